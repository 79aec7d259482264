"""Entry of a job shell process (forked by the spawner, so already warm)."""

from __future__ import annotations

import asyncio


def run_forked_shell(info: dict, env: dict | None = None) -> int:
    from ..util import fluid
    try:
        from setproctitle import setproctitle
        setproctitle(f"fluxlite-shell {fluid.f58_plain(info['jobid'])} "
                     f"rank={info['shell_rank']}")
    except ImportError:
        pass
    from .shell import JobShell
    return asyncio.run(JobShell(info).run())

"""Entry of a job shell process (forked by the spawner, so already warm)."""

from __future__ import annotations

import asyncio


def preload() -> None:
    """Import everything a job shell needs, so a forked shell starts warm.

    The spawner calls this before it forks any shell; nothing here opens a socket."""
    import subprocess  # noqa: F401

    from ..client import aio  # noqa: F401
    from ..protocol.dispatch import declared_handlers
    from .plugin import ShellPlugin
    from .plugins import doom, input, instance, output, pmi, pty, signals  # noqa: F401
    from .shell import JobShell
    # the handlers each class declares, looked up once here rather than in every shell
    for cls in (JobShell, *ShellPlugin.__subclasses__()):
        declared_handlers(cls)


def run_forked_shell(info: dict, env: dict | None = None) -> int:
    import signal
    # as Flux's shell: writing to a task's closed stdin is an EPIPE error to handle,
    # not a SIGPIPE that kills the shell (tasks get the default back when they start)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    from ..util import fluid
    from ..util.proctitle import set_title
    set_title(f"fluxlite-shell {fluid.f58_plain(info['jobid'])} rank={info['shell_rank']}")
    from .shell import JobShell
    return asyncio.run(JobShell(info, env).run())

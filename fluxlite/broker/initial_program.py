"""Rank 0's initial program (Flux's rc2): started through the spawner once the
instance is up, ended when the instance is asked to shut down.

It runs with the instance's environment plus FLUXLITE_URI (and FLUX_URI under the
Flux compatibility layer) naming rank 0, and fluxlite's bin directory on PATH.
`fluxlite start` puts it in the launcher's (foreground) process group; a nested
instance on a terminal (alloc) makes it lead its own session on that terminal.
Asked to shut down while it runs, the broker sends it SIGTERM (SIGHUP when it
owns a terminal), then SIGKILL after 5 seconds.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable

from ..util import log as blog
from ..util import procs
from .placement import BrokerConfig

log = blog.get_logger("broker")

GRACE = 5.0   # seconds between the polite signal and SIGKILL


def program_env(env: dict[str, str], local_uri: str) -> dict[str, str]:
    """The initial program's environment: the instance's, naming rank 0's broker."""
    env = dict(env)
    env["FLUXLITE_URI"] = local_uri
    from ..util.compat import flux_compat
    if flux_compat(env):
        env["FLUX_URI"] = local_uri
    from ..util.paths import fluxlite_bindir
    bindir = fluxlite_bindir()
    if bindir and bindir not in env.get("PATH", "").split(os.pathsep):
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    return env


async def run_initial_program(spawner, cfg: BrokerConfig, env: dict[str, str],
                              shutdown: asyncio.Event,
                              reason: Callable[[], str]) -> int | None:
    """Run cfg.initial_program to its end: its wait status, or None when it did not
    start (said in one line on stderr).  `shutdown` set while it runs ends it;
    `reason()` says why, for the log."""
    argv = cfg.initial_program
    try:
        if cfg.nested and os.isatty(0):
            # alloc's terminal: the program leads its own session on it
            proc = spawner.spawn("exec", argv=argv, env=env, setsid=True, ctty=True)
        else:
            proc = spawner.spawn("exec", argv=argv, env=env, pgid=cfg.initial_pgid)
        pid = await proc.started
    except OSError as exc:
        log.info("initial program failed to start", error=exc.strerror)
        where = "fluxlite instance" if cfg.nested else "fluxlite start"
        print(f"{where}: {exc.strerror}", file=sys.stderr, flush=True)
        return None
    log.info("rc2 started", pid=pid, argv=" ".join(argv))
    t0 = time.monotonic()
    waiter = asyncio.ensure_future(shutdown.wait())
    while True:
        done, _ = await asyncio.wait({proc.exited, waiter},
                                     return_when=asyncio.FIRST_COMPLETED)
        if proc.exited in done:
            break
        log.info("terminating initial program", reason=reason())
        await _terminate(spawner, proc, signal.SIGHUP if cfg.interactive else signal.SIGTERM)
        waiter = asyncio.get_running_loop().create_future()
    waiter.cancel()
    try:
        status = proc.exited.result()
    except OSError:
        status = 1 << 8
    log.info("rc2 exited", status=procs.describe_status(status),
             elapsed=f"{time.monotonic() - t0:.3f}s")
    return status


async def _terminate(spawner, proc, signum: int) -> None:
    """`signum`, then SIGKILL if it is still there after GRACE seconds."""
    try:
        spawner.kill(proc, signum)
    except OSError:
        pass
    try:
        await asyncio.wait_for(asyncio.shield(proc.exited), GRACE)
    except TimeoutError:
        try:
            spawner.kill(proc, signal.SIGKILL)
        except OSError:
            pass
    except OSError:
        pass  # the spawner is gone, and the program with it

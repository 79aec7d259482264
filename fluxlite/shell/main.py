"""Entry of a job shell process (forked by the spawner, so already warm)."""

from __future__ import annotations

import asyncio
import sys


def preload() -> None:
    """Import everything a job shell needs, so a forked shell starts warm.

    The launcher calls it for the image its brokers are forked from, and the spawner
    before it forks any shell; nothing here opens a socket."""
    import subprocess  # noqa: F401

    from ..client import aio  # noqa: F401
    from ..protocol.dispatch import declared_handlers
    from .plugin import ShellPlugin, hooks_of
    from .plugins import (  # noqa: F401
        affinity,
        doom,
        input,
        instance,
        limits,
        output,
        pmi,
        pty,
        signals,
    )
    from .shell import JobShell
    # the shell's own log (its stderr) may fail to take a line (a full disk): that
    # must never change the job's result
    sys.stderr = _LogStream(sys.stderr)
    # the handlers and hooks each class declares, looked up once here rather than in
    # every shell
    declared_handlers(JobShell)
    for cls in ShellPlugin.__subclasses__():
        if cls.__module__.startswith(f"{__package__}.plugins."):
            declared_handlers(cls)
            hooks_of(cls)


def warm_spawner() -> None:
    """What the spawner runs once, after it forks its first shell: an event loop's
    life ten times, as every shell will live it.

    CPython specialises code and fills its type caches on first use, writing to
    code and type objects; done in the spawner, those writes are not repeated
    (each a page copied) in every later shell.  Not in the launcher, nor before the
    first shell: an instance that runs no job (`start --size 64 true`) would pay
    for it in every broker while the instance starts."""
    import os

    async def turn(loop) -> None:
        r, w = os.pipe()
        readable = loop.create_future()
        loop.add_reader(r, lambda: readable.done() or readable.set_result(os.read(r, 1)))
        loop.call_soon(os.write, w, b"x")
        await readable
        loop.remove_reader(r)
        os.close(r)
        os.close(w)
        event = asyncio.Event()
        loop.call_soon(event.set)
        await event.wait()
        await asyncio.gather(asyncio.ensure_future(asyncio.sleep(0)), asyncio.sleep(0))

    for _ in range(10):
        # the loop's self-pipe is a socket pair, closed with it
        loop = asyncio.new_event_loop()
        loop.run_until_complete(turn(loop))
        loop.close()
    # OpenPMIx's server library (the pmix plugin, on by default), linked once here
    from ..pmi import pmix_build
    pmix_build.preload()


def run_forked_shell(info: bytes, env: dict | None = None, tmpdir: str | None = None) -> int:
    """What a forked shell runs: `info` is its ShellInfo as rexec encoded it (the
    spawner passes it unread), `tmpdir` the private directory the spawner made."""
    import signal
    # as Flux's shell: writing to a task's closed stdin is an EPIPE error to handle,
    # not a SIGPIPE that kills the shell (tasks get the default back when they start)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    from ..job import shell_info
    from ..util import fluid
    from ..util.proctitle import set_title
    info = shell_info.decode(info)
    set_title(f"fluxlite-shell {fluid.f58_plain(info.jobid)} rank={info.shell_rank}")
    from .shell import JobShell
    # the shell's own log (its stderr) may fail to take a line (a full disk): that
    # must never change the job's result
    sys.stderr = _LogStream(sys.stderr)
    # not asyncio.run: the process ends (os._exit) as soon as this returns, and the
    # shell has already closed its connection, so cancelling what is left and closing
    # the loop would only delay the exit that job-exec is waiting for
    return asyncio.new_event_loop().run_until_complete(JobShell(info, env, tmpdir).run())


class _LogStream:
    """A text stream whose write and flush errors (ENOSPC, EIO) are dropped."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name):
        return getattr(self._stream, name)

"""input: where tasks' standard input comes from.

Without an input option, tasks read /dev/null.  `input.path=FILE` opens FILE
for every task.  `input` (set by `fluxlite run` when its own stdin is a pipe
or a file) makes every shell follow the job's `guest.input` eventlog in the
KVS and write what arrives to each of its tasks, then close their stdin at
the eof mark, so `echo hi | fluxlite run cat` works on any number of nodes.
`input.ranks=IDSET` (`run --input=RANKS`, as Flux's run) limits that to the
tasks of those ranks; the others read /dev/null.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess

from ...job.eventlog import decode_data, eventlog_key
from ...util import idset
from ..plugin import ShellPlugin


class Input(ShellPlugin):
    name = "input"

    def __init__(self, shell):
        super().__init__(shell)
        self.path = shell.options.get("input.path")
        self.stream = bool(shell.options.get("input")) and not self.path
        ranks = shell.options.get("input.ranks")
        # `run --input=RANKS`: only these tasks read the stream, the others /dev/null
        self.ranks = None if ranks is None else idset.decode(str(ranks))
        self.pipes: dict[int, bytearray] = {}   # task stdin fd -> bytes waiting
        self.eof = False
        self.watch = None

    def shell_init(self) -> None:
        """An input file that cannot be read fails the job before any task starts."""
        if self.path:
            try:
                os.close(os.open(self.path, os.O_RDONLY))
            except OSError as exc:
                raise ValueError(f"cannot open input file {self.path}: {exc.strerror}") \
                    from None

    def task_init(self, task) -> None:
        if self.path:
            try:
                task.stdin = os.open(self.path, os.O_RDONLY)
            except OSError as exc:
                raise ValueError(f"cannot open input file {self.path}: {exc.strerror}") \
                    from None
        elif self.stream and (self.ranks is None or task.rank in self.ranks):
            task.stdin = subprocess.PIPE

    def shell_start(self) -> None:
        if not self.stream:
            return
        for task in self.shell.tasks:
            if task.proc is not None and task.proc.stdin is not None:
                fd = task.proc.stdin.fileno()
                os.set_blocking(fd, False)
                self.pipes[fd] = bytearray()
        key = eventlog_key(self.shell.jobid, "input")
        self.watch = self.shell.h.rpc("kvs.watch", {"key": key, "append": True,
                                                    "waitcreate": True}, streaming=True)
        self.watch.on_response = self._arrived

    def _arrived(self, msg) -> None:
        if msg.errnum:
            return
        for e in msg.payload.get("entries", ()):
            ctx = e.get("context") or {}
            if "data" in ctx:
                data = decode_data(ctx)
                for buf in self.pipes.values():
                    buf += data
            if ctx.get("eof"):
                self.eof = True
        for fd in list(self.pipes):
            self._write(fd)

    def _write(self, fd: int) -> None:
        loop = asyncio.get_running_loop()
        buf = self.pipes.get(fd)
        if buf is None:
            return
        while buf:
            try:
                n = os.write(fd, buf)
            except BlockingIOError:
                loop.add_writer(fd, self._write, fd)
                return
            except OSError as exc:  # the task closed its stdin or exited
                if exc.errno not in (errno.EPIPE, errno.EBADF):
                    raise
                buf.clear()
                break
            del buf[:n]
        loop.remove_writer(fd)
        if self.eof:
            del self.pipes[fd]
            try:
                os.close(fd)
            except OSError:
                pass

    def shell_exit(self) -> None:
        if self.watch is not None and not self.watch.done:
            self.watch.cancel()

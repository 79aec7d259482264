"""input: where tasks' standard input comes from.

Without an input option, tasks read /dev/null.  `input.path=FILE` opens FILE
for every task.  `input` (set by `fluxlite run` when its own stdin is a pipe
or a file) makes every shell follow the job's `guest.input` eventlog in the
KVS and write what arrives to each of its tasks, then close their stdin at
the eof mark, so `echo hi | fluxlite run cat` works on any number of nodes.
`input.ranks=IDSET` (`run --input=RANKS`, as Flux's run) limits that to the
tasks of those ranks; the others read /dev/null.

`input.stdin.type=service` (Flux's default, set by submit, bulksubmit and run
when it does not forward its own stdin... see job.jobspec) gives every task a
stdin pipe fed by the leader's `stdin` method: `fluxlite job attach` sends what
it reads there ({data[, encoding]}, then {eof: true}); the leader writes it to
its own tasks and, for the other shells, appends it to `guest.input`, which
they follow.  Nothing is read until someone attaches, as in Flux.

A task on the job's terminal (the pty plugin's, which comes first) reads that
terminal whatever the input options say, as Flux's pty takes the task's stdin.
"""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess

from ...job.eventlog import decode_data, entry, eventlog_key
from ...protocol import kvs
from ...protocol.dispatch import handler
from ...protocol.schema import Struct
from ...util import idset
from ..plugin import ShellPlugin


class StdinRequest(Struct, kw_only=True):
    """A piece of an attached client's stdin for every task (data) or its end (eof)."""
    data: str = ""
    encoding: str = ""
    eof: bool = False


class Input(ShellPlugin):
    name = "input"

    def __init__(self, shell):
        super().__init__(shell)
        self.path = shell.options.get("input.path")
        self.service = shell.options.get("input.stdin.type") == "service" and not self.path
        # followers of a job fed through the leader's service read what it relays
        self.stream = (bool(shell.options.get("input")) and not self.path) or \
            (self.service and not shell.is_leader)
        ranks = shell.options.get("input.ranks")
        # `run --input=RANKS`: only these tasks read the stream, the others /dev/null
        self.ranks = None if ranks is None else idset.decode(str(ranks))
        self.pipes: dict[int, bytearray] = {}   # task stdin fd -> bytes waiting
        self.eof = False
        self.watch = None
        self.started = False
        self.backlog: list[dict] = []   # what came before the tasks' pipes were open

    def shell_init(self) -> None:
        """An input file that cannot be read fails the job before any task starts."""
        if self.path:
            try:
                os.close(os.open(self.path, os.O_RDONLY))
            except OSError as exc:
                raise ValueError(f"cannot open input file {self.path}: {exc.strerror}") \
                    from None

    def task_init(self, task) -> None:
        if isinstance(task.stdin, int) and task.stdin >= 0 and os.isatty(task.stdin):
            return  # task 0 on the job's terminal (pty) reads it, as Flux's
        if self.path:
            try:
                task.stdin = os.open(self.path, os.O_RDONLY)
            except OSError as exc:
                raise ValueError(f"cannot open input file {self.path}: {exc.strerror}") \
                    from None
        elif (self.stream or self.service) and (self.ranks is None or task.rank in self.ranks):
            task.stdin = subprocess.PIPE

    def shell_start(self) -> None:
        if not (self.stream or self.service):
            return
        for task in self.shell.tasks:
            if task.proc is not None and task.proc.stdin is not None:
                fd = task.proc.stdin.fileno()
                os.set_blocking(fd, False)
                self.pipes[fd] = bytearray()
        self.started = True
        if self.backlog:
            backlog, self.backlog = self.backlog, []
            self._take(backlog)
        if not self.stream:
            return
        key = eventlog_key(self.shell.jobid, "input")
        self.watch = self.shell.rpc("kvs-watch.lookup", {
            "key": key, "flags": kvs.WATCH | kvs.WAITCREATE | kvs.WATCH_APPEND},
            streaming=True)
        self.watch.on_response = self._arrived

    @handler("stdin", schema=StdinRequest)
    def _m_stdin(self, msg, req: StdinRequest) -> dict:
        """Leader: an attached client's stdin, for every task of the job."""
        ctx = {"stream": "stdin", "rank": "all"}
        if req.data:
            ctx.update(data=req.data, **({"encoding": req.encoding} if req.encoding else {}))
        if req.eof:
            ctx["eof"] = True
        if self.shell.nshells > 1:
            self.shell.append_eventlog("input", [entry("data", ctx)])
        self._take([entry("data", ctx)])
        return {}

    def _arrived(self, msg) -> None:
        if msg.errnum:
            return
        self._take(kvs.value(msg.payload))

    def _take(self, entries) -> None:
        if not self.started:
            self.backlog.extend(entries)
            return
        for e in entries:
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

"""pty: run task 0 on a pseudo-terminal that a user's terminal can attach to.

Active with the shell option `pty` (set by an interactive `fluxlite alloc`).
Task 0's stdin, stdout and stderr are the terminal's slave side; the leader
shell keeps the master and offers three methods on the job's shell service:

    pty-attach   streaming: {} at once (attached), then {data: bytes} as the
                 program writes; ends with ENODATA when the terminal closes (what
                 was written before the first attach is kept and sent first).
                 {mode: "ro"} watches only (`job attach --read-only`): it gets
                 what was kept without taking it, and its leaving hangs up nothing
    pty-write    {data: bytes} typed by the user
    pty-detach   {}: the caller's attach streams end, the terminal stays up (a
                 client leaving on purpose, Flux's detach: the job runs on)
    pty-resize   {rows, cols}

An attach is answered at every point of the leader shell's life, never refused
for coming early or late: one that comes before the terminal is read waits for
its output; one that comes after the terminal closed gets what it showed and its
end; one that comes after shell.exit, which moved what nobody read to the job's
output log, gets its end alone (the client reads the output log then).  A client
that the shell never answered (it exited first) reads the output log too.

Hang-up.  The terminal is hung up (the master is closed: the kernel sends
SIGHUP to the session on it, whose reads then end) as a real one is:
  - when the last attached client (read-only ones aside) goes away: the
    broker sends the service `disconnect` for a client that closed its
    connection, was killed or refused a message (protocol.md, local clients),
    and nobody is left to type into the terminal;
  - when the shell gets a terminating signal (SIGTERM, SIGALRM or SIGHUP from
    job-exec ending the job): an interactive shell ignores SIGTERM, and
    would otherwise hold the job until the kill timeout.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import struct
import termios
from typing import Annotated

from msgspec import Meta

from ...errors import UsageError
from ...protocol.schema import Struct
from ..plugin import NO_REPLY, ShellPlugin, handler

_BACKLOG = 1 << 16
HANGUP_SIGNALS = (signal.SIGTERM, signal.SIGALRM, signal.SIGHUP)
_Cells = Annotated[int, Meta(ge=1, le=0xFFFF)]   # a winsize field is an unsigned short


class PtyWrite(Struct, kw_only=True):
    """Bytes the user typed."""
    data: bytes = b""


class PtyAttach(Struct, kw_only=True):
    """rw: the user's terminal on the job's; ro: its output only."""
    mode: str = "rw"


class PtyResize(Struct, kw_only=True):
    """The user's terminal size."""
    rows: _Cells = 24
    cols: _Cells = 80


def _controlling_terminal() -> None:
    """In the task, after its setsid and before exec: stdin's terminal becomes the
    controlling terminal of its new session."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Pty(ShellPlugin):
    name = "pty"

    def __init__(self, shell):
        super().__init__(shell)
        self.master: int | None = None
        self.slave: int | None = None
        self.backlog = b""
        self.clients: list = []   # attach streams of terminals typing into it
        self.watchers: list = []  # read-only attach streams
        self.closed = False
        self.hung_up = False
        self.reading = False      # shell.start: the master is read as the task writes
        self.exited = False       # shell.exit ran: the terminal is gone for good
        self.task = None          # task 0, the one on the terminal

    def shell_init(self) -> None:
        # before the init barrier, so the terminal exists once `shell.init` is posted
        self.master, self.slave = os.openpty()

    def task_init(self, task) -> None:
        if task.rank != 0:
            return
        task.stdin = task.stdout = task.stderr = self.slave
        self.task = task
        task.env.setdefault("TERM", "xterm")
        if self.shell.options.get("instance"):
            return  # a broker (alloc): it gives the terminal to its initial program
        # a session of its own with the terminal as its controlling one, as Flux's
        # pty: Ctrl-C and Ctrl-Z typed there signal its foreground job, a shell on it
        # has job control, and the hang-up reaches the session from the kernel
        task.start_new_session = True
        task.preexec = _controlling_terminal

    def shell_start(self) -> None:
        if self.master is None:
            return
        os.close(self.slave)
        self.slave = None
        os.set_blocking(self.master, False)
        asyncio.get_running_loop().add_reader(self.master, self._readable)
        self.reading = True
        self.shell.subscribe("shell.signal", self._signalled)

    def _signalled(self, signum: int) -> None:
        """The shell received a signal: a terminating one hangs up too."""
        if signum in HANGUP_SIGNALS:
            self.hangup(f"signal {signal.Signals(signum).name}")

    def _readable(self) -> bool:
        """Read what the terminal wrote; False once nothing more is waiting."""
        try:
            data = os.read(self.master, 65536)
        except BlockingIOError:
            return False
        except OSError:
            data = b""  # EIO: every holder of the slave side is gone
        if not data:
            self._close()
            return False
        for msg in self.clients + self.watchers:
            self.shell.respond(msg, {"data": data})
        if not self.clients:   # kept for the first terminal to attach
            self.backlog = (self.backlog + data)[-_BACKLOG:]
        return True

    def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.reading and self.master is not None:
            asyncio.get_running_loop().remove_reader(self.master)
        for msg in self.clients + self.watchers:
            self.shell.end_stream(msg)
        self.clients.clear()
        self.watchers.clear()

    def hangup(self, why: str) -> None:
        """Close the master: the session on the terminal gets SIGHUP, its reads end."""
        if self.hung_up or self.master is None or self.slave is not None:
            return  # already done, or the task has not started yet
        self.hung_up = True
        if not self.closed:
            self.shell.log(f"pty: hanging up the terminal ({why})")
        # SIGHUP then SIGCONT to the terminal's session first, as the kernel's hang-up
        # sends them: closing the master alone also ends the session's reads, and a
        # shell that sees that end before its SIGHUP exits 0 as if logged out
        if self.task is not None:
            self.task.kill(signal.SIGHUP)
            self.task.kill(signal.SIGCONT)
        self._close()
        os.close(self.master)
        self.master = None

    @handler("pty-attach", schema=PtyAttach, streaming=True)
    def _attach(self, msg, req: PtyAttach):
        if req.mode not in ("rw", "ro"):
            raise UsageError(f"pty-attach: mode {req.mode!r}: rw (type into the "
                             "terminal) or ro (watch it)")
        if self.exited:
            # what nobody read is in the output log (shell_exit), for the client to read
            self.shell.end_stream(msg)
            return NO_REPLY
        self.shell.respond(msg, {})
        if self.backlog:
            self.shell.respond(msg, {"data": self.backlog})
            if req.mode == "rw":
                self.backlog = b""
        if self.closed:
            self.shell.end_stream(msg)
        else:  # before the terminal is read: its output will come
            (self.clients if req.mode == "rw" else self.watchers).append(msg)
        return NO_REPLY

    @handler("pty-detach")
    def _detach(self, msg, _req):
        """A client leaves on purpose: its streams end; the terminal is not hung up
        (what it shows from now on is kept for the next terminal to attach)."""
        route = tuple(msg.route)
        for m in self.clients + self.watchers:
            if tuple(m.route) == route:
                self.shell.end_stream(m)
        self.clients = [m for m in self.clients if tuple(m.route) != route]
        self.watchers = [m for m in self.watchers if tuple(m.route) != route]
        return {}

    @handler("disconnect")
    def _disconnect(self, msg, _req):
        """The broker says a client is gone: forget its streams; hang up if it was the
        last terminal typing into ours."""
        route = tuple(msg.route)
        self.watchers = [m for m in self.watchers if tuple(m.route) != route]
        gone = [m for m in self.clients if tuple(m.route) == route]
        if not gone:
            return NO_REPLY
        self.clients = [m for m in self.clients if tuple(m.route) != route]
        if not self.clients:
            self.hangup("its client went away")
        return NO_REPLY

    @handler("pty-write", schema=PtyWrite)
    def _write(self, msg, req: PtyWrite):
        if self.master is not None and not self.closed:
            try:
                os.write(self.master, req.data)
            except OSError:
                pass
        return {}

    @handler("pty-resize", schema=PtyResize)
    def _resize(self, msg, req: PtyResize):
        if self.master is not None and not self.closed:
            rows, cols = req.rows, req.cols
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        return {}

    def shell_exit(self) -> None:
        self.exited = True
        # what the task wrote last and was not read yet (bounded: a background
        # process may still be writing)
        for _ in range(64 if self.reading else 0):
            if self.closed or not self._readable():
                break
        self._close()   # a background process may still hold the terminal's slave side
        if self.backlog and not self.hung_up:
            # nobody attached in time (a quick `run -o pty`): what the terminal showed
            # goes to the job's output log, as Flux's pty capture, for attach to replay
            from ...job.eventlog import encode_data, entry
            self.shell.append_eventlog("output", [entry("data", {
                "stream": "stdout", "rank": "0", **encode_data(self.backlog)})])
            self.backlog = b""
        if self.master is not None:
            os.close(self.master)
            self.master = None

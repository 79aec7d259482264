"""The terminal side of a job's interactive pty (`alloc`, `run -o pty.interactive`,
`job attach` of a running `submit -o pty.interactive` job): raw mode, keystrokes
in, screen out, window size changes, then the job's exit code.

Standard input that is not a terminal (a pipe, a file) is written to the job's
terminal as it comes, without raw mode, and its end stops only the writing: the
terminal's output is followed until it closes (as Flux's pty client does).
Read-only (`job attach --read-only`): the terminal's output alone; nothing is
sent to the job, no signal is caught, and leaving does not hang the terminal up.

Ctrl-\\ typed on a terminal (first in what one read returns, as Flux's client
looks for it) detaches: the shell ends our stream without hanging its terminal
up, the job runs on, and we exit 0; `job attach ID` comes back to it.

SIGHUP or SIGTERM (the terminal closed, the ssh connection dropped) ends it:
the terminal is restored, the connection closed, and alloc exits 128+signal.
The job's pty plugin sees its client go (as it does when alloc is killed
outright) and hangs up the job's terminal, so the interactive shell exits and
the instance ends on its own.
"""

from __future__ import annotations

import errno
import os
import signal
import struct
import sys
import termios
import tty

from ..errors import NotFound
from ..job import shell_options, states
from ..jobapi import api
from ..util import fluid
from .attach import Attach, stdin_has_data

DETACH = b"\x1c"   # Ctrl-\, Flux's pty client's detach key


def _winsize() -> tuple[int, int]:
    """The size of the terminal we type in (stdin's, as Flux's client reads it: our
    output may go to a file)."""
    import fcntl
    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(sys.stdin.fileno(),
                                                             termios.TIOCGWINSZ, b"\0" * 8))
        return rows or 24, cols or 80
    except OSError:
        return 24, 80


def _pty_service(h, jobid: int) -> tuple[str, int] | None:
    """The job shell's service name and leader rank, from its shell.init event; None
    when the job ended before its shells started."""
    try:
        for e in api.event_watch(h, jobid, "exec"):
            if e["name"] == "shell.init":
                return e["context"]["service"], e["context"]["leader-rank"]
    except NotFound:   # it never ran (cancelled while pending, refused at start)
        pass
    return None


def interactive_pty(h, jobid: int) -> bool:
    """Whether the job's task 0 runs on a terminal a client attaches to
    (-o pty.interactive, as Flux's shell advertises it at shell.init)."""
    options = api.job_data(h, jobid, "jobspec")["attributes"]["system"].get(
        "shell", {}).get("options", {})
    try:
        return shell_options.flag(shell_options.canonical(options).get("pty.interactive",
                                                                       False))
    except ValueError:
        return False


class _PtySession:
    """The job's terminal on ours: its output written here, our keystrokes and window
    size sent there, until it closes or we are hung up."""

    def __init__(self, h, service: str, leader: int, read_only: bool = False):
        self.h = h
        self.service = service
        self.leader = leader
        self.read_only = read_only
        self.reading_stdin = False
        self.ended = False       # the job's terminal closed
        self.attached = False    # the shell took our attach
        self.got = False         # any output came
        self.error: str | None = None
        self.hangup: int | None = None
        self.detaching = False   # we asked the shell to let us go (Ctrl-\)
        self.sig_r, self.sig_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def on_data(self, msg) -> None:
        if msg.errnum:
            self.ended = True
            # an attach the shell never took (it exited first, its service is gone):
            # no error, the terminal's output is read from the output log (as Flux's
            # attach falls back to the output eventlog)
            if self.attached and msg.errnum not in (errno.ENODATA, errno.ENOSYS):
                self.error = msg.errstr
            return
        if not self.attached:
            self.attached = True
            self._read_stdin()
        data = (msg.payload or {}).get("data")
        if data:
            self.got = True
            os.write(sys.stdout.fileno(), data)

    def resize(self) -> None:
        rows, cols = _winsize()
        self.h.send(f"{self.service}.pty-resize", {"rows": rows, "cols": cols},
                    nodeid=self.leader)

    def _read_stdin(self) -> None:
        """Once attached: what we read on stdin goes to the job's terminal."""
        if self.read_only or not (sys.stdin.isatty() or stdin_has_data()):
            return
        self.h.add_fd(sys.stdin.fileno(), self.on_stdin)
        self.reading_stdin = True

    def on_stdin(self) -> None:
        try:
            data = os.read(sys.stdin.fileno(), 4096)
        except OSError:
            data = b""
        if data[:1] == DETACH and sys.stdin.isatty():
            self.detaching = True
            self.h.send(f"{self.service}.pty-detach", {}, nodeid=self.leader)
        elif data:
            self.h.send(f"{self.service}.pty-write", {"data": data}, nodeid=self.leader)
        else:  # its end: nothing more to send, the terminal's output is still followed
            self.h.remove_fd(sys.stdin.fileno())
            self.reading_stdin = False

    def on_signal(self) -> None:
        try:
            sigs = os.read(self.sig_r, 64)
        except BlockingIOError:
            return
        for sig in (signal.SIGHUP, signal.SIGTERM):
            if sig in sigs:
                self.hangup = sig
                return
        self.resize()

    def run(self) -> None:
        """Until the terminal closes, we are hung up, or the connection goes."""
        h = self.h
        stream = h.rpc(f"{self.service}.pty-attach", {"mode": "ro"} if self.read_only else {},
                       nodeid=self.leader, streaming=True)
        stream.on_response = self.on_data
        old_wakeup = signal.set_wakeup_fd(self.sig_w)
        caught = () if self.read_only else (signal.SIGWINCH, signal.SIGHUP, signal.SIGTERM)
        old_handlers = {s: signal.signal(s, lambda *a: None) for s in caught}
        # raw mode and our window size only for a terminal we type into
        interactive = sys.stdin.isatty() and not self.read_only
        saved = termios.tcgetattr(sys.stdin.fileno()) if interactive else None
        try:
            if interactive:
                # as Flux's client: at once, keeping what was typed ahead
                tty.setraw(sys.stdin.fileno(), termios.TCSANOW)
                self.resize()
            h.add_fd(self.sig_r, self.on_signal)
            h.run_until(lambda: self.ended or self.hangup is not None or not h.connected)
        finally:
            if self.reading_stdin:
                h.remove_fd(sys.stdin.fileno())
            h.remove_fd(self.sig_r)
            _restore_terminal(saved)
            signal.set_wakeup_fd(old_wakeup)
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)
            os.close(self.sig_r)
            os.close(self.sig_w)


def _restore_terminal(saved) -> None:
    try:
        if saved is not None:
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)
    except termios.error:
        pass  # the terminal is gone (hung up)


def attach_pty(h, jobid: int, prog: str = "fluxlite alloc", read_only: bool = False) -> int:
    """Our terminal on the job's until it closes; the job's exit code."""
    where = _pty_service(h, jobid)
    if where is None:   # it never ran: its exception and end, as attach shows them
        return _replay(h, jobid, prog, read_only)
    session = _PtySession(h, *where, read_only=read_only)
    session.run()
    if session.hangup is not None:
        # leaving closes our connection: the job's terminal is hung up behind us
        return 128 + session.hangup
    if session.detaching and session.ended:
        print(f"{prog}: detached; the job runs on (fluxlite job attach "
              f"{fluid.f58(jobid)} comes back to it)", file=sys.stderr)
        return 0
    if session.error:
        print(f"{prog}: terminal: {session.error}", file=sys.stderr)
    if not session.got:
        # the job's terminal closed before we attached, or our attach came after the
        # shell's exit: its output was kept in the output log (the shell's pty
        # capture); show that, and the job's end, as attach
        return _replay(h, jobid, prog, read_only)
    status = fatal = None
    for e in api.event_watch(h, jobid):
        if e["name"] == "finish":
            status = e["context"]["status"]
        elif e["name"] == "exception" and e["context"].get("severity") == 0:
            fatal = e["context"]
            print(f"{prog}: {describe_exception(fatal)}", file=sys.stderr)
    return states.exit_code(status, fatal is not None)


def _replay(h, jobid: int, prog: str, read_only: bool) -> int:
    """The job's output log and its end, as `job attach` shows a job without a pty."""
    attach = Attach(h, jobid, prog=prog)
    attach.read_only = read_only
    return attach.run()


def describe_exception(ctx: dict) -> str:
    """'cancel: NOTE', or 'cancel by USER' when a cancel has no note."""
    etype, note = ctx.get("type", "exception"), ctx.get("note") or ""
    if note:
        return f"{etype}: {note}"
    if etype == "cancel" and isinstance(ctx.get("userid"), int):
        from .jobs import username
        return f"cancel by {username(ctx['userid'])}"
    return str(etype)

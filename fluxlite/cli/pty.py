"""The terminal side of an interactive `fluxlite alloc`: raw mode, keystrokes in,
screen out, window size changes, then the job's exit code.

SIGHUP or SIGTERM (the terminal closed, the ssh connection dropped) detaches:
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

from ..errors import FluxliteError
from ..job import states
from ..jobapi import api


def _winsize() -> tuple[int, int]:
    import fcntl
    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(sys.stdout.fileno(),
                                                             termios.TIOCGWINSZ, b"\0" * 8))
        return rows or 24, cols or 80
    except OSError:
        return 24, 80


def _pty_service(h, jobid: int) -> tuple[str, int]:
    """The job shell's service name and leader rank, from its shell.init event."""
    for e in api.event_watch(h, jobid, "exec"):
        if e["name"] == "shell.init":
            return e["context"]["service"], e["context"]["leader-rank"]
    raise FluxliteError("the instance ended before its terminal was ready")


class _PtySession:
    """The job's terminal on ours: its output written here, our keystrokes and window
    size sent there, until it closes or we are hung up."""

    def __init__(self, h, service: str, leader: int):
        self.h = h
        self.service = service
        self.leader = leader
        self.ended = False       # the job's terminal closed
        self.attached = False    # the shell took our attach
        self.got = False         # any output came
        self.error: str | None = None
        self.hangup: int | None = None
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
        self.attached = True
        data = (msg.payload or {}).get("data")
        if data:
            self.got = True
            os.write(sys.stdout.fileno(), data)

    def resize(self) -> None:
        rows, cols = _winsize()
        self.h.send(f"{self.service}.pty-resize", {"rows": rows, "cols": cols},
                    nodeid=self.leader)

    def on_stdin(self) -> None:
        try:
            data = os.read(sys.stdin.fileno(), 4096)
        except OSError:
            data = b""
        if data:
            self.h.send(f"{self.service}.pty-write", {"data": data}, nodeid=self.leader)

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
        stream = h.rpc(f"{self.service}.pty-attach", {}, nodeid=self.leader, streaming=True)
        stream.on_response = self.on_data
        old_wakeup = signal.set_wakeup_fd(self.sig_w)
        old_handlers = {s: signal.signal(s, lambda *a: None)
                        for s in (signal.SIGWINCH, signal.SIGHUP, signal.SIGTERM)}
        # without a terminal (run -o pty tty > file): the job's terminal output only
        interactive = sys.stdin.isatty()
        saved = termios.tcgetattr(sys.stdin.fileno()) if interactive else None
        try:
            if interactive:
                tty.setraw(sys.stdin.fileno())
                self.resize()
                h.add_fd(sys.stdin.fileno(), self.on_stdin)
            h.add_fd(self.sig_r, self.on_signal)
            h.run_until(lambda: self.ended or self.hangup is not None or not h.connected)
        finally:
            if interactive:
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


def attach_pty(h, jobid: int, prog: str = "fluxlite alloc") -> int:
    session = _PtySession(h, *_pty_service(h, jobid))
    session.run()
    if session.hangup is not None:
        # leaving closes our connection: the job's terminal is hung up behind us
        return 128 + session.hangup
    if session.error:
        print(f"{prog}: terminal: {session.error}", file=sys.stderr)
    if not session.got:
        # the job's terminal closed before we attached, or our attach came after the
        # shell's exit: its output was kept in the output log (the shell's pty
        # capture); show that, and the job's end, as attach
        from .attach import Attach
        return Attach(h, jobid, prog=prog).run()
    status = fatal = None
    for e in api.event_watch(h, jobid):
        if e["name"] == "finish":
            status = e["context"]["status"]
        elif e["name"] == "exception" and e["context"].get("severity") == 0:
            fatal = e["context"]
            print(f"{prog}: {describe_exception(fatal)}", file=sys.stderr)
    return states.exit_code(status, fatal is not None)


def describe_exception(ctx: dict) -> str:
    """'cancel: NOTE', or 'cancel by USER' when a cancel has no note."""
    etype, note = ctx.get("type", "exception"), ctx.get("note") or ""
    if note:
        return f"{etype}: {note}"
    if etype == "cancel" and isinstance(ctx.get("userid"), int):
        from .jobs import username
        return f"cancel by {username(ctx['userid'])}"
    return str(etype)

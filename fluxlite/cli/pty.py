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
from ..job import api, states


def _winsize() -> tuple[int, int]:
    import fcntl
    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(sys.stdout.fileno(),
                                                             termios.TIOCGWINSZ, b"\0" * 8))
        return rows or 24, cols or 80
    except OSError:
        return 24, 80


def attach_pty(h, jobid: int, prog: str = "fluxlite alloc") -> int:
    service = leader = None
    for e in api.event_watch(h, jobid, "exec"):
        if e["name"] == "shell.init":
            service, leader = e["context"]["service"], e["context"]["leader-rank"]
            break
    if service is None:
        raise FluxliteError("the instance ended before its terminal was ready")
    stream = h.rpc(f"{service}.pty-attach", {}, nodeid=leader, streaming=True)
    done = {"pty": False, "got": False}

    def on_data(msg):
        if msg.errnum:
            done["pty"] = True
            if msg.errnum not in (errno.ENODATA, errno.ENOSYS):
                done["error"] = msg.errstr
            return
        done["got"] = True
        os.write(sys.stdout.fileno(), msg.payload["data"])
    stream.on_response = on_data

    def resize():
        rows, cols = _winsize()
        h.send(f"{service}.pty-resize", {"rows": rows, "cols": cols}, nodeid=leader)

    def on_stdin():
        try:
            data = os.read(sys.stdin.fileno(), 4096)
        except OSError:
            data = b""
        if data:
            h.send(f"{service}.pty-write", {"data": data}, nodeid=leader)

    sig_r, sig_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    old_wakeup = signal.set_wakeup_fd(sig_w)
    old_handlers = {s: signal.signal(s, lambda *a: None)
                    for s in (signal.SIGWINCH, signal.SIGHUP, signal.SIGTERM)}

    def on_signal():
        try:
            sigs = os.read(sig_r, 64)
        except BlockingIOError:
            return
        for sig in (signal.SIGHUP, signal.SIGTERM):
            if sig in sigs:
                done["hangup"] = sig
                return
        resize()

    # without a terminal (run -o pty tty > file): the job's terminal output only
    interactive = sys.stdin.isatty()
    saved = termios.tcgetattr(sys.stdin.fileno()) if interactive else None
    try:
        if interactive:
            tty.setraw(sys.stdin.fileno())
            resize()
            h.add_fd(sys.stdin.fileno(), on_stdin)
        h.add_fd(sig_r, on_signal)
        h.run_until(lambda: done["pty"] or "hangup" in done or not h.connected)
    finally:
        if interactive:
            h.remove_fd(sys.stdin.fileno())
        h.remove_fd(sig_r)
        try:
            if saved is not None:
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)
        except termios.error:
            pass  # the terminal is gone (hung up)
        signal.set_wakeup_fd(old_wakeup)
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
        os.close(sig_r)
        os.close(sig_w)
    if "hangup" in done:
        # leaving closes our connection: the job's terminal is hung up behind us
        return 128 + done["hangup"]
    if done.get("error"):
        print(f"{prog}: terminal: {done['error']}", file=sys.stderr)
    if not done["got"]:
        # the job's terminal closed before we attached: its output was kept in the
        # output log (the shell's pty capture); show that, and the job's end, as attach
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

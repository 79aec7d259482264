"""The terminal side of an interactive `fluxlite alloc`: raw mode, keystrokes in,
screen out, window size changes, then the job's exit code."""

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


def attach_pty(h, jobid: int) -> int:
    service = leader = None
    for e in api.event_watch(h, jobid, "exec"):
        if e["name"] == "shell.init":
            service, leader = e["context"]["service"], e["context"]["leader-rank"]
            break
    if service is None:
        raise FluxliteError("the instance ended before its terminal was ready")
    stream = h.rpc(f"{service}.pty-attach", {}, nodeid=leader, streaming=True)
    done = {"pty": False}

    def on_data(msg):
        if msg.errnum:
            done["pty"] = True
            if msg.errnum != errno.ENODATA:
                done["error"] = msg.errstr
            return
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
    old_winch = signal.signal(signal.SIGWINCH, lambda *a: None)

    def on_signal():
        try:
            os.read(sig_r, 64)
        except BlockingIOError:
            pass
        resize()

    saved = termios.tcgetattr(sys.stdin.fileno())
    try:
        tty.setraw(sys.stdin.fileno())
        resize()
        h.add_fd(sys.stdin.fileno(), on_stdin)
        h.add_fd(sig_r, on_signal)
        h.run_until(lambda: done["pty"] or not h.connected)
    finally:
        h.remove_fd(sys.stdin.fileno())
        h.remove_fd(sig_r)
        termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)
        signal.set_wakeup_fd(old_wakeup)
        signal.signal(signal.SIGWINCH, old_winch)
        os.close(sig_r)
        os.close(sig_w)
    if done.get("error"):
        print(f"fluxlite alloc: terminal: {done['error']}", file=sys.stderr)
    status = fatal = None
    for e in api.event_watch(h, jobid):
        if e["name"] == "finish":
            status = e["context"]["status"]
        elif e["name"] == "exception" and e["context"].get("severity") == 0:
            fatal = e["context"]
            print(f"fluxlite alloc: {e['context'].get('type')}: {e['context'].get('note')}",
                  file=sys.stderr)
    return states.exit_code(status, fatal is not None)


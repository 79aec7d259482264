"""Reading a command that runs in the background (`inst.cli_background`) line by
line with a bound on each line, and stopping it as a user does, with Ctrl-C."""

import signal

from fluxlite.testing import _readline


def lines_of(proc, n, timeout=30):
    """The next n lines `proc` prints (bounded wait for each)."""
    out = []
    for _ in range(n):
        line = _readline(proc.stdout, timeout)
        assert line, f"no line within {timeout}s after {out!r}"
        out.append(line.rstrip("\n"))
    return out


def interrupt(proc, timeout=30):
    proc.send_signal(signal.SIGINT)
    rc = proc.wait(timeout)
    return rc, proc.stderr.read()

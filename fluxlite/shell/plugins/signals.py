"""signal: forward signals the shell receives to every local task's process group.

job-exec sends SIGTERM (SIGALRM for a time limit) to the shells to end a job,
and `fluxlite job kill -s SIG` sends any signal; the shell passes them on
(ShellContext.forward_signal).  Other plugins that must act on a signal define
`shell_signal(signum)` (or subscribe to `shell.signal`) instead of installing
handlers of their own.

The signals arrive through a wakeup pipe read by the event loop, as asyncio's
own `add_signal_handler` does, but without its per-call validation of every
signal number (about as costly as the rest of the shell's start-up).
"""

from __future__ import annotations

import asyncio
import os
import signal

from ..plugin import ShellPlugin

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGHUP, signal.SIGUSR1,
             signal.SIGUSR2, signal.SIGCONT, signal.SIGQUIT, signal.SIGWINCH)


def _noted(signum, frame) -> None:
    """The Python-level handler: nothing to do, the wakeup pipe carries the signal."""


class SignalForwarder(ShellPlugin):
    name = "signal"

    def shell_init(self) -> None:
        loop = asyncio.get_running_loop()
        self._wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        for sig in FORWARDED:
            signal.signal(sig, _noted)
        loop.add_reader(self._wake_r, self._received)

    def _received(self) -> None:
        try:
            data = os.read(self._wake_r, 512)
        except BlockingIOError:
            return
        for sig in data:
            self.shell.forward_signal(sig)

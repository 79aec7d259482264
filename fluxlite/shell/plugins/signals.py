"""signal: forward signals the shell receives to every local task's process group.

job-exec sends SIGTERM (SIGALRM for a time limit) to the shells to end a job,
and `fluxlite job kill -s SIG` sends any signal; the shell passes them on.
Other plugins that must act on a signal add a callback(signum) to the
shell's `signal_listeners` instead of installing handlers of their own.

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
            self.forward(sig)

    def forward(self, sig: int) -> None:
        if sig not in (signal.SIGCONT, signal.SIGWINCH):
            # tasks not started yet get it as they start (a job cancelled during its
            # start must not wait for the kill timeout)
            self.shell.early_signals.append(sig)
        for task in self.shell.tasks:
            task.kill(sig)
        for listener in self.shell.signal_listeners:  # e.g. the pty plugin's hang-up
            listener(sig)

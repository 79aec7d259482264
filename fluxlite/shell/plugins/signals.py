"""signal: forward signals the shell receives to every local task's process group.

job-exec sends SIGTERM (SIGALRM for a time limit) to the shells to end a job,
and `fluxlite job kill -s SIG` sends any signal; the shell passes them on.
"""

from __future__ import annotations

import asyncio
import signal

from ..plugin import ShellPlugin

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGALRM, signal.SIGHUP, signal.SIGUSR1,
             signal.SIGUSR2, signal.SIGCONT, signal.SIGQUIT, signal.SIGWINCH)


class SignalForwarder(ShellPlugin):
    name = "signal"

    def shell_init(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in FORWARDED:
            loop.add_signal_handler(sig, self.forward, sig)

    def forward(self, sig: int) -> None:
        for task in self.shell.tasks:
            task.kill(sig)

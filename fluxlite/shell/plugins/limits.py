"""rlimit, files and the warning signal: what a job asks of its tasks' setting.

rlimit (`-o rlimit.NAME=N`, `--rlimit`, and the submitter's own limits, which the
submitting commands put there as Flux's do): each task starts with these soft
limits (-1: unlimited); one above the hard limit is the hard limit, with a warning.
files (`--add-file`, attributes.system.files, RFC 37 entries with their data
inline): written into the job's temporary directory on every node before any
task starts, so tasks find them as {{tmpdir}}/NAME.
signal (`--signal=SIG@TIME`, `-o signal`, `-o signal.signum=N -o signal.timeleft=T`):
the tasks get SIG TIME seconds before the job's time limit (at once when less time
is left when they start); `-o signal=0` sends nothing, as Flux's.
oom.adjust (`-o oom.adjust=N`): each task's /proc/PID/oom_score_adj, as Flux's oom
plugin sets it.
"""

from __future__ import annotations

import asyncio
import base64
import os
import resource
import time

from ...util import fsd
from ..plugin import ShellPlugin


class Limits(ShellPlugin):
    name = "limits"

    def __init__(self, shell):
        super().__init__(shell)
        opts = shell.options
        limits = dict(opts.get("rlimit") or {})
        limits.update({k[7:]: v for k, v in opts.items() if k.startswith("rlimit.")})
        self.limits = limits
        self.rlimits: list[tuple[int, int]] = []
        self.files = shell.jobspec["attributes"]["system"].get("files") or {}
        signal = opts.get("signal")
        self.signal = dict(signal) if isinstance(signal, dict) else {}
        self.warn = signal is not None and signal != 0
        self.oom_adjust = opts.get("oom.adjust")
        self._timer = None

    def _changes(self, limits: dict) -> list[tuple[int, int]]:
        """(resource, soft limit) for each limit the tasks need other than the shell's
        own (the submitter's usually are); one above the hard limit is the hard limit,
        with a warning, as Flux's rlimit plugin does."""
        out = []
        for name, value in limits.items():
            which = getattr(resource, f"RLIMIT_{name.upper()}", None)
            if which is None:
                self.shell.log(f"rlimit.{name}: no such limit on this system", "WARN")
                continue
            soft = resource.RLIM_INFINITY if value == -1 else int(value)
            cur, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY and (soft == resource.RLIM_INFINITY
                                                   or soft > hard):
                self.shell.log(f"{name} exceeds current max, raising value to hard limit",
                               "WARN")
                soft = hard
            if soft != cur:
                out.append((which, soft))
        return out

    def shell_init(self) -> None:
        self.rlimits = self._changes(self.limits)
        if not self.files:
            return
        tmpdir = self.shell.tmpdir
        if not tmpdir:
            raise ValueError("--add-file: the job has no temporary directory to write to")
        for name, entry in self.files.items():
            data = entry.get("data", "")
            body = base64.b64decode(data) if entry.get("encoding") == "base64" else \
                data.encode()
            path = os.path.join(tmpdir, os.path.basename(name))
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                         int(entry.get("mode", 0o600)) & 0o7777)
            try:
                os.write(fd, body)
            finally:
                os.close(fd)

    def task_init(self, task) -> None:
        if not self.rlimits and self.oom_adjust is None:
            return
        limits, oom = self.rlimits, self.oom_adjust
        before = task.preexec   # another plugin's (pty: the controlling terminal)

        def apply():
            if before is not None:
                before()
            for which, soft in limits:
                _hard = resource.getrlimit(which)[1]
                resource.setrlimit(which, (soft, _hard))
            if oom is not None:
                with open("/proc/self/oom_score_adj", "w") as f:
                    f.write(str(int(oom)))
        task.preexec = apply

    def shell_start(self) -> None:
        if not self.warn:
            return
        R = self.shell.info.R
        expiration = (R.get("execution") or {}).get("expiration") or 0.0
        if not expiration:
            return
        signum = int(self.signal.get("signum", 10))
        left = fsd.parse(self.signal.get("timeleft", 60))
        delay = max(0.0, expiration - left - time.time())
        self._timer = asyncio.get_running_loop().call_later(delay, self._send, signum)

    def _send(self, signum: int) -> None:
        self.shell.debug(f"sending signal {signum} to the tasks before the time limit")
        for task in self.shell.tasks:
            task.kill(signum)

    def shell_exit(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

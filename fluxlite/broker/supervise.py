"""The launcher's wait on the brokers it started (`fluxlite start`): signals from
the terminal, the exit timer, and the exit code.

Ctrl-C or SIGTERM asks rank 0 to shut down (SIGTERM), which ends the initial
program and takes the instance down leaves first; a second Ctrl-C within 2s
kills every broker.  An instance taken down by Ctrl-C exits 130 (128+SIGINT)
unless the initial program chose its own exit code.

The exit timer is Flux's (flux-start --test-exit-timeout, --test-exit-mode):
once the leader has exited (mode `any`: once any broker has) while others still
run, they get that long (default 20s) and are then killed, with one line saying
which ranks.  In `leader` mode, fluxlite's default, `start` exits with rank 0's
code and an instance outlives the loss of other brokers; in `any` mode, Flux's
default, with the highest code of all brokers.  Waiting is on pidfds, never by
polling.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

from ..util import idset, procs


class Supervisor:
    """The brokers this launcher forked (pid -> rank), until the last has exited."""

    def __init__(self, pids: dict[int, int], *, exit_mode: str = "leader",
                 exit_timeout: float | None = 20.0):
        self.exit_mode = exit_mode           # what arms the exit timer: leader, any
        self.exit_timeout = exit_timeout     # None: the timer never runs
        self.alive = dict(pids)
        self.rank0 = next((pid for pid, r in pids.items() if r == 0), None)
        self.codes: dict[int, int] = {}          # rank -> exit code (shell convention)
        self.status: int | None = None           # rank 0's wait status
        self.deadline: float | None = None       # when the exit timer expires
        self.fired = False
        self.interrupts: list[float] = []

    # ------------------------------------------------------------ signals
    def on_signal(self, sig, frame) -> None:
        if sig == signal.SIGINT:
            now = time.monotonic()
            self.interrupts.append(now)
            if len(self.interrupts) >= 2 and now - self.interrupts[-2] < 2.0:
                for pid in self.alive:
                    _kill(pid, signal.SIGKILL)
                return
        if self.rank0 in self.alive:
            _kill(self.rank0, signal.SIGTERM)

    # ------------------------------------------------------------ waiting
    def wait(self, remove_rundir: str | None, interactive: bool) -> int:
        """Wait until every broker has exited; remove the run directory if asked;
        return the instance's exit code."""
        import shutil
        signal.signal(signal.SIGINT, signal.SIG_IGN if interactive else self.on_signal)
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGHUP, self.on_signal)
        fds: dict[int, int] = {}
        for pid in self.alive:
            try:
                fds[os.pidfd_open(pid)] = pid
            except OSError:     # gone already: waitpid reaps it
                fds[-pid] = pid
        try:
            while self.alive:
                ready = [fd for fd in fds if fd < 0]
                if not ready:
                    left = (None if self.deadline is None
                            else max(0.0, self.deadline - time.monotonic()))
                    ready, _, _ = select.select([fd for fd in fds if fd >= 0], [], [], left)
                if not ready:
                    self._expire()
                for fd in ready:
                    pid = fds.pop(fd)
                    if fd >= 0:
                        os.close(fd)
                    self._reaped(pid)
        finally:
            for fd in fds:
                if fd >= 0:
                    os.close(fd)
        if remove_rundir:
            shutil.rmtree(remove_rundir, ignore_errors=True)
        return self._exit_code()

    def _reaped(self, pid: int) -> None:
        _, st = os.waitpid(pid, 0)
        self.codes[self.alive.pop(pid)] = procs.wait_status_to_exit_code(st)
        if pid == self.rank0:
            self.status = st
        armed = 0 in self.codes if self.exit_mode == "leader" else True
        if self.alive and armed and not self.fired and self.deadline is None \
                and self.exit_timeout is not None:
            self.deadline = time.monotonic() + self.exit_timeout

    def _expire(self) -> None:
        if self.deadline is None or time.monotonic() < self.deadline:
            return
        self.deadline, self.fired = None, True
        for pid in self.alive:
            _kill(pid, signal.SIGKILL)
        print(f"fluxlite start: exit timeout: killed rank "
              f"{idset.encode(self.alive.values())}", file=sys.stderr, flush=True)

    def _exit_code(self) -> int:
        st = self.status
        if st is not None and os.WIFSIGNALED(st):
            print(f"fluxlite start: rank 0 broker (pid {self.rank0}) "
                  f"{procs.signal_name(os.WTERMSIG(st))}", file=sys.stderr, flush=True)
        if self.exit_mode == "any":
            code = max(self.codes.values(), default=1)
        else:
            code = 1 if st is None else procs.wait_status_to_exit_code(st)
        if self.interrupts and code > 128:  # the shutdown Ctrl-C asked for killed it
            code = 128 + signal.SIGINT
        return code


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass

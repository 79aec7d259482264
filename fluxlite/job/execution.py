"""One job's execution as job-exec sees it: a pure state machine, events in, effects out.

    ex = Execution(jobid, ranks, hosts, config)
    effects = ex.start()                        # the exec eventlog's init, starting; timers
    effects = ex.handle(ShellExited(1, status)) # what to do now, as data

The job-exec service (fluxlite/service/job_exec.py) owns the I/O: it feeds
events in (shells started, exited, unreachable; barrier requests; timers;
exceptions from the job-manager; critical-ranks updates) and carries the
effects out (eventlog entries, reports to the job-manager, signals, timers,
barrier answers, notices to the leader shell).  Nothing here touches a socket,
a clock or a process, so every ordering can be driven in a unit test
(tests/unit/test_execution.py), including those real processes cannot force.

The job moves through phases; the shells each move through theirs:

    job     starting --init barrier--> initialized --start barrier--> running
            any phase --all shells exited or lost--> complete
            `fatal` (an exception of severity 0) is orthogonal: the job is being
            terminated (SIGTERM, or SIGALRM for a time limit; SIGKILL after
            exec.kill-timeout), whatever its phase
    shell   pending --started--> running --exited--> exited
            pending|running --unreachable, or killed by a signal--> lost

Rules (as in docs/resilience.md):
- a barrier completes when every shell still active has entered it; lost and
  exited shells never hold it;
- a shell lost on a critical rank (rank 0 always is) is a fatal node-failure;
  elsewhere a non-fatal one (severity 2); the leader is told either way;
- a follower killed by a signal after the init barrier counts as lost; before
  it, any shell ending is fatal ("terminated before first barrier");
- the leader exiting normally while others run starts exec.shell-exit-timeout;
- the job's status is the worst among critical shells that exited (signals
  above exit codes), or the status named by the fatal exception (doom).
"""

from __future__ import annotations

import collections
import os
import signal
from collections.abc import Callable

import msgspec
from msgspec import Struct

from ..util import fsd, idset, procs
from ..util.handlers import handler_table

# job phases
STARTING, INITIALIZED, RUNNING, COMPLETE = "starting", "initialized", "running", "complete"
# shell phases
PENDING, SHELL_RUNNING, EXITED, LOST = "pending", "running", "exited", "lost"


# ---------------------------------------------------------------- events in
class ExecutionEvent(Struct, frozen=True):
    """What happened to a job's shells: each subclass has its handler in
    Execution.HANDLERS."""


class ShellStarted(ExecutionEvent):
    shell_rank: int
    pid: int


class ShellExited(ExecutionEvent):
    shell_rank: int
    status: int            # wait status


class ShellUnreachable(ExecutionEvent):
    """Its rank's broker is gone (rexec's stream failed with EHOSTUNREACH)."""
    shell_rank: int


class ShellStartFailed(ExecutionEvent):
    shell_rank: int
    error: str


class BarrierEntered(ExecutionEvent):
    barrier: str           # "init" or "start"
    shell_rank: int
    error: str | None = None   # the shell could not get there (a plugin failed)


class TimerFired(ExecutionEvent):
    name: str              # barrier, expire, shell-exit, kill


class FatalException(ExecutionEvent):
    """The job-manager recorded a fatal exception raised elsewhere (cancel, doom, ...)."""
    type: str
    note: str = ""
    wait_status: int | None = None


class SetCritical(ExecutionEvent):
    ranks: frozenset[int]  # shell ranks, already checked to belong to the job


class KillTasks(ExecutionEvent):
    signum: int


# -------------------------------------------------------------- effects out
class Log(Struct, frozen=True):
    """Append an entry to the exec eventlog."""
    name: str
    context: dict | None = None


class Report(Struct, frozen=True):
    """A response on the job-manager's job-exec.start stream."""
    kind: str              # start, exception, finish, release
    data: dict = msgspec.field(default_factory=dict)


class Signal(Struct, frozen=True):
    signum: int
    shell_ranks: tuple[int, ...]
    tasks: bool = False    # the processes below each shell, not the shell


class Timer(Struct, frozen=True):
    """Arm timer `name` (replacing one of that name) after `delay` seconds or at the
    wall-clock time `at`; with neither, cancel it."""
    name: str
    delay: float | None = None
    at: float | None = None


class Answer(Struct, frozen=True):
    """Answer the shells waiting in a barrier (an error answer if `error`)."""
    barrier: str
    shell_ranks: tuple[int, ...]
    payload: dict | None = None
    error: str | None = None


class Notify(Struct, frozen=True):
    """A request that wants no answer to the leader shell's service."""
    method: str            # exception, critical-ranks
    payload: dict


class Finished(Struct, frozen=True):
    """Every shell is done: end the job-manager's stream and forget the job."""


class Config(Struct):
    barrier_timeout: float | None = None
    shell_exit_timeout: float | None = 30.0
    kill_timeout: float = 5.0
    expiration: float = 0.0                # wall-clock end of the allocation (R), or 0


class _Shell:
    __slots__ = ("rank", "phase", "pid", "status", "failing", "lost_notice")

    def __init__(self, rank: int):
        self.rank = rank
        self.phase = PENDING
        self.pid: int | None = None
        self.status: int | None = None
        self.failing = False               # reported its own failure and is exiting
        self.lost_notice: dict | None = None

    @property
    def active(self) -> bool:
        return self.phase in (PENDING, SHELL_RUNNING)


class Execution:
    HANDLERS: dict[type, Callable] = {}     # event type -> its handler (below the class)

    def __init__(self, jobid: int, ranks: list[int], hosts: dict[int, str], config: Config,
                 *, service: str = "", taskmap: dict | None = None, history: int = 64):
        self.jobid = jobid
        self.ranks = list(ranks)                # broker rank of each shell rank
        self.hosts = hosts                      # broker rank -> hostname
        self.config = config
        self.service = service
        self.taskmap = taskmap
        self.shells = [_Shell(r) for r in self.ranks]
        self.phase = STARTING
        self.critical: set[int] = set(range(len(self.ranks)))
        self.crit_seq = 0
        self.fatal: dict | None = None
        self.term_signal = 0                    # the last signal _terminate sent (0: none)
        self.waiting: dict[str, set[int]] = {"init": set(), "start": set()}
        self.timers: set[str] = set()
        self.history: collections.deque = collections.deque(maxlen=history)

    @property
    def nshells(self) -> int:
        return len(self.shells)

    def host(self, shell_rank: int) -> str:
        return self.hosts.get(self.ranks[shell_rank], "")

    def critical_info(self) -> dict:
        return {"ranks": idset.encode(self.critical), "seq": self.crit_seq}

    # ----------------------------------------------------------- the machine
    def start(self) -> list:
        fx = [Log("init"), Log("starting")]
        if self.config.barrier_timeout:
            fx.append(self._timer("barrier", self.config.barrier_timeout))
        return fx

    def handle(self, event) -> list:
        """Apply one event; returns the effects, in order.  Events for a job that is
        complete change nothing."""
        if self.phase == COMPLETE:
            return []
        before = (self.phase, self.fatal is not None)
        fx: list = []
        self.HANDLERS[type(event)](self, event, fx)
        self._check_barriers(fx)
        self._check_done(fx)
        self.history.append((type(event).__name__, before, (self.phase, self.fatal is not None)))
        return fx

    # events ------------------------------------------------------------------
    def _on_ShellStarted(self, ev: ShellStarted, fx: list) -> None:
        s = self.shells[ev.shell_rank]
        s.pid = ev.pid
        if s.phase == PENDING:
            s.phase = SHELL_RUNNING
            if self.term_signal:
                # the job is being terminated: the signal sent while this shell was
                # still being started found no process, so it goes again now (a job
                # cancelled during its start must not wait for the kill timeout)
                fx.append(Signal(self.term_signal, (ev.shell_rank,), False))

    def _on_ShellStartFailed(self, ev: ShellStartFailed, fx: list) -> None:
        s = self.shells[ev.shell_rank]
        if not s.active:
            return
        s.phase, s.status = EXITED, 1 << 8
        self._raise(fx, "exec", 0, f"job shell failed to start on rank {s.rank}: {ev.error}")

    def _on_ShellUnreachable(self, ev: ShellUnreachable, fx: list) -> None:
        s = self.shells[ev.shell_rank]
        self._lost(fx, ev.shell_rank, f"node failure on {self.host(ev.shell_rank)} "
                                      f"(rank {s.rank}, shell rank {ev.shell_rank})",
                   "node failure")

    def _on_ShellExited(self, ev: ShellExited, fx: list) -> None:
        sr, status = ev.shell_rank, ev.status
        s = self.shells[sr]
        if not s.active:
            return
        host, signaled = self.host(sr), os.WIFSIGNALED(status)
        initialized = self.phase != STARTING
        if signaled and self.fatal is None and initialized and sr != 0:
            # a follower shell killed by a signal is a lost shell, like a lost node
            how = procs.signal_name(os.WTERMSIG(status))
            s.status = status
            self._lost(fx, sr, f"shell rank {sr} (on {host}, rank {s.rank}): {how}", how)
            return
        s.phase, s.status = EXITED, status
        if not initialized and self.fatal is None:
            self._raise(fx, "exec", 0, f"{host} (rank {s.rank}) terminated before first "
                                       "barrier")
        elif signaled and self.fatal is None:
            how = procs.signal_name(os.WTERMSIG(status))
            self._raise(fx, "exec", 0, f"shell rank 0 (on {host}, rank {s.rank}): {how}",
                        {"shell_rank": 0, "rank": s.rank, "host": host, "reason": how})
        if sr == 0 and not signaled:
            active = [x for x in self.shells if x.active]
            ctx = {"rank": s.rank, "wait_status": status}
            if active:
                ctx["active_ranks"] = idset.encode(x.rank for x in active)
                limit = self.config.shell_exit_timeout
                if limit and self.fatal is None:
                    fx.append(self._timer("shell-exit", limit))
            fx.append(Log("shell-exit", ctx))

    def _on_BarrierEntered(self, ev: BarrierEntered, fx: list) -> None:
        if self.fatal is not None:
            fx.append(Answer(ev.barrier, (ev.shell_rank,), error="job is being terminated"))
            return
        if ev.error:
            self.shells[ev.shell_rank].failing = True
            self._raise(fx, "exec", 0, ev.error)
            fx.append(Answer(ev.barrier, (ev.shell_rank,), error="job is being terminated"))
            return
        self.waiting[ev.barrier].add(ev.shell_rank)

    def _on_TimerFired(self, ev: TimerFired, fx: list) -> None:
        if ev.name not in self.timers:
            return  # cancelled while it was firing
        self.timers.discard(ev.name)
        if ev.name == "barrier":
            if self.phase == RUNNING:
                return
            name = "init" if self.phase == STARTING else "start"
            late = [s for i, s in enumerate(self.shells)
                    if s.active and i not in self.waiting[name]]
            if late:
                self._raise(fx, "exec", 0, f"job shells on rank[s] "
                                           f"{idset.encode(s.rank for s in late)} did not "
                                           "start in time")
        elif ev.name == "expire":
            self._raise(fx, "timeout", 0, "resource allocation expired")
        elif ev.name == "shell-exit":
            active = [s for s in self.shells if s.active]
            if not active or self.fatal is not None:
                return
            ranks = idset.encode(s.rank for s in active)
            limit = self.config.shell_exit_timeout or 0
            hosts = sorted({self.hosts.get(s.rank, "") for s in active})
            self._raise(fx, "exec", 0,
                        f"job shells still active on {','.join(hosts)} "
                        f"(rank{'s' if len(active) > 1 else ''} {ranks}) "
                        f"{fsd.format(limit)} after leader shell exit",
                        {"active_ranks": ranks})
        elif ev.name == "kill":
            self.term_signal = signal.SIGKILL
            fx.append(self._signal(signal.SIGKILL))

    def _on_FatalException(self, ev: FatalException, fx: list) -> None:
        if self.fatal is not None:
            return
        self.fatal = {"type": ev.type, "severity": 0, "note": ev.note}
        if ev.wait_status is not None:
            self.fatal["wait_status"] = ev.wait_status
        self._terminate(fx, signal.SIGALRM if ev.type == "timeout" else signal.SIGTERM)

    def _on_SetCritical(self, ev: SetCritical, fx: list) -> None:
        self.critical = set(ev.ranks) | {0}  # the leader shell is always critical
        self.crit_seq += 1
        info = self.critical_info()
        fx.append(Log("critical-ranks", info))
        if self.phase != STARTING and self.shells[0].active:
            fx.append(Notify("critical-ranks", info))

    def _on_KillTasks(self, ev: KillTasks, fx: list) -> None:
        fx.append(self._signal(ev.signum, tasks=True))

    # helpers -----------------------------------------------------------------
    def _timer(self, name: str, delay: float | None, at: float | None = None) -> Timer:
        if delay is None and at is None:
            self.timers.discard(name)
        else:
            self.timers.add(name)
        return Timer(name, delay, at)

    def _signal(self, sig: int, *, tasks: bool = False) -> Signal:
        """Signal the active shells (which forward termination signals to their tasks),
        or with `tasks` the processes below each shell directly.  A shell that said it
        is failing is left to exit, unless the signal is SIGKILL."""
        ranks = tuple(i for i, s in enumerate(self.shells)
                      if s.active and (not s.failing or sig == signal.SIGKILL))
        return Signal(int(sig), ranks, tasks)

    def _raise(self, fx: list, etype: str, severity: int, note: str,
               context: dict | None = None) -> None:
        """An exception on the job (reported to the job-manager); a fatal one kills it."""
        data = {"type": etype, "severity": severity, "note": note}
        if context:
            data["context"] = context
        if severity == 0:
            if self.fatal is not None:
                return
            self.fatal = data
        fx.append(Report("exception", data))
        if severity == 0:
            self._terminate(fx, signal.SIGALRM if etype == "timeout" else signal.SIGTERM)

    def _terminate(self, fx: list, sig: int) -> None:
        for t in ("expire", "shell-exit"):
            if t in self.timers:
                fx.append(self._timer(t, None))
        self.term_signal = sig
        fx.append(self._signal(sig))
        fx.append(self._timer("kill", self.config.kill_timeout))

    def _lost(self, fx: list, sr: int, note: str, reason: str) -> None:
        s = self.shells[sr]
        if not s.active:
            return
        s.phase = LOST
        critical = sr == 0 or sr in self.critical
        ctx = {"shell_rank": sr, "rank": s.rank, "host": self.host(sr), "reason": reason}
        if self.fatal is None or not critical:
            self._raise(fx, "node-failure", 0 if critical else 2, note, ctx)
        s.lost_notice = {"type": "lost-shell", "severity": 0 if critical else 2,
                         "shell_rank": sr, "message": note}
        if sr != 0 and self.phase != STARTING and self.shells[0].active:
            fx.append(Notify("exception", s.lost_notice))

    def _check_barriers(self, fx: list) -> None:
        for name, phase, after in (("init", STARTING, INITIALIZED),
                                   ("start", INITIALIZED, RUNNING)):
            if self.phase != phase:
                continue
            waiting = self.waiting[name]
            if any(i not in waiting and s.active for i, s in enumerate(self.shells)):
                return
            self.phase = after
            if name == "init":
                fx.append(Log("shell.init", {"service": self.service,
                                             "leader-rank": self.ranks[0],
                                             "size": self.nshells}))
                # shells lost before the leader was up: their notices come with the answer
                answer = {"critical": self.critical_info(),
                          "lost": [s.lost_notice for s in self.shells if s.lost_notice]}
            else:
                if "barrier" in self.timers:
                    fx.append(self._timer("barrier", None))
                fx.append(Log("shell.start", {"taskmap": self.taskmap} if self.taskmap
                              else None))
                answer = {}
                fx.append(Report("start"))
                if self.config.expiration:
                    fx.append(self._timer("expire", None, at=self.config.expiration))
            if waiting:
                fx.append(Answer(name, tuple(sorted(waiting)), answer))
            waiting.clear()

    def _check_done(self, fx: list) -> None:
        if self.phase == COMPLETE or any(s.active for s in self.shells):
            return
        self.phase = COMPLETE
        for t in sorted(self.timers):
            fx.append(Timer(t))
        self.timers.clear()
        exited = [(i, s) for i, s in enumerate(self.shells)
                  if s.phase == EXITED and s.status is not None]
        # a non-critical shell's tasks do not decide how the job ended (a persisting
        # instance's lost leaf broker must not turn the batch script's status into 137)
        decisive = [s for i, s in exited if i in self.critical] or [s for _, s in exited]
        status = max((s.status for s in decisive), key=procs.wait_status_to_exit_code) \
            if decisive else 1 << 8
        if self.fatal is not None and "wait_status" in self.fatal:
            # the exception names the task that ended the job (doom): its status wins
            status = procs.wait_status_to_exit_code(self.fatal["wait_status"]) << 8
        if self.fatal is not None and status == 0:
            status = 1 << 8
        fx += [Log("complete", {"status": status}), Report("finish", {"status": status}),
               Log("done"), Report("release", {"ranks": "all", "final": True}), Finished()]


Execution.HANDLERS = handler_table(Execution, ExecutionEvent, {
    ShellStarted: Execution._on_ShellStarted,
    ShellExited: Execution._on_ShellExited,
    ShellUnreachable: Execution._on_ShellUnreachable,
    ShellStartFailed: Execution._on_ShellStartFailed,
    BarrierEntered: Execution._on_BarrierEntered,
    TimerFired: Execution._on_TimerFired,
    FatalException: Execution._on_FatalException,
    SetCritical: Execution._on_SetCritical,
    KillTasks: Execution._on_KillTasks,
})

"""Changing a job from outside (flux-core's urgency.c, raise.c, kill.c): urgency,
exceptions (raise, cancel, raiseall), signals to a running job, and memos."""

from __future__ import annotations

from ...errors import FluxliteError, NotFound, PermissionDenied, UsageError
from ...job import actions as act
from ...job import depend, states
from ...job.actions import Job
from ...protocol.schema import (
    AnyMap,
    JobId,
    KillRequest,
    Name,
    Severity,
    Struct,
    Text,
    Urgency,
    UserId,
    WaitStatus,
)
from ...util import fluid
from ..base import ANY, handler


class UrgencyRequest(Struct, kw_only=True):
    id: JobId
    urgency: Urgency


class CancelRequest(Struct, kw_only=True):
    id: JobId
    note: Text = ""


class RaiseRequest(Struct, kw_only=True):
    id: JobId
    type: Name
    severity: Severity
    note: Text = ""
    context: AnyMap | None = None
    wait_status: WaitStatus | None = None


class RaiseAllRequest(Struct, kw_only=True):
    userid: UserId | None = None      # None: every user's jobs (instance owner only)
    states: list[Name] = []   # depend, priority, sched, run, pending, running, active (default)
    type: Name = "cancel"
    severity: Severity = 0
    note: Text = ""
    dry_run: bool = False


# `cancel --states` words, as flux-cancel(1)
STATE_WORDS = {"depend": {states.DEPEND}, "priority": {states.PRIORITY},
               "sched": {states.SCHED}, "run": {states.RUN},
               "pending": set(states.PENDING), "running": {states.RUN, states.CLEANUP},
               "active": set(states.PENDING) | {states.RUN, states.CLEANUP}}


class MemoRequest(Struct, kw_only=True):
    id: JobId
    memo: AnyMap


class Control:
    """Urgency, exceptions, kill and memo (a part of JobManagerService)."""

    @handler("job-manager.urgency", schema=UrgencyRequest, roles=ANY)
    def urgency(self, msg, r):
        """Change a pending job's urgency (an `urgency` event, then its new priority):
        raising it from 0 releases a held job, setting it to 0 holds one."""
        job = self._job(r.id)
        self._authorize(msg, job)
        if job.state not in states.PENDING or job.fatal is not None:
            raise UsageError(f"job {fluid.f58(job.id)} is not pending: its urgency can no "
                             "longer be changed")
        if r.urgency > depend.URGENCY_DEFAULT and not self.is_owner(msg):
            raise PermissionDenied(f"urgency {r.urgency}: only the instance owner may set "
                                   f"an urgency above {depend.URGENCY_DEFAULT}")
        old = job.urgency
        self._handle(job, act.Urgency(r.urgency, msg.userid))
        return {"old_urgency": old}

    # --------------------------------------------------------- exceptions
    def raise_exception(self, job: Job, etype: str, severity: int, note: str,
                        context: dict | None = None, userid: int | None = None,
                        wait_status: int | None = None) -> None:
        if job.state == states.INACTIVE:
            raise UsageError(f"job {fluid.f58(job.id)} is inactive")
        self._handle(job, act.Raise(etype, severity, note, context, userid, wait_status))


    @handler("job-manager.raise", schema=RaiseRequest, roles=ANY)
    def raise_rpc(self, msg, r):
        if " " in r.type or "=" in r.type:
            raise UsageError(f"invalid exception type {r.type!r}")
        job = self._job(r.id)
        self._authorize(msg, job)
        if job.state == states.INACTIVE:
            raise UsageError(f"job {fluid.f58(r.id)} is inactive")
        self.raise_exception(job, r.type, r.severity, r.note, r.context, userid=msg.userid,
                             wait_status=r.wait_status)
        return {}

    @handler("job-manager.cancel", schema=CancelRequest, roles=ANY)
    def cancel(self, msg, r):
        jobid, note = r.id, r.note
        job = self._job(jobid)
        self._authorize(msg, job)
        if job.state in (states.INACTIVE, states.CLEANUP) or job.fatal is not None:
            raise UsageError(f"job {fluid.f58(jobid)} is already finishing or inactive")
        self.raise_exception(job, "cancel", 0, note, userid=msg.userid)
        return {}

    @handler("job-manager.raiseall", schema=RaiseAllRequest, roles=ANY)
    def raiseall(self, msg, r):
        """Raise an exception on every job of a user (or of all users) in some states:
        `cancel --all/--user/--states`.  Jobs already ending (a fatal exception raised,
        or in CLEANUP) are not counted.  Answers {count, errors}."""
        if " " in r.type or "=" in r.type:
            raise UsageError(f"invalid exception type {r.type!r}")
        if r.userid != msg.userid and not self.is_owner(msg):
            raise PermissionDenied("permission denied: only the instance owner may raise "
                                   "exceptions on other users' jobs")
        want: set[str] = set()
        for word in r.states or ["active"]:
            if word.lower() not in STATE_WORDS:
                raise UsageError(f"invalid state {word!r}: expected some of "
                                 f"{', '.join(STATE_WORDS)}")
            want |= STATE_WORDS[word.lower()]
        targets = [j for j in self.jobs.values()
                   if (r.userid is None or j.userid == r.userid) and j.state in want
                   and j.state != states.CLEANUP and j.fatal is None]
        errors = 0
        if not r.dry_run:
            for job in targets:
                if job.fatal is not None:  # ended meanwhile (a dependency on another)
                    continue
                try:
                    self.raise_exception(job, r.type, r.severity, r.note, userid=msg.userid)
                except FluxliteError:
                    errors += 1
        return {"count": len(targets), "errors": errors}

    @handler("job-manager.kill", schema=KillRequest, roles=ANY)
    def kill(self, msg, r):
        job = self._job(r.id)
        self._authorize(msg, job)
        if job.state != states.RUN:
            raise UsageError(f"job {fluid.f58(r.id)} is not running")
        self.send("job-exec.kill", {"id": r.id, "signum": r.signum})
        return {}

    @handler("job-manager.memo", schema=MemoRequest, roles=ANY)
    def memo(self, msg, r):
        job = self._job(r.id)
        if job.state == states.INACTIVE:   # as Flux: ENOENT before any authorization
            raise NotFound("job is inactive")
        self._authorize(msg, job)
        self._handle(job, act.Memo(r.memo))
        return {}


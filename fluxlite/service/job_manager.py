"""The `job-manager` service (rank 0): accepts jobs and drives them to INACTIVE.

Every state change is an entry appended to the job's main eventlog, in the
order RFC 21 gives: submit, validate, depend, priority, alloc, start,
exception, finish, release, free, clean.  The job-manager talks to the
scheduler (`sched.alloc` / `sched.cancel` / `sched.free`) and to job-exec
(`job-exec.start`, whose responses are start / exception / finish / release),
and is where exceptions are raised: a fatal one (severity 0) moves the job to
CLEANUP, cancels it if it is pending and has job-exec kill it if it runs.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import functools
import sys
import time
from typing import Annotated

from ..errors import (FluxliteError, NoChild, NotFound, PermissionDenied, ProtocolError, TryAgain,
                      UsageError)
from ..job import depend
from ..job import jobspec as js
from ..job import rset, states
from ..job.eventlog import entry, eventlog_key, job_key
from ..protocol.message import STREAMING
from ..protocol.schema import (AnyMap, JobId, Matchtag, Meta, Name, Severity, Signal, Struct,
                               Text, Urgency, UserId, WaitStatus)
from ..util import fluid, fsd, idset, procs
from .base import ANY, OWNER, Service, handler


class SubmitRequest(Struct, kw_only=True):
    jobspec: AnyMap
    urgency: Urgency = 16
    flags: Annotated[int, Meta(ge=0)] = 0   # WAITABLE: not purged until waited for


class PurgeRequest(Struct, kw_only=True):
    age_limit: Annotated[float, Meta(ge=-1)] = -1.0   # seconds; -1: no age limit
    num_limit: Annotated[int, Meta(ge=-1)] = -1       # -1: no number limit
    force: bool = False
    ids: list[JobId] | None = None


class JobRequest(Struct, kw_only=True):
    id: JobId


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


class KillRequest(Struct, kw_only=True):
    id: JobId
    signum: Signal


class MemoRequest(Struct, kw_only=True):
    id: JobId
    memo: AnyMap


class WaitRequest(Struct, kw_only=True):
    id: JobId | None = None


class QueueStartRequest(Struct, kw_only=True):
    start: bool
    all: bool = False
    nocheckpoint: bool = False
    reason: Text | None = None


class ListRequest(Struct, kw_only=True):
    states: Name = "active"
    ids: list[JobId] | None = None
    userid: UserId | None = None     # only this user's jobs (None: everyone's)


class JournalRequest(Struct, kw_only=True):
    full: bool = False    # history of every known job (else of the active ones only)


class JournalCancelRequest(Struct, kw_only=True):
    matchtag: Matchtag


JOURNAL_BATCH = 64   # jobs per history response of job-manager.events-journal

_BUSY = (states.RUN, states.CLEANUP)
_NOTHING: dict = {}   # the shared empty map of a Job's unused fields: never changed


class Job:
    # The jobspec itself lives in the KVS only (thousands of pending jobs would
    # otherwise each keep their whole environment here): a Job keeps what it reads
    # (name, duration, whether it is an instance) and reads the rest from the KVS
    # when it is needed (the scheduler's request, job-exec's start).
    __slots__ = ("id", "userid", "urgency", "priority", "req", "name", "state", "duration",
                 "instance", "t_submit", "t_run", "t_cleanup", "t_inactive", "alloc",
                 "exceptions", "fatal", "status", "memo", "waiters", "ran", "key",
                 "expiration", "exec_pending", "freed", "waited", "deps", "dependents",
                 "flags")

    def __init__(self, jobid: int, userid: int, jobspec: dict, req: js.Request, urgency: int):
        self.id = jobid
        self.userid = userid
        self.req = req
        self.urgency = urgency
        self.priority = depend.priority(urgency)
        self.name = sys.intern(js.command_name(jobspec))
        system = jobspec["attributes"]["system"]
        self.duration = system.get("duration", 0)
        self.instance = bool(system.get("shell", {}).get("options", {}).get("instance"))
        self.state = states.NEW
        self.t_submit = time.time()
        self.t_run = self.t_cleanup = self.t_inactive = 0.0
        # empty until used: a pending job holds no containers of its own (a list or map
        # is made by the first append; `alloc` and `memo` are replaced, never changed)
        self.alloc: dict[int, list[int]] = _NOTHING
        self.exceptions: list[dict] | tuple = ()
        self.fatal: dict | None = None
        self.status: int | None = None
        self.memo: dict = _NOTHING
        self.waiters: list | tuple = ()
        self.ran = False
        self.key = eventlog_key(jobid)
        self.expiration = 0.0
        self.exec_pending = None
        self.freed = False
        self.waited = False
        self.deps: dict[str, tuple[str, int | None]] = _NOTHING  # description ->
        #                                                          (scheme, job id)
        self.dependents: list[Job] | tuple = ()      # jobs in DEPEND waiting on this one
        self.flags = 0

    @property
    def result(self) -> str | None:
        if self.state != states.INACTIVE:
            return None
        return states.result(self.ran, self.status, self.fatal["type"] if self.fatal else None)

    def info(self, level: int = 0) -> dict:
        """What `jobs` and `job-manager.info` report; `level` is this instance's depth."""
        ex = self.fatal or (self.exceptions[-1] if self.exceptions else None)
        return {
            "id": self.id, "userid": self.userid, "name": self.name, "state": self.state,
            "result": self.result, "urgency": self.urgency, "priority": self.priority,
            "t_submit": self.t_submit, "t_run": self.t_run, "t_cleanup": self.t_cleanup,
            "t_inactive": self.t_inactive, "ntasks": self.req.ntasks,
            "nnodes": self.req.nnodes if not self.alloc else len(self.alloc),
            "ranks": idset.encode(self.alloc) if self.alloc else "",
            "ncores": sum(len(c) for c in self.alloc.values()),
            "waitstatus": self.status,
            "returncode": (None if self.state != states.INACTIVE else
                           states.exit_code(self.status, self.fatal is not None)),
            "exception": ({"occurred": True, "type": ex["type"], "severity": ex["severity"],
                           "note": ex["note"]} if ex else {"occurred": False}),
            "duration": self.duration,
            "expiration": self.expiration, "memo": self.memo,
            "instance": self.instance, "waited": self.waited,
            "depth": level + 1 if self.instance else 0,
            "dependencies": list(self.deps),
        }


def _own(job: Job, field: str):
    """The job's own list or map in `field`, made now if it still has the shared empty."""
    value = getattr(job, field)
    if value is _NOTHING or value == ():
        value = {} if value is _NOTHING else []
        setattr(job, field, value)
    return value


def _unwait(job: Job, msg) -> None:
    """A waiter's client went away."""
    if msg in job.waiters:
        job.waiters.remove(msg)


WAITABLE = states.WAITABLE
TRIM_EVERY = 256   # purged jobs between two trims of the heap (release_free_memory)
AGE_LIMIT = "job-manager.inactive-age-limit"
NUM_LIMIT = "job-manager.inactive-num-limit"


class JobManagerService(Service):
    name = "job-manager"

    def __init__(self, ctx, *, kvs):
        super().__init__(ctx)
        self.jobs: dict[int, Job] = {}
        self.any_waiters: list = []   # job-manager.wait without an id, in arrival order
        self.gen = fluid.FluidGenerator(0)
        self.kvs = kvs
        self.hostname = ctx.hostname
        self.level = int(ctx.attrs.get("instance-level") or 0)
        self._idle = asyncio.Event()
        self._idle.set()
        self._settle: collections.deque[Job] = collections.deque()  # jobs whose dependents
        self._settling = False                                       # are to be looked at
        # the one anonymous queue (flux-queue(1)): scheduling started or stopped
        self.started = True
        self.stop_reason: str | None = None
        self.n_active = 0        # jobs not INACTIVE
        self.n_running = 0       # jobs in RUN or CLEANUP (what `queue idle` waits out)
        self.drain_waiters: list = []
        self.inactive_purged = 0  # inactive jobs forgotten (purge counts them here)
        self.idle_waiters: list = []
        self.inactive: dict[int, Job] = {}  # inactive jobs, oldest first (purge order)
        self._purge_timer = None
        self.journal: list = []  # job-manager.events-journal streams
        self._untrimmed = 0       # jobs purged since the heap was last trimmed

    # ------------------------------------------------------------ helpers
    def _job(self, jobid) -> Job:
        job = self.jobs.get(jobid)
        if job is None:
            raise NotFound(f"unknown job id {fluid.f58(jobid)}")
        return job

    def _authorize(self, msg, job: Job) -> None:
        self.authorize(msg, job.userid, f"job {fluid.f58(job.id)}")

    def _post(self, job: Job, name: str, context: dict | None = None, *, extra_ops=()) -> None:
        """Append one entry to the main eventlog and move the job's state."""
        e = entry(name, context)
        self.kvs.commit(list(extra_ops) + [{"key": job.key, "append": [e]}])
        if self.journal:
            self._journal_post(job, [e])
        self._advance(job, name, context)

    def _advance(self, job: Job, name: str, context: dict | None) -> None:
        new = states.next_state(job.state, name, context)
        if new == job.state:
            return
        old, job.state = job.state, new
        was_running, running = old in _BUSY, new in _BUSY
        if was_running != running:
            self.n_running += 1 if running else -1
            if not running and self.idle_waiters:
                self._answer_idle()
        now = time.time()
        if new == states.RUN:
            job.t_run = now
        elif new == states.CLEANUP:
            job.t_cleanup = now
        elif new == states.INACTIVE:
            job.t_inactive = now
            self._inactive(job)

    def _inactive(self, job: Job) -> None:
        for w in job.waiters:
            self.untrack_stream(w)
            self.respond(w, self._wait_result(job))
        job.waiters = ()
        for w in list(self.any_waiters):
            if self._waitable(w, job):  # the first waiting for any job gets it
                self.any_waiters.remove(w)
                self.untrack_stream(w)
                self.respond(w, self._wait_result(job))
                break
        self.n_active -= 1
        job.exec_pending = None   # the scheduler's answer: nothing more is to come
        self.inactive[job.id] = job
        if self.n_active == 0:
            self._idle.set()
            for w in self.drain_waiters:
                self.untrack_stream(w)
                self.respond(w, {})
            self.drain_waiters.clear()
        self._notify_dependents(job)
        self._purge_by_policy()
        if self.n_active == 0:
            procs.release_free_memory()  # the peak of a burst of jobs is over

    def _wait_result(self, job: Job) -> dict:
        job.waited = True
        info = job.info(self.level)
        ok = info["result"] == "COMPLETED"
        if ok:
            err = ""
        elif job.fatal:
            err = job.fatal["note"] or f"{job.fatal['type']} exception"
        else:
            err = states.status_message(job.status or 0) or info["result"]
        return {"id": job.id, "success": ok, "errstr": err, "result": info["result"],
                "returncode": info["returncode"]}

    # ------------------------------------------------------------- submit
    @handler("job-manager.submit", schema=SubmitRequest, roles=ANY)
    def submit(self, msg, r):
        spec, urgency = r.jobspec, r.urgency
        req = js.validate(spec)
        if self.ctx.at_least("cleanup"):
            raise TryAgain("the instance is shutting down: submissions are closed")
        if urgency > depend.URGENCY_DEFAULT and not self._is_owner(msg):
            raise PermissionDenied(f"urgency {urgency}: only the instance owner may submit "
                                   f"with an urgency above {depend.URGENCY_DEFAULT}")
        jobid = self.gen.generate()
        if r.flags & ~WAITABLE:
            raise UsageError(f"submit: unknown flags 0x{r.flags & ~WAITABLE:x}")
        job = Job(jobid, msg.userid, spec, req, urgency)
        job.flags = r.flags
        self.jobs[jobid] = job
        self.n_active += 1
        self._idle.clear()
        events = [entry("submit", {"userid": job.userid, "urgency": urgency, "flags": 0,
                                   "version": 1}),
                  entry("validate")]
        self.kvs.commit([{"key": job_key(jobid, "jobspec"), "value": spec},
                         {"key": job.key, "append": events}])
        if self.journal:
            self._journal_post(job, events)
        for e in events:
            self._advance(job, e["name"], e.get("context"))
        self._add_dependencies(job, spec["attributes"]["system"].get("dependencies", []))
        if job.fatal is None and not job.deps:
            self._depended(job)
        out = {"id": jobid}
        if job.fatal is not None:  # denied during submit (e.g. unsatisfiable)
            out["exception"] = {"type": job.fatal["type"], "note": job.fatal["note"]}
        return out

    def _is_owner(self, msg) -> bool:
        return bool(msg.role & OWNER) and msg.userid == self.ctx.owner

    # -------------------------------------------------------- dependencies
    def _verdict(self, scheme: str, target: Job) -> tuple[str, str]:
        return depend.verdict(scheme, target.id, started=target.ran,
                              inactive=target.state == states.INACTIVE, result=target.result)

    def _add_dependencies(self, job: Job, deps: list) -> None:
        """RFC 26 after* dependencies: each one met now is dropped, each one that may
        still be met is a dependency-add, and one that never can be ends the job."""
        for dep in deps:
            scheme, desc = dep["scheme"], depend.description(dep)
            if scheme == depend.BEGIN_TIME:
                self._begin_time(job, desc, float(dep["value"]))
                continue
            tid = depend.target(dep["value"], scheme)
            target = self.jobs.get(tid)
            if target is None:
                why = f"{scheme}: job {fluid.f58(tid)} not found"
            elif target.userid != job.userid:
                why = (f"{scheme}: job {fluid.f58(tid)} belongs to another user "
                       "(permission denied)")
            else:
                verdict, why = self._verdict(scheme, target)
                if verdict == depend.MET:
                    continue
                if verdict == depend.WAIT:
                    if desc not in job.deps:
                        _own(job, "deps")[desc] = (scheme, tid)
                        _own(target, "dependents").append(job)
                        self._post(job, "dependency-add", {"description": desc})
                    continue
            self.raise_exception(job, "dependency", 0, why)
            return

    def _begin_time(self, job: Job, desc: str, at: float) -> None:
        """A begin-time dependency: met now, or a dependency-add and a timer."""
        delay = at - time.time()
        if delay <= 0 or desc in job.deps:
            return
        _own(job, "deps")[desc] = (depend.BEGIN_TIME, None)
        self._post(job, "dependency-add", {"description": desc})
        asyncio.get_running_loop().call_later(delay, self._begin_time_reached, job, desc)

    def _begin_time_reached(self, job: Job, desc: str) -> None:
        if job.fatal is not None or job.state != states.DEPEND or desc not in job.deps:
            return
        del job.deps[desc]
        self._post(job, "dependency-remove", {"description": desc})
        if not job.deps:
            self._depended(job)

    def _notify_dependents(self, target: Job) -> None:
        """`target` started or ended: look again at the jobs that depend on it (one job at
        a time, so that a long chain ending at once does not recurse)."""
        if not target.dependents:
            return
        self._settle.append(target)
        if self._settling:
            return
        self._settling = True
        try:
            while self._settle:
                self._settle_dependents(self._settle.popleft())
        finally:
            self._settling = False

    def _settle_dependents(self, target: Job) -> None:
        for job in list(target.dependents):
            if job.fatal is None and job.state == states.DEPEND:
                for desc, (scheme, tid) in list(job.deps.items()):
                    if tid != target.id:
                        continue
                    verdict, why = self._verdict(scheme, target)
                    if verdict == depend.MET:
                        del job.deps[desc]
                        self._post(job, "dependency-remove", {"description": desc})
                    elif verdict == depend.NEVER:
                        self.raise_exception(job, "dependency", 0, why)
                        break
            if job.fatal is not None or job.state != states.DEPEND or \
                    all(tid != target.id for _, tid in job.deps.values()):
                target.dependents.remove(job)
            if job.fatal is None and job.state == states.DEPEND and not job.deps:
                self._depended(job)

    def _depended(self, job: Job) -> None:
        """No dependency left: on to PRIORITY and SCHED; a held job (priority 0) waits
        there until its urgency is raised."""
        self._post(job, "depend")
        self._post(job, "priority", {"priority": job.priority})
        if job.priority > depend.PRIORITY_MIN:
            self._alloc(job)

    def _jobspec(self, job: Job) -> dict:
        """The job's jobspec, from the KVS (its one copy)."""
        return self.kvs.lookup(job_key(job.id, "jobspec"))

    def _alloc(self, job: Job) -> None:
        """Ask the scheduler for the job's resources; while the queue is stopped the
        job waits in SCHED without asking (`queue start` asks for it)."""
        if not self.started:
            job.exec_pending = None
            return
        part = js.resource_part(self._jobspec(job))
        p = self.rpc("sched.alloc", {"id": job.id, "jobspec": part,
                                     "priority": job.priority})
        job.exec_pending = p
        p.on_response = lambda resp, job=job, p=p: self._alloc_response(job, resp, p)

    # ------------------------------------------------------------ urgency
    @handler("job-manager.urgency", schema=UrgencyRequest, roles=ANY)
    def urgency(self, msg, r):
        """Change a pending job's urgency (an `urgency` event, then its new priority):
        raising it from 0 releases a held job, setting it to 0 holds one."""
        job = self._job(r.id)
        self._authorize(msg, job)
        if job.state not in states.PENDING or job.fatal is not None:
            raise UsageError(f"job {fluid.f58(job.id)} is not pending: its urgency can no "
                             "longer be changed")
        if r.urgency > depend.URGENCY_DEFAULT and not self._is_owner(msg):
            raise PermissionDenied(f"urgency {r.urgency}: only the instance owner may set "
                                   f"an urgency above {depend.URGENCY_DEFAULT}")
        old = job.urgency
        job.urgency = r.urgency
        self._post(job, "urgency", {"userid": msg.userid, "urgency": r.urgency})
        new, was = depend.priority(r.urgency), job.priority
        job.priority = new
        if job.state == states.SCHED and new != was:
            self._post(job, "priority", {"priority": new})
            if was == depend.PRIORITY_MIN:
                self._alloc(job)
            elif new == depend.PRIORITY_MIN:
                job.exec_pending = None
                self.send("sched.cancel", {"id": job.id})
            else:
                self.send("sched.prioritize", {"id": job.id, "priority": new})
        return {"old_urgency": old}

    def _alloc_response(self, job: Job, resp, p=None) -> None:
        if p is not None and p is not job.exec_pending:
            # an allocation asked for before the job was held: give it back
            if not resp.errnum:
                self.send("sched.free", {"id": job.id})
            return
        if resp.errnum:
            if resp.errnum == errno.ECANCELED or job.fatal is not None:
                return
            self.raise_exception(job, "alloc", 0, resp.errstr)
            return
        if job.state != states.SCHED:
            # canceled while the response was on its way: give the resources back
            self.send("sched.free", {"id": job.id})
            return
        alloc = {int(r): c for r, c in resp.payload["alloc"].items()}
        job.alloc = alloc
        now = time.time()
        dur = job.duration or 0
        job.expiration = now + dur if dur else 0.0
        R = rset.build(alloc, starttime=now, expiration=job.expiration,
                       hostname=self.hostname, nslots=job.req.nslots)
        self._post(job, "alloc", {"annotations": {"sched": {
            "resource_summary": resp.payload.get("summary", "")}}},
            extra_ops=[{"key": job_key(job.id, "R"), "value": R}])
        p = self.rpc("job-exec.start", {"id": job.id, "userid": job.userid,
                                        "jobspec": self._jobspec(job), "R": R}, streaming=True)
        p.on_response = lambda r, job=job: self._exec_response(job, r)

    def _exec_response(self, job: Job, resp) -> None:
        if resp.errnum:
            if resp.errnum != errno.ENODATA:
                self.raise_exception(job, "exec", 0, resp.errstr or "job-exec failed")
                self._release(job, final=True)
            return
        kind, data = resp.payload.get("type"), resp.payload.get("data") or {}
        if kind == "start":
            job.ran = True
            self._post(job, "start")
            self._notify_dependents(job)
        elif kind == "exception":
            self.raise_exception(job, data["type"], data["severity"], data.get("note", ""),
                                 data.get("context"), notify_exec=False)
        elif kind == "finish":
            job.status = data["status"]
            self._post(job, "finish", {"status": job.status})
        elif kind == "release":
            self._release(job, final=bool(data.get("final")), ranks=data.get("ranks", "all"))

    def _release(self, job: Job, final: bool, ranks: str = "all") -> None:
        if job.freed:
            return
        if job.state == states.RUN:
            # job-exec ended without a finish (it failed): the job still has to end
            self._advance(job, "finish", {"status": job.status or 256})
        self._post(job, "release", {"ranks": ranks, "final": final})
        if final:
            job.freed = True
            self.send("sched.free", {"id": job.id})
            self._post(job, "free")
            self._post(job, "clean")

    # --------------------------------------------------------- exceptions
    def raise_exception(self, job: Job, etype: str, severity: int, note: str,
                        context: dict | None = None, userid: int | None = None,
                        notify_exec: bool = True, wait_status: int | None = None) -> None:
        if job.state == states.INACTIVE:
            raise FluxliteError(f"job {fluid.f58(job.id)} is inactive", errno.EINVAL)
        ex = {"type": etype, "severity": severity, "note": note}
        if userid is not None:
            ex["userid"] = userid
        if wait_status is not None:
            ex["wait_status"] = wait_status
        if context:
            ex["context"] = context
        _own(job, "exceptions").append(ex)
        prior = job.state
        self._post(job, "exception", ex)
        if severity != 0 or job.fatal is not None:
            return
        job.fatal = ex
        if prior in states.PENDING:
            self.send("sched.cancel", {"id": job.id})
            self._post(job, "clean")
        elif prior == states.RUN and notify_exec:
            fwd = {"id": job.id, "type": etype, "severity": severity, "note": note}
            if wait_status is not None:
                fwd["wait_status"] = wait_status
            self.send("job-exec.exception", fwd)

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
            raise FluxliteError(f"job {fluid.f58(jobid)} is already finishing or inactive",
                                errno.EINVAL)
        self.raise_exception(job, "cancel", 0, note, userid=msg.userid)
        return {}

    @handler("job-manager.raiseall", schema=RaiseAllRequest, roles=ANY)
    def raiseall(self, msg, r):
        """Raise an exception on every job of a user (or of all users) in some states:
        `cancel --all/--user/--states`.  Jobs already ending (a fatal exception raised,
        or in CLEANUP) are not counted.  Answers {count, errors}."""
        if " " in r.type or "=" in r.type:
            raise UsageError(f"invalid exception type {r.type!r}")
        if r.userid != msg.userid and not self._is_owner(msg):
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
        self._authorize(msg, job)
        job.memo = {**job.memo, **r.memo}
        self._post(job, "memo", r.memo)
        return {}

    # ------------------------------------------------------------ queries
    @handler("job-manager.wait", schema=WaitRequest, roles=ANY)
    def wait(self, msg, r):
        """Wait for one job (`{id}`), or without an id for any job of the caller's
        not waited for yet: the one that ended first, else the next to end."""
        if r.id is None:
            return self._wait_any(msg)
        job = self._job(r.id)
        if job.state == states.INACTIVE:
            out = self._wait_result(job)
            self._purge_by_policy()  # a waitable job may go now
            return out
        msg.drop_payload()  # kept to be answered: its route and matchtag are enough
        _own(job, "waiters").append(msg)
        self.track_stream(msg, functools.partial(_unwait, job, msg))
        return self.no_reply

    def _waitable(self, msg, job: Job) -> bool:
        """A job `msg`'s sender may get from a wait for any job: its own, not waited
        for yet, and nobody waiting for it by id."""
        return job.userid == msg.userid and not job.waited and not job.waiters

    def _wait_any(self, msg):
        done = [j for j in self.jobs.values()
                if j.state == states.INACTIVE and self._waitable(msg, j)]
        if done:
            return self._wait_result(min(done, key=lambda j: j.t_inactive))
        pending = [j for j in self.jobs.values() if self._waitable(msg, j)]
        if len(pending) <= sum(1 for w in self.any_waiters if w.userid == msg.userid):
            raise NoChild("there are no waitable jobs")
        msg.drop_payload()
        self.any_waiters.append(msg)
        self.track_stream(msg, lambda: self.any_waiters.remove(msg)
                          if msg in self.any_waiters else None)
        return self.no_reply

    @handler("job-manager.list", schema=ListRequest, roles=ANY)
    def list(self, msg, r):
        which, ids = r.states, (set(r.ids) if r.ids is not None else None)
        out = []
        for job in self.jobs.values():
            if ids is not None and job.id not in ids:
                continue
            if r.userid is not None and job.userid != r.userid:
                continue
            if which == "active" and job.state == states.INACTIVE:
                continue
            if which == "inactive" and job.state != states.INACTIVE:
                continue
            out.append(job.info(self.level))
        out.sort(key=lambda j: (j["state"] == states.INACTIVE, -j["t_submit"]))
        return {"jobs": out}

    @handler("job-manager.stats", schema=None, roles=ANY)
    def stats(self, msg, r):
        """Counts of every job in the instance, as `jobs --stats` prints them."""
        out = {"pending": 0, "running": 0, "successful": 0, "failed": 0,
               "inactive_purged": self.inactive_purged,
               "journal": {"listeners": len(self.journal)}}
        for job in self.jobs.values():
            if job.state in states.PENDING or job.state == states.NEW:
                out["pending"] += 1
            elif job.state in _BUSY:
                out["running"] += 1
            elif job.result == "COMPLETED":
                out["successful"] += 1
            else:
                out["failed"] += 1   # failed, canceled and timeout, as Flux counts them
        return out

    @handler("job-manager.history.get", schema=None, roles=ANY)
    def history_get(self, msg, r):
        """The ids of the caller's jobs, newest first (`job last`)."""
        ids = [j.id for j in self.jobs.values() if j.userid == msg.userid]
        ids.reverse()  # jobs are kept in submit order
        return {"jobs": ids}

    @handler("job-manager.info", schema=JobRequest, roles=ANY)
    def info(self, msg, r):
        return self._job(r.id).info(self.level)

    # ------------------------------------------------------------ journal
    # job-manager.events-journal streams the main eventlog entries of every job the
    # caller may see (the owner: all; a guest: its own), as Flux's job-manager does.
    # Each response is {"jobs": [{"id", "events", "jobspec"?, "R"?}...]}: first the
    # history (every known job with `full`, else the active ones), JOURNAL_BATCH jobs
    # a response, then {"jobs": []} (the sentinel), then one response per new entry
    # (the submit entry with the job's jobspec, alloc with its R).  Responses go
    # straight to the client's connection, bounded by broker.client-queue like every
    # stream.  The stream ends with the client, events-journal-cancel or shutdown.
    def _journal_job(self, job: Job, events: list, jobspec: bool, R: bool) -> dict:
        out = {"id": job.id, "events": events}
        for key, want in (("jobspec", jobspec), ("R", R)):
            if want:
                try:
                    value = self.kvs.lookup(job_key(job.id, key))
                except FluxliteError:
                    continue
                out[key] = _redacted(value) if key == "jobspec" else value
        return out

    def _journal_sees(self, msg, job: Job) -> bool:
        return job.userid == msg.userid or self._is_owner(msg)

    def _journal_post(self, job: Job, events: list) -> None:
        for e in events:
            resp = {"jobs": [self._journal_job(job, [e], e["name"] == "submit",
                                               e["name"] == "alloc")]}
            for w in self.journal:
                if self._journal_sees(w, job):
                    self.respond(w, resp)

    @handler("job-manager.events-journal", schema=JournalRequest, streaming=True, roles=ANY)
    def events_journal(self, msg, r):
        if not msg.flags & STREAMING:
            raise ProtocolError("job-manager.events-journal requires the streaming flag")
        batch: list = []
        for job in self.jobs.values():   # nothing here changes the table
            if (not r.full and job.state == states.INACTIVE) or not self._journal_sees(msg, job):
                continue
            try:
                events = self.kvs.lookup(job.key)
            except FluxliteError:
                continue
            batch.append(self._journal_job(job, events, True, True))
            if len(batch) >= JOURNAL_BATCH:
                self.respond(msg, {"jobs": batch})
                batch = []
        if batch:
            self.respond(msg, {"jobs": batch})
        self.respond(msg, {"jobs": []})
        self.journal.append(msg)
        self.track_stream(msg, lambda: self._journal_drop(msg))

    def _journal_drop(self, msg) -> bool:
        if msg in self.journal:
            self.journal.remove(msg)
            return True
        return False

    @handler("job-manager.events-journal-cancel", schema=JournalCancelRequest, roles=ANY)
    def events_journal_cancel(self, msg, r):
        for w in [w for w in self.journal if w.matchtag == r.matchtag and w.route == msg.route]:
            self._journal_drop(w)
            self.untrack_stream(w)
            self.end_stream(w)
        return {}

    # -------------------------------------------------------------- queue
    @handler("job-manager.queue-start", schema=QueueStartRequest)
    def queue_start(self, msg, r):
        """`queue stop` / `queue start`.  Stopping withdraws the requests the
        scheduler still holds (their jobs stay in SCHED); starting asks again for
        every pending job, in priority then submit order."""
        if not r.start:
            self.started = False
            self.stop_reason = r.reason or None
            for job in self.jobs.values():
                if job.state == states.SCHED and job.exec_pending is not None:
                    job.exec_pending = None
                    self.send("sched.cancel", {"id": job.id})
            return {}
        if self.started:
            return {}
        self.started, self.stop_reason = True, None
        waiting = [j for j in self.jobs.values() if self._unrequested(j)]
        for job in sorted(waiting, key=lambda j: (-j.priority, j.id)):
            self._alloc(job)
        return {}

    def _unrequested(self, job: Job) -> bool:
        return (job.state == states.SCHED and job.fatal is None and job.exec_pending is None
                and job.priority > depend.PRIORITY_MIN)

    @handler("job-manager.queue-status", schema=None, roles=ANY)
    def queue_status(self, msg, r):
        out = {"enable": True, "start": self.started}
        if not self.started and self.stop_reason:
            out["stop_reason"] = self.stop_reason
        return out

    @handler("job-manager.alloc-query", schema=None, roles=ANY)
    def alloc_query(self, msg, r):
        sched = [j for j in self.jobs.values()
                 if j.state == states.SCHED and j.fatal is None]
        return {"queue_length": sum(1 for j in sched if self._unrequested(j)),
                "alloc_pending": sum(1 for j in sched if j.exec_pending is not None),
                "running": sum(1 for j in self.jobs.values() if j.state == states.RUN)}

    @handler("job-manager.drain", schema=None)
    def drain(self, msg, r):
        """Answer once no job is active (at once if none is); a client that goes
        away stops waiting."""
        if self.n_active == 0:
            return {}
        self.drain_waiters.append(msg)
        self.track_stream(msg, lambda: self.drain_waiters.remove(msg)
                          if msg in self.drain_waiters else None)
        return self.no_reply

    @handler("job-manager.idle", schema=None)
    def idle(self, msg, r):
        """Answer once no job is in RUN or CLEANUP, with how many are pending."""
        if self.n_running == 0:
            return {"pending": self.n_active}
        self.idle_waiters.append(msg)
        self.track_stream(msg, lambda: self.idle_waiters.remove(msg)
                          if msg in self.idle_waiters else None)
        return self.no_reply

    def _answer_idle(self) -> None:
        if self.n_running:
            return
        # n_active still counts a job moving to INACTIVE now: count pending ones
        pending = sum(1 for j in self.jobs.values() if j.state in states.PENDING)
        for w in self.idle_waiters:
            self.untrack_stream(w)
            self.respond(w, {"pending": pending})
        self.idle_waiters.clear()

    # -------------------------------------------------------------- purge
    # Inactive jobs are forgotten oldest first: by the job-manager.inactive-age-limit and
    # inactive-num-limit attributes as each job ends (and, for the age, by a timer), or
    # by `job-manager.purge` (`fluxlite job purge`).  A purged job leaves the job table
    # and the KVS (its output goes from the store with it): it is an unknown job.
    # A job submitted WAITABLE stays until it has been waited for.
    def _limits(self) -> tuple[float, int]:
        """The policy's (age limit in seconds, number limit); -1 for no limit."""
        age, num = (self.ctx.attrs.get(AGE_LIMIT) or ""), (self.ctx.attrs.get(NUM_LIMIT) or "")
        return (fsd.parse(age) if age else -1.0), (int(num) if num else -1)

    def _purgeable(self, age_limit: float, num_limit: int, now: float) -> list[Job]:
        """Inactive jobs beyond an age or number limit, oldest first."""
        over = len(self.inactive) - num_limit if num_limit >= 0 else 0
        out = []
        for i, job in enumerate(self.inactive.values()):
            if i >= over and (age_limit < 0 or now - job.t_inactive <= age_limit):
                break  # the rest are younger
            if job.flags & WAITABLE and not job.waited:
                continue
            out.append(job)
        return out

    def _purge(self, jobs: list[Job]) -> None:
        if not jobs:
            return
        self.kvs.commit([{"key": job_key(j.id), "unlink": True, "prune": True} for j in jobs])
        for job in jobs:
            del self.inactive[job.id]
            del self.jobs[job.id]
        self.inactive_purged += len(jobs)
        self._untrimmed += len(jobs)
        if self._untrimmed >= TRIM_EVERY or not self.inactive:
            self._untrimmed = 0
            procs.release_free_memory()

    def _purge_by_policy(self) -> None:
        age_limit, num_limit = self._limits()
        if age_limit < 0 and num_limit < 0:
            return
        now = time.time()
        self._purge(self._purgeable(age_limit, num_limit, now))
        if age_limit >= 0 and self.inactive and self._purge_timer is None:
            oldest = next(iter(self.inactive.values()))
            delay = max(0.0, oldest.t_inactive + age_limit - now) + 0.01
            self._purge_timer = asyncio.get_running_loop().call_later(delay, self._purge_tick)

    def _purge_tick(self) -> None:
        self._purge_timer = None
        self._purge_by_policy()

    @handler("job-manager.purge", schema=PurgeRequest)
    def purge(self, msg, r):
        """Purge inactive jobs (by limits, or the given ids); without `force`, only
        count them.  Answers {count, inactive} (inactive: how many remain)."""
        if r.ids is not None:
            jobs = []
            for jobid in r.ids:
                job = self._job(jobid)
                if job.state != states.INACTIVE:
                    raise UsageError(f"job {fluid.f58(jobid)} is not inactive: only inactive "
                                     "jobs can be purged")
                jobs.append(job)
        elif r.age_limit < 0 and r.num_limit < 0:
            jobs = []
        else:
            jobs = self._purgeable(r.age_limit, r.num_limit, time.time())
        count = len(jobs)
        if r.force:
            self._purge(jobs)
        return {"count": count, "inactive": len(self.inactive)}

    # ------------------------------------------------------------ cleanup
    async def cleanup(self) -> None:
        """Instance shutdown: cancel every job and wait for them to end."""
        for job in list(self.jobs.values()):
            if job.state not in (states.INACTIVE, states.CLEANUP) and job.fatal is None:
                self.raise_exception(job, "cancel", 0, "instance shutting down")
        await self._idle.wait()
        for w in self.journal:
            self.untrack_stream(w)
            self.end_stream(w)
        self.journal.clear()


def _redacted(jobspec: dict) -> dict:
    """A jobspec without its environment, as Flux's journal gives it."""
    system = jobspec.get("attributes", {}).get("system", {})
    if "environment" not in system:
        return jobspec
    system = {k: v for k, v in system.items() if k != "environment"}
    return {**jobspec, "attributes": {**jobspec["attributes"], "system": system}}

"""The `job-manager` service (rank 0): accepts jobs and drives them to INACTIVE.

Every state change is an entry appended to the job's main eventlog, in the
order RFC 21 gives: submit, validate, depend, priority, alloc, start,
exception, finish, release, free, clean.  What each event leads to is decided
by the per-job state machine in job/actions.py (pure: events in, effects out);
this service owns the job table and the I/O.  It turns requests and answers
into events, and carries out the effects in one place (`_handle`): eventlog
commits, the scheduler (`sched.alloc` / `cancel` / `prioritize` / `free`),
job-exec (`job-exec.start`, whose responses are start / exception / finish /
release, and `job-exec.exception`), waiters, dependents and the purge policy.

A submission is first checked by the scheduler (`sched.feasibility`), as
flux-core's job-ingest does: a request that can never fit is a submit error
and never becomes a job.

With a state directory (-Sstatedir), the table is rebuilt at start from the
jobs' eventlogs (jm_restart.py), and a shutdown cancels only running jobs.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import functools
import json
import time
from typing import Annotated

from ..errors import (
    FluxliteError,
    NoChild,
    NoService,
    NotFound,
    PermissionDenied,
    ProtocolError,
    TryAgain,
    UsageError,
)
from ..job import actions as act
from ..job import depend, joblist, signed, states
from ..job import policy as jpolicy
from ..job import schema as jschema
from ..job.actions import Job, own
from ..job.eventlog import entry, job_key
from ..protocol.message import STREAMING
from ..protocol.schema import (
    BULK_PAYLOAD,
    AnyMap,
    JobId,
    JobRequest,
    KillRequest,
    Matchtag,
    Meta,
    Name,
    Severity,
    Struct,
    Text,
    Urgency,
    UserId,
    WaitStatus,
)
from ..util import fluid, fsd, procs
from ..util.log import enabled as log_enabled
from . import jm_restart
from .base import ANY, Service, handler


class SubmitRequest(Struct, kw_only=True):
    jobspec: AnyMap
    urgency: Urgency = 16
    flags: Annotated[int, Meta(ge=0)] = 0   # WAITABLE: not purged until waited for


class IngestRequest(Struct, kw_only=True):
    J: str
    urgency: int = 16                        # its range is checked with Flux's message
    flags: Annotated[int, Meta(ge=0)] = 0


class PurgeRequest(Struct, kw_only=True):
    age_limit: Annotated[float, Meta(ge=-1)] = -1.0   # seconds; -1: no age limit
    num_limit: Annotated[int, Meta(ge=-1)] = -1       # -1: no number limit
    force: bool = False
    ids: list[JobId] | None = None


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


class WaitRequest(Struct, kw_only=True):
    id: JobId | None = None


class QueueStartRequest(Struct, kw_only=True):
    start: bool
    all: bool = False
    nocheckpoint: bool = False
    reason: Text | None = None
    name: Name | None = None   # the queue (Flux's key); needed when queues are named


class QueueStatusRequest(Struct, kw_only=True):
    name: Name | None = None


class QueueState:
    """One queue's state: whether it takes submissions (enable) and whether its jobs
    are scheduled (start), with the reasons given.  Plain data (`as_dict`), so
    that it can be saved and restored as it is."""
    __slots__ = ("enable", "disable_reason", "start", "stop_reason")

    def __init__(self, enable=True, disable_reason=None, start=True, stop_reason=None):
        self.enable, self.disable_reason = enable, disable_reason
        self.start, self.stop_reason = start, stop_reason

    def as_dict(self) -> dict:
        out = {"enable": self.enable, "start": self.start}
        if not self.enable and self.disable_reason:
            out["disable_reason"] = self.disable_reason
        if not self.start and self.stop_reason:
            out["stop_reason"] = self.stop_reason
        return out


class QueueEnableRequest(Struct, kw_only=True):
    enable: bool
    all: bool = False
    name: Name | None = None
    reason: Text | None = None


class JobtapRequest(Struct, kw_only=True):   # Flux's query_only is the default here
    load: Text | None = None
    remove: Text | None = None


# Flux's built-in jobtap plugins whose behaviour this job-manager has (it loads no others)
BUILTIN_PLUGINS = (".priority-default", ".dependency-after", ".begin-time", ".history")


class ListRequest(Struct, kw_only=True):
    states: Name = "active"
    ids: list[JobId] | None = None
    userid: UserId | None = None     # only this user's jobs (None: everyone's)


class JobListRequest(Struct, kw_only=True):
    """Flux's job-list.list: at most max_entries jobs (0: all) that meet an RFC 31
    constraint, inactive ones only if they became so after `since`; the fields
    named in attrs (["all"]: every one)."""
    max_entries: Annotated[int, Meta(ge=0)] = 0
    since: float = 0.0
    attrs: list[str] | None = None
    constraint: AnyMap | None = None


class JobListIdRequest(Struct, kw_only=True):
    id: JobId
    attrs: list[str] | None = None


class JournalRequest(Struct, kw_only=True):
    full: bool = False    # history of every known job (else of the active ones only)


class JournalCancelRequest(Struct, kw_only=True):
    matchtag: Matchtag


JOURNAL_BATCH = 64   # jobs per history response of job-manager.events-journal

_BUSY = (states.RUN, states.CLEANUP)


def _unwait(job: Job, msg) -> None:
    """A waiter's client went away."""
    if msg in job.waiters:
        job.waiters.remove(msg)


WAITABLE = states.WAITABLE
TRIM_EVERY = 256   # purged jobs between two trims of the heap (release_free_memory)
ASK_SLICE = 64     # jobs asked for in one loop turn when a queue starts
AGE_LIMIT = "job-manager.inactive-age-limit"
NUM_LIMIT = "job-manager.inactive-num-limit"


class JobManagerService(Service):
    name = "job-manager"
    aliases = ("job-list", "job-ingest")   # Flux's job-list and job-ingest topics

    def __init__(self, ctx, *, kvs):
        super().__init__(ctx)
        self.jobs: dict[int, Job] = {}
        self._last_stamp = 0.0   # the latest eventlog entry's timestamp (_stamp)
        # active jobs with an explicit name, for singleton dependencies: job id ->
        # (userid, name), the count of each, and the singletons waiting, in submit order
        self._named: dict[int, tuple[int, str]] = {}
        self._named_active: dict[tuple[int, str], int] = {}
        self._singletons: dict[tuple[int, str], collections.deque] = {}
        self.any_waiters: list = []   # job-manager.wait without an id, in arrival order
        self.gen = fluid.FluidGenerator(0)
        self.kvs = kvs
        self.level = int(ctx.attrs.get("instance-level") or 0)
        self.actions = act.Actions(ctx.hosts)   # the per-job machine (and the queue)
        self._events: collections.deque = collections.deque()  # (job, event) to handle
        self._handling = False
        self._idle = asyncio.Event()
        self._idle.set()
        queues = json.loads(ctx.attrs.get("queues") or "{}")
        self.policy = jpolicy.Policy(queues, json.loads(ctx.attrs.get("policy") or "{}"))
        # each queue's state by name ("" is the one anonymous queue when none is named)
        self.queues: dict[str, QueueState] = {q: QueueState() for q in self.policy.names}
        self._nocheckpoint: set[str] = set()   # stopped with --nocheckpoint
        self.n_active = 0        # jobs not INACTIVE
        self.n_running = 0       # jobs in RUN or CLEANUP (what `queue idle` waits out)
        self.drain_waiters: list = []
        self.inactive_purged = 0  # inactive jobs forgotten (purge counts them here)
        self.idle_waiters: list = []
        self.inactive: dict[int, Job] = {}  # inactive jobs, oldest first (purge order)
        self._purge_timer = None
        self.journal: list = []  # job-manager.events-journal streams
        self._untrimmed = 0       # jobs purged since the heap was last trimmed
        self.max_purged = 0       # the largest id of a purged job (ids are never reused)
        self._calm = asyncio.Event()   # set while no job is in RUN or CLEANUP
        self._calm.set()

    async def start(self) -> None:
        """With a state directory, rebuild the table the last run left; the jobs
        are looked at again once every service of the rank is up."""
        if self.kvs.durable:
            jm_restart.rebuild(self)
            if self.n_running:
                self._calm.clear()
            asyncio.get_running_loop().call_soon(jm_restart.resume, self)

    def checkpoint(self, *ops) -> None:
        """Write what the job-manager keeps beside the eventlogs (with `ops`, in one
        commit), where a restart finds it; nothing without a state directory."""
        if not self.kvs.durable:
            return
        queue = self._saved_queue("") if "" in self.queues else {"start": True}
        if list(self.queues) != [""]:
            queue["queues"] = {q: self._saved_queue(q) for q in self.queues}
        cp = {"version": 1, "epoch": self.gen.epoch, "max_jobid": self.max_purged,
              "queue": queue}
        self.kvs.commit([*ops, {"key": jm_restart.CHECKPOINT, "value": cp}])

    def _saved_queue(self, name: str) -> dict:
        """A queue's state as a restart restores it (as Flux's checkpoint: a queue
        stopped with --nocheckpoint comes back started; a disabled one stays so)."""
        state = self.queues[name]
        out = {"start": True}
        if not state.start and name not in self._nocheckpoint:
            out = {"start": False, "reason": state.stop_reason}
        if not state.enable:
            out.update(enable=False, disable_reason=state.disable_reason)
        return out

    # ------------------------------------------------------------ helpers
    def _job(self, jobid) -> Job:
        job = self.jobs.get(jobid)
        if job is None:
            raise NotFound(f"unknown job id {fluid.f58(jobid)}")
        return job

    def _authorize(self, msg, job: Job) -> None:
        self.authorize(msg, job.userid, f"job {fluid.f58(job.id)}")

    def _jobspec(self, job: Job) -> dict:
        """The job's jobspec, from the KVS (its one copy)."""
        return self.kvs.lookup(job_key(job.id, "jobspec"))

    # ------------------------------------------------------ the one place
    def _handle(self, job: Job, event) -> None:
        """Feed one event to the job's state machine (job/actions.py) and carry out
        the effects it returns.  An event that comes while effects are being carried
        out (an answer the RPC tracker delivers inside the call that asked for it, a
        dependent looked at again) waits its turn: effects apply in the order the
        machine gave them, and a long chain of dependents never recurses."""
        self._events.append((job, event))
        if self._handling:
            return
        self._handling = True
        debug = log_enabled("debug")
        try:
            while self._events:
                job, event = self._events.popleft()
                old = job.state
                effects = self.actions.handle(job, event, time.time())
                if debug:
                    self.log.debug("job transition", jobid=fluid.f58_plain(job.id),
                                   state=f"{old}->{job.state}", stimulus=type(event).__name__,
                                   effects=act.describe(effects))
                self._apply(job, old, effects)
        finally:
            self._handling = False

    def _stamp(self, ts: float) -> float:
        """An entry's timestamp, later than every one before it, as each of Flux's
        events has its own (a state change's events share one `now`); a journal in
        timestamp order is then the order they were logged in."""
        ts = max(ts or time.time(), self._last_stamp + 1e-6)
        self._last_stamp = ts
        return ts

    def _apply(self, job: Job, old: str, effects: list) -> None:
        if (old in _BUSY) != (job.state in _BUSY):
            self.n_running += 1 if job.state in _BUSY else -1
            if self.n_running:
                self._calm.clear()
            else:
                self._calm.set()
                if self.idle_waiters:
                    self._answer_idle()
        ops: list = []
        entries: list = []   # consecutive entries go in one commit
        for e in effects:
            kind = type(e)
            if kind is act.Post:
                if e.extra:
                    ops += [{"key": job_key(job.id, k), "value": v} for k, v in e.extra.items()]
                entries.append(entry(e.name, e.context, self._stamp(e.timestamp)))
                continue
            if entries:
                self._commit(job, ops, entries)
                ops, entries = [], []
            if kind is act.AskAlloc:
                ask = {"id": job.id, "request": job.req.wire(), "priority": e.priority,
                       "queue": job.queue, "duration": job.duration}
                if job.constraint:
                    ask["constraint"] = job.constraint
                p = self.rpc("sched.alloc", ask)
                p.on_response = functools.partial(self._alloc_answer, job, e.seq)
            elif kind is act.CancelAlloc:
                self.send("sched.cancel", {"id": job.id})
            elif kind is act.Prioritize:
                self.send("sched.prioritize", {"id": job.id, "priority": e.priority})
            elif kind is act.Free:
                self.send("sched.free", {"id": job.id})
            elif kind is act.StartExec:
                p = self.rpc("job-exec.start", {"id": job.id, "userid": job.userid,
                                                "request": job.req.wire(),
                                                "jobspec": self._jobspec(job), "R": e.R},
                             streaming=True)
                p.on_response = functools.partial(self._exec_answer, job)
            elif kind is act.ForwardException:
                self.send("job-exec.exception", e.payload)
            elif kind is act.Watch:
                target = self.jobs.get(e.target)
                if target is not None:
                    own(target, "dependents").append(job)
            elif kind is act.BeginTimer:
                asyncio.get_running_loop().call_later(
                    e.delay, self._handle, job, act.BeginTimeReached(e.desc))
            elif kind is act.AnswerWaiters:
                self._answer_waiters(job)
            elif kind is act.NotifyDependents:
                self._settle_dependents(job)
            elif kind is act.Inactive:
                self._inactive(job)
        if entries:
            self._commit(job, ops, entries)

    def _commit(self, job: Job, ops: list, entries: list) -> None:
        """Append entries to the job's main eventlog (with other keys of the job)."""
        ops.append({"key": job.key, "append": entries})
        self.kvs.commit(ops)
        if self.journal:
            self._journal_post(job, entries)

    def _alloc_answer(self, job: Job, seq: int, resp) -> None:
        if resp.errnum:
            self._handle(job, act.AllocAnswered(seq, errnum=resp.errnum, errstr=resp.errstr))
        else:
            got = resp.payload
            self._handle(job, act.AllocAnswered(seq, got["alloc"], got.get("summary", ""),
                                                gpus=got.get("gpus"),
                                                properties=got.get("properties")))

    def _exec_answer(self, job: Job, resp) -> None:
        if resp.errnum:
            if resp.errnum != errno.ENODATA:   # ENODATA: the stream's clean end
                self._handle(job, act.ExecFailed(resp.errstr))
            return
        kind, data = resp.payload.get("type"), resp.payload.get("data") or {}
        if kind == "start":
            ev = act.ExecStarted()
        elif kind == "exception":
            ev = act.ExecException(data["type"], data["severity"], data.get("note", ""),
                                   data.get("context"))
        elif kind == "finish":
            ev = act.ExecFinished(data["status"])
        elif kind == "release":
            ev = act.ExecReleased(data.get("ranks", "all"), bool(data.get("final")))
        else:
            return
        self._handle(job, ev)

    def _answer_waiters(self, job: Job) -> None:
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

    def _inactive(self, job: Job) -> None:
        self.n_active -= 1
        if self._named:
            self._singleton_gone(job)
        self.inactive[job.id] = job
        if self.n_active == 0:
            self._idle.set()
            for w in self.drain_waiters:
                self.untrack_stream(w)
                self.respond(w, {})
            self.drain_waiters.clear()
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
    @handler("job-manager.submit", schema=SubmitRequest, roles=ANY, max_payload=BULK_PAYLOAD)
    def submit(self, msg, r):
        """As flux-core's job-ingest, a job gets an id only once the scheduler says its
        request could ever fit (sched.feasibility): one that never can is a submit
        error, EOVERFLOW "unsatisfiable request: ...", and no job."""
        req = jschema.validate(r.jobspec)
        self._open(msg, r)
        system = r.jobspec["attributes"]["system"]
        deps = system.get("dependencies", [])
        for dep in deps:   # a malformed one is an error before anything is asked
            if dep["scheme"] not in (depend.BEGIN_TIME, depend.SINGLETON):
                depend.target(dep["value"], dep["scheme"])
        queue = self._queue_policy(system, req)
        ask = {"request": req.wire(), "queue": queue}
        if system.get("constraints"):
            ask["constraint"] = system["constraints"]
        p = self.rpc("sched.feasibility", ask)
        p.on_response = functools.partial(self._feasible, msg, r, req)
        return self.no_reply

    @handler("job-ingest.submit", schema=IngestRequest, roles=ANY, max_payload=BULK_PAYLOAD)
    def ingest_submit(self, msg, r):
        """Flux's job-ingest.submit: J (signed.py: Flux's unsigned form) taken apart,
        then submitted as job-manager.submit submits a jobspec."""
        if not depend.URGENCY_HOLD <= r.urgency <= depend.URGENCY_EXPEDITE:
            raise UsageError(f"urgency range is [{depend.URGENCY_HOLD}:"
                             f"{depend.URGENCY_EXPEDITE}]")
        return self.submit(msg, SubmitRequest(jobspec=signed.unwrap(r.J, msg.userid),
                                              urgency=r.urgency, flags=r.flags))

    def _queue_policy(self, system: dict, req: jschema.Request) -> str:
        """The job's queue (named, or the default, written into its jobspec as Flux
        does), whose limits it must keep; a job without a time limit gets the queue's
        default duration (or the instance's)."""
        queue = self.policy.queue_of(system)
        state = self.queues[queue]
        if not state.enable:
            raise UsageError(f"{'queue ' + queue + ': ' if queue else ''}job submission is "
                             f"disabled: {state.disable_reason}")
        if queue:
            system["queue"] = queue
        if not system.get("duration"):
            default = self.policy.default_duration(queue)
            if default:
                system["duration"] = default
        nnodes = req.nnodes or 1
        self.policy.check_limits(queue, system.get("duration") or 0.0, {
            "nnodes": nnodes, "ncores": req.nslots * req.cores_per_slot,
            "ngpus": req.nslots * req.gpus_per_slot})
        return queue

    def _open(self, msg, r) -> None:
        """Whether a submission may be taken now, from this sender."""
        if self.ctx.at_least("cleanup"):
            raise TryAgain("the instance is shutting down: submissions are closed")
        if r.urgency > depend.URGENCY_DEFAULT and not self.is_owner(msg):
            raise PermissionDenied(f"urgency {r.urgency}: only the instance owner may submit "
                                   f"with an urgency above {depend.URGENCY_DEFAULT}")
        if r.flags & ~WAITABLE:
            raise UsageError(f"submit: unknown flags 0x{r.flags & ~WAITABLE:x}")

    def _feasible(self, msg, r, req: jschema.Request, resp) -> None:
        """sched's feasibility answer: refuse the submission, or make the job."""
        if resp.errnum:
            self.respond_exception(msg, resp.error())
            return
        try:
            self._open(msg, r)   # the instance may have begun shutting down meanwhile
            self.respond(msg, self._new_job(msg.userid, r, req))
        except Exception as exc:
            self.dispatcher.respond_exception(msg, exc)

    def _new_job(self, userid: int, r, req: jschema.Request) -> dict:
        spec = r.jobspec
        name = spec["attributes"]["system"].get("job", {}).get("name")
        key = (userid, name) if name else None   # singleton counts explicitly named jobs
        deps = tuple(self._dep(userid, d, key) for d in
                     spec["attributes"]["system"].get("dependencies", []))
        jobid = self.gen.generate()
        job = Job(jobid, userid, spec, req, r.urgency, time.time(), r.flags)
        self.jobs[jobid] = job
        if key is not None:
            self._named[jobid] = key
            self._named_active[key] = self._named_active.get(key, 0) + 1
            if any(d.scheme == depend.SINGLETON and d.verdict == depend.WAIT for d in deps):
                self._singletons.setdefault(key, collections.deque()).append(job)
        self.n_active += 1
        self._idle.clear()
        self._handle(job, act.Submitted(spec, deps))
        out = {"id": jobid}
        if job.fatal is not None:  # ended at submit: a dependency that can never be met
            out["exception"] = {"type": job.fatal["type"], "note": job.fatal["note"]}
        return out

    # -------------------------------------------------------- dependencies
    def _verdict(self, scheme: str, target: Job) -> tuple[str, str]:
        return depend.verdict(scheme, target.id, started=target.ran,
                              inactive=target.state == states.INACTIVE, result=target.result,
                              excepted=target.fatal is not None)

    def _dep(self, userid: int, dep: dict, key: tuple | None) -> act.Dep:
        """An RFC 26 dependency of a new job, judged from what is known of its target
        (a begin-time one is judged by the machine); `key` is (userid, explicit job
        name), or None for a job without one."""
        scheme, desc = dep["scheme"], depend.description(dep)
        if scheme == depend.BEGIN_TIME:
            return act.Dep(desc, scheme, at=float(dep["value"]))
        if scheme == depend.SINGLETON:
            if key is None:
                return act.Dep(desc, scheme, None, depend.NEVER,
                               "dependency: singleton jobs require a job name (--job-name)")
            busy = self._named_active.get(key, 0) > 0
            return act.Dep(desc, scheme, None, depend.WAIT if busy else depend.MET)
        tid = depend.target(dep["value"], scheme)
        target = self.jobs.get(tid)
        if target is None:   # Flux's words (dependency-after)
            return act.Dep(desc, scheme, tid, depend.NEVER,
                           f"dependency: {scheme}: id {dep['value']}: job not found")
        if target.userid != userid:
            return act.Dep(desc, scheme, tid, depend.NEVER,
                           f"dependency: {scheme}: Permission denied for job {dep['value']}")
        return act.Dep(desc, scheme, tid, *self._verdict(scheme, target))

    def _singleton_gone(self, job: Job) -> None:
        """An explicitly named job ended: when every other active job of its user and
        name is a waiting singleton, the first of those may go (dependency-singleton)."""
        key = self._named.pop(job.id, None)
        if key is None:
            return
        left = self._named_active[key] - 1
        if left:
            self._named_active[key] = left
        else:
            del self._named_active[key]
        waiting = self._singletons.get(key)
        if waiting is None:
            return
        if job in waiting:      # a waiting singleton itself ended (canceled)
            waiting.remove(job)
        if waiting and left == len(waiting):
            self._handle(waiting.popleft(), act.Verdicts(((depend.SINGLETON, depend.MET, ""),)))
        if not waiting:
            del self._singletons[key]

    def _settle_dependents(self, target: Job) -> None:
        """`target` started or ended: judge again the dependencies naming it."""
        for job in list(target.dependents):
            items = []
            if job.fatal is None and job.state == states.DEPEND:
                items = [(desc, *self._verdict(scheme, target))
                         for desc, (scheme, tid) in job.deps.items() if tid == target.id]
            verdicts = {v for _, v, _ in items}
            if depend.NEVER in verdicts or depend.WAIT not in verdicts:
                target.dependents.remove(job)   # it no longer waits on target
            if items:
                self._handle(job, act.Verdicts(tuple(items)))

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
        self._authorize(msg, job)
        self._handle(job, act.Memo(r.memo))
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
        own(job, "waiters").append(msg)
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

    # Flux's job-list service, answered from the same job table (joblist.py: its shape)
    @handler("job-list.list", schema=JobListRequest, roles=ANY)
    def job_list(self, msg, r):
        found = [joblist.entry(j.info(self.level)) for j in self.jobs.values()]
        found = sorted((e for e in found if joblist.matches(e, r.constraint) and
                        (not r.since or e.get("t_inactive", r.since + 1) > r.since)),
                       key=joblist.order)
        if r.max_entries:
            found = found[:r.max_entries]
        return {"jobs": [joblist.select(e, r.attrs) for e in found]}

    @handler("job-list.job-stats", schema=None, roles=ANY)
    def job_list_stats(self, msg, r):
        """Flux's job-list.job-stats: jobs per state and per result (every user's)."""
        names = {states.NEW: "depend", states.DEPEND: "depend", states.PRIORITY: "priority",
                 states.SCHED: "sched", states.RUN: "run", states.CLEANUP: "cleanup",
                 states.INACTIVE: "inactive"}
        counts = dict.fromkeys(("depend", "priority", "sched", "run", "cleanup", "inactive"),
                               0)
        results = dict.fromkeys(("successful", "failed", "timeout", "canceled"), 0)
        by_result = {"COMPLETED": "successful", "FAILED": "failed", "TIMEOUT": "timeout",
                     "CANCELED": "canceled"}
        for job in self.jobs.values():
            counts[names[job.state]] += 1
            if job.state == states.INACTIVE and job.result in by_result:
                results[by_result[job.result]] += 1
        return {"job_states": {**counts, "total": len(self.jobs) + self.inactive_purged},
                **results, "inactive_purged": self.inactive_purged, "queues": []}

    @handler("job-list.list-attrs", schema=None, roles=ANY)
    def job_list_attrs(self, msg, r):
        """Flux's job-list.list-attrs: the attributes job-list.list may be asked for."""
        return {"attrs": list(joblist.ATTRS)}

    @handler("job-list.list-id", schema=JobListIdRequest, roles=ANY)
    def job_list_id(self, msg, r):
        return {"job": joblist.select(joblist.entry(self._job(r.id).info(self.level)),
                                      r.attrs)}

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
        return job.userid == msg.userid or self.is_owner(msg)

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
        """`queue stop` / `queue start`, of one queue (`name`) or all of them.
        Stopping withdraws the requests the scheduler still holds for that queue's
        jobs (they stay in SCHED); starting asks again for every pending job of it,
        in priority then submit order.  Other queues go on as they were."""
        names = self._queue_names(r.name, r.all)
        for name in names:
            state = self.queues[name]
            state.start = r.start
            state.stop_reason = None if r.start else (r.reason or None)
            if r.start:
                self.actions.stopped.discard(name)
            else:
                self.actions.stopped.add(name)
            if r.nocheckpoint and not r.start:
                self._nocheckpoint.add(name)
            else:
                self._nocheckpoint.discard(name)
        self.checkpoint()
        chosen = set(names)
        if not r.start:
            for job in [j for j in self.jobs.values() if j.state == states.SCHED
                        and j.sched_req and j.queue in chosen]:
                self._handle(job, act.QueueChanged())
            return {}
        waiting = [j for j in self.jobs.values() if self._unrequested(j) and j.queue in chosen]
        waiting.sort(key=lambda j: (-j.priority, j.id))
        self._ask_again(waiting, 0)
        return {}

    def _ask_again(self, jobs: list[Job], start: int) -> None:
        """Ask sched for `jobs` (a started queue's), ASK_SLICE of them a loop turn, so
        that ten thousand pending jobs do not hold every other request up."""
        for job in jobs[start:start + ASK_SLICE]:
            if self._unrequested(job) and self.actions.queue_started(job.queue):
                self._handle(job, act.QueueChanged())
        if start + ASK_SLICE < len(jobs):
            asyncio.get_running_loop().call_soon(self._ask_again, jobs, start + ASK_SLICE)

    def restore_queues(self, saved: dict) -> None:
        """Each queue's state as a checkpoint saved it: {"start", "reason"} for the
        anonymous queue, and "queues": {name: {"start", "reason"}} for named ones."""
        for name, state in self.queues.items():
            s = saved.get("queues", {}).get(name) if "queues" in saved else \
                (saved if name == "" else None)
            if not isinstance(s, dict):
                continue
            state.start = bool(s.get("start", True))
            state.stop_reason = None if state.start else s.get("reason")
            state.enable = s.get("enable", True) is not False
            state.disable_reason = None if state.enable else \
                (s.get("disable_reason") or "disabled by administrator")
            if state.start:
                self.actions.stopped.discard(name)
            else:
                self.actions.stopped.add(name)

    def _queue_names(self, name: str | None, all_: bool) -> list[str]:
        """The queues a request means: `name`, or all of them (the one anonymous queue,
        or every named one with `all`)."""
        if name is not None:
            if name not in self.queues:
                raise UsageError(f"{name!r} is not a queue (queues: "
                                 f"{', '.join(q for q in self.queues if q) or 'none'})")
            return [name]
        if all_ or list(self.queues) == [""]:
            return list(self.queues)
        raise UsageError(f"queues are configured ({', '.join(self.queues)}): name one, "
                         "or use --all")

    def _unrequested(self, job: Job) -> bool:
        return (job.state == states.SCHED and job.fatal is None and not job.sched_req
                and job.priority > depend.PRIORITY_MIN)

    @handler("job-manager.queue-enable", schema=QueueEnableRequest)
    def queue_enable(self, msg, r):
        """`queue enable` / `queue disable`, of one queue (`name`) or all of them:
        whether submissions are accepted (jobs already submitted are untouched)."""
        if not r.enable and not r.reason:
            raise UsageError("reason is required for disable")
        for name in self._queue_names(r.name, r.all):
            state = self.queues[name]
            state.enable, state.disable_reason = r.enable, None if r.enable else r.reason
        self.checkpoint()
        return {}

    @handler("job-manager.jobtap", schema=JobtapRequest)
    def jobtap(self, msg, r):
        """`jobtap list`: the plugins in effect (built in; none can be loaded)."""
        if r.load or r.remove:
            raise NoService("jobtap plugins cannot be loaded or removed here: the "
                            "built-in ones are always in effect")
        return {"plugins": list(BUILTIN_PLUGINS)}

    @handler("job-manager.queue-list", schema=None, roles=ANY)
    def queue_list(self, msg, r):
        """The named queues (Flux's answer for an instance with only the anonymous
        queue is an empty list)."""
        return {"queues": [q for q in self.queues if q]}

    @handler("job-manager.queue-status", schema=QueueStatusRequest, roles=ANY)
    def queue_status(self, msg, r):
        """One queue's state; without a name, the anonymous queue's, or with named
        queues each one's under `queues` (`start`/`enable` true only if every
        queue's is)."""
        if r.name is not None or list(self.queues) == [""]:
            return self.queues[self._queue_names(r.name, False)[0]].as_dict()
        each = {q: s.as_dict() for q, s in self.queues.items()}
        return {"enable": all(s.enable for s in self.queues.values()),
                "start": all(s.start for s in self.queues.values()), "queues": each}

    @handler("job-manager.alloc-query", schema=None, roles=ANY)
    def alloc_query(self, msg, r):
        sched = [j for j in self.jobs.values()
                 if j.state == states.SCHED and j.fatal is None]
        return {"queue_length": sum(1 for j in sched if self._unrequested(j)),
                "alloc_pending": sum(1 for j in sched if j.sched_req),
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
        ops = [{"key": job_key(j.id), "unlink": True, "prune": True} for j in jobs]
        self.max_purged = max(self.max_purged, *(j.id for j in jobs))
        if self.kvs.durable:
            self.checkpoint(*ops)
        else:
            self.kvs.commit(ops)
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
        """Instance shutdown: cancel every job and wait for them to end.  With a state
        directory, as Flux's: only running jobs are canceled, and pending ones wait for
        the next start (the queue is stopped meanwhile, not as a restart will see it)."""
        if self.kvs.durable:
            self.actions.started = False
            for job in [j for j in self.jobs.values() if j.state == states.SCHED and j.sched_req]:
                self._handle(job, act.QueueChanged())
            for job in [j for j in self.jobs.values() if j.state == states.RUN]:
                if job.fatal is None:
                    self.raise_exception(job, "cancel", 0, "instance shutting down")
            await self._calm.wait()
        else:
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

"""The job-manager's per-job state machine: events in, effects out, as data.

    jm = Actions(hosts)           # every rank's host name, for R's nodelist
    effects = jm.handle(job, AllocAnswered(1, alloc={0: [0]}), now)

The job-manager service (fluxlite/service/job_manager/) owns the I/O and the
job table: it feeds events in (a job submitted, a client's exception, urgency
or memo, the scheduler's and job-exec's answers, dependency verdicts, timers,
the queue started or stopped) and carries the effects out (eventlog entries,
requests to sched and job-exec, waiters answered, dependents looked at again,
the job's end), in order and in one place.  Nothing here touches a socket, a
clock or a process (`now` comes with each event), so every ordering can be
driven in a unit test (tests/unit/test_job_actions.py).  The events and
effects themselves are data, in machine_io.py (named here too: act.Submitted).

As Flux's job-manager (event_job_post_pack, then event_job_action), each event
first posts what happened, which moves the job's state (states.next_state),
and then `_action` looks at the state the job is in and does what that state
asks for; it is idempotent, so any event may be followed by it:

    DEPEND    no dependency left (and no fatal exception): post `depend`
    PRIORITY  post `priority`
    SCHED     the queue started and the job not held (priority > 0): ask sched
              for resources once; otherwise withdraw a request sched still holds
    CLEANUP   withdraw a request sched still holds; with no resources, post
              `clean` (with resources, job-exec's final release frees them)
    INACTIVE  answer the waiters, look at the dependents, end the job (purge)

A request to sched is numbered (`Job.sched_req` is the number of the one
outstanding, 0 for none): an answer to a request withdrawn meanwhile (the job
was held, canceled or the queue stopped) is stale, and resources it brings
are given back at once.  Events for an INACTIVE job change nothing, except
such a stale allocation, which is still freed.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable

from ..util import idset
from ..util.handlers import handler_table
from . import depend, rset, states
from . import jobspec as js
from .eventlog import eventlog_key
from .machine_io import (
    RESTART_NOTE,
    AllocAnswered,
    AnswerWaiters,
    AskAlloc,
    BeginTimer,
    BeginTimeReached,
    CancelAlloc,
    ExecException,
    ExecFailed,
    ExecFinished,
    ExecReleased,
    ExecStarted,
    ForwardException,
    Free,
    Inactive,
    JobEvent,
    Memo,
    NotifyDependents,
    Post,
    Prioritize,
    QueueChanged,
    Raise,
    Restarted,
    StartExec,
    Submitted,
    Urgency,
    Verdicts,
    Watch,
)
from .machine_io import (
    Dep as Dep,  # the service and tests name it act.Dep
)
from .schema import Request
from .schema import request as jobspec_request

_NOTHING: dict = {}   # the shared empty map of a Job's unused fields: never changed


class Job:
    # The jobspec itself lives in the KVS only (thousands of pending jobs would
    # otherwise each keep their whole environment here): a Job keeps what it reads
    # (name, duration, whether it is an instance) and reads the rest from the KVS
    # when it is needed (the scheduler's request, job-exec's start).
    __slots__ = ("id", "userid", "urgency", "priority", "req", "name", "state", "duration",
                 "instance", "t_submit", "t_run", "t_cleanup", "t_inactive", "alloc",
                 "exceptions", "fatal", "status", "memo", "waiters", "ran",
                 "expiration", "sched_req", "nreq", "waited", "deps", "dependents",
                 "flags", "queue", "cwd", "constraint", "gpus")

    def __init__(self, jobid: int, userid: int, jobspec: dict, req: Request, urgency: int,
                 t_submit: float = 0.0, flags: int = 0):
        self.id = jobid
        self.userid = userid
        self.req = req
        self.urgency = urgency
        self.priority = depend.priority(urgency)
        self.name = sys.intern(js.command_name(jobspec))
        system = jobspec["attributes"]["system"]
        self.duration = system.get("duration", 0)
        self.constraint = system.get("constraints")   # RFC 31, or None
        self.gpus: dict[int, list[int]] = _NOTHING     # rank -> GPU ids, once allocated
        self.instance = bool(system.get("shell", {}).get("options", {}).get("instance"))
        queue, cwd = system.get("queue", ""), system.get("cwd", "")
        # what `jobs` shows; interned, as most jobs share them
        self.queue = sys.intern(queue) if isinstance(queue, str) else ""
        self.cwd = sys.intern(cwd) if isinstance(cwd, str) else ""
        self.state = states.NEW
        self.t_submit = t_submit
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
        self.expiration = 0.0
        self.sched_req = 0      # number of the sched.alloc request outstanding (0: none)
        self.nreq = 0           # sched.alloc requests made so far
        self.waited = False
        self.deps: dict[str, tuple[str, int | None]] = _NOTHING  # description ->
        #                                                          (scheme, job id)
        self.dependents: list[Job] | tuple = ()      # jobs in DEPEND waiting on this one
        self.flags = flags

    @property
    def key(self) -> str:
        """The KVS key of its main eventlog (made when asked: ten thousand pending jobs
        need not each hold one)."""
        return eventlog_key(self.id)

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
            "ngpus": sum(len(g) for g in self.gpus.values()),
            "waitstatus": self.status,
            "returncode": (None if self.state != states.INACTIVE else
                           states.exit_code(self.status, self.fatal is not None)),
            "exception": ({"occurred": True, "type": ex["type"], "severity": ex["severity"],
                           "note": ex["note"]} if ex else {"occurred": False}),
            "duration": self.duration,
            "expiration": self.expiration, "memo": self.memo,
            "instance": self.instance, "waited": self.waited,
            "depth": level + 1 if self.instance else 0,
            "dependencies": list(self.deps), "queue": self.queue, "cwd": self.cwd,
        }


def own(job: Job, field: str):
    """The job's own list or map in `field`, made now if it still has the shared empty."""
    value = getattr(job, field)
    if value is _NOTHING or value == ():
        value = {} if value is _NOTHING else []
        setattr(job, field, value)
    return value


def update(job: Job, name: str, ctx: dict, now: float, extra: dict | None = None) -> None:
    """What one main-eventlog entry tells of a job, written into it: the one place a
    Job's fields change by its history (Flux's event_job_update).  A live post and a
    restart's replay both come here, so the table a replay rebuilds is the one the
    live run had.  `extra` holds R for an `alloc` entry (its KVS key)."""
    if name == "submit":
        job.userid = ctx.get("userid", job.userid)
        job.urgency = ctx.get("urgency", job.urgency)
        job.priority = depend.priority(job.urgency)
        job.flags = ctx.get("flags", 0)
        job.t_submit = now
    elif name == "dependency-add":
        scheme, target, _ = depend.parse_description(ctx["description"])
        own(job, "deps")[ctx["description"]] = (scheme, target)
    elif name == "dependency-remove":
        if ctx["description"] in job.deps:
            del job.deps[ctx["description"]]
    elif name == "urgency":
        job.urgency = ctx["urgency"]
        job.priority = depend.priority(job.urgency)
    elif name == "priority":
        job.priority = ctx["priority"]
    elif name == "memo":
        job.memo = {**job.memo, **ctx}
    elif name == "alloc":
        R = (extra or {}).get("R")
        if R is not None:
            job.alloc = rset.parse(R)
            gpus = rset.parse(R, "gpu")
            if gpus:
                job.gpus = gpus
            job.expiration = R["execution"].get("expiration", 0.0)
    elif name == "start":
        job.ran = True
    elif name == "finish":
        job.status = ctx["status"]
    elif name == "exception":
        own(job, "exceptions").append(ctx)
        if ctx.get("severity", 0) == 0 and job.fatal is None:
            job.fatal = ctx


def replay(jobid: int, jobspec: dict, entries: list[dict], R: dict | None = None) -> Job:
    """A job rebuilt from its jobspec and main eventlog (and R, if it was given
    resources): the fields and state the live run left it in, but for what no
    restart keeps (waiters, dependents, a request to the scheduler in flight)."""
    first = entries[0]["context"] if entries and entries[0]["name"] == "submit" else {}
    job = Job(jobid, first.get("userid", 0), jobspec, jobspec_request(jobspec),
              first.get("urgency", depend.URGENCY_DEFAULT))
    machine = Actions(())
    fx: list = []
    extra = {"R": R} if R is not None else None
    for e in entries:
        name, ctx = e["name"], e.get("context") or {}
        update(job, name, ctx, e["timestamp"], extra if name == "alloc" else None)
        new = states.next_state(job.state, name, ctx)
        if new != job.state:
            machine._enter(job, fx, e["timestamp"], new)
    return job


class Actions:
    """The machine.  It holds no job: each call is given one (a Job's fields are its
    state), so a pending job costs nothing here.  `started` is the queue's state."""

    HANDLERS: dict[type, Callable] = {}     # event type -> its handler (below the class)

    def __init__(self, hosts: tuple[str, ...]):
        self.hosts = hosts          # rank -> host name: R's nodelist
        self.started = True         # every queue (stop/start without a queue name)
        self.stopped: set[str] = set()   # named queues stopped one by one
        # False once sched answered ENOSYS (`module remove sched`): nothing is asked of
        # it until a scheduler says job-manager.sched-ready
        self.sched_ready = True

    def queue_started(self, queue: str) -> bool:
        return self.started and queue not in self.stopped

    def handle(self, job: Job, event, now: float) -> list:
        """Apply one event to `job` at time `now`; returns the effects, in order."""
        fx: list = []
        if job.state == states.INACTIVE and not isinstance(event, AllocAnswered):
            return fx
        self.HANDLERS[type(event)](self, job, event, fx, now)
        if job.state != states.INACTIVE:
            self._action(job, fx, now)
        return fx

    # events ------------------------------------------------------------------
    def _on_Submitted(self, job: Job, ev: Submitted, fx: list, now: float) -> None:
        self._post(job, fx, now, "submit", {"userid": job.userid, "urgency": job.urgency,
                                             "flags": job.flags, "version": 1},
                   extra={"jobspec": ev.jobspec})
        self._post(job, fx, now, "validate")
        for d in ev.deps:
            if d.desc in job.deps:
                continue   # given twice: once is enough
            verdict = d.verdict
            if d.scheme == depend.BEGIN_TIME:
                verdict = depend.MET if d.at <= now else depend.WAIT
            if verdict == depend.MET:   # met already: added and removed, as Flux posts
                self._post(job, fx, now, "dependency-add", {"description": d.desc})
                self._post(job, fx, now, "dependency-remove", {"description": d.desc})
                continue
            if verdict == depend.WAIT:
                self._post(job, fx, now, "dependency-add", {"description": d.desc})
                if d.scheme == depend.BEGIN_TIME:
                    fx.append(BeginTimer(d.desc, d.at - now))
                elif d.target is not None:
                    fx.append(Watch(d.target))
                continue
            self._raise(job, fx, now, Raise("dependency", 0, d.why))
            return

    def _on_Verdicts(self, job: Job, ev: Verdicts, fx: list, now: float) -> None:
        if job.fatal is not None or job.state != states.DEPEND:
            return
        for desc, verdict, why in ev.items:
            if desc not in job.deps:
                continue
            if verdict == depend.MET:
                self._post(job, fx, now, "dependency-remove", {"description": desc})
            elif verdict == depend.NEVER:
                self._raise(job, fx, now, Raise("dependency", 0, why))
                return

    def _on_BeginTimeReached(self, job: Job, ev: BeginTimeReached, fx: list,
                             now: float) -> None:
        if job.fatal is not None or job.state != states.DEPEND or ev.desc not in job.deps:
            return
        self._post(job, fx, now, "dependency-remove", {"description": ev.desc})

    def _on_Raise(self, job: Job, ev: Raise, fx: list, now: float) -> None:
        self._raise(job, fx, now, ev)

    def _on_Urgency(self, job: Job, ev: Urgency, fx: list, now: float) -> None:
        was = job.priority
        self._post(job, fx, now, "urgency", {"userid": ev.userid, "urgency": ev.urgency})
        new = job.priority
        if job.state == states.SCHED and new != was:
            self._post(job, fx, now, "priority", {"priority": new})
            if job.sched_req and new > depend.PRIORITY_MIN:
                fx.append(Prioritize(new))
            # held (priority 0) or released: _action withdraws or asks

    def _on_Memo(self, job: Job, ev: Memo, fx: list, now: float) -> None:
        self._post(job, fx, now, "memo", ev.memo)

    def _on_Restarted(self, job: Job, ev: Restarted, fx: list, now: float) -> None:
        if job.state in (states.RUN, states.CLEANUP) and job.alloc:
            self._raise(job, fx, now, Raise("exec", 0, RESTART_NOTE, forward=False))
            # no scheduler holds them now: released without a sched.free
            self._post(job, fx, now, "release", {"ranks": "all", "final": True})
            self._post(job, fx, now, "free")
            self._post(job, fx, now, "clean")

    def _on_QueueChanged(self, job: Job, ev: QueueChanged, fx: list, now: float) -> None:
        pass  # _action asks or withdraws

    def _on_AllocAnswered(self, job: Job, ev: AllocAnswered, fx: list, now: float) -> None:
        if ev.seq != job.sched_req:
            # a request withdrawn meanwhile (held, canceled, queue stopped): an
            # allocation it brings is given back
            if ev.alloc is not None:
                fx.append(Free())
            return
        job.sched_req = 0
        if ev.alloc is None:
            if ev.errnum == errno.ENOSYS:   # no scheduler loaded: ask the next one
                self.sched_ready = False
                return
            if ev.errnum == errno.ECANCELED or job.fatal is not None:
                return
            self._raise(job, fx, now, Raise("alloc", 0, ev.errstr))
            return
        alloc = {int(r): c for r, c in ev.alloc.items()}
        gpus = {int(r): g for r, g in (ev.gpus or {}).items()}
        R = rset.build(alloc, starttime=now,
                       expiration=now + job.duration if job.duration else 0.0,
                       hosts=self.hosts, nslots=job.req.nslots, gpus=gpus,
                       properties=ev.properties)
        self._post(job, fx, now, "alloc",
                   {"annotations": {"sched": {"resource_summary": ev.summary}}},
                   extra={"R": R})
        fx.append(StartExec(R))

    def _on_ExecStarted(self, job: Job, ev: ExecStarted, fx: list, now: float) -> None:
        self._post(job, fx, now, "start")
        if job.dependents:
            fx.append(NotifyDependents())

    def _on_ExecException(self, job: Job, ev: ExecException, fx: list, now: float) -> None:
        self._raise(job, fx, now, Raise(ev.type, ev.severity, ev.note, ev.context,
                                        forward=False))

    def _on_ExecFinished(self, job: Job, ev: ExecFinished, fx: list, now: float) -> None:
        self._post(job, fx, now, "finish", {"status": ev.status})

    def _on_ExecReleased(self, job: Job, ev: ExecReleased, fx: list, now: float) -> None:
        self._release(job, fx, now, ev.ranks, ev.final)

    def _on_ExecFailed(self, job: Job, ev: ExecFailed, fx: list, now: float) -> None:
        self._raise(job, fx, now, Raise("exec", 0, ev.errstr or "job-exec failed"))
        self._release(job, fx, now, "all", True)

    # the action of each state ---------------------------------------------------
    def _action(self, job: Job, fx: list, now: float) -> None:
        if job.state == states.DEPEND and not job.deps and job.fatal is None:
            self._post(job, fx, now, "depend")
        if job.state == states.PRIORITY:
            self._post(job, fx, now, "priority", {"priority": job.priority})
        if job.state == states.SCHED:
            if (self.sched_ready and self.queue_started(job.queue)
                    and job.priority > depend.PRIORITY_MIN and job.fatal is None):
                if not job.sched_req:
                    job.nreq += 1
                    job.sched_req = job.nreq
                    fx.append(AskAlloc(job.sched_req, job.priority))
            elif job.sched_req:
                job.sched_req = 0
                fx.append(CancelAlloc())
        elif job.state == states.CLEANUP:
            if job.sched_req:
                job.sched_req = 0
                fx.append(CancelAlloc())
            if not job.alloc:
                self._post(job, fx, now, "clean")

    # helpers -----------------------------------------------------------------
    def _post(self, job: Job, fx: list, now: float, name: str, context: dict | None = None,
              extra: dict | None = None) -> None:
        """Log an entry, update the job by it (`update`, as a replay does) and move
        its state."""
        fx.append(Post(name, context, extra, now))
        update(job, name, context or {}, now, extra)
        new = states.next_state(job.state, name, context)
        if new != job.state:
            self._enter(job, fx, now, new)

    def _enter(self, job: Job, fx: list, now: float, new: str) -> None:
        job.state = new
        if new == states.RUN:
            job.t_run = now
        elif new == states.CLEANUP:
            job.t_cleanup = now
        elif new == states.INACTIVE:
            job.t_inactive = now
            job.sched_req = 0   # nothing more is to come from sched
            fx.append(AnswerWaiters())
            if job.dependents:
                fx.append(NotifyDependents())
            fx.append(Inactive())

    def _raise(self, job: Job, fx: list, now: float, ev: Raise) -> None:
        ex = {"type": ev.type, "severity": ev.severity, "note": ev.note}
        if ev.userid is not None:
            ex["userid"] = ev.userid
        if ev.wait_status is not None:
            ex["wait_status"] = ev.wait_status
        if ev.context:
            ex["context"] = ev.context
        prior = job.state
        self._post(job, fx, now, "exception", ex)
        if job.fatal is not ex:
            return   # a second fatal exception is logged, and changes nothing more
        if prior == states.RUN and ev.forward:
            fwd = {"id": job.id, "type": ev.type, "severity": ev.severity, "note": ev.note}
            if ev.wait_status is not None:
                fwd["wait_status"] = ev.wait_status
            fx.append(ForwardException(fwd))

    def _release(self, job: Job, fx: list, now: float, ranks: str, final: bool) -> None:
        # in RUN (job-exec ended without a finish: it failed), release enters CLEANUP
        self._post(job, fx, now, "release", {"ranks": ranks, "final": final})
        if final:
            fx.append(Free())
            self._post(job, fx, now, "free")
            self._post(job, fx, now, "clean")


Actions.HANDLERS = handler_table(Actions, JobEvent, {
    Submitted: Actions._on_Submitted,
    Verdicts: Actions._on_Verdicts,
    BeginTimeReached: Actions._on_BeginTimeReached,
    Raise: Actions._on_Raise,
    Urgency: Actions._on_Urgency,
    Memo: Actions._on_Memo,
    QueueChanged: Actions._on_QueueChanged,
    AllocAnswered: Actions._on_AllocAnswered,
    ExecStarted: Actions._on_ExecStarted,
    ExecException: Actions._on_ExecException,
    ExecFinished: Actions._on_ExecFinished,
    ExecReleased: Actions._on_ExecReleased,
    ExecFailed: Actions._on_ExecFailed,
    Restarted: Actions._on_Restarted,
})


def describe(effects: list) -> str:
    """Effects in a few words, for the debug log: 'Post(depend) Post(priority) AskAlloc'."""
    return " ".join(f"Post({e.name})" if type(e) is Post else type(e).__name__
                    for e in effects)

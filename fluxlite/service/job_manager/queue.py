"""Queue control (flux-core's queue.c and drain.c): start/stop and enable/disable
of each queue, the checkpoint that saves their state, the scheduler's hello and
ready, and the instance-wide waits `queue drain` and `queue idle`."""

from __future__ import annotations

import asyncio

from ...errors import UsageError
from ...job import actions as act
from ...job import depend, states
from ...job import policy as jpolicy
from ...job.actions import Job
from ...protocol.schema import Name, Struct, Text
from .. import jm_restart
from ..base import ANY, handler


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


ASK_SLICE = 64     # jobs asked for in one loop turn when a queue starts

class Queues:
    """Queue control and its checkpoint (a part of JobManagerService)."""

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

    @handler("job-manager.config-reload", schema=None)
    def config_reload(self, msg, r):
        """Flux's config-reload (`config load`/`reload`): the [queues] and [policy] of
        the new config object.  A new queue starts enabled and started, one that
        stays keeps its state, one that goes must have no active job (refused
        otherwise, and nothing changes).  Jobs submitted later get the new
        defaults and limits."""
        cfg = msg.payload if isinstance(msg.payload, dict) else {}
        queues, policy = cfg.get("queues") or {}, cfg.get("policy") or {}
        jpolicy.check_queues(queues, "queues")
        jpolicy.check_policy(policy, "policy")
        new = jpolicy.Policy(queues, policy)
        gone = [q for q in self.queues if q not in new.names]
        for q in gone:
            n = sum(1 for j in self.jobs.values()
                    if j.queue == q and j.state != states.INACTIVE)
            if n:
                what = f"queue {q}" if q else "the anonymous queue"
                raise UsageError(f"{what} has {n} active job{'s' if n != 1 else ''}: it "
                                 "cannot be removed until they end")
        self.policy = new
        for q in gone:
            del self.queues[q]
            self.actions.stopped.discard(q)
            self._nocheckpoint.discard(q)
        for q in new.names:
            self.queues.setdefault(q, QueueState())
        self.checkpoint()
        return {}

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

    # ------------------------------------------------------- the scheduler
    @handler("job-manager.sched-hello", schema=None)
    def sched_hello(self, msg, r):
        """A scheduler (loaded again) asks which jobs hold resources: {allocs: [{id,
        cores, gpus, end}]} (rank -> ids; end: the expiration, 0 for none)."""
        out = []
        for job in self.jobs.values():
            if job.alloc and job.state in (states.RUN, states.CLEANUP):
                a = {"id": job.id, "cores": {str(k): list(v) for k, v in job.alloc.items()},
                     "end": job.expiration or 0}
                if job.gpus:
                    a["gpus"] = {str(k): list(v) for k, v in job.gpus.items()}
                out.append(a)
        return {"allocs": out}

    @handler("job-manager.sched-ready", schema=None)
    def sched_ready(self, msg, r):
        """The scheduler is ready: every pending job asks it again, in priority then
        submit order (those asked before it was removed were answered ENOSYS)."""
        self.actions.sched_ready = True
        waiting = [j for j in self.jobs.values() if self._unrequested(j)]
        waiting.sort(key=lambda j: (-j.priority, j.id))
        self._ask_again(waiting, 0)
        return {}

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


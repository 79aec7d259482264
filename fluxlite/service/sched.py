"""The `sched` service (rank 0): cores and GPUs per rank, EASY backfill by time limits.

Pending requests are kept in order of priority (highest first; the job-manager
computes it from the urgency), then submit order (job id).  A scheduling pass
(job/easy.py: Sweep) goes through them in that order: a job that fits starts;
the first job of each queue that does not fit gets a reservation from the
running jobs' expected ends (start + time limit), and a later job starts
ahead of it only if it leaves the reserved resources alone or ends before
the reservation's time.  A job waiting on jobs without a time limit cannot
be given a time: it holds its nodes, and the order there is strict.
`sched.prioritize` moves a pending job when its priority changes.

Where a job may run is its queue's `requires` (properties) and its own
constraint (RFC 31, `--requires`), over ranks that are up.  `-N` asks for
whole nodes (with all their GPUs); otherwise slots of c cores and g GPUs are
packed onto ranks in rank order.

Passes run in slices of at most SLICE seconds of the event loop, so no
request waits long behind one (10,000 pending jobs included); a change
(a free, a new or withdrawn request, a rank up or down) starts the pass
again.  A request that comes after a pass ended, and sorts after every job
it looked at, is judged against that pass's state alone.

A request that can never fit is denied at once, in the words of Flux's
schedulers ("unsatisfiable request: need 4 exclusive node(s) with 1 core(s)
each, only 3 eligible"), at submit and again, for every pending job, whenever
ranks are lost and the resource set shrinks.  Down (drained, torpid, offline)
ranks still count toward what could fit; lost ranks do not.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import time
from typing import Annotated

from msgspec import Meta

from ..errors import Canceled, EndOfStream, NoService, NotFound, Unsatisfiable, UsageError
from ..job import constraint as jconstraint
from ..job import easy, rset
from ..job import policy as jpolicy
from ..job import schema as jschema
from ..job.depend import PRIORITY_MAX
from ..protocol.schema import AnyMap, JobId, JobRequest, Struct
from ..util import idset
from .base import ANY, Service, handler

Priority = Annotated[int, Meta(ge=0, le=PRIORITY_MAX)]
Queue = Annotated[str, Meta(max_length=255)]
Duration = Annotated[float, Meta(ge=0.0, le=jschema.MAX_DURATION)]
SLICE = 0.01   # seconds of one pass between two turns of the event loop


class AllocRequest(Struct, kw_only=True):
    id: JobId
    request: jschema.Request   # computed once, at submit (Request.wire())
    priority: Priority = 16
    queue: Queue = ""
    constraint: AnyMap | None = None
    duration: Duration = 0.0   # the job's time limit (0: none), for backfill


class PrioritizeRequest(Struct, kw_only=True):
    id: JobId
    priority: Priority


class FeasibilityRequest(Struct, kw_only=True):
    """A jobspec (as Flux's feasibility.check), or the request the job-manager
    computed from one, with its queue and constraint."""
    jobspec: AnyMap | None = None
    request: jschema.Request | None = None
    queue: Queue = ""
    constraint: AnyMap | None = None



class _Pending:
    __slots__ = ("id", "msg", "req", "priority", "queue", "where", "duration")

    def __init__(self, jobid, msg, req, priority, queue="", where=None, duration=0.0):
        self.id, self.msg, self.req, self.priority = jobid, msg, req, priority
        self.queue, self.where, self.duration = queue, where, duration

    def order(self) -> tuple[int, int]:
        """Highest priority first, then submit order (job ids grow with time)."""
        return (-self.priority, self.id)


class SchedService(Service):
    name = "sched"
    aliases = ("sched-simple",)   # Flux's name for its simple scheduler module
    busy = None   # `module remove sched` pauses scheduling; `module load sched` resumes

    def __init__(self, ctx, *, rejoin: bool = False):
        super().__init__(ctx)
        # loaded again (`module load`): the job-manager's jobs that hold resources are
        # asked for first (job-manager.sched-hello, as Flux's schedulers do), and only
        # then does the job-manager send requests again (job-manager.sched-ready)
        self.rejoin = rejoin
        self._acquire = None      # the resource.acquire stream
        self._held: list | None = None   # sched-hello's allocations, until resources come
        self._have_resources = False
        self.total = easy.Pool({}, {})
        self.free = easy.Pool({}, {})
        self.properties: dict[str, set[int]] = {}
        self.up: set[int] = set()
        self.removed: set[int] = set()
        self.allocs: dict[int, tuple[easy.Alloc, float]] = {}   # id -> (alloc, end)
        self.queue: list[_Pending] = []
        self.ready = False
        self._soon = False   # a schedule_soon() is pending
        self._pass = None    # the pass under way (a generator), or None
        self._again = False  # something changed during the pass: another follows it
        self._version = 0    # bumped by every change to the queue's membership or order
        self._last: tuple | None = None   # (sweep, last order) of the pass that ended
        self._where: dict = {}   # (queue, constraint text) -> (constraint, ranks)
        attrs = getattr(ctx, "attrs", None) or {}
        queues = json.loads(attrs.get("queues") or "{}")
        self.requires = {q: t.get("requires", []) for q, t in queues.items()}

    async def start(self) -> None:
        p = self._acquire = self.rpc("resource.acquire", streaming=True)
        p.on_response = self._resource_update
        if self.rejoin:
            hello = self.rpc("job-manager.sched-hello")
            hello.on_response = self._hello

    def _hello(self, msg) -> None:
        if msg.errnum:
            self.log.error("job-manager.sched-hello failed", error=msg.errstr)
            return
        self._held = list(msg.payload.get("allocs", ()))
        self._take_held()

    def _take_held(self) -> None:
        """Once both the resources and the jobs that hold some are known: take those
        out of the free pool, start scheduling, and tell the job-manager."""
        if self._held is None or not self._have_resources:
            return
        for a in self._held:
            alloc = easy.Alloc({int(r): list(c) for r, c in a["cores"].items()},
                               {int(r): list(g) for r, g in (a.get("gpus") or {}).items()})
            for rank, cores in alloc.cores.items():
                self.free.cores.get(rank, set()).difference_update(cores)
            for rank, gpus in alloc.gpus.items():
                self.free.gpus.get(rank, set()).difference_update(gpus)
            self.allocs[int(a["id"])] = (alloc, a.get("end") or easy.INF)
        self._held = None
        self.ready = True
        self.log.info("scheduler loaded again", running=len(self.allocs))
        self.send("job-manager.sched-ready")
        self.schedule_soon()

    def module_stats(self) -> dict:
        """What `module stats sched` adds to the message counters."""
        return {"pending": len(self.queue), "running": len(self.allocs),
                "ready": self.ready}

    async def unload(self) -> None:
        """`module remove`: every request held is answered ENOSYS (the job-manager asks
        again when a scheduler is loaded), and resource.acquire is let go."""
        waiting, self.queue = self.queue, []
        self._version += 1
        for p in waiting:
            self.respond_exception(p.msg, NoService("the scheduler was unloaded"))
        if self._acquire is not None:
            self.send("resource.acquire-cancel", {"matchtag": self._acquire.matchtag})

    def _resource_update(self, msg) -> None:
        if msg.errnum:
            if not isinstance(msg.error(), EndOfStream):   # (its end: let go of)
                self.log.error("resource.acquire failed", error=msg.errstr)
            return
        u = msg.payload
        if "resources" in u:
            gpus = u.get("gpus", {})
            self.total = easy.Pool({int(r): set(c) for r, c in u["resources"].items()},
                                   {int(r): set(g) for r, g in gpus.items()})
            self.free = self.total.copy()
            self.properties = {p: idset.decode(v)
                               for p, v in u.get("properties", {}).items()}
            self.up = idset.decode(u.get("up", ""))
            self._where.clear()
            self._have_resources = True
            if self.rejoin:
                self._take_held()
            else:
                self.ready = True
        else:
            self.up |= idset.decode(u.get("up", ""))
        self.up -= idset.decode(u.get("down", ""))
        shrink = idset.decode(u.get("shrink", ""))
        if shrink:
            self.removed |= shrink
            self.up -= shrink
            self._where.clear()
            self._deny_infeasible()
        self._changed()
        self.schedule_soon()

    # -------------------------------------------------------- decisions
    def _eligible(self, queue: str, where: str | None) -> tuple[str, list[int]]:
        """(a few words on what narrowed them, the ranks a job of `queue` with constraint
        `where` (JSON text) may ever use, in rank order)."""
        key = (queue, where)
        hit = self._where.get(key)
        if hit is None:
            parts = []
            if self.requires.get(queue):
                parts.append({"properties": list(self.requires[queue])})
            if where:
                parts.append(json.loads(where))
            everyone = {r for r in self.total.cores if r not in self.removed}
            ranks = jconstraint.ranks(jconstraint.combine(parts), everyone, self.properties,
                                      self.ctx.hosts)
            words = (f" in queue {queue}" if queue else "") + \
                (" with the job's constraints" if where else "")
            hit = self._where[key] = (words, sorted(ranks))
        return hit

    def unsatisfiable(self, req: jschema.Request, queue: str = "",
                      where: str | None = None) -> str | None:
        """Why `req` can never fit in what remains (of its queue, under its
        constraint), or None if it could."""
        words, ranks = self._eligible(queue, where)
        return easy.unsatisfiable(req, ranks, self.total, words)

    def schedule_soon(self) -> None:
        """Schedule on the next loop turn, once however many changes come in between.

        This is batching: frees come in bursts (the job-manager sends one per job as
        jobs end, and a burst of ended jobs is handed over in one turn), and a pass
        looks at every pending job, so one pass after the burst does the work of
        one pass per free.  A pass cut into slices also goes on here."""
        if self._soon:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:   # driven without a loop (unit tests): at once
            self.schedule()
            return
        self._soon = True
        loop.call_soon(self._scheduled)

    def _scheduled(self) -> None:
        self._soon = False
        if self._pass is not None:
            self._run_slice(self._pass)
        else:
            self.schedule()

    def _changed(self) -> None:
        """Resources or the order changed: the last pass's state no longer holds, and
        a pass under way is to be followed by another."""
        self._last = None
        if self._pass is not None:
            self._again = True

    def schedule(self) -> None:
        """Start a pass over every pending job and run its first slice now (or, with
        one under way, have another follow it)."""
        if not self.ready:
            return
        if self._pass is not None:
            self._again = True
            return
        self._last = None
        self._again = False
        self._pass = self._sweep()
        self._run_slice(self._pass)

    def _run_slice(self, gen) -> None:
        try:
            asyncio.get_running_loop()
            deadline = time.monotonic() + SLICE
        except RuntimeError:   # driven without a loop (unit tests): the whole pass
            deadline = easy.INF
        for _ in gen:
            if time.monotonic() > deadline:
                self.schedule_soon()
                return
        self._pass = None
        if self._again:
            self._again = False
            self._last = None
            self.schedule_soon()

    def _candidate(self, p: _Pending, cache: dict | None = None) -> easy.Candidate:
        key = (p.queue, p.where)
        ranks = None if cache is None else cache.get(key)
        if ranks is None:
            ranks = [r for r in self._eligible(p.queue, p.where)[1] if r in self.up]
            if cache is not None:
                cache[key] = ranks
        return easy.Candidate(p.id, p.req, ranks, p.duration, p.queue, key)

    def _running(self) -> list[tuple[float, easy.Alloc]]:
        return [(end, a) for a, end in self.allocs.values()]

    def _sweep(self):
        """One pass (a generator: it yields after each job, so it can be sliced).  It
        walks the live queue, taking out the jobs it starts; a change to the queue
        meanwhile (a request added, withdrawn or moved) ends it, and another follows."""
        sweep = easy.Sweep(self.free, self.total, self._running(), time.time())
        version, cache, last, i = self._version, {}, None, 0
        while i < len(self.queue) and not sweep.done():
            p = self.queue[i]
            last = p.order()
            alloc = sweep.consider(self._candidate(p, cache))
            if alloc is not None:
                del self.queue[i]
                self._grant(p, alloc, sweep.now)
            else:
                i += 1
            yield
            if self._version != version:
                return   # _again is set: the next pass starts from the top
        if not self._again:
            self._last = (sweep, last)

    def _grant(self, p: _Pending, alloc: easy.Alloc, now: float) -> None:
        """Answer `p` (out of the queue) with `alloc` (already taken from the free
        pool)."""
        end = now + p.duration if p.duration else easy.INF
        self.allocs[p.id] = (alloc, end)
        payload = {"id": p.id, "alloc": {str(r): c for r, c in alloc.cores.items()},
                   "summary": rset.summary(alloc.cores)}
        if alloc.gpus:
            payload["gpus"] = {str(r): g for r, g in alloc.gpus.items()}
        props = {name: idset.encode(ranks & alloc.cores.keys())
                 for name, ranks in self.properties.items() if ranks & alloc.cores.keys()}
        if props:
            payload["properties"] = props
        self.respond(p.msg, payload)

    def _deny_infeasible(self) -> None:
        """Deny every pending request that no longer fits in what remains."""
        keep = []
        for p in self.queue:
            why = self.unsatisfiable(p.req, p.queue, p.where)
            if why:
                self.log.info("pending job no longer fits", id=p.id, reason=why)
                self.respond_exception(p.msg, Unsatisfiable(why))
            else:
                keep.append(p)
        self.queue = keep
        self._version += 1

    # --------------------------------------------------------------- RPCs
    @handler("sched.config-reload", schema=None)
    def config_reload(self, msg, req):
        """Flux's config-reload (`config load`/`reload`): the queues' `requires` of the
        new config object; jobs asked for later are placed by them."""
        cfg = msg.payload if isinstance(msg.payload, dict) else {}
        queues = cfg.get("queues") or {}
        jpolicy.check_queues(queues, "queues")
        self.requires = {q: t.get("requires", []) for q, t in queues.items()}
        self._where.clear()
        self._changed()
        self.schedule_soon()
        return {}

    @handler("sched.alloc", schema=AllocRequest)
    def alloc(self, msg, r):
        req = r.request.shared()
        where = json.dumps(r.constraint, sort_keys=True) if r.constraint else None
        if self.ready:
            why = self.unsatisfiable(req, r.queue, where)
            if why:
                raise Unsatisfiable(why)
        msg.drop_payload()  # the request is kept to be answered; its payload is not needed
        p = _Pending(r.id, msg, req, r.priority, r.queue, where, r.duration)
        self._enqueue(p)
        last = self._last
        if self._pass is None and last is not None and (last[1] is None
                                                        or p.order() > last[1]):
            # after every job the last pass judged, nothing changed since: judge it alone
            sweep = last[0]
            sweep.now = time.time()
            alloc = None if sweep.done() else sweep.consider(self._candidate(p))
            self._last = (sweep, p.order())
            if alloc is not None:
                self._dequeue(p)
                self._grant(p, alloc, sweep.now)
        else:
            self.schedule()
        return self.no_reply

    def _enqueue(self, p: _Pending) -> None:
        bisect.insort(self.queue, p, key=_Pending.order)
        self._version += 1

    def _dequeue(self, p: _Pending) -> None:
        """Take `p` out of the queue (found by its order: no scan of ten thousand)."""
        i = bisect.bisect_left(self.queue, p.order(), key=_Pending.order)
        if i < len(self.queue) and self.queue[i] is p:
            del self.queue[i]
        else:
            self.queue.remove(p)
        self._version += 1

    @handler("sched.prioritize", schema=PrioritizeRequest)
    def prioritize(self, msg, r):
        for p in self.queue:
            if p.id == r.id:
                self._dequeue(p)
                p.priority = r.priority
                self._enqueue(p)
                self.schedule()
                return {"found": True}
        return {"found": False}

    @handler("sched.feasibility", schema=FeasibilityRequest, roles=ANY)
    def feasibility(self, msg, r):
        if (r.jobspec is None) == (r.request is None):
            raise UsageError("sched.feasibility: give a jobspec or a request (one of them)")
        where = r.constraint
        if r.request is None:
            req = jschema.validate(r.jobspec)   # kept by no one
            where = where or r.jobspec["attributes"]["system"].get("constraints")
        else:
            req = r.request
        if r.queue and r.queue not in self.requires:
            raise UsageError(f"invalid queue {r.queue!r}")
        text = json.dumps(where, sort_keys=True) if where else None
        why = self.unsatisfiable(req, r.queue, text) if self.ready else None
        if why:
            raise Unsatisfiable(why)
        return {}

    @handler("sched.cancel", schema=JobRequest)
    def cancel(self, msg, r):
        jobid = r.id
        for i, p in enumerate(self.queue):
            if p.id == jobid:
                del self.queue[i]
                self._version += 1
                self._changed()   # it may have held a reservation
                self.schedule_soon()
                self.respond_exception(p.msg, Canceled("canceled"))
                return {"canceled": True}
        return {"canceled": False}

    @handler("sched.free", schema=JobRequest)
    def free_rpc(self, msg, r):
        jobid = r.id
        held = self.allocs.pop(jobid, None)
        if held is None:
            raise NotFound(f"job {jobid} has no allocation")
        alloc = held[0]
        for rank, cores in alloc.cores.items():
            if rank in self.free.cores and rank not in self.removed:
                self.free.cores[rank] |= set(cores)
        for rank, gpus in alloc.gpus.items():
            if rank in self.free.gpus and rank not in self.removed:
                self.free.gpus[rank] |= set(gpus)
        self._changed()
        self.schedule_soon()
        return {}

    @handler("sched.resource-status", schema=None, roles=ANY)
    def resource_status(self, msg, r):
        """Scheduler view for `resource list`: all / free / allocated / down, per rank
        (cores; `gpus` the same for GPUs), with properties and queues' ranks."""
        out = {"all": {}, "free": {}, "allocated": {}, "down": {}}
        gpus = {"all": {}, "free": {}, "allocated": {}, "down": {}}
        for rank in sorted(self.total.cores):
            if rank in self.removed:
                continue
            key = str(rank)
            for view, pool in ((out, self.total.cores), (gpus, self.total.gpus)):
                total = pool.get(rank, set())
                free = (self.free.cores if pool is self.total.cores
                        else self.free.gpus).get(rank, set())
                if total:
                    view["all"][key] = sorted(total)
                used = total - free
                if used:  # jobs keep running on a drained or torpid rank
                    view["allocated"][key] = sorted(used)
                if rank not in self.up:
                    if total:
                        view["down"][key] = sorted(total)
                elif free:
                    view["free"][key] = sorted(free)
        out["gpus"] = gpus
        out["properties"] = {p: idset.encode(s - self.removed)
                             for p, s in sorted(self.properties.items())}
        out["queues"] = {q: idset.encode(self._eligible(q, None)[1]) for q in self.requires}
        out["removed"] = idset.encode(self.removed)
        out["pending"] = len(self.queue)
        return out

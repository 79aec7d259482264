"""The `sched` service (rank 0): first-fit over cores per rank, in priority order.

Pending requests are kept in order of priority (highest first; the job-manager
computes it from the urgency), then submit order (job id), and are served
strictly in that order: a job that does not fit yet blocks the ones behind it,
so nothing starves.  There is no backfill.  `sched.prioritize` moves a pending
job when its priority changes.  `-N` asks for whole nodes;
otherwise slots of c cores are packed onto ranks in rank order.

A request that can never fit is denied at once, in the words of Flux's
schedulers ("unsatisfiable request: need 4 exclusive node(s) with 1 core(s)
each, only 3 eligible"), at submit and again, for every pending job, whenever
ranks are lost and the resource set shrinks.  Down (drained, torpid, offline)
ranks still count toward what could fit; lost ranks do not.
"""

from __future__ import annotations

import asyncio
import bisect
import errno
from typing import Annotated

from msgspec import Meta

from ..errors import FluxliteError, NotFound, UsageError
from ..job import schema as jschema
from ..job import rset
from ..job.depend import PRIORITY_MAX
from ..protocol.schema import AnyMap, JobId, Struct
from ..util import idset
from .base import ANY, Service, handler

Priority = Annotated[int, Meta(ge=0, le=PRIORITY_MAX)]


class AllocRequest(Struct, kw_only=True):
    id: JobId
    request: jschema.Request   # computed once, at submit (Request.wire())
    priority: Priority = 16


class PrioritizeRequest(Struct, kw_only=True):
    id: JobId
    priority: Priority


class FeasibilityRequest(Struct, kw_only=True):
    """A jobspec (as Flux's feasibility.check), or the request the job-manager
    computed from one."""
    jobspec: AnyMap | None = None
    request: jschema.Request | None = None


class JobRequest(Struct, kw_only=True):
    id: JobId

EOVERFLOW = errno.EOVERFLOW


class _Pending:
    __slots__ = ("id", "msg", "req", "priority")   # one per pending job: kept small

    def __init__(self, jobid, msg, req, priority):
        self.id, self.msg, self.req, self.priority = jobid, msg, req, priority

    def order(self) -> tuple[int, int]:
        """Highest priority first, then submit order (job ids grow with time)."""
        return (-self.priority, self.id)


class SchedService(Service):
    name = "sched"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.total: dict[int, set[int]] = {}
        self.free: dict[int, set[int]] = {}
        self.up: set[int] = set()
        self.removed: set[int] = set()
        self.allocs: dict[int, dict[int, list[int]]] = {}
        self.queue: list[_Pending] = []
        self.ready = False
        self._soon = False   # a schedule_soon() is pending

    async def start(self) -> None:
        p = self.rpc("resource.acquire", streaming=True)
        p.on_response = self._resource_update

    def _resource_update(self, msg) -> None:
        if msg.errnum:
            self.log.error("resource.acquire failed", error=msg.errstr)
            return
        u = msg.payload
        if "resources" in u:
            self.total = {int(r): set(c) for r, c in u["resources"].items()}
            self.free = {r: set(c) for r, c in self.total.items()}
            self.up = idset.decode(u.get("up", ""))
            self.ready = True
        else:
            self.up |= idset.decode(u.get("up", ""))
        self.up -= idset.decode(u.get("down", ""))
        shrink = idset.decode(u.get("shrink", ""))
        if shrink:
            self.removed |= shrink
            self.up -= shrink
            self._deny_infeasible()
        self.schedule_soon()

    # -------------------------------------------------------- decisions
    def unsatisfiable(self, req: jschema.Request) -> str | None:
        """Why `req` can never fit in what remains, or None if it could.

        The sentence says what was asked (nodes and cores per node, or slots of
        c cores) and what the limit is: too few nodes, or nodes too small.
        """
        eligible = [r for r in self.total if r not in self.removed]
        largest = max((len(self.total[r]) for r in eligible), default=0)
        have = f"{len(eligible)} eligible node(s) have at most {largest} core(s) each"
        if req.nnodes is not None:
            need = req.slots_per_node * req.cores_per_slot
            n = sum(1 for r in eligible if len(self.total[r]) >= need)
            if n >= req.nnodes:
                return None
            asked = (f"unsatisfiable request: need {req.nnodes} exclusive node(s) with "
                     f"{need} core(s) each")
            if n == len(eligible):  # every node is big enough; there are too few
                return f"{asked}, only {n} eligible"
            if n == 0:
                return f"{asked}, but the {have}"
            return (f"{asked}, only {n} of the {len(eligible)} eligible node(s) have "
                    f"{need} or more cores")
        c = req.cores_per_slot
        slots = sum(len(self.total[r]) // c for r in eligible)
        if slots < req.nslots:
            asked = f"unsatisfiable request: need {req.nslots} slot(s) of {c} core(s)"
            if eligible and c > largest:  # a slot lives on one node
                return f"{asked}, but the {have} (a slot must fit on one node)"
            total = sum(len(self.total[r]) for r in eligible)
            return f"{asked}, only {slots} such slot(s) available (total cores: {total})"
        return None

    def _try_alloc(self, req: jschema.Request) -> dict[int, list[int]] | None:
        ranks = [r for r in sorted(self.total) if r in self.up and r not in self.removed]
        if req.nnodes is not None:
            need = req.slots_per_node * req.cores_per_slot
            chosen = [r for r in ranks if len(self.free[r]) == len(self.total[r]) >= need]
            if len(chosen) < req.nnodes:
                return None
            return {r: sorted(self.total[r]) for r in chosen[:req.nnodes]}
        c, left, out = req.cores_per_slot, req.nslots, {}
        if req.exclusive:  # -x: the slots land on whole nodes, which the job gets entirely
            for r in ranks:
                if len(self.free[r]) == len(self.total[r]) and len(self.total[r]) >= c:
                    out[r] = sorted(self.total[r])
                    left -= len(self.total[r]) // c
                    if left <= 0:
                        return out
            return None
        for r in ranks:
            take = min(len(self.free[r]) // c, left)
            if take:
                out[r] = sorted(self.free[r])[:take * c]
                left -= take
                if left == 0:
                    return out
        return None

    def schedule_soon(self) -> None:
        """Schedule on the next loop turn, once however many frees come in between.

        A free never schedules in its own call: the answer it would give a pending
        job reaches the job-manager at once, whose job may fail to start at once (a
        rank lost but not yet shrunk) and free again, so one free would recurse
        through the whole queue."""
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
        self.schedule()

    def schedule(self) -> None:
        if not self.ready:
            return
        while self.queue:
            p = self.queue[0]
            alloc = self._try_alloc(p.req)
            if alloc is None:
                return
            self.queue.pop(0)
            for r, cores in alloc.items():
                self.free[r] -= set(cores)
            self.allocs[p.id] = alloc
            self.respond(p.msg, {"id": p.id, "alloc": {str(r): c for r, c in alloc.items()},
                                 "summary": rset.summary(alloc)})

    def _deny_infeasible(self) -> None:
        keep, denied = [], []
        for p in self.queue:
            why = self.unsatisfiable(p.req)
            (denied if why else keep).append((p, why))
        # the queue is settled before anyone hears: answering calls the job-manager,
        # which may call back in (sched.cancel) while we would still be iterating
        self.queue = [p for p, _ in keep]
        for p, why in denied:
            self.log.info("pending job no longer fits", id=p.id, reason=why)
            self.respond_error(p.msg, EOVERFLOW, why)

    # --------------------------------------------------------------- RPCs
    @handler("sched.alloc", schema=AllocRequest)
    def alloc(self, msg, r):
        req = r.request.shared()
        if self.ready:
            why = self.unsatisfiable(req)
            if why:
                raise FluxliteError(why, EOVERFLOW)
        msg.drop_payload()  # the request is kept to be answered; its payload is not needed
        self._enqueue(_Pending(r.id, msg, req, r.priority))
        self.schedule()
        return self.no_reply

    def _enqueue(self, p: _Pending) -> None:
        bisect.insort(self.queue, p, key=_Pending.order)

    @handler("sched.prioritize", schema=PrioritizeRequest)
    def prioritize(self, msg, r):
        for p in self.queue:
            if p.id == r.id:
                self.queue.remove(p)
                p.priority = r.priority
                self._enqueue(p)
                self.schedule()
                return {"found": True}
        return {"found": False}

    @handler("sched.feasibility", schema=FeasibilityRequest, roles=ANY)
    def feasibility(self, msg, r):
        if (r.jobspec is None) == (r.request is None):
            raise UsageError("sched.feasibility: give a jobspec or a request (one of them)")
        req = jschema.validate(r.jobspec) if r.request is None else r.request   # kept by no one
        why = self.unsatisfiable(req) if self.ready else None
        if why:
            raise FluxliteError(why, EOVERFLOW)
        return {}

    @handler("sched.cancel", schema=JobRequest)
    def cancel(self, msg, r):
        jobid = r.id
        for p in list(self.queue):
            if p.id == jobid:
                self.queue.remove(p)
                self.respond_error(p.msg, errno.ECANCELED, "canceled")
                return {"canceled": True}
        return {"canceled": False}

    @handler("sched.free", schema=JobRequest)
    def free_rpc(self, msg, r):
        jobid = r.id
        alloc = self.allocs.pop(jobid, None)
        if alloc is None:
            raise NotFound(f"job {jobid} has no allocation")
        for r, cores in alloc.items():
            if r in self.free and r not in self.removed:
                self.free[r] |= set(cores)
        self.schedule_soon()
        return {}

    @handler("sched.resource-status", schema=None, roles=ANY)
    def resource_status(self, msg, r):
        """Scheduler view for `resource list`: all / free / allocated / down, per rank."""
        out = {"all": {}, "free": {}, "allocated": {}, "down": {}}
        for r in sorted(self.total):
            if r in self.removed:
                continue
            total = self.total[r]
            out["all"][str(r)] = sorted(total)
            used = total - self.free[r]
            if used:  # jobs keep running on a drained or torpid rank
                out["allocated"][str(r)] = sorted(used)
            if r not in self.up:
                out["down"][str(r)] = sorted(total)
            elif self.free[r]:
                out["free"][str(r)] = sorted(self.free[r])
        out["removed"] = idset.encode(self.removed)
        out["pending"] = len(self.queue)
        return out

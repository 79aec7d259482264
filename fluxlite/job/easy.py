"""Where jobs fit, and EASY backfill: the scheduler's decisions as pure functions.

    pool = Pool({0: {0, 1, 2, 3}}, {0: {0, 1}})            # free cores, free GPUs
    alloc = fit(req, [0], pool, total)                     # Alloc or None
    sweep = Sweep(free, total, running=[(end, alloc), ...], now=t)
    for job in pending:                                    # highest priority first
        alloc = sweep.consider(job)                        # start it now, or None
    sweep.reservations                                     # queue -> Reservation

`fit` places one request (RFC 14 counts, as schema.Request reduces them) on
ranks in rank order: `-N` takes whole free nodes with all their cores and
GPUs; slots of c cores and g GPUs pack onto ranks; exclusive slots take whole
nodes.

`Sweep` is one scheduling pass, EASY backfill by time limits.  Jobs are
considered in priority order.  In each queue, the first job that does not
fit gets a reservation: the earliest time at which it fits on what is free
plus what running jobs give back by their expected ends, and the resources it
would use then.  A later job starts now if it fits without touching a
reservation's resources, or if it ends (now + its duration) before that
reservation's time.  A blocked job whose time cannot be known (a running job
it waits for has no time limit) reserves every node it could use, so nothing
overtakes it there: with no time limits the order is strict, as before.

Within a pass resources only shrink, so a request that failed to fit fails
again for the same reservations: such repeats are answered from a memo, and
ten thousand alike pending jobs cost one fit each pass.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

INF = math.inf


@dataclass
class Alloc:
    cores: dict[int, list[int]]
    gpus: dict[int, list[int]] = field(default_factory=dict)


class Pool:
    """Cores and GPUs per rank (free, or total)."""
    __slots__ = ("cores", "gpus")

    def __init__(self, cores: dict[int, set[int]], gpus: dict[int, set[int]] | None = None):
        self.cores = cores
        self.gpus = gpus if gpus is not None else {}

    def copy(self) -> Pool:
        return Pool({r: set(c) for r, c in self.cores.items()},
                    {r: set(g) for r, g in self.gpus.items()})

    def take(self, a: Alloc) -> None:
        for r, c in a.cores.items():
            self.cores[r].difference_update(c)
        for r, g in a.gpus.items():
            self.gpus[r].difference_update(g)

    def give(self, a: Alloc) -> None:
        for r, c in a.cores.items():
            if r in self.cores:
                self.cores[r].update(c)
        for r, g in a.gpus.items():
            if r in self.gpus:
                self.gpus[r].update(g)

    def empty(self) -> bool:
        return not any(self.cores.values())


def _whole(r: int, free: Pool, total: Pool) -> bool:
    return (len(free.cores.get(r, ())) == len(total.cores[r])
            and len(free.gpus.get(r, ())) == len(total.gpus.get(r, ())))


def fit(req, ranks: list[int], free: Pool, total: Pool) -> Alloc | None:
    """Place `req` on `ranks` (in order) out of `free`; None if it does not fit now."""
    c, g = req.cores_per_slot, getattr(req, "gpus_per_slot", 0)
    if req.nnodes is not None:
        return _fit_nodes(req, ranks, free, total, c, g)
    if req.exclusive:   # -x: the slots land on whole nodes, which the job gets entirely
        return _fit_whole(req.nslots, ranks, free, total, c, g)
    return _fit_slots(req.nslots, ranks, free, c, g)


def _fit_nodes(req, ranks: list[int], free: Pool, total: Pool, c: int, g: int) -> Alloc | None:
    """-N: the first `req.nnodes` whole nodes big enough for a node's slots."""
    need_c, need_g = req.slots_per_node * c, req.slots_per_node * g
    chosen = [r for r in ranks if _whole(r, free, total)
              and len(total.cores[r]) >= need_c and len(total.gpus.get(r, ())) >= need_g]
    if len(chosen) < req.nnodes:
        return None
    chosen = chosen[:req.nnodes]
    return Alloc({r: sorted(total.cores[r]) for r in chosen},
                 {r: sorted(total.gpus[r]) for r in chosen if total.gpus.get(r)})


def _fit_whole(left: int, ranks: list[int], free: Pool, total: Pool, c: int,
               g: int) -> Alloc | None:
    """-x: `left` slots on whole free nodes, each given entirely."""
    out = Alloc({}, {})
    for r in ranks:
        if not _whole(r, free, total):
            continue
        n = len(total.cores[r]) // c
        if g:
            n = min(n, len(total.gpus.get(r, ())) // g)
        if n <= 0:
            continue
        out.cores[r] = sorted(total.cores[r])
        if total.gpus.get(r):
            out.gpus[r] = sorted(total.gpus[r])
        left -= n
        if left <= 0:
            return out
    return None


def _fit_slots(left: int, ranks: list[int], free: Pool, c: int, g: int) -> Alloc | None:
    """`left` slots of `c` cores (and `g` GPUs) out of the free ones, rank by rank."""
    out = Alloc({}, {})
    for r in ranks:
        fc = free.cores.get(r)
        if not fc:
            continue
        n = len(fc) // c
        if g:
            n = min(n, len(free.gpus.get(r, ())) // g)
        take = min(n, left)
        if take <= 0:
            continue
        out.cores[r] = sorted(fc)[:take * c]
        if g:
            out.gpus[r] = sorted(free.gpus[r])[:take * g]
        left -= take
        if left == 0:
            return out
    return None


@dataclass
class Reservation:
    """The blocked job `id` of a queue is to start at `time` on `alloc`; when its time
    cannot be known (INF), `ranks` are held for it whole."""
    id: int
    time: float
    alloc: Alloc | None
    ranks: frozenset = frozenset()


@dataclass
class Candidate:
    """What a pass needs of a pending job."""
    id: int
    req: object               # schema.Request
    ranks: list[int]          # where it may run (constraint, queue, up), in rank order
    duration: float = 0.0     # seconds (0: unknown)
    queue: str = ""
    where: object = None      # hashable: what chose `ranks` (jobs alike share it)


class Sweep:
    """One EASY backfill pass over pending jobs, in priority order."""

    def __init__(self, free: Pool, total: Pool, running: list[tuple[float, Alloc]],
                 now: float):
        self.free = free
        self.total = total
        self.running = sorted(running, key=lambda ea: ea[0])   # by expected end
        self.now = now
        self.reservations: dict[str, Reservation] = {}
        self._failed: set = set()

    def consider(self, job: Candidate) -> Alloc | None:
        """Start `job` now (its allocation, taken from the free pool), or None; a first
        blocked job of its queue gets the queue's reservation."""
        end = self.now + job.duration if job.duration else INF
        held = tuple(q for q, r in self.reservations.items() if end > r.time or r.alloc is None)
        key = (job.req, job.where if job.where is not None else tuple(job.ranks), held)
        if key in self._failed:
            alloc = None
        else:
            free, ranks, copied = self.free, job.ranks, False
            for q in held:
                res = self.reservations[q]
                if res.alloc is None:
                    ranks = [r for r in ranks if r not in res.ranks]
                    continue
                if not copied:
                    free, copied = free.copy(), True
                free.take(res.alloc)
            alloc = fit(job.req, ranks, free, self.total)
            if alloc is None:
                self._failed.add(key)
        if alloc is not None:
            self.free.take(alloc)
            # it runs from now on: a later reservation counts on its end
            bisect.insort(self.running, (end, alloc), key=lambda ea: ea[0])
            return alloc
        if job.queue not in self.reservations:
            self.reservations[job.queue] = self._reserve(job)
        return None

    def _reserve(self, job: Candidate) -> Reservation:
        """When and where `job` could start, as running jobs end."""
        later = self.free.copy()
        for res in self.reservations.values():   # another queue's reservation stands
            if res.alloc is not None:
                later.take(res.alloc)
        for end, alloc in self.running:
            if end == INF:
                break
            later.give(alloc)
            a = fit(job.req, job.ranks, later, self.total)
            if a is not None:
                return Reservation(job.id, end, a)
        return Reservation(job.id, INF, None, frozenset(job.ranks))

    def done(self) -> bool:
        """Nothing more can start in this pass."""
        return self.free.empty()


def unsatisfiable(req, eligible: list[int], total: Pool, where: str = "") -> str | None:
    """Why `req` can never fit on the `eligible` ranks of `total`, or None if it could.

    The sentence says what was asked (nodes and cores per node, or slots of c cores,
    with their GPUs) and what the limit is: too few nodes, or nodes too small.
    `where` names a queue or constraint that narrowed the eligible nodes."""
    c, g = req.cores_per_slot, getattr(req, "gpus_per_slot", 0)
    gpus_of = total.gpus
    largest = max((len(total.cores[r]) for r in eligible), default=0)
    have = f"{len(eligible)} eligible node(s) have at most {largest} core(s) each"
    head = f"unsatisfiable request{where}"
    if g:
        most_g = max((len(gpus_of.get(r, ())) for r in eligible), default=0)
        have += f" and {most_g} GPU(s)"
    if req.nnodes is not None:
        need_c, need_g = req.slots_per_node * c, req.slots_per_node * g
        n = sum(1 for r in eligible
                if len(total.cores[r]) >= need_c and len(gpus_of.get(r, ())) >= need_g)
        if n >= req.nnodes:
            return None
        asked = (f"{head}: need {req.nnodes} exclusive node(s) with {need_c} core(s)"
                 + (f" and {need_g} GPU(s)" if need_g else "") + " each")
        if n == len(eligible):  # every node is big enough; there are too few
            return f"{asked}, only {n} eligible"
        if n == 0:
            return f"{asked}, but the {have}"
        return (f"{asked}, only {n} of the {len(eligible)} eligible node(s) have "
                f"{need_c} or more cores" + (f" and {need_g} or more GPUs" if need_g else ""))

    def slots(r):
        n = len(total.cores[r]) // c
        return min(n, len(gpus_of.get(r, ())) // g) if g else n
    have_slots = sum(slots(r) for r in eligible)
    if have_slots < req.nslots:
        asked = (f"{head}: need {req.nslots} slot(s) of {c} core(s)"
                 + (f" and {g} GPU(s)" if g else ""))
        if eligible and not any(slots(r) for r in eligible):  # a slot lives on one node
            return f"{asked}, but the {have} (a slot must fit on one node)"
        cores = sum(len(total.cores[r]) for r in eligible)
        ngpus = sum(len(gpus_of.get(r, ())) for r in eligible)
        return (f"{asked}, only {have_slots} such slot(s) available (total cores: {cores}"
                + (f", GPUs: {ngpus}" if g else "") + ")")
    return None

"""`flux.resource.Rv1Pool`: a pool of resources (an RFC 20 R) that allocates
jobs' requests from itself, as a simple scheduler does: ResourceRequest (from a
jobspec, RFC 14 counts and ranges), feasibility (could the idle pool ever
satisfy it? else InfeasibleRequest), allocation from the ranks that are up and
match the request's RFC 31 constraint (worst-fit: the nodes with the most free
cores first; else InsufficientResources), frees whole or partial, replays of
existing allocations, and the R of what each job holds.

Each rank's state is `_ranks[rank]`: hostname, cores, gpus, allocated_cores,
allocated_gpus, up.  `_properties` maps a property to its ranks; `_job_state`
maps a job id to (end time, the Rv1Pool it holds).  Subclasses may override
`_sort_candidates`, `_select_resources` and `_check_feasibility`, and keep
their own state across copies with `_init_from_state`."""

from __future__ import annotations

import json
import time

from fluxlite.util import hostlist as _hostlist
from fluxlite.util import idset as _idset

from . import InfeasibleRequest, InsufficientResources
from .ResourceCount import ResourceCount
from .Rv1Set import Rv1Set, _Node, bracketed

__all__ = ["ResourceRequest", "Rv1Pool"]

MAX_DEPTH = 64   # resource nesting a jobspec may have (deeper is refused, not recursed)


def _ranks_of(value) -> set[int]:
    if isinstance(value, str):
        return _idset.decode(value)
    if isinstance(value, int):
        return {value}
    return {int(r) for r in value}


class ResourceRequest:
    """What a job asks of the pool: node_count (None: no node level), slot_count
    (per node when node_count is given), slot_size cores and gpu_per_slot GPUs a
    slot, duration (0: none), an RFC 31 constraint, exclusive nodes."""

    def __init__(self, node_count, slot_count, slot_size: int = 1, gpu_per_slot: int = 0,
                 duration: float = 0.0, constraint=None, exclusive: bool = False,
                 jobspec=None):
        self.node_count, self.slot_count = node_count, slot_count
        self.slot_size, self.gpu_per_slot = int(slot_size), int(gpu_per_slot or 0)
        self.duration = float(duration or 0.0)
        if isinstance(constraint, str):
            constraint = json.loads(constraint)
        self.constraint = constraint or None
        self.exclusive = bool(exclusive)
        self.jobspec = jobspec

    @property
    def nnodes(self) -> int:
        return self.node_count.min if self.node_count else 0

    @property
    def nnodes_max(self):
        return self.node_count.max if self.node_count else 0

    @property
    def slots_per_node(self) -> int:
        return self.slot_count.min

    @property
    def nslots(self) -> int:
        if self.node_count:
            return self.slot_count.min * self.node_count.min
        return self.slot_count.min

    @property
    def nslots_max(self):
        if self.node_count:
            if self.node_count.max is None or self.slot_count.max is None:
                return None
            return self.slot_count.max * self.node_count.max
        return self.slot_count.max

    @property
    def ncores(self) -> int:
        return self.nslots * self.slot_size

    @property
    def ngpus(self) -> int:
        return self.nslots * self.gpu_per_slot

    @property
    def stepped(self) -> bool:
        return any(c is not None and c.stepped for c in (self.node_count, self.slot_count))

    @classmethod
    def from_jobspec(cls, jobspec: dict) -> ResourceRequest:
        """The request of a jobspec: its node level (scaled by the counts of the
        levels above it), its task slot and the cores and GPUs in one slot."""
        system = (jobspec.get("attributes") or {}).get("system")
        if jobspec.get("version") == 1:
            if not isinstance(system, dict):
                raise ValueError("jobspec v1: attributes.system is missing")
            if "duration" not in system:
                raise ValueError("jobspec v1: attributes.system.duration is missing")
        system = system if isinstance(system, dict) else {}
        found = {"node": None, "slot": None, "size": 1, "gpus": 0, "exclusive": False}
        _walk(jobspec.get("resources") or [], 1, 0, found, under_node=False)
        if found["slot"] is None:
            raise ValueError("jobspec has no task slot")
        node = found["node"]
        slot = found["slot"]
        if node is None and found["exclusive"]:   # exclusive slots: one node each
            node = ResourceCount(slot.min, slot.max, slot.values)
            slot = ResourceCount(1)
        return cls(node, slot, found["size"], found["gpus"], system.get("duration", 0.0),
                   system.get("constraints") or None, found["exclusive"], jobspec)


def _count(res: dict) -> ResourceCount:
    return ResourceCount.from_spec(res.get("count", 1))


def _has_node_below(res_list: list, depth: int) -> bool:
    stack = [(r, depth) for r in res_list]
    while stack:
        r, d = stack.pop()
        if d > MAX_DEPTH:
            raise ValueError(f"jobspec resources nest deeper than {MAX_DEPTH} (depth)")
        if r.get("type") == "node":
            return True
        stack.extend((c, d + 1) for c in r.get("with") or [])
    return False


def _walk(res_list: list, factor: int, depth: int, found: dict, under_node: bool) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"jobspec resources nest deeper than {MAX_DEPTH} (depth)")
    for r in res_list:
        if not isinstance(r, dict):
            raise ValueError(f"invalid jobspec resource {r!r}")
        kind, children = r.get("type"), r.get("with") or []
        if kind == "node":
            found["node"] = _count(r).scaled(factor)
            found["exclusive"] = found["exclusive"] or bool(r.get("exclusive"))
            _walk(children, 1, depth + 1, found, under_node=True)
        elif kind == "slot" and (under_node or not _has_node_below(children, depth + 1)):
            count = _count(r)
            found["slot"] = count if under_node else count.scaled(factor)
            found["exclusive"] = found["exclusive"] or bool(r.get("exclusive"))
            for c in children:
                if c.get("type") == "core":
                    found["size"] = _count(c).min
                elif c.get("type") == "gpu":
                    found["gpus"] = _count(c).min
        elif children:
            _walk(children, factor * _count(r).min, depth + 1, found, under_node)


class Rv1Pool:
    """Rv1Pool(R as a dict or JSON text)."""

    def __init__(self, R, log=None, **kwargs) -> None:
        if isinstance(R, (str, bytes)):
            R = json.loads(R)
        if not isinstance(R, dict):
            raise TypeError(f"an Rv1Pool is made from R (a dict or JSON text), not "
                            f"{type(R).__name__}")
        rset = Rv1Set(R, keep_scheduling=True)
        self.log = log
        self._ranks: dict[int, dict] = {
            r: {"hostname": n.host, "cores": set(n.cores), "gpus": set(n.gpus),
                "allocated_cores": set(), "allocated_gpus": set(), "up": True}
            for r, n in sorted(rset.nodes.items())}
        self._properties: dict[str, set[int]] = {k: set(v) for k, v in rset.props.items()}
        self._starttime, self._expiration = rset.starttime, rset.expiration
        self._scheduling = rset.scheduling
        self._nslots = (R.get("execution") or {}).get("nslots")
        self._job_state: dict[int, tuple[float, Rv1Pool]] = {}

    # -- making copies (subclasses keep their own state with _init_from_state) ------
    def _init_from_state(self, source: Rv1Pool) -> None:
        """Hook: copy a subclass's own attributes from `source`."""

    def _from_state(self, ranks: dict, properties: dict, job_state=None) -> Rv1Pool:
        new = type(self).__new__(type(self))
        new.log = self.log
        new._ranks = ranks
        new._properties = {k: v & set(ranks) for k, v in properties.items()}
        new._properties = {k: v for k, v in new._properties.items() if v}
        new._starttime, new._expiration = self._starttime, self._expiration
        new._scheduling = self._scheduling
        new._nslots = None
        new._job_state = dict(job_state or {})
        new._init_from_state(self)
        return new

    @staticmethod
    def _copy_info(info: dict) -> dict:
        return {k: set(v) if isinstance(v, set) else v for k, v in info.items()}

    def copy(self) -> Rv1Pool:
        """An independent pool with the same resources, allocations and states."""
        new = self._from_state({r: self._copy_info(i) for r, i in self._ranks.items()},
                               self._properties, self._job_state)
        new._nslots = self._nslots
        return new

    def _copy_from_ranks(self, rank_set: set) -> Rv1Pool:
        return self._from_state({r: self._copy_info(i) for r, i in self._ranks.items()
                                 if r in rank_set}, self._properties)

    def _subset(self, which: dict, local_props: bool = True) -> Rv1Pool:
        """A pool of some resources: rank -> (cores, gpus)."""
        ranks = {r: {"hostname": self._ranks[r]["hostname"], "cores": set(c),
                     "gpus": set(g), "allocated_cores": set(), "allocated_gpus": set(),
                     "up": True} for r, (c, g) in sorted(which.items())}
        props = self._properties if local_props else \
            {k: v for k, v in self._properties.items() if not k.startswith("+")}
        return self._from_state(ranks, props)

    def copy_allocated(self) -> Rv1Pool:
        return self._subset({r: (i["allocated_cores"], i["allocated_gpus"])
                             for r, i in self._ranks.items()
                             if i["allocated_cores"] or i["allocated_gpus"]})

    def copy_down(self) -> Rv1Pool:
        return self._subset({r: (i["cores"], i["gpus"]) for r, i in self._ranks.items()
                             if not i["up"]})

    def to_set(self) -> Rv1Set:
        return Rv1Set(self.to_dict(), keep_scheduling=True)

    # -- reading ---------------------------------------------------------------------
    def count(self, kind: str) -> int:
        if kind == "core":
            return sum(len(i["cores"]) for i in self._ranks.values())
        if kind == "gpu":
            return sum(len(i["gpus"]) for i in self._ranks.values())
        if kind == "node":
            return len(self._ranks)
        return 0

    def nnodes(self) -> int:
        return len(self._ranks)

    @property
    def expiration(self) -> float:
        return self._expiration

    @expiration.setter
    def expiration(self, value: float) -> None:
        self._expiration = float(value)

    def set_expiration(self, value: float) -> None:
        self.expiration = value

    def set_starttime(self, value: float) -> None:
        self._starttime = float(value)

    def to_dict(self) -> dict:
        groups: dict[tuple, list[int]] = {}
        for r, i in sorted(self._ranks.items()):
            groups.setdefault((frozenset(i["cores"]), frozenset(i["gpus"])), []).append(r)
        lite = []
        for (cores, gpus), ranks in groups.items():
            children = {}
            if cores:
                children["core"] = _idset.encode(cores)
            if gpus:
                children["gpu"] = _idset.encode(gpus)
            lite.append({"rank": _idset.encode(ranks), "children": children})
        ex = {"R_lite": lite, "starttime": self._starttime, "expiration": self._expiration}
        hosts = [i["hostname"] for _, i in sorted(self._ranks.items())]
        if hosts and all(hosts):
            ex["nodelist"] = [_hostlist.encode(hosts)]
        props = {k: _idset.encode(v) for k, v in self._properties.items() if v}
        if props:
            ex["properties"] = props
        if self._nslots is not None:
            ex["nslots"] = self._nslots
        out = {"version": 1, "execution": ex}
        if self._scheduling is not None:
            out["scheduling"] = self._scheduling
        return out

    def encode(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def dumps(self) -> str:
        """The R_lite text: `rank[0-1]/core[0-3] rank2/core0`."""
        groups: dict[tuple, list[int]] = {}
        for r, i in sorted(self._ranks.items()):
            groups.setdefault((frozenset(i["cores"]), frozenset(i["gpus"])), []).append(r)
        parts = []
        for (cores, gpus), ranks in groups.items():
            kids = ([f"core{bracketed(cores)}"] if cores else []) + \
                ([f"gpu{bracketed(gpus)}"] if gpus else [])
            parts.append(f"rank{bracketed(ranks)}/" + ",".join(kids))
        return " ".join(parts)

    __str__ = dumps

    # -- the ranks' states -------------------------------------------------------------
    def _which(self, ids) -> set[int]:
        return set(self._ranks) if ids == "all" else _ranks_of(ids)

    def mark_up(self, ids) -> None:
        for r in self._which(ids):
            if r in self._ranks:
                self._ranks[r]["up"] = True

    def mark_down(self, ids) -> None:
        for r in self._which(ids):
            if r in self._ranks:
                self._ranks[r]["up"] = False

    def remove_ranks(self, ranks) -> None:
        for r in _ranks_of(ranks):
            self._ranks.pop(r, None)
        for k in list(self._properties):
            self._properties[k] &= set(self._ranks)
            if not self._properties[k]:
                del self._properties[k]

    def _matching(self, constraint) -> set[int]:
        if not constraint:
            return set(self._ranks)
        rset = Rv1Set()
        rset.nodes = {r: _Node(i["hostname"], i["cores"], i["gpus"])
                      for r, i in self._ranks.items()}
        rset.props = {k: set(v) for k, v in self._properties.items()}
        return rset.matching(constraint)

    # -- requests ----------------------------------------------------------------------
    def parse_resource_request(self, jobspec: dict) -> ResourceRequest:
        return ResourceRequest.from_jobspec(jobspec)

    def check_feasibility(self, request) -> None:
        """InfeasibleRequest if the pool, idle and every rank up, could never
        satisfy `request`."""
        self._check_feasibility(request)

    def _slots(self, cores: int, gpus: int, request) -> int:
        n = cores // request.slot_size if request.slot_size else 0
        if request.gpu_per_slot:
            n = min(n, gpus // request.gpu_per_slot)
        return n

    def _check_feasibility(self, request) -> None:
        if request.stepped:
            raise InfeasibleRequest("stepped resource counts are not supported")
        try:
            ranks = self._matching(request.constraint)
        except ValueError as exc:
            raise InfeasibleRequest(f"invalid constraint: {exc}") from None
        caps = [self._slots(len(self._ranks[r]["cores"]), len(self._ranks[r]["gpus"]),
                            request) for r in sorted(ranks)]
        if request.nnodes:
            fit = sum(1 for c in caps if c >= request.slots_per_node)
            if fit < request.nnodes:
                raise InfeasibleRequest(f"unsatisfiable request: {request.nnodes} nodes "
                                        f"with {request.slots_per_node} slots each, "
                                        f"{fit} could hold them")
        elif sum(caps) < request.nslots:
            raise InfeasibleRequest(f"unsatisfiable request: {request.nslots} slots of "
                                    f"{request.slot_size} cores, {sum(caps)} fit")

    def _sort_candidates(self, candidates: list) -> list:
        """Worst-fit: the ranks with the most free cores first, then by rank."""
        return sorted(candidates, key=lambda c: (-len(c[2]), c[0]))

    def _select_resources(self, candidates: list, request) -> tuple:
        """From candidates (rank, info, free cores, free GPUs) in order, what to
        allocate: ({rank: (cores, gpus)}, slots).  InsufficientResources if they
        cannot satisfy the request."""
        size, gps = request.slot_size, request.gpu_per_slot
        chosen: dict[int, tuple[set, set]] = {}
        slots = 0
        if request.nnodes:
            spn = request.slots_per_node
            limit = request.nnodes_max
            for rank, info, cores, gpus in candidates:
                if limit is not None and len(chosen) >= limit:
                    break
                if request.exclusive:
                    if len(cores) < len(info["cores"]) or len(gpus) < len(info["gpus"]):
                        continue
                    if self._slots(len(cores), len(gpus), request) < spn:
                        continue
                    chosen[rank] = (set(cores), set(gpus))
                elif self._slots(len(cores), len(gpus), request) >= spn:
                    chosen[rank] = (set(sorted(cores)[:spn * size]),
                                    set(sorted(gpus)[:spn * gps]))
                else:
                    continue
                slots += spn
            if len(chosen) < request.nnodes:
                raise InsufficientResources(f"{request.nnodes} nodes needed, "
                                            f"{len(chosen)} available")
            return chosen, slots
        want = request.nslots_max
        for rank, _info, cores, gpus in candidates:
            if want is not None and slots >= want:
                break
            n = self._slots(len(cores), len(gpus), request)
            if want is not None:
                n = min(n, want - slots)
            if n <= 0:
                continue
            if request.exclusive:
                chosen[rank] = (set(cores), set(gpus))
            else:
                chosen[rank] = (set(sorted(cores)[:n * size]), set(sorted(gpus)[:n * gps]))
            slots += n
        if slots < request.nslots:
            raise InsufficientResources(f"{request.nslots} slots needed, {slots} free")
        return chosen, slots

    def alloc(self, jobid: int, request) -> Rv1Pool:
        """Allocate `request` for `jobid`: the Rv1Pool of what it gets."""
        self._check_feasibility(request)
        ranks = self._matching(request.constraint)
        candidates = []
        for r in sorted(ranks):
            info = self._ranks[r]
            if not info["up"]:
                continue
            candidates.append((r, info, info["cores"] - info["allocated_cores"],
                               info["gpus"] - info["allocated_gpus"]))
        chosen, slots = self._select_resources(self._sort_candidates(candidates), request)
        for r, (cores, gpus) in chosen.items():
            self._ranks[r]["allocated_cores"] |= cores
            self._ranks[r]["allocated_gpus"] |= gpus
        now = time.time()
        end = now + request.duration if request.duration else self._expiration
        result = self._subset(chosen, local_props=False)
        result._starttime, result._expiration = now, end
        result._nslots = slots
        self._job_state[jobid] = (end, result)
        return result

    def register_alloc(self, jobid: int, R) -> None:
        """Record an allocation made before (a restart replaying its jobs)."""
        held = R if isinstance(R, Rv1Pool) else Rv1Pool(R)
        missing = set(held._ranks) - set(self._ranks)
        if missing:
            raise ValueError(f"job {jobid}: ranks {_idset.encode(missing)} of its R are "
                             "not in the pool")
        for r, i in held._ranks.items():
            self._ranks[r]["allocated_cores"] |= i["cores"]
            self._ranks[r]["allocated_gpus"] |= i["gpus"]
        self._job_state[jobid] = (held.expiration, held)

    def _release(self, held: Rv1Pool) -> None:
        for r, i in held._ranks.items():
            mine = self._ranks.get(r)
            if mine is not None:
                mine["allocated_cores"] -= i["cores"]
                mine["allocated_gpus"] -= i["gpus"]

    def free(self, jobid: int, R=None, final: bool = False) -> None:
        """Give back what `jobid` holds: all of it (R None), or the ranks of R (the
        rest stays held until a free with final=True, whose R is what is left).
        An unknown job is ignored."""
        state = self._job_state.get(jobid)
        if state is None:
            return
        end, held = state
        if R is None:
            self._release(held)
            del self._job_state[jobid]
            return
        part = R if isinstance(R, Rv1Pool) else Rv1Pool(R)
        ranks, left = set(part._ranks), set(held._ranks)
        if not ranks <= left:
            raise ValueError(f"job {jobid}: ranks {_idset.encode(ranks - left)} are not "
                             "held by it")
        if final and ranks != left:
            raise ValueError(f"job {jobid}: the final free names ranks "
                             f"{_idset.encode(ranks)}, it holds {_idset.encode(left)}")
        self._release(part)
        if final:
            del self._job_state[jobid]
        else:
            self._job_state[jobid] = (end, held._copy_from_ranks(left - ranks))

    def update_expiration(self, jobid: int, expiration: float) -> None:
        state = self._job_state.get(jobid)
        if state is not None:
            self._job_state[jobid] = (float(expiration), state[1])

    def job_end_times(self) -> list[tuple[int, float]]:
        return sorted(((j, end) for j, (end, _) in self._job_state.items()),
                      key=lambda x: x[1])

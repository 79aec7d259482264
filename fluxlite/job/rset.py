"""Resource sets: R as Flux writes it, and how tasks are laid out on it.

    {"version": 1, "execution": {"R_lite": [{"rank": "0-1", "children": {"core": "0-3",
                                                                         "gpu": "0-1"}}],
                                 "starttime": T, "expiration": T+limit or 0,
                                 "nslots": N, "nodelist": ["node[0-1]"],
                                 "properties": {"batch": "0-1"}}}

Internally an allocation is {rank: [core ids]} (and {rank: [GPU ids]}); `gpu`
children and `properties` appear only where there are some, as in Flux.
`layout()` turns a jobspec's task count and an allocation into tasks per rank (block order: ranks in
order, filled before moving on), which is what the job shells run.  It is
arithmetic over the allocated ranks: its cost never grows with a task count
that a jobspec chose.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..util import hostlist, idset


def build(alloc: dict[int, list[int]], *, starttime: float, expiration: float,
          hosts: Sequence[str], nslots: int | None = None,
          gpus: dict[int, list[int]] | None = None,
          properties: dict[str, str] | None = None) -> dict:
    """R for `alloc` (rank -> cores) and `gpus` (rank -> GPU ids); `hosts` names every
    rank's host, in rank order; `properties` maps a property to an idset of ranks."""
    gpus = gpus or {}
    groups: dict[tuple[str, str], list[int]] = {}
    for rank in sorted(alloc):
        key = (idset.encode(alloc[rank]), idset.encode(gpus.get(rank, ())))
        groups.setdefault(key, []).append(rank)
    r_lite = []
    for (cores, gpu), ranks in sorted(groups.items(), key=lambda kv: kv[1][0]):
        children = {"core": cores}
        if gpu:
            children["gpu"] = gpu
        r_lite.append({"rank": idset.encode(ranks), "children": children})
    execution = {
        "R_lite": r_lite, "starttime": starttime, "expiration": expiration,
        "nslots": sum(len(c) for c in alloc.values()) if nslots is None else nslots,
        "nodelist": [hostlist.of_ranks(hosts, sorted(alloc))]}
    if properties:
        execution["properties"] = dict(properties)
    return {"version": 1, "execution": execution}


def parse(R: dict, child: str = "core") -> dict[int, list[int]]:
    """rank -> ids of `child` ("core", or "gpu": ranks without GPUs are left out)."""
    out: dict[int, list[int]] = {}
    for item in R["execution"]["R_lite"]:
        ids = item["children"].get(child)
        if ids is None:
            continue
        ids = sorted(idset.decode(ids))
        for rank in idset.decode(item["rank"]):
            out[rank] = list(ids)
    return dict(sorted(out.items()))


def summary(alloc: dict[int, list[int]]) -> str:
    """'rank[0-1]/core[0-3]' as sched annotations show it."""
    parts = []
    for rank in sorted(alloc):
        parts.append(f"rank{rank}/core[{idset.encode(alloc[rank])}]")
    return ",".join(parts) if len(parts) < 4 else f"rank[{idset.encode(alloc)}]"


def layout(req, alloc: dict[int, list[int]]) -> list[int]:
    """Number of tasks on each allocated rank, in rank order."""
    ranks_ = sorted(alloc)
    if req.per_node is not None:
        return [req.per_node] * len(ranks_)
    slots = [len(alloc[r]) // req.cores_per_slot for r in ranks_]
    if req.nnodes is not None and req.slots_per_node:
        slots = [min(s, req.slots_per_node) for s in slots]
    elif req.nnodes is None:
        # an exclusive slot request gets whole nodes: run the slots asked for, not
        # one per core of those nodes
        left = req.nslots
        for i, s in enumerate(slots):
            slots[i] = min(s, left)
            left -= slots[i]
    if req.total is None:
        return [s * req.per_slot for s in slots]
    counts, left = [], req.total
    for s in slots:
        take = min(s, left)
        counts.append(take)
        left -= take
    if left > 0 and counts:
        # more tasks than slots (an oversubscribed total): deal the rest round robin,
        # in arithmetic, so the work is per rank whatever the count
        each, extra = divmod(left, len(counts))
        counts = [c + each + (1 if i < extra else 0) for i, c in enumerate(counts)]
    return counts

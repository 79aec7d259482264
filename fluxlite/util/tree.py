"""k-ary tree math for the overlay topology ("kary:K"; "kary:0" is flat).

Ranks are numbered breadth first; the parent of rank r is (r-1)//K.  Nothing
here does I/O: the overlay, the launcher and critical-rank computation all ask
this module the same questions.
"""

from __future__ import annotations

import re

DEFAULT_TOPO = "kary:32"
_TOPO_RE = re.compile(r"^kary:(\d+)$")


def parse_topo(text: str) -> int:
    """Fanout K of a topology string "kary:K"; raises ValueError otherwise."""
    m = _TOPO_RE.match(text.strip()) if isinstance(text, str) else None
    if not m:
        raise ValueError(
            f"invalid topology {text!r}: expected kary:K with K an integer >= 0 (kary:0 is flat)"
        )
    return int(m.group(1))


def parent(rank: int, k: int) -> int | None:
    """Parent of `rank`, or None for rank 0."""
    if rank == 0:
        return None
    if k == 0:
        return 0
    return (rank - 1) // k


def children(rank: int, size: int, k: int) -> list[int]:
    """Direct children of `rank` in an instance of `size` ranks."""
    if k == 0:
        return list(range(1, size)) if rank == 0 else []
    first = rank * k + 1
    return list(range(first, min(first + k, size)))


def descendants(rank: int, size: int, k: int) -> list[int]:
    """Every rank below `rank`, breadth first."""
    out: list[int] = []
    frontier = children(rank, size, k)
    while frontier:
        out.extend(frontier)
        frontier = [c for r in frontier for c in children(r, size, k)]
    return out


def level(rank: int, k: int) -> int:
    """Depth of `rank` in the tree (rank 0 is level 0)."""
    depth = 0
    while rank != 0:
        rank = parent(rank, k)
        depth += 1
    return depth


def next_hop(me: int, target: int, k: int) -> int | None:
    """The child of `me` through which `target` is reached, or None if target is not below me."""
    if target == me or target < 0:
        return None
    r = target
    while r != 0:
        p = parent(r, k)
        if p == me:
            return r
        r = p
    return None


def interior_ranks(size: int, k: int) -> list[int]:
    """Ranks that have at least one child (rank 0 included when size > 1)."""
    return [r for r in range(size) if children(r, size, k)]


def critical_ranks(size: int, k: int) -> list[int]:
    """Default critical set of an instance: rank 0 plus every interior rank."""
    return sorted({0, *interior_ranks(size, k)})

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


class Topology:
    """The tree of one instance, whatever its shape: kary:K, or the parents a
    bootstrap config names (Flux's "custom").  The router, the overlay and the
    overlay service ask it; nothing here does I/O."""

    def __init__(self, parents: list[int | None]):
        if not parents or parents[0] is not None:
            raise ValueError("rank 0 must be the root (its parent is None)")
        self.parents = list(parents)
        self.size = len(parents)
        self._children: list[list[int]] = [[] for _ in parents]
        for r, p in enumerate(parents[1:], start=1):
            if p is None or not 0 <= p < self.size or p == r:
                raise ValueError(f"rank {r}: invalid parent {p!r}")
            self._children[p].append(r)
        self._levels = [0] * self.size
        for r in self._breadth_first():
            for c in self._children[r]:
                self._levels[c] = self._levels[r] + 1

    @classmethod
    def kary(cls, size: int, k: int) -> Topology:
        return cls([parent(r, k) for r in range(size)])

    def _breadth_first(self) -> list[int]:
        order, frontier, seen = [], [0], {0}
        while frontier:
            order += frontier
            nxt = [c for r in frontier for c in self._children[r]]
            if seen & set(nxt):
                raise ValueError("the parents do not form a tree")
            seen |= set(nxt)
            frontier = nxt
        if len(order) != self.size:
            raise ValueError("the parents do not form a tree (a cycle, or ranks "
                             "unreachable from rank 0)")
        return order

    def parent(self, rank: int) -> int | None:
        return self.parents[rank]

    def children(self, rank: int) -> list[int]:
        return list(self._children[rank])

    def descendants(self, rank: int) -> list[int]:
        out: list[int] = []
        frontier = self._children[rank]
        while frontier:
            out.extend(frontier)
            frontier = [c for r in frontier for c in self._children[r]]
        return out

    def level(self, rank: int) -> int:
        return self._levels[rank]

    @property
    def maxlevel(self) -> int:
        return max(self._levels)

    def next_hop(self, me: int, target: int) -> int | None:
        """The child of `me` through which `target` is reached, or None if it is not below."""
        if target == me or not 0 <= target < self.size:
            return None
        r = target
        while r != 0:
            p = self.parents[r]
            if p == me:
                return r
            r = p
        return None

    def critical_ranks(self) -> list[int]:
        """Rank 0 plus every interior rank: the default critical set."""
        return sorted({0, *(r for r in range(self.size) if self._children[r])})

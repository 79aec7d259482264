"""Which ranks are online, torpid, lost or offline, merged up the tree.

Every broker merges the reports of its children's subtrees with its own links'
states into one report of its subtree, and sends it upstream when it changes;
rank 0 folds the whole-instance report into `Membership`, which remembers when
each rank entered its state (for `overlay status`, quorum and the resource
service).  A child speaks for its own subtree only: ranks outside it in its
report are ignored.

Pure: no sockets, and the clock is an argument.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ..util import idset
from .liveness import LOST, OFFLINE, ONLINE, TORPID

STATES = (ONLINE, TORPID, LOST, OFFLINE)

Report = dict[str, set[int]]


def child_report(payload: Mapping, subtree: set[int], size: int) -> Report:
    """A child's `status` payload ({state: idset text}) as a report limited to
    the child's subtree; unknown states are dropped.  Raises ValueError when
    the payload is malformed."""
    try:
        return {k: idset.decode(v, below=size) & subtree
                for k, v in payload.items() if k in STATES}
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed status report: {exc}") from None


def merge_subtree(rank: int, children: Iterable[tuple[int, str, Report]]) -> Report:
    """This rank's subtree report: itself online, each child's report merged, and
    a torpid child (whose own report still says online) moved to torpid.
    `children` yields (rank, link state, report) for each direct child."""
    out: Report = {ONLINE: {rank}, TORPID: set(), LOST: set(), OFFLINE: set()}
    for child, state, report in children:
        for s, ranks in report.items():
            out[s] |= ranks
        if state == TORPID:
            out[ONLINE].discard(child)
            out[TORPID].add(child)
    return out


def encode(report: Report) -> dict[str, str]:
    return {k: idset.encode(v) for k, v in report.items()}


class Membership:
    """The whole instance's view (rank 0): rank -> state, and since when."""

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self.states: dict[int, str] = {}
        self.since: dict[int, float] = {}

    def update(self, report: Report) -> Report:
        """Fold a whole-instance report in; returns the ranks that changed, by state."""
        changes: Report = {}
        now = self.clock()
        for state, ranks in report.items():
            for r in ranks:
                if self.states.get(r) != state:
                    self.states[r] = state
                    self.since[r] = now
                    changes.setdefault(state, set()).add(r)
        return changes

    def online_count(self) -> int:
        return sum(1 for s in self.states.values() if s in (ONLINE, TORPID))

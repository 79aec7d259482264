"""The `overlay` service: what `fluxlite overlay status` asks.

`overlay.health` answers on any rank with its own links; `overlay.status`
(rank 0) answers with the whole instance: every rank's state and the tree
shape, from the membership reports that flow upstream; `overlay.watch` (rank 0)
streams the membership as it changes.
"""

from __future__ import annotations

import time
from typing import Protocol

from ..errors import UsageError
from ..util import idset, tree
from .base import ANY, Service, handler


class OverlayView(Protocol):
    """What the service reads of this rank's overlay (the broker passes its Overlay)."""

    topology: tree.Topology
    hostname: str
    started: float                        # when this broker's overlay started (time.time)
    membership: dict[int, str]            # rank -> online, torpid, lost, offline...
    membership_since: dict[int, float]    # rank -> when it entered that state

    def health(self) -> dict: ...


class OverlayService(Service):
    name = "overlay"
    busy = "it reports the tree of brokers this broker is part of"

    def __init__(self, ctx, *, overlay: OverlayView, on_membership):
        super().__init__(ctx)
        self.overlay = overlay
        self._on_membership = on_membership
        self._watchers: list | None = None

    @handler("overlay.health", schema=None, roles=ANY)
    def health(self, msg, req):
        return self.overlay.health()

    @handler("overlay.watch", schema=None, streaming=True, roles=ANY)
    def watch(self, msg, req):
        """Rank 0: the membership now, then every change: {ranks: {state: idset}}."""
        if self.ctx.rank != 0:
            raise UsageError("overlay.watch is answered by rank 0")
        if self._watchers is None:
            self._watchers = []
            self._on_membership(self._changed)
        self._watchers.append(msg)
        self.track_stream(msg, lambda: self._watchers.remove(msg))
        self.respond(msg, self._snapshot())

    def _snapshot(self) -> dict:
        by_state: dict[str, list[int]] = {}
        for r, state in sorted(self.overlay.membership.items()):
            by_state.setdefault(state, []).append(r)
        return {"ranks": {k: idset.encode(v) for k, v in by_state.items()}}

    def _changed(self, changes) -> None:
        if not changes:
            return
        snap = self._snapshot()
        for w in list(self._watchers):
            self.respond(w, snap)

    @handler("overlay.status", schema=None, roles=ANY)
    def status(self, msg, req):
        if self.ctx.rank != 0:
            raise UsageError("overlay.status is answered by rank 0")
        ov = self.overlay
        size, topo = self.ctx.size, ov.topology
        ranks = []
        for r in range(size):
            state = ov.membership.get(r, "offline")
            ranks.append({"rank": r, "hostname": self.ctx.hosts[r], "state": state,
                          "status": _subtree_status(ov, r), "parent": topo.parent(r),
                          "since": ov.membership_since.get(r, ov.started)})
        return {"size": size, "topo": self.ctx.attrs["tbon.topo"],
                "hostname": ov.hostname, "now": time.time(), "ranks": ranks}


def _subtree_status(ov, rank: int) -> str:
    """Flux's subtree status: lost/offline for the rank itself, else full/partial/degraded."""
    own = ov.membership.get(rank, "offline")
    if own in ("lost", "offline"):
        return own
    below = [ov.membership.get(r, "offline") for r in ov.topology.descendants(rank)]
    if any(s == "lost" for s in below):
        return "degraded"
    if any(s == "offline" for s in below):
        return "partial"
    return "full"

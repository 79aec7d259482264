"""The states of one broker's peers as its overlay drives them: each child's link
(`ChildLink`: state, since when, its subtree's report), a peer found lost,
offline or torpid and what the owner is told of it (`OverlayCallbacks`), the
keepalive timer that judges silence, and the subtree report sent upstream
(rank 0: the instance's membership).

The rules are pure and elsewhere: when a peer is torpid or lost (liveness.py),
how subtree reports merge (membership.py).  `PeerStates` is the part of
`Overlay` (overlay.py) that applies them; overlay.py keeps the sockets, CURVE
and the hello, and the sends these go through.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..protocol.message import Message
from ..util import fsd, tree
from ..util.log import get_logger
from . import membership as members
from .liveness import LOST, OFFLINE, ONLINE, TORPID, Liveness, PeerTimes
from .membership import Membership

log = get_logger("overlay")


@dataclass
class OverlayCallbacks:
    """How the overlay tells its owner what happened."""

    message: Callable[[Message, int], None]          # a request/response/event from a peer
    parent_lost: Callable[[str], None]               # (reason)
    child_gone: Callable[[int, str, str], None]      # (rank, "lost"|"offline", reason)
    membership: Callable[[dict], None]               # rank 0: {state: set(ranks)} changed
    shutdown: Callable[[str], None]                  # the parent asks us to shut down


class ChildLink(PeerTimes):
    __slots__ = ("rank", "ident", "state", "since", "report", "pid", "hostname", "error")

    def __init__(self, rank: int):
        super().__init__()
        self.rank = rank
        self.ident: bytes | None = None
        self.state = OFFLINE
        self.since = time.time()
        self.report: dict[str, set[int]] = {}
        self.pid = 0
        self.hostname = ""
        self.error = ""


class PeerStates:
    """Mixed into `Overlay`, which sets these attributes up and provides the sends
    (`send_parent`, `_send_parent_control`, `_send_child_control`, `parent_connected`)
    and the channels whose backlog is read before silence is judged."""

    cb: OverlayCallbacks
    rank: int
    size: int
    hostname: str
    topology: tree.Topology
    children: dict[int, ChildLink]
    by_ident: dict[bytes, ChildLink]
    parent_state: str
    parent_times: PeerTimes
    liveness: Liveness
    members: Membership
    keepalive_period: float

    # ------------------------------------------------- links
    def child_state(self, rank: int) -> str:
        c = self.children.get(rank)
        return c.state if c else OFFLINE

    def live_children(self) -> list[int]:
        return [c.rank for c in self.children.values() if c.state in (ONLINE, TORPID)]

    def health(self) -> dict:
        """This rank's view of its children, for `overlay status` and tests."""
        return {
            "rank": self.rank,
            "hostname": self.hostname,
            "parent": self.parent_state,
            "children": [{"rank": c.rank, "state": c.state, "since": c.since,
                          "hostname": c.hostname, "error": c.error}
                         for c in self.children.values()],
        }

    # --------------------------- peers lost, offline, silent
    def _on_parent_disconnect(self, event: int, value: int) -> None:
        if self.parent_state == ONLINE:
            self._parent_lost("connection to parent closed")

    def _parent_lost(self, reason: str) -> None:
        if self.parent_state != ONLINE:
            return
        self.parent_state = LOST
        self.cb.parent_lost(reason)

    def _on_child_disconnect_hint(self, event: int, value: int) -> None:
        # a connection closed: probe every child now; vanished ones fail the send
        for c in list(self.children.values()):
            if c.state in (ONLINE, TORPID):
                self._send_child_control(c, "keepalive")

    def _child_lost(self, c: ChildLink, reason: str) -> None:
        if c.state not in (ONLINE, TORPID):
            return
        below = self.topology.descendants(c.rank)
        log.error("broker failed", peer=c.rank, hostname=c.hostname, reason=reason,
                  severed=len(below))
        self._drop_child(c, LOST, reason)

    def _child_offline(self, c: ChildLink, reason: str) -> None:
        if c.state not in (ONLINE, TORPID):
            return
        log.debug("broker left", peer=c.rank, reason=reason)
        self._drop_child(c, OFFLINE, reason)

    def _drop_child(self, c: ChildLink, state: str, reason: str) -> None:
        c.state = state
        c.since = time.time()
        c.error = reason
        if c.ident is not None:
            self.by_ident.pop(c.ident, None)
        below = set(self.topology.descendants(c.rank))
        c.report = {state: {c.rank} | below}
        self.schedule_report()
        self.cb.child_gone(c.rank, state, reason)

    async def _keepalive_loop(self) -> None:
        while True:
            await asyncio.sleep(self.keepalive_period)
            try:
                self._tick()
            except Exception:
                log.error("keepalive tick failed", exc_info=True)

    def _tick(self) -> None:
        # what peers sent while this loop was busy is read before anyone's silence is
        # judged (Liveness.tick): a stall here must not make live peers look unresponsive
        now, judge = self.liveness.tick(self._drain_backlog)
        live = self.liveness
        if self.up is not None and self.parent_state == ONLINE:
            if live.keepalive_due(self.parent_times, now):
                self._send_parent_control("keepalive")
            if judge and live.parent_lost(self.parent_times, now):
                silent = live.silence(self.parent_times, now)
                self._parent_lost(f"parent silent for {fsd.format(silent)}")
        for c in list(self.children.values()):
            if c.state not in (ONLINE, TORPID):
                continue
            if live.keepalive_due(c, now) and not self._send_child_control(c, "keepalive"):
                continue
            if not judge:
                continue
            verdict = live.judge(c, c.state, now)
            silent = fsd.format(live.silence(c, now))
            if verdict == LOST:
                self._child_lost(c, f"unresponsive for {silent}")
            elif verdict != c.state:
                log.warning("broker has been unresponsive", peer=c.rank, silent=silent)
                c.state = verdict
                self.schedule_report()

    def _drain_backlog(self) -> None:
        for ch in (self.up, self.down):
            if ch is not None:
                ch.drain_backlog()

    # -------------------------------------------- membership
    def schedule_report(self) -> None:
        if not self._report_pending:
            self._report_pending = True
            asyncio.get_running_loop().call_soon(self._send_report)

    def subtree_report(self) -> dict[str, set[int]]:
        return members.merge_subtree(
            self.rank, ((c.rank, c.state, c.report) for c in self.children.values()))

    def _send_report(self) -> None:
        self._report_pending = False
        rep = self.subtree_report()
        if rep == self._last_report:
            return
        if self.rank == 0:
            self._update_membership(rep)
        elif self.parent_connected():
            self._send_parent_control("status", members.encode(rep))
        else:
            return  # not joined yet: join() reports once the parent accepts us
        self._last_report = rep

    def _update_membership(self, rep: dict[str, set[int]]) -> None:
        changes = self.members.update(rep)
        if changes:
            self.cb.membership(changes)

    def online_count(self) -> int:
        return self.members.online_count()


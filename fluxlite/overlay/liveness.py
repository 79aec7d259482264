"""When a peer of the overlay is torpid or lost, judged from times alone.

The overlay records, for its parent and each child, when it last heard from the
peer and when it last sent to it.  Each keepalive period `Liveness.tick` reads
everything already waiting on the sockets first (the backlog: what peers sent
while this process was busy counts as heard), then says which peers are owed a
keepalive and whose silence has made them torpid or lost.

A tick that comes far later than its period means this process itself was
stopped (SIGSTOP, swapped out): ZeroMQ's I/O thread may not have handed over
what peers sent meanwhile, so that tick judges no one.

Pure: the clock is an argument, so the rules are tested with a fake one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

ONLINE, TORPID, LOST, OFFLINE = "online", "torpid", "lost", "offline"

# a tick later than this many periods (plus the grace below) means we were stopped
STALL_PERIODS, STALL_GRACE = 2, 0.5


@dataclass
class Timeouts:
    """Liveness settings, in seconds (lost: None means never)."""

    keepalive: float
    torpid: float
    lost: float | None
    connect: float


@dataclass(slots=True)
class PeerTimes:
    """When this broker last heard from one peer and last sent to it."""

    lastseen: float = 0.0
    lastsent: float = 0.0


class Liveness:
    """The liveness rules for one broker's links, on the clock it is given."""

    def __init__(self, timeouts: Timeouts, clock: Callable[[], float]):
        self.clock = clock
        self.timeouts = timeouts
        self._last_tick = clock()

    def seen(self, peer: PeerTimes) -> None:
        peer.lastseen = self.clock()

    def sent(self, peer: PeerTimes) -> None:
        peer.lastsent = self.clock()

    def tick(self, drain_backlog: Callable[[], None]) -> tuple[float, bool]:
        """Begin a tick: read the backlog, then take the time.  Returns (now, judge):
        judge is False when this process stalled since the last tick."""
        drain_backlog()
        now = self.clock()
        limit = STALL_PERIODS * self.timeouts.keepalive + STALL_GRACE
        stalled = now - self._last_tick > limit
        self._last_tick = now
        return now, not stalled

    def keepalive_due(self, peer: PeerTimes, now: float) -> bool:
        """Nothing was sent to `peer` for a keepalive period."""
        return now - peer.lastsent >= self.timeouts.keepalive

    def silence(self, peer: PeerTimes, now: float) -> float:
        return now - peer.lastseen

    def judge(self, peer: PeerTimes, state: str, now: float) -> str:
        """The state `peer`'s silence puts it in (ONLINE or TORPID peers only):
        LOST past the lost timeout, TORPID past the torpid one, else `state`
        (a torpid peer becomes online again only by being heard from)."""
        silent = self.silence(peer, now)
        lost = self.timeouts.lost
        if lost is not None and silent > lost:
            return LOST
        if state == ONLINE and silent > self.timeouts.torpid:
            return TORPID
        return state

    def parent_lost(self, peer: PeerTimes, now: float) -> bool:
        """The parent is lost past the lost timeout (a parent is never torpid)."""
        lost = self.timeouts.lost
        return lost is not None and self.silence(peer, now) > lost

"""The overlay's liveness and membership rules as pure objects, on a fake clock.

Liveness: keepalives owed after a quiet period, torpid and lost after silence,
a parent never torpid, lost disabled by None, the backlog read before silence
is judged, and a stalled process judging no one on the tick after the stall.
Membership: a child's report limited to its subtree, subtree reports merged
with torpid links, and rank 0's view recording when each rank changed.
"""

import pytest

from fluxlite.overlay import membership as members
from fluxlite.overlay.liveness import LOST, OFFLINE, ONLINE, TORPID, Liveness, PeerTimes, Timeouts
from fluxlite.overlay.membership import Membership
from fluxlite.util import idset

pytestmark = pytest.mark.timeout(10)


class FakeClock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


def make(keepalive=1.0, torpid=5.0, lost=10.0):
    clock = FakeClock()
    return clock, Liveness(Timeouts(keepalive=keepalive, torpid=torpid, lost=lost,
                                     connect=3.0), clock=clock)


def heard_now(clock, live):
    peer = PeerTimes()
    live.seen(peer)
    live.sent(peer)
    return peer


def ticks(clock, live, seconds, step=1.0):
    """Tick every `step` seconds (no stall) for `seconds`; returns the last (now, judge)."""
    out = None
    for _ in range(int(seconds / step)):
        clock.advance(step)
        out = live.tick(lambda: None)
    return out


def test_seen_and_sent_take_the_clock():
    clock, live = make()
    peer = PeerTimes()
    clock.advance(3)
    live.seen(peer)
    clock.advance(2)
    live.sent(peer)
    assert (peer.lastseen, peer.lastsent) == (1003.0, 1005.0)


@pytest.mark.parametrize("quiet, due", [(0.0, False), (0.99, False), (1.0, True), (7.0, True)])
def test_keepalive_due_after_a_quiet_period(quiet, due):
    clock, live = make(keepalive=1.0)
    peer = heard_now(clock, live)
    clock.advance(quiet)
    assert live.keepalive_due(peer, clock()) is due


@pytest.mark.parametrize("state, silent, verdict", [
    (ONLINE, 4.0, ONLINE),
    (ONLINE, 5.0, ONLINE),        # torpid only past the timeout
    (ONLINE, 5.5, TORPID),
    (TORPID, 6.0, TORPID),        # stays torpid until heard from
    (ONLINE, 10.0, TORPID),
    (ONLINE, 10.5, LOST),
    (TORPID, 11.0, LOST),
])
def test_judge_by_silence(state, silent, verdict):
    clock, live = make(torpid=5.0, lost=10.0)
    peer = heard_now(clock, live)
    clock.advance(silent)
    assert live.silence(peer, clock()) == silent
    assert live.judge(peer, state, clock()) == verdict


def test_lost_none_means_never_lost():
    clock, live = make(torpid=5.0, lost=None)
    peer = heard_now(clock, live)
    clock.advance(10_000)
    assert live.judge(peer, ONLINE, clock()) == TORPID
    assert live.parent_lost(peer, clock()) is False


def test_parent_is_lost_never_torpid():
    clock, live = make(torpid=5.0, lost=10.0)
    parent = heard_now(clock, live)
    clock.advance(9.0)
    assert live.parent_lost(parent, clock()) is False
    clock.advance(1.5)
    assert live.parent_lost(parent, clock()) is True


def test_new_timeouts_apply_at_once():
    clock, live = make(torpid=5.0, lost=10.0)
    peer = heard_now(clock, live)
    clock.advance(3.0)
    assert live.judge(peer, ONLINE, clock()) == ONLINE
    live.timeouts = Timeouts(keepalive=0.5, torpid=1.0, lost=2.0, connect=1.0)
    assert live.judge(peer, ONLINE, clock()) == LOST


def test_backlog_is_read_before_the_time_is_taken():
    """A peer whose keepalive sat unread in the socket while this process was busy
    is heard from before its silence is judged."""
    clock, live = make(keepalive=1.0, torpid=5.0, lost=10.0)
    peer = heard_now(clock, live)
    ticks(clock, live, 9.0)
    clock.advance(1.0)
    order = []

    def drain():
        order.append("drain")
        live.seen(peer)        # the queued keepalive, read now

    now, judge = live.tick(drain)
    assert order == ["drain"] and judge
    assert live.judge(peer, ONLINE, now) == ONLINE
    # without the backlog the same peer, at the same time, would be torpid
    stale = PeerTimes(lastseen=peer.lastseen - 10.0)
    assert live.judge(stale, ONLINE, now) == TORPID


def test_regular_ticks_judge():
    clock, live = make(keepalive=1.0)
    _, judge = ticks(clock, live, 5.0)
    assert judge is True


@pytest.mark.parametrize("late, judge", [(2.5, True), (2.51, False), (60.0, False)])
def test_a_stalled_process_judges_no_one_on_the_next_tick(late, judge):
    """A tick later than two periods and half a second means this process was
    stopped: peers' messages may not have been handed over yet."""
    clock, live = make(keepalive=1.0)
    ticks(clock, live, 3.0)
    clock.advance(late)
    now, judged = live.tick(lambda: None)
    assert now == clock() and judged is judge
    # the tick after is on time again and judges
    clock.advance(1.0)
    assert live.tick(lambda: None)[1] is True


def test_a_stall_keeps_a_peer_that_was_heard_meanwhile_online():
    """After a stall, the peer's keepalives arrive on the tick after; it was never lost."""
    clock, live = make(keepalive=1.0, torpid=5.0, lost=10.0)
    peer = heard_now(clock, live)
    clock.advance(30.0)                      # stopped for 30 s
    now, judge = live.tick(lambda: None)     # nothing handed over yet
    assert judge is False
    assert live.judge(peer, ONLINE, now) == LOST   # what judging now would have said
    clock.advance(1.0)
    now, judge = live.tick(lambda: live.seen(peer))
    assert judge is True and live.judge(peer, ONLINE, now) == ONLINE


# ------------------------------------------------------------------ membership

def test_child_report_is_limited_to_its_subtree():
    payload = {ONLINE: "1,3-4", LOST: "7", "bogus": "2", OFFLINE: "5"}
    report = members.child_report(payload, subtree={1, 3, 4, 5}, size=8)
    assert report == {ONLINE: {1, 3, 4}, LOST: set(), OFFLINE: {5}}


@pytest.mark.parametrize("payload", [{ONLINE: "x"}, {ONLINE: 7}, {ONLINE: "9"}, ["online"]])
def test_child_report_malformed_is_value_error(payload):
    with pytest.raises(ValueError, match="malformed status report"):
        members.child_report(payload, subtree={1}, size=8)


def test_merge_subtree():
    children = [
        (1, ONLINE, {ONLINE: {1, 3}, OFFLINE: {4}}),
        (2, TORPID, {ONLINE: {2, 5}, LOST: {6}}),    # torpid: its own report says online
    ]
    assert members.merge_subtree(0, children) == {
        ONLINE: {0, 1, 3, 5}, TORPID: {2}, LOST: {6}, OFFLINE: {4}}


def test_merge_subtree_leaf():
    assert members.merge_subtree(7, []) == {ONLINE: {7}, TORPID: set(), LOST: set(),
                                            OFFLINE: set()}


def test_encode_round_trips_through_child_report():
    report = {ONLINE: {0, 1, 2}, TORPID: set(), LOST: {5}, OFFLINE: {3, 4}}
    wire = members.encode(report)
    assert all(isinstance(v, str) for v in wire.values())
    assert members.child_report(wire, subtree=set(range(8)), size=8) == report
    assert idset.decode(wire[OFFLINE]) == {3, 4}


def test_membership_records_changes_and_since():
    clock = FakeClock(100.0)
    view = Membership(clock=clock)
    changes = view.update({ONLINE: {0}, OFFLINE: {1, 2}})
    assert changes == {ONLINE: {0}, OFFLINE: {1, 2}}
    assert view.since == {0: 100.0, 1: 100.0, 2: 100.0}
    assert view.online_count() == 1
    clock.advance(5)
    changes = view.update({ONLINE: {0, 1}, OFFLINE: {2}})
    assert changes == {ONLINE: {1}}
    assert view.since == {0: 100.0, 1: 105.0, 2: 100.0}
    clock.advance(5)
    assert view.update({ONLINE: {0, 1}, OFFLINE: {2}}) == {}
    changes = view.update({ONLINE: {0}, TORPID: {1}, LOST: {2}})
    assert changes == {TORPID: {1}, LOST: {2}}
    assert view.states == {0: ONLINE, 1: TORPID, 2: LOST}
    assert view.since[2] == 110.0
    assert view.online_count() == 2      # torpid counts as online

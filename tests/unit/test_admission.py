"""The connection guard's bounds on silent connections (protocol/admission.py), on
real socket pairs: the guard shuts down the broker's end, the peer sees end of file."""

import socket

import pytest

from fluxlite.protocol.admission import ConnectionGuard

pytestmark = pytest.mark.timeout(30)


def pairs(n):
    return [socket.socketpair() for _ in range(n)]


def closed_by_guard(peer):
    peer.settimeout(5)
    return peer.recv(1) == b""


def test_the_oldest_silent_connection_goes_past_the_bound():
    ps = pairs(4)
    try:
        g = ConnectionGuard("t", pending=3, limit=1 << 20, reserve=0)
        for ours, _ in ps[:3]:
            g.accepted(ours.fileno())
        g.spoke(ps[1][0].fileno())           # a connection that spoke is no longer bounded
        g.accepted(ps[3][0].fileno())
        assert list(g.pending) == [ps[0][0].fileno(), ps[2][0].fileno(), ps[3][0].fileno()]
        extra = pairs(1)[0]
        ps.append(extra)
        g.accepted(extra[0].fileno())
        assert closed_by_guard(ps[0][1])
        assert ps[0][0].fileno() not in g.pending and g.closed_pending == 1
        assert g.closed(ps[0][0].fileno()) is True     # its end is the guard's doing
        assert g.closed(ps[2][0].fileno()) is False
    finally:
        for a, b in ps:
            a.close()
            b.close()


def test_per_address_bound_closes_that_address_oldest_only():
    ps = pairs(4)
    addr = {ps[0][0].fileno(): "a", ps[1][0].fileno(): "b", ps[2][0].fileno(): "a",
            ps[3][0].fileno(): "a"}
    try:
        g = ConnectionGuard("t", pending=100, per_address=2, limit=1 << 20, reserve=0,
                            address_of=addr.get)
        for ours, _ in ps:
            g.accepted(ours.fileno())
        assert closed_by_guard(ps[0][1])                 # a's oldest
        assert ps[1][0].fileno() in g.pending            # b untouched
        assert g.by_address == {"a": 2, "b": 1}
    finally:
        for a, b in ps:
            a.close()
            b.close()


def test_near_the_limit_a_connection_is_refused_at_once():
    ours, peer = socket.socketpair()
    try:
        g = ConnectionGuard("t", pending=100, limit=ours.fileno() + 10, reserve=10)
        g.accepted(ours.fileno())
        assert closed_by_guard(peer) and g.refused == 1 and not g.pending
    finally:
        ours.close()
        peer.close()


def test_a_reused_descriptor_is_never_touched():
    ours, peer = socket.socketpair()
    other, other_peer = socket.socketpair()
    try:
        g = ConnectionGuard("t", pending=0, limit=1 << 20, reserve=0)
        g.pending[ours.fileno()] = (0, None)   # an inode that is not this socket's
        g._close_oldest(None)
        ours.setblocking(False)
        peer.send(b"x")
        assert ours.recv(1) == b"x"          # still open both ways
    finally:
        for s in (ours, peer, other, other_peer):
            s.close()

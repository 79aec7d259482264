"""A handle told it was dropped (`disconnect` with `refused_from`) fails the requests
the broker did not take as refused and the others as lost, none left waiting."""

import errno

from fluxlite.client.base import HandleCore
from fluxlite.protocol import message as m
from fluxlite.protocol.message import Message
from fluxlite.protocol.rpc import RPCTracker


class Core(HandleCore):
    def _transmit(self, frames):
        pass


def outcome(p):
    msg = p._queue[-1] if p._queue else None
    return None if msg is None else (msg.errnum, msg.errstr)


def test_requests_after_refused_from_are_refused_the_rest_lost():
    h = Core()
    h.connected = h.answered = True
    sent = [h.rpc("kvs.lookup", {"key": "k"}) for _ in range(5)]
    tags = [p.matchtag for p in sent]
    frames = m.encode(Message.control("disconnect", {"reason": "client too slow: x",
                                                     "refused_from": tags[3]}))
    h._deliver(frames)
    assert len(h.tracker) == 0
    for p in sent[:3]:
        errnum, errstr = outcome(p)
        assert errnum == errno.EHOSTUNREACH and "dropped this connection" in errstr
    for p in sent[3:]:
        errnum, errstr = outcome(p)
        assert errnum == errno.ECONNREFUSED and "not carried out" in errstr


def test_fail_from_counts_matchtags_that_wrapped_around_as_later():
    t = RPCTracker()
    t._next = 0x7FFFFFFE
    a, b, c = t.new("x"), t.new("x"), t.new("x")     # 0x7FFFFFFE, 0x7FFFFFFF, then 1
    assert c.matchtag == 1
    t.fail_from(b.matchtag, errno.ECONNREFUSED, "refused")
    assert len(t) == 1 and a.matchtag in t._pending

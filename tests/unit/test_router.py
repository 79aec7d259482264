"""The router as a pure object: a table of routing cases, driven without sockets.

Each case builds a Router for one rank of a tree, delivers one message from a
source hop, and checks where it went: to a local service, up to the parent,
down to a child, back to a client, or an error answer naming why.  Then the
things a table cannot say: responses retracing routes, in-flight requests
failing when a link goes, forged responses, streams ended for vanished clients,
events in order, and messages for this broker's services handed over on a later
turn (the tests' `run` is that turn), never inside the call that sent them.
"""

import errno
import sys

import pytest

from fluxlite.errors import HostUnreachable
from fluxlite.protocol import message as m
from fluxlite.protocol.message import Message
from fluxlite.router.router import INTERNAL, PARENT, Router
from fluxlite.util import tree

CLIENT = b"\x01client"
OTHER = b"\x02other"


class Links:
    """Records what the router sends; children listed in `down` are online."""

    def __init__(self, parent=True, down=(), dead_clients=()):
        self.parent = parent
        self.down = set(down)
        self.dead = set(dead_clients)
        self.sent: list[tuple[object, Message]] = []
        self.turns: list = []      # later turns the router asked for

    def run(self):
        """The loop's next turns, until nothing more is asked for."""
        while self.turns:
            self.turns.pop(0)()

    def parent_connected(self):
        return self.parent

    def send_parent(self, frames, instance=False):
        self.sent.append((PARENT, m.decode(frames)))

    def child_state(self, rank):
        return "online" if rank in self.down else "lost"

    def send_child(self, rank, frames, instance=False):
        if rank not in self.down:
            return False
        self.sent.append((rank, m.decode(frames)))
        return True

    def send_children(self, frames):
        for r in sorted(self.down):
            self.sent.append((r, m.decode(frames)))

    def send_client(self, ident, frames, instance=False):
        if ident in self.dead:
            return False
        self.sent.append((ident, m.decode(frames)))
        return True


class Service:
    """A service that keeps every request to answer later (as a stream or a wait)."""

    def __init__(self):
        self.got: list[Message] = []
        self.dropped: list = []

    def dispatch(self, msg):
        self.got.append(msg)
        return True

    def drop_streams(self, match):
        self.dropped.append(match)


def router(rank=0, size=7, k=2, **links):
    lk = Links(**links)
    r = Router(rank=rank, topology=tree.Topology.kary(size, k), userid=1000, links=lk,
               later=lk.turns.append)
    r.open()
    return r, lk


def req(topic, nodeid=m.NODEID_ANY, flags=0, tag=7, route=None):
    msg = Message.request(topic, {"x": 1}, nodeid=nodeid, flags=flags, matchtag=tag)
    msg.route = list(route or [])
    return msg


# rank, size, kary, services here, message (topic, nodeid, flags), source,
# where it goes: ("service", name) | (hop, topic) | ("error", errno, words)
CASES = [
    ("local service, any rank", 0, 7, 2, ["kvs"], ("kvs.lookup", m.NODEID_ANY, 0), CLIENT,
     ("service", "kvs")),
    ("not here: upstream", 3, 7, 2, [], ("kvs.lookup", m.NODEID_ANY, 0), CLIENT,
     (PARENT, "kvs.lookup")),
    ("not here, rank 0: ENOSYS", 0, 7, 2, [], ("nosuch.get", m.NODEID_ANY, 0), CLIENT,
     ("error", errno.ENOSYS, "No service matching nosuch.get")),
    ("to this rank", 1, 7, 2, ["broker"], ("broker.ping", 1, 0), PARENT,
     ("service", "broker")),
    ("to this rank, no such service", 1, 7, 2, [], ("x.y", 1, 0), CLIENT,
     ("error", errno.ENOSYS, "registered on rank 1")),
    ("to a child's subtree: down", 0, 7, 2, [], ("broker.ping", 5, 0), CLIENT, (2, "broker.ping")),
    ("to a grandchild: via the child", 1, 7, 2, [], ("broker.ping", 4, 0), CLIENT,
     (4, "broker.ping")),
    ("to a sibling: up", 3, 7, 2, [], ("broker.ping", 4, 0), CLIENT, (PARENT, "broker.ping")),
    ("to rank 0 from a leaf: up", 6, 7, 2, [], ("broker.ping", 0, 0), CLIENT,
     (PARENT, "broker.ping")),
    ("rank beyond the size", 0, 7, 2, [], ("broker.ping", 9, 0), CLIENT,
     ("error", errno.EHOSTUNREACH, "does not exist (instance size is 7)")),
    ("child lost", 0, 7, 2, [], ("broker.ping", 1, 0), CLIENT,
     ("error", errno.EHOSTUNREACH, "rank 1 is lost")),
    ("upstream flag skips own services", 1, 7, 2, ["kvs"], ("kvs.lookup", 1, m.UPSTREAM), CLIENT,
     (PARENT, "kvs.lookup")),
    ("upstream flag at rank 0", 0, 7, 2, ["kvs"], ("kvs.lookup", 0, m.UPSTREAM), CLIENT,
     ("error", errno.ENOSYS, "No service matching kvs.lookup")),
    ("no parent connection", 3, 7, 2, [], ("kvs.lookup", m.NODEID_ANY, 0), CLIENT,
     ("error", errno.EHOSTUNREACH, "not connected to a parent")),
    ("flat tree: rank 0 to leaf", 0, 5, 0, [], ("broker.ping", 4, 0), CLIENT, (4, "broker.ping")),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_routing_table(case):
    _, rank, size, k, names, (topic, nodeid, flags), source, expect = case
    down = tree.children(rank, size, k)
    if expect[0] == "error" and "is lost" in expect[2]:
        down = []
    r, links = router(rank, size, k, parent=rank != 0 and "not connected" not in str(expect),
                      down=down)
    services = {n: Service() for n in names}
    r.services.update(services)
    r.deliver(req(topic, nodeid, flags), source)
    if expect[0] == "service":
        assert services[expect[1]].got == []       # not inside the call
        links.run()
        got = services[expect[1]].got
        assert len(got) == 1 and got[0].topic == topic and not links.sent
        assert got[0].route == [source] if isinstance(source, bytes) else [source]
    elif expect[0] == "error":
        assert links.sent, "no answer"
        hop, msg = links.sent[-1]
        assert hop == source and msg.type == m.RESPONSE and msg.errnum == expect[1]
        assert expect[2] in msg.errstr
    else:
        hop, msg = links.sent[-1]
        assert (hop, msg.topic, msg.type) == (expect[0], expect[1], m.REQUEST)


def test_requests_before_open_wait_for_the_services():
    """A parent counts a child online at its hello and may send at once: the child
    holds what comes before its services start, then routes it in order."""
    lk = Links(parent=False, down=[])
    r = Router(rank=1, topology=tree.Topology.kary(7, 2), userid=1000, links=lk,
               later=lk.turns.append)
    r.deliver(req("broker.getattr", nodeid=1, tag=1), PARENT)
    r.deliver(req("broker.ping", nodeid=1, tag=2), PARENT)
    assert lk.sent == []                       # not ENOSYS, and nothing lost upstream
    svc = Service()
    r.services["broker"] = svc
    lk.parent = True
    r.open()
    lk.run()
    assert [(g.topic, g.matchtag) for g in svc.got] == [("broker.getattr", 1),
                                                         ("broker.ping", 2)]
    assert svc.got[0].route == [PARENT]
    r.deliver(req("broker.ping", nodeid=1, tag=3), PARENT)   # open: straight through
    lk.run()
    assert [g.matchtag for g in svc.got] == [1, 2, 3]


def test_client_route_is_replaced_by_its_identity():
    r, links = router(rank=3, down=[])
    r.deliver(req("kvs.lookup", route=[b"forged", 2]), CLIENT)
    hop, msg = links.sent[-1]
    assert hop == PARENT and msg.route == [CLIENT]


def test_response_retraces_the_route_and_clears_inflight():
    r, links = router(rank=1, down=[3, 4])
    r.deliver(req("broker.ping", nodeid=4, tag=11), CLIENT)   # down to child 4
    assert links.sent[-1][0] == 4 and r.inflight[4]
    _, fwd = links.sent[-1]
    r.deliver(fwd.response({"ok": 1}), 4)
    hop, resp = links.sent[-1]
    assert hop == CLIENT and resp.payload == {"ok": 1} and resp.matchtag == 11
    assert 4 not in r.inflight


def test_streaming_stays_inflight_until_its_error_ends_it():
    r, links = router(rank=0, down=[1, 2])
    r.deliver(req("kvs.watch", nodeid=1, flags=m.STREAMING), CLIENT)
    _, fwd = links.sent[-1]
    for i in range(3):
        r.deliver(fwd.response({"n": i}), 1)
    assert r.inflight[1]
    r.deliver(fwd.response(None, errno.ENODATA), 1)
    assert 1 not in r.inflight
    assert [msg.payload for hop, msg in links.sent if hop == CLIENT][:3] == \
        [{"n": 0}, {"n": 1}, {"n": 2}]


def test_lost_link_fails_everything_in_flight_through_it():
    r, links = router(rank=0, down=[1, 2])
    r.deliver(req("a.x", nodeid=3, tag=1), CLIENT)
    r.deliver(req("b.y", nodeid=4, tag=2, flags=m.STREAMING), OTHER)
    r.deliver(req("c.z", nodeid=5, tag=3), CLIENT)            # via child 2: unaffected
    links.sent.clear()
    r.fail_inflight(1, "rank 1 lost: gone")
    answers = {(hop, msg.matchtag): msg for hop, msg in links.sent}
    assert set(answers) == {(CLIENT, 1), (OTHER, 2)}
    assert all(a.errnum == errno.EHOSTUNREACH and "rank 1 lost" in a.errstr
               for a in answers.values())
    assert r.inflight[2]


def test_a_client_cannot_answer_a_request_not_routed_to_it():
    """A forged response (say, with the route of sched's resource.acquire stream)
    is dropped: the internal RPC it imitates never sees it."""
    r, links = router(rank=0)
    got = []
    p = r.rpc("resource.acquire", streaming=True)   # no service: answered ENOSYS
    p.on_response = got.append
    links.run()
    assert [g.errnum for g in got] == [errno.ENOSYS]
    got.clear()
    forged = Message(m.RESPONSE, "resource.acquire", {"shrink": "1-3"}, matchtag=p.matchtag,
                     route=[INTERNAL])
    r.deliver(forged, CLIENT)
    links.run()
    assert got == [] and links.sent == []


def test_a_client_may_answer_a_request_routed_to_it():
    r, links = router(rank=0)
    r.add_client_service(CLIENT, "myshell", pid=None)
    r.deliver(req("myshell.hello", tag=5), OTHER)
    hop, fwd = links.sent[-1]
    assert hop == CLIENT
    r.deliver(fwd.response({"hi": 1}), CLIENT)
    assert links.sent[-1][0] == OTHER and links.sent[-1][1].payload == {"hi": 1}
    r.deliver(fwd.response({"again": 1}), CLIENT)  # a second answer to a plain RPC
    assert links.sent[-1][1].payload == {"hi": 1}


def test_vanished_client_disconnects_every_service_it_talked_to():
    r, links = router(rank=0)
    kvs, jm = Service(), Service()
    r.services.update({"kvs": kvs, "job-manager": jm})
    r.deliver(req("kvs.watch", flags=m.STREAMING), CLIENT)
    r.deliver(req("job-manager.wait"), CLIENT)            # not streaming: still told
    r.client_gone(CLIENT, "client connection closed")
    links.run()
    assert [m_.topic for m_ in kvs.got] == ["kvs.watch", "kvs.disconnect"]
    assert [m_.topic for m_ in jm.got] == ["job-manager.wait", "job-manager.disconnect"]
    assert jm.got[-1].route == [CLIENT] and jm.got[-1].flags & m.NORESPONSE


def test_vanished_client_disconnects_only_where_an_answer_may_still_come():
    """A service that answered at once holds nothing of the client's; one that kept
    the request, and a service on another rank that has not answered yet, are told."""
    r, links = router(rank=1, down=(3,))
    answered, held = _Answer(r, 1), Service()
    r.services.update({"kvs": answered, "job-manager": held})
    r.deliver(req("kvs.lookup"), CLIENT)
    r.deliver(req("job-manager.wait"), CLIENT)
    links.run()                                          # kvs answers, the wait is kept
    r.deliver(req("sched.alloc"), CLIENT)                # not on rank 1: sent up
    r.deliver(req("job-exec.kill", nodeid=3), CLIENT)    # down to rank 3
    r.deliver(req("kvs.lookup", nodeid=0, tag=8), CLIENT)  # sent up, and answered
    up = links.sent[-1][1]
    r.deliver(up.response({"value": 1}), PARENT)
    assert links.sent[-1][0] == CLIENT
    links.sent.clear()
    r.client_gone(CLIENT, "client connection closed")
    links.run()
    assert [m_.topic for m_ in held.got] == ["job-manager.wait", "job-manager.disconnect"]
    told = sorted((hop, msg.topic) for hop, msg in links.sent)
    assert told == [(PARENT, "sched.disconnect"), (3, "job-exec.disconnect")]


class _WatchesAndAnswers:
    """kvs as it is: a watch is kept, a get answered at once."""

    def __init__(self, router_):
        self.router, self.got = router_, []

    def dispatch(self, msg):
        self.got.append(msg.topic)
        if msg.topic == "kvs.watch":
            return True
        self.router.respond(msg.response({}))
        return False


def test_an_answer_at_once_does_not_settle_a_kept_request():
    """A client with a watch open also does a get that is answered at once, and
    another that fails: when it goes, the watch's service is still told."""
    r, links = router(rank=0)
    kvs = _WatchesAndAnswers(r)
    r.services["kvs"] = kvs
    r.deliver(req("kvs.watch", flags=m.STREAMING, tag=1), CLIENT)
    r.deliver(req("kvs.lookup", tag=2), CLIENT)
    r.deliver(req("kvs.lookup", nodeid=9, tag=3), CLIENT)     # no rank 9: refused
    links.run()
    r.client_gone(CLIENT, "client connection closed")
    links.run()
    assert kvs.got == ["kvs.watch", "kvs.lookup", "kvs.disconnect"]


def test_vanished_client_loses_its_services_and_fails_requests_to_it():
    r, links = router(rank=0)
    r.add_client_service(CLIENT, "svc", pid=42)
    r.deliver(req("svc.do", tag=9), OTHER)
    links.sent.clear()
    r.client_gone_by_pid(42)
    assert "svc" not in r.services
    hop, msg = links.sent[-1]
    assert hop == OTHER and msg.errnum == errno.EHOSTUNREACH
    r.deliver(req("svc.do", tag=10), OTHER)
    assert links.sent[-1][1].errnum == errno.ENOSYS


def test_send_failure_to_a_client_forgets_it():
    r, links = router(rank=0, dead_clients=[CLIENT])
    svc = Service()
    r.services["kvs"] = svc
    r.deliver(req("kvs.lookup"), CLIENT)
    links.run()
    r.respond(svc.got[0].response({}))
    assert CLIENT not in r.clients


def test_child_subtree_gone_drops_streams_from_it():
    r, _ = router(rank=0)
    svc = Service()
    r.services["kvs"] = svc
    r.subtree_gone(2)
    match = svc.dropped[0]
    assert match((b"c", 2)) and not match((b"c", 1)) and not match(())


def test_events_in_order_to_children_and_subscribed_clients():
    r, links = router(rank=1, size=7, k=2, down=[3, 4])
    r.subscribe_client(CLIENT, "job.")
    seen = []
    r.subscribe("job.", seen.append)
    for seq in (1, 2, 2, 1, 5):
        r.deliver(Message.event("job.state", {"seq": seq}, seq), PARENT)
    assert [e.seq for e in seen] == [1, 2, 5]      # duplicates and stale ones dropped
    assert [msg.seq for hop, msg in links.sent if hop == CLIENT] == [1, 2, 5]
    assert [msg.seq for hop, msg in links.sent if hop == 3] == [1, 2, 5]


def test_events_only_from_the_parent():
    r, links = router(rank=1, down=[3, 4])
    r.deliver(Message.event("job.state", None, 1), 3)
    r.deliver(Message.event("job.state", None, 1), CLIENT)
    assert links.sent == []


def test_rank0_publishes_with_increasing_sequence():
    r, links = router(rank=0, down=[1, 2])
    r.publish("a")
    r.publish("b")
    assert [(hop, msg.seq) for hop, msg in links.sent] == [(1, 1), (2, 1), (1, 2), (2, 2)]


def test_noresponse_request_is_never_answered():
    r, links = router(rank=0)
    r.deliver(req("nosuch.x", flags=m.NORESPONSE), CLIENT)
    assert links.sent == []


# ------------------------------------------------------------ a whole tree
class _TreeLinks:
    """Links of one rank in a tree of routers wired to each other in-process:
    a frame sent to a neighbour is delivered to its router at once."""

    def __init__(self, net: "_Net", rank: int):
        self.net, self.rank = net, rank
        self.to_clients: list[tuple[bytes, Message]] = []

    def parent_connected(self):
        return self.rank != 0 and self.rank not in self.net.cut

    def send_parent(self, frames, instance=False):
        parent = self.net.topology.parent(self.rank)
        self.net.hops.append((self.rank, parent))
        self.net.routers[parent].deliver(m.decode(frames), self.rank)

    def child_state(self, rank):
        return "lost" if rank in self.net.cut else "online"

    def send_child(self, rank, frames, instance=False):
        if rank in self.net.cut:
            return False
        self.net.hops.append((self.rank, rank))
        self.net.routers[rank].deliver(m.decode(frames), PARENT)
        return True

    def send_children(self, frames):
        for r in self.net.topology.children(self.rank):
            self.send_child(r, frames)

    def send_client(self, ident, frames, instance=False):
        self.to_clients.append((ident, m.decode(frames)))
        return True


class _Answer:
    """A service that answers at once with the rank it runs on."""

    def __init__(self, router_, rank):
        self.router, self.rank = router_, rank

    def dispatch(self, msg):
        self.router.respond(msg.response({"rank": self.rank}))
        return False

    def drop_streams(self, match):
        pass


class _Net:
    def __init__(self, size=7, k=2):
        self.topology = tree.Topology.kary(size, k)
        self.cut: set[int] = set()
        self.hops: list[tuple[int, int]] = []
        self.routers = {}
        self.turns: list = []
        for rank in range(size):
            r = Router(rank=rank, topology=self.topology, userid=1000,
                       links=_TreeLinks(self, rank), later=self.turns.append)
            r.services["echo"] = _Answer(r, rank)
            r.open()
            self.routers[rank] = r

    def run(self):
        while self.turns:
            self.turns.pop(0)()


# from rank, to rank, the hops the request takes (the response retraces them)
RETRACE = [
    ("down two hops", 0, 4, [(0, 1), (1, 4)]),
    ("up two hops", 4, 0, [(4, 1), (1, 0)]),
    ("sibling: up then down", 3, 4, [(3, 1), (1, 4)]),
    ("across the tree", 3, 6, [(3, 1), (1, 0), (0, 2), (2, 6)]),
]


@pytest.mark.parametrize("case", RETRACE, ids=[c[0] for c in RETRACE])
@pytest.mark.parametrize("origin", ["client", "internal"])
def test_response_retraces_every_hop(case, origin):
    """A request crosses several brokers; its response comes back the same way,
    hop by hop (from the parent on to a child, and up), and no rank keeps it in flight."""
    _, src, dst, hops = case
    net = _Net()
    r = net.routers[src]
    got = []
    if origin == "client":
        r.deliver(req("echo.x", nodeid=dst, tag=21), CLIENT)
    else:
        p = r.rpc("echo.x", nodeid=dst)          # answered by a remote rank
        p.on_response = got.append
    net.run()
    back = [(b, a) for a, b in reversed(hops)]
    assert net.hops == hops + back
    if origin == "client":
        (ident, resp), = r.links.to_clients
        assert ident == CLIENT and resp.matchtag == 21
    else:
        resp, = got
    assert resp.errnum == 0 and resp.payload == {"rank": dst}
    assert all(not x.inflight for x in net.routers.values())


def test_losing_the_parent_fails_internal_rpcs_and_client_requests():
    """The parent link goes: what this rank sent upstream, for a client or for its
    own services (PendingRPCs), fails with EHOSTUNREACH; nothing is left in flight."""
    r, links = router(rank=3, down=[])
    got = []
    p = r.rpc("kvs.lookup", {"key": "a"})
    p.on_response = got.append
    r.deliver(req("kvs.lookup", tag=31), CLIENT)
    r.deliver(req("job-manager.wait", tag=32, flags=m.STREAMING), OTHER)
    assert [hop for hop, _ in links.sent] == [PARENT, PARENT, PARENT]
    links.sent.clear()
    links.parent = False
    r.fail_inflight(PARENT, "lost parent: rank 1 went away")
    links.run()
    (resp,) = got
    assert resp.errnum == errno.EHOSTUNREACH and "lost parent" in resp.errstr
    with pytest.raises(HostUnreachable, match="lost parent"):
        raise resp.error()
    answers = {(hop, msg.matchtag): msg.errnum for hop, msg in links.sent}
    assert answers == {(CLIENT, 31): errno.EHOSTUNREACH, (OTHER, 32): errno.EHOSTUNREACH}
    assert PARENT not in r.inflight
    r.deliver(req("kvs.lookup", tag=33), CLIENT)      # and new ones fail at once
    assert links.sent[-1][1].errnum == errno.EHOSTUNREACH


# ------------------------------------------ between services of one broker
class _Relay:
    """A service that, for each request, asks `next_topic` (another service of the
    same broker) and notes when its handler ran and when the answer came."""

    def __init__(self, router_, name, log, next_topic=None):
        self.router, self.name, self.log, self.next_topic = router_, name, log, next_topic

    def dispatch(self, msg):
        self.log.append(f"{self.name} got {msg.topic}")
        if self.next_topic:
            p = self.router.rpc(self.next_topic)
            p.on_response = lambda resp: self.log.append(f"{self.name} answered by "
                                                         f"{resp.payload['by']}")
            self.log.append(f"{self.name} asked {self.next_topic}")
        self.router.respond(msg.response({"by": self.name}))
        self.log.append(f"{self.name} done")
        return False

    def drop_streams(self, match):
        pass


def test_a_request_between_services_is_handed_over_on_a_later_turn():
    r, links = router(rank=0)
    log = []
    r.services.update({"a": _Relay(r, "a", log, "b.work"), "b": _Relay(r, "b", log)})
    r.deliver(req("a.go", tag=3), CLIENT)
    assert log == [] and links.sent == []
    links.run()
    # a's handler ends before b's begins, and a hears b's answer after both
    assert log == ["a got a.go", "a asked b.work", "a done", "b got b.work", "b done",
                   "a answered by b"]
    assert [(hop, msg.matchtag) for hop, msg in links.sent] == [(CLIENT, 3)]


def test_an_rpc_is_never_answered_before_the_caller_holds_it():
    r, links = router(rank=0)
    got = []
    p = r.rpc("nosuch.x")                       # refused (ENOSYS) by the router itself
    assert got == [] and not p.ready()
    p.on_response = got.append
    links.run()
    assert [g.errnum for g in got] == [errno.ENOSYS]


def _stack_depth() -> int:
    frame, n = sys._getframe(), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n


class _Chain:
    """Each request asks the next service of the chain, down to zero."""

    def __init__(self, router_):
        self.router, self.depths, self.answers = router_, [], 0

    def dispatch(self, msg):
        self.depths.append(_stack_depth())
        n = msg.payload["n"]
        if n:
            p = self.router.rpc("chain.next", {"n": n - 1})
            p.on_response = self._answered
        self.router.respond(msg.response({}))
        return False

    def _answered(self, resp):
        self.answers += 1

    def drop_streams(self, match):
        pass


def test_a_long_chain_of_requests_between_services_does_not_grow_the_stack():
    r, links = router(rank=0)
    chain = _Chain(r)
    r.services["chain"] = chain
    p = r.rpc("chain.next", {"n": 3000})      # deeper than Python's recursion limit
    links.run()
    assert p.ready() and chain.answers == 3000
    assert len(chain.depths) == 3001 and len(set(chain.depths)) == 1


def test_a_turn_stops_after_its_slice_and_the_rest_keeps_its_order(monkeypatch):
    """A burst of in-broker requests is handed over in slices of TURN_SLICE: a turn
    that has used its time leaves the rest, in order, to the next one (so a client's
    request on a socket never waits behind the whole burst)."""
    from fluxlite.router import router as router_mod
    clock = [0.0]
    monkeypatch.setattr(router_mod.time, "monotonic", lambda: clock[0])
    r, links = router(rank=0)
    got = []

    class Slow:
        def dispatch(self, msg):
            got.append(msg.matchtag)
            clock[0] += router_mod.TURN_SLICE / 4     # each takes a quarter slice
            return True

    r.services["slow"] = Slow()
    for tag in range(10):
        r.deliver(req("slow.work", tag=tag, route=[b"c"]), b"c")
    turns = 0
    while links.turns:
        links.turns.pop(0)()
        turns += 1
    assert got == list(range(10))
    assert turns == 3        # 4 + 4 + 2: each turn stopped once its slice was used


def test_the_router_is_busy_while_many_deliveries_wait_for_its_services():
    """While INTAKE_LIMIT local clients' requests wait for this broker's services,
    the router says it is busy (the local endpoint then takes nothing more from its
    clients)."""
    from fluxlite.router.router import INTAKE_LIMIT
    r, links = router(rank=0)
    r.services["svc"] = Service()
    for tag in range(INTAKE_LIMIT - 1):
        r.deliver(req("svc.work", tag=tag), CLIENT)
    assert not r.busy()
    r.deliver(req("svc.work", tag=INTAKE_LIMIT), CLIENT)
    assert r.busy()
    links.run()
    assert not r.busy() and len(r.services["svc"].got) == INTAKE_LIMIT
    # the services' own requests are not counted: they are what clears the queue
    for _ in range(2 * INTAKE_LIMIT):
        r.rpc("svc.work")
    assert not r.busy()

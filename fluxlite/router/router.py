"""The one dispatch loop: where every message a broker handles goes next.

Sources are named by route hops: a child rank (int >= 0), the parent (-1), a
local client (its ZeroMQ identity, bytes), or this broker's own services
(b"").  Requests push their source onto the route and go to the nearest
broker that registered the topic's service (this one first, then upstream),
or along the tree to the rank they name.  Responses pop the route to retrace
it.  Events come down from rank 0 with a sequence number and reach
subscribed services and clients in order.

The router is pure: it holds tables and decides, and it sends only through the
`Links` it is given (the overlay's parent and child sockets and the local
endpoint), so its behaviour is unit-tested without sockets (tests/unit/test_router.py).

What the router guarantees:
- in-flight requests are remembered per next hop, so when a child, the parent
  or a client vanishes, every RPC still waiting on it fails at once with
  EHOSTUNREACH instead of hanging;
- a client may answer only a request that was routed to it (a response with any
  other route and matchtag is dropped), so no client can forge another
  service's answers;
- a client's requests are remembered by service, so when it vanishes each of
  those services gets `<service>.disconnect` with its route: its streams and its
  waits end with it;
- a message for this broker's own services (a request to one of them, from a
  client, a peer or another service; a response to one of their RPCs) is queued
  and handed over on a later turn of the event loop, in the order it was
  routed, never inside the call that sent it (flux-core's modules talk over
  interthread channels for the same reason).  A service's handler therefore
  never runs inside another's, an answer never reaches an RPC before the caller
  holds it, and no chain of requests and answers grows the stack.  `later`
  (call_soon of the running loop, unless given) asks for that turn.
  While INTAKE_LIMIT local clients' requests wait there, `busy()` says so and
  the local endpoint takes no more from its clients (router/local.py): a client
  sending requests faster than they are answered waits in its own socket, and
  one dropped for not reading its answers leaves its requests not taken
  (refused) instead of queued here to be answered for nobody.  The services'
  own traffic is not counted: it is what clears the queue.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import time
from collections.abc import Callable
from typing import Protocol

from ..errors import AlreadyExists, NotFound, UsageError
from ..protocol import message as m
from ..protocol.message import Message
from ..protocol.rpc import PendingRPC, RPCTracker
from ..util import tree
from ..util.log import get_logger

INTERNAL = b""
# the most one turn of in-broker deliveries runs before sockets and timers get theirs
TURN_SLICE = 0.010
# local clients' requests waiting for this broker's services, from which the local
# endpoint stops taking messages
INTAKE_LIMIT = 64
PARENT = -1

log = get_logger("router")


class Links(Protocol):
    """How the router's decisions leave the broker (the overlay and the local endpoint)."""

    def parent_connected(self) -> bool: ...
    def send_parent(self, frames: list[bytes], instance: bool = False) -> None: ...
    def child_state(self, rank: int) -> str: ...
    def send_child(self, rank: int, frames: list[bytes], instance: bool = False) -> bool: ...
    def send_children(self, frames: list[bytes]) -> None: ...
    def send_client(self, ident: bytes, frames: list[bytes], instance: bool = False) -> bool: ...


class ClientState:
    """What the broker remembers about one local client."""

    __slots__ = ("services", "owed", "subscriptions", "pid")

    def __init__(self):
        self.services: set[str] = set()            # services it registered
        # its requests that may still be answered: (matchtag, service, nodeid) -> how many
        self.owed: dict[tuple[int, str, int], int] = {}
        self.subscriptions: list[str] = []
        self.pid: int | None = None


def _next_turn(callback: Callable[[], None]) -> None:
    asyncio.get_running_loop().call_soon(callback)


class Router:
    def __init__(self, *, rank: int, topology: tree.Topology, userid: int, links: Links,
                 later: Callable[[Callable[[], None]], None] = _next_turn):
        self.rank = rank
        self.size = topology.size
        self.topology = topology
        self.userid = userid
        self.links = links
        self.services: dict[str, object] = {}   # name -> in-broker service, or client identity
        self.clients: dict[bytes, ClientState] = {}
        self.tracker = RPCTracker()
        # next hop -> {(route, matchtag): (topic, streaming)}
        self.inflight: dict[object, dict[tuple, tuple[str, bool]]] = {}
        self.subscribers: list[tuple[str, Callable[[Message], None]]] = []
        self.event_seq = 0        # last sequence number published (rank 0) or seen
        # requests that arrive before this rank's services have started wait here:
        # a parent counts a child online at its hello and may send at once, and an
        # answer then (ENOSYS, or none while the hello-ok is still being handled)
        # would be wrong or lost
        self.held: list[tuple[Message, object]] | None = []
        # messages for this broker's services, handed over on a later turn, in order
        self._local: collections.deque = collections.deque()
        self._later = later
        self._turn_asked = False
        self._client_backlog = 0   # local clients' requests among them (busy())

    # ---------------------------------------------------------------- entry
    def deliver(self, msg: Message, source) -> None:
        """Handle a decoded message that arrived from `source` (a hop)."""
        t = msg.type
        if t == m.REQUEST:
            if self.held is not None:
                self.held.append((msg, source))
                return
            if isinstance(source, bytes) and source:
                msg.route = [source]
            else:
                msg.route.append(source)
            self.route_request(msg)
        elif t == m.RESPONSE:
            if not self._untrack(source, msg):
                if isinstance(source, bytes):
                    log.warning("response from a client to no request of its dropped",
                                topic=msg.topic, client=source.hex())
                return
            self.respond(msg)
        elif t == m.EVENT:
            if source == PARENT and self._check_seq(msg.seq):
                self.distribute_event(msg)
        else:
            log.warning("unexpected control message", topic=msg.topic, source=_hop(source))

    def open(self) -> None:
        """This rank's services have started: route the requests held until now."""
        held, self.held = self.held or [], None
        for msg, source in held:
            self.deliver(msg, source)

    # ------------------------------------------------------------- requests
    def route_request(self, msg: Message) -> None:
        nodeid = msg.nodeid
        if nodeid == m.NODEID_ANY or (msg.flags & m.UPSTREAM and nodeid != self.rank):
            target = self.services.get(msg.service)
            if target is not None:
                self._deliver_local(msg, target)
            elif self.rank == 0:
                self._fail(msg, errno.ENOSYS, f"No service matching {msg.topic} is registered")
            else:
                self._send_up(msg)
            return
        if msg.flags & m.UPSTREAM:  # skip this rank's services
            if self.rank == 0:
                self._fail(msg, errno.ENOSYS, f"No service matching {msg.topic} is registered")
            else:
                self._send_up(msg)
            return
        if nodeid == self.rank:
            target = self.services.get(msg.service)
            if target is None:
                self._fail(msg, errno.ENOSYS,
                           f"No service matching {msg.topic} is registered on rank {nodeid}")
            else:
                self._deliver_local(msg, target)
            return
        if not 0 <= nodeid < self.size:
            self._fail(msg, errno.EHOSTUNREACH,
                       f"rank {nodeid} does not exist (instance size is {self.size})")
            return
        hop = self.topology.next_hop(self.rank, nodeid)
        if hop is None:
            self._send_up(msg)
        else:
            self._send_down(hop, msg)

    def _deliver_local(self, msg: Message, target) -> None:
        if isinstance(target, bytes):
            self._track(target, msg)
            self._note_owed(msg)
            if not self.links.send_client(target, m.encode(msg)):
                self.client_gone(target, "client disconnected")
        else:
            route = msg.route
            from_client = len(route) == 1 and type(route[0]) is bytes and route[0] != INTERNAL
            self._client_backlog += from_client
            self._hand_over(self._dispatch, (target, msg, self._note_owed(msg), from_client))

    def _dispatch(self, item: tuple) -> None:
        target, msg, ident, from_client = item
        self._client_backlog -= from_client
        if not target.dispatch(msg) and ident is not None:
            self._settle(ident, msg)   # answered or refused at once: nothing held

    # ----------------------------------------------- this broker's services
    def _hand_over(self, deliver: Callable, item) -> None:
        """Queue `item` for `deliver` on a later turn of the loop."""
        self._local.append((deliver, item))
        if not self._turn_asked:
            self._turn_asked = True
            self._later(self._turn)

    def busy(self) -> bool:
        """Whether enough of local clients' requests wait for this broker's services
        that clients should wait their turn."""
        return self._client_backlog >= INTAKE_LIMIT

    def _turn(self) -> None:
        """Hand over what was queued before this turn; what that leads to is queued
        for the next one, so sockets and timers get their turn in between."""
        self._turn_asked = False
        local = self._local
        deadline = time.monotonic() + TURN_SLICE
        for _ in range(len(local)):
            deliver, item = local.popleft()
            try:
                deliver(item)
            except Exception:
                log.error("local delivery failed", exc_info=True)
            if time.monotonic() >= deadline:
                break   # the rest waits one turn: no request waits behind a long pass
        if local and not self._turn_asked:
            self._turn_asked = True
            self._later(self._turn)

    def _answer_internal(self, msg: Message) -> None:
        if not self.tracker.dispatch(msg):
            log.debug("unmatched internal response", topic=msg.topic, tag=msg.matchtag)

    def _note_owed(self, msg: Message) -> bytes | None:
        """A local client's request that may be answered later (a stream, a wait, one
        that left this broker): until its last answer, the service gets
        `<service>.disconnect` if the client goes.  Flux's connector tells every
        service the client used; one that answered at once holds nothing of it, and
        each job shell would cost rank 0 a disconnect per service.  Returns the
        client, or None for a request of no local client."""
        route = msg.route
        if len(route) == 1 and type(route[0]) is bytes and route[0] \
                and not msg.flags & m.NORESPONSE:   # (a disconnect itself, among others)
            owed = self._client(route[0]).owed
            key = (msg.matchtag, msg.service, msg.nodeid)
            owed[key] = owed.get(key, 0) + 1
            return route[0]
        return None

    def _settle(self, ident: bytes, msg: Message) -> None:
        """The last answer to a request noted by _note_owed (a response carries its
        request's matchtag, topic and nodeid); one never noted changes nothing."""
        st = self.clients.get(ident)
        if st is None:
            return
        key = (msg.matchtag, msg.service, msg.nodeid)
        n = st.owed.get(key)
        if n is not None:
            if n <= 1:
                del st.owed[key]
            else:
                st.owed[key] = n - 1

    def _send_up(self, msg: Message) -> None:
        if not self.links.parent_connected():
            self._fail(msg, errno.EHOSTUNREACH, "no route upstream: not connected to a parent")
            return
        self._track(PARENT, msg)
        self._note_owed(msg)
        self.links.send_parent(m.encode(msg))

    def _send_down(self, child: int, msg: Message) -> None:
        state = self.links.child_state(child)
        if state not in ("online", "torpid"):
            self._fail(msg, errno.EHOSTUNREACH,
                       f"rank {msg.nodeid} is unreachable: rank {child} is {state}")
            return
        self._track(child, msg)
        self._note_owed(msg)
        if not self.links.send_child(child, m.encode(msg)):
            self._untrack(child, msg, force=True)
            self._fail(msg, errno.EHOSTUNREACH,
                       f"rank {msg.nodeid} is unreachable: rank {child} is lost")

    def _fail(self, msg: Message, errnum: int, errstr: str) -> None:
        if msg.flags & m.NORESPONSE:
            return
        self.respond(msg.response(None, errnum, errstr))

    # ------------------------------------------------------------ responses
    def respond(self, msg: Message) -> None:
        """Send a response one hop back along its route."""
        if not msg.route:
            log.debug("response with empty route dropped", topic=msg.topic)
            return
        hop = msg.route.pop()
        if hop == INTERNAL:
            self._hand_over(self._answer_internal, msg)
        elif isinstance(hop, bytes):
            if not msg.flags & m.STREAMING or msg.errnum:   # not a stream's next answer
                self._settle(hop, msg)
            if not self.links.send_client(hop, m.encode(msg), msg.flags & m.INSTANCE):
                self.client_gone(hop, "client disconnected")
        elif hop == PARENT:
            if self.links.parent_connected():
                self.links.send_parent(m.encode(msg), msg.flags & m.INSTANCE)
        else:
            self.links.send_child(hop, m.encode(msg), msg.flags & m.INSTANCE)

    # ------------------------------------------------------ in-flight table
    def _track(self, hop, msg: Message) -> None:
        if msg.flags & m.NORESPONSE:
            return
        self.inflight.setdefault(hop, {})[(tuple(msg.route), msg.matchtag)] = (
            msg.topic, bool(msg.flags & m.STREAMING))

    def _untrack(self, hop, msg: Message, force: bool = False) -> bool:
        """A response came back from `hop`: True if a request was in flight to it
        (a stream stays in flight until its error response ends it)."""
        table = self.inflight.get(hop)
        if not table:
            return False
        key = (tuple(msg.route), msg.matchtag)
        entry = table.get(key)
        if entry is None:
            return False
        if force or not entry[1] or msg.errnum:
            del table[key]
            if not table:
                del self.inflight[hop]
        return True

    def subtree_gone(self, child: int) -> None:
        """A child was lost: streams opened from its subtree end here too."""
        for svc in set(self.services.values()):
            if not isinstance(svc, bytes):
                svc.drop_streams(lambda route, child=child: bool(route) and route[-1] == child)

    def fail_inflight(self, hop, errstr: str) -> None:
        """Everything sent to `hop` and still unanswered fails with EHOSTUNREACH."""
        table = self.inflight.pop(hop, None)
        if not table:
            return
        for (route, tag), (topic, _) in table.items():
            resp = Message(m.RESPONSE, topic, None, matchtag=tag, errnum=errno.EHOSTUNREACH,
                           errstr=errstr, route=list(route))
            self.respond(resp)

    # -------------------------------------------------------- local clients
    def _client(self, ident: bytes) -> ClientState:
        st = self.clients.get(ident)
        if st is None:
            st = self.clients[ident] = ClientState()
        return st

    def client_gone(self, ident: bytes, reason: str) -> None:
        """A local client vanished: fail what waits on it, drop its services and
        subscriptions, and tell each service it talked to (its streams and waits end)."""
        st = self.clients.pop(ident, None)
        self.fail_inflight(ident, reason)
        # its own requests still travelling (their answers have nowhere to go)
        for hop, table in list(self.inflight.items()):
            for key in [k for k in table if k[0][:1] == (ident,)]:
                del table[key]
            if not table:
                del self.inflight[hop]
        if st is None:
            return
        for name in st.services:
            if self.services.get(name) == ident:
                del self.services[name]
                log.debug("service removed", service=name, reason=reason)
        for service, nodeid in dict.fromkeys((svc, nid) for _, svc, nid in st.owed):
            if self.services.get(service) == ident:
                continue
            msg = Message.request(f"{service}.disconnect", None, nodeid=nodeid,
                                  flags=m.NORESPONSE, userid=self.userid, role=m.ROLE_OWNER)
            msg.route = [ident]
            self.route_request(msg)

    def client_gone_by_pid(self, pid: int) -> None:
        for ident, st in list(self.clients.items()):
            if st.pid == pid:
                self.client_gone(ident, f"process {pid} exited")

    def add_client_service(self, ident: bytes, name: str, pid: int | None) -> None:
        if not name or "." in name:
            raise UsageError(f"invalid service name {name!r}")
        owner = self.services.get(name)
        if owner is not None and owner != ident:
            raise AlreadyExists(f"service {name!r} is already registered")
        self.services[name] = ident
        st = self._client(ident)
        st.services.add(name)
        if pid:
            st.pid = pid

    def remove_client_service(self, ident: bytes, name: str) -> None:
        if self.services.get(name) != ident:
            raise NotFound(f"service {name!r} is not registered by this client")
        del self.services[name]
        self._client(ident).services.discard(name)

    def subscribe_client(self, ident: bytes, topic: str) -> None:
        subs = self._client(ident).subscriptions
        if topic not in subs:
            subs.append(topic)

    def unsubscribe_client(self, ident: bytes, topic: str) -> bool:
        """Drop a subscription; False if the client had none to that topic."""
        subs = self._client(ident).subscriptions
        if topic not in subs:
            return False
        subs.remove(topic)
        return True

    # --------------------------------------------------------------- events
    def publish(self, topic: str, payload=None, *, published: bytes | None = None) -> int | None:
        """Publish an event to the whole instance (through rank 0): `payload` a value,
        or `published` a publisher's bytes, kept as they are; on rank 0, its seq."""
        if self.rank == 0:
            self.event_seq += 1
            self.distribute_event(Message.event(topic, payload, self.event_seq, published))
            return self.event_seq
        else:
            self.send_noresponse("event.publish", m.event_publish_payload(
                topic, payload if published is None else published), nodeid=0)

    def distribute_event(self, msg: Message) -> None:
        frames = m.encode(msg)
        self.links.send_children(frames)
        topic = msg.topic
        for prefix, cb in list(self.subscribers):
            if topic.startswith(prefix):
                try:
                    cb(msg)
                except Exception:
                    log.error("event subscriber failed", topic=topic, exc_info=True)
        for ident, st in list(self.clients.items()):
            if any(topic.startswith(p) for p in st.subscriptions):
                if not self.links.send_client(ident, frames):
                    self.client_gone(ident, "client disconnected")

    def _check_seq(self, seq: int) -> bool:
        """False for a duplicate or stale event (dropped); gaps are logged."""
        if self.event_seq and seq <= self.event_seq:
            log.warning("duplicate event dropped", seq=seq)
            return False
        expected = self.event_seq + 1
        if self.event_seq and seq > expected:
            log.warning("lost events", first=expected, last=seq - 1)
        self.event_seq = seq
        return True

    def subscribe(self, prefix: str, callback: Callable[[Message], None]) -> None:
        self.subscribers.append((prefix, callback))

    # ------------------------------------------------------- internal RPCs
    def rpc(self, topic: str, payload=None, *, nodeid=None, streaming: bool = False,
            flags: int = 0) -> PendingRPC:
        pending = self.tracker.new(topic, streaming)
        msg = Message.request(topic, payload,
                              nodeid=m.NODEID_ANY if nodeid is None else nodeid,
                              flags=flags | (m.STREAMING if streaming else 0),
                              matchtag=pending.matchtag, userid=self.userid, role=m.ROLE_OWNER)
        msg.route = [INTERNAL]
        self.route_request(msg)
        return pending

    def send_noresponse(self, topic: str, payload=None, *, nodeid=None) -> None:
        msg = Message.request(topic, payload,
                              nodeid=m.NODEID_ANY if nodeid is None else nodeid,
                              flags=m.NORESPONSE, userid=self.userid, role=m.ROLE_OWNER)
        msg.route = [INTERNAL]
        self.route_request(msg)


def _hop(source) -> str:
    if isinstance(source, bytes):
        return "internal" if source == INTERNAL else f"client:{source.hex()}"
    return "parent" if source == PARENT else f"child:{source}"

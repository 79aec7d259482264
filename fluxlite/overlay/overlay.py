"""One broker's links in the tree: a DEALER to its parent, a ROUTER for its children.

Handshake: a child sends CONTROL `hello` {version, rank, pid, hostname}; the
parent checks that an ipc peer is the instance owner's process (SO_PEERCRED, as
libzmq reports it), the protocol version and that the rank is one of its children,
then answers `hello-ok` (or `disconnect` with a reason, which the child logs
and exits on).

Liveness, both ways:
- every link carries a keepalive each `tbon.keepalive-period` when nothing
  else was sent;
- a connection that closes (the peer process died) is noticed at once: a
  socket-monitor event makes the parent probe its children, and the ROUTER
  (ROUTER_MANDATORY) refuses sends to a vanished child with EHOSTUNREACH;
  a child whose parent connection closes declares its parent lost;
- silence longer than `tbon.torpid-timeout` marks a peer torpid (kept out of
  scheduling, jobs continue); longer than `tbon.lost-timeout`, lost.

Silence is judged only after everything already waiting on the sockets has been
read: if this broker's own loop stalled, its peers' queued keepalives count.

A lost child takes its whole subtree with it; a broker that loses its parent
shuts itself down.  Each broker reports its subtree's membership (online,
torpid, lost, offline ranks) upstream whenever it changes, so rank 0 holds the
whole instance's view for `overlay status`, quorum and the resource service.

The rules of liveness and of merging membership are pure, in liveness.py and
membership.py; peers.py applies them (peers' states, the keepalive timer, the
subtree report); this module keeps the sockets, CURVE and the hello.

The overlay knows no broker: what it learns it reports through the callbacks
in OverlayCallbacks, given at construction (as flux-core's overlay_create()).
"""

from __future__ import annotations

import asyncio
import os
import socket as _socket
import time
from dataclasses import dataclass

import zmq

from ..errors import ConnectFailed, ProtocolError
from ..protocol import message as m
from ..protocol.admission import ConnectionGuard
from ..protocol.frames import monitor_event, peer_uid, recv_frames_auth, recv_frames_from
from ..protocol.message import Message
from ..protocol.transport import Channel
from ..util import fsd, tree
from ..util.log import get_logger
from . import membership as members
from .liveness import OFFLINE, ONLINE, TORPID, Liveness, PeerTimes, Timeouts
from .membership import Membership
from .peers import ChildLink, OverlayCallbacks, PeerStates

log = get_logger("overlay")


@dataclass
class Curve:
    """CURVE keys of this broker's TCP links (Z85 text, 40 bytes each)."""

    public: bytes
    secret: bytes
    parent_public: bytes | None = None         # the key the parent presents
    # keys of the peers that may connect to us, each with the one rank that may use
    # it (PMI bootstrap), or None where every broker shares the key (a certificate)
    allowed: dict[bytes, int | None] | None = None


# connections to the child socket that have not said anything yet, kept at most
# (per peer address on TCP, and in all); the oldest is closed past either
PENDING_PER_ADDRESS, PENDING_LIMIT = 64, 256

HANDSHAKE_FAILED = (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                    | zmq.EVENT_HANDSHAKE_FAILED_AUTH)


class Overlay(PeerStates):
    """One broker's links: its sockets, CURVE, the hello, sends and receives;
    its peers' states are driven by PeerStates (peers.py)."""

    def __init__(self, *, rank: int, topology: tree.Topology, ctx: zmq.Context,
                 bind_endpoint: str | None, parent_endpoint: str | None, timeouts: Timeouts,
                 callbacks: OverlayCallbacks, max_message: int, curve: Curve | None = None,
                 insecure: bool = False, bind_fd: int | None = None):
        self.cb = callbacks
        self.bind_fd = bind_fd       # a listening TCP socket made before (PMI bootstrap)
        self.curve = curve
        self.insecure = insecure     # plain TCP (tests only): refused unless asked for
        self.zap = None
        self.ctx = ctx
        self.rank = rank
        self.size = topology.size
        self.topology = topology
        self.max_message = max_message
        self.bind_endpoint = bind_endpoint
        self.parent_endpoint = parent_endpoint
        self.child_ranks = topology.children(self.rank)
        self.children = {r: ChildLink(r) for r in self.child_ranks}
        for c in self.children.values():
            c.report = {OFFLINE: {c.rank, *topology.descendants(c.rank)}}
        self.by_ident: dict[bytes, ChildLink] = {}
        self.down: Channel | None = None
        self.up: Channel | None = None
        self._monitors: list[Channel] = []
        self.parent_state = OFFLINE if self.rank else ONLINE
        self.parent_times = PeerTimes()
        self._hello_done: asyncio.Future | None = None
        self._report_pending = False
        self._last_report: dict | None = None
        self._timer: asyncio.Task | None = None
        self.shutting_down = False
        self.started = time.time()
        # whole-instance membership (meaningful on rank 0): rank -> state, and since when
        self.members = Membership(clock=time.time)
        self.membership = self.members.states
        self.membership_since = self.members.since
        self.hostname = _socket.gethostname()
        self._accepted: dict[int, str | None] = {}   # TCP descriptor -> peer address
        self._handshake_failures: list[int] = []      # failed, not yet closed
        self.liveness = Liveness(timeouts, clock=time.monotonic)
        self.set_timeouts(timeouts)

    def set_timeouts(self, t: Timeouts) -> None:
        self.liveness.timeouts = t
        self.keepalive_period = t.keepalive
        self.lost_timeout = t.lost
        self.connect_timeout = t.connect

    # ------------------------------------------------------------ sockets
    def bind(self) -> None:
        if not self.child_ranks:
            return
        sock = self.ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, self.max_message)
        sock.setsockopt(zmq.LINGER, 200)
        if self.bind_endpoint.startswith("tcp://"):
            self._secure_server(sock)
            if self.bind_fd is not None:
                sock.setsockopt(zmq.USE_FD, self.bind_fd)   # ZeroMQ owns it from here
        tcp = self.bind_endpoint.startswith("tcp://")
        # children say hello at once: a connection that does not is bounded
        self.guard = ConnectionGuard(
            "overlay", pending=PENDING_LIMIT,
            per_address=PENDING_PER_ADDRESS if tcp else None,
            address_of=_peer_address if tcp else None)
        self._watch(sock, zmq.EVENT_DISCONNECTED | zmq.EVENT_ACCEPTED | HANDSHAKE_FAILED,
                    self._on_child_event)
        old = os.umask(0o077)  # an ipc socket only this user may connect to
        try:
            sock.bind(self.bind_endpoint)
        finally:
            os.umask(old)
        self.down = Channel(sock, self._on_child_frames,
                            recv=recv_frames_auth if self.zap is not None else recv_frames_from)
        self.bind_endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)  # tcp port "*"

    def _watch(self, sock: zmq.Socket, events: int, cb) -> None:
        mon = sock.get_monitor_socket(events=events)
        def on_frames(frames, cb=cb):
            try:
                event, value = monitor_event(frames)
            except ValueError:
                return
            cb(event, value)
        self._monitors.append(Channel(mon, on_frames))

    async def join(self) -> None:
        """Connect to the parent and complete the hello; raises ConnectFailed on refusal."""
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.IDENTITY, os.urandom(8))
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, self.max_message)
        sock.setsockopt(zmq.LINGER, 500)
        sock.setsockopt(zmq.RECONNECT_IVL, 10)
        sock.setsockopt(zmq.RECONNECT_IVL_MAX, 200)
        if self.parent_endpoint.startswith("tcp://"):
            self._secure_client(sock)
        self._watch(sock, zmq.EVENT_DISCONNECTED, self._on_parent_disconnect)
        sock.connect(self.parent_endpoint)
        self.up = Channel(sock, self._on_parent_frames)
        self._hello_done = asyncio.get_running_loop().create_future()
        self._send_parent_control("hello", {"version": m.PROTOCOL_VERSION, "rank": self.rank,
                                            "pid": os.getpid(), "hostname": self.hostname})
        try:
            await asyncio.wait_for(self._hello_done, self.connect_timeout)
        except TimeoutError:
            raise ConnectFailed(
                f"parent did not accept us within {fsd.format(self.connect_timeout)}") from None
        self.parent_state = ONLINE
        self.liveness.seen(self.parent_times)
        self.schedule_report()

    def _secure_server(self, sock: zmq.Socket) -> None:
        """A TCP child socket is a CURVE server whose clients ZAP checks; plain TCP
        only when the instance was started insecure (tests)."""
        if self.curve is None:
            if self.insecure:
                return
            raise ConnectFailed("a TCP overlay needs a CURVE certificate (see `fluxlite "
                                "keygen`); plain TCP only with the insecure test flag")
        from .zap import DOMAIN, ZapHandler
        self.zap = ZapHandler(self.ctx, self.curve.allowed or {self.curve.public: None})
        sock.setsockopt(zmq.ZAP_DOMAIN, DOMAIN)
        sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
        sock.setsockopt(zmq.CURVE_SERVER, 1)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.curve.public)
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.curve.secret)

    def _secure_client(self, sock: zmq.Socket) -> None:
        if self.curve is None:
            if self.insecure:
                return
            raise ConnectFailed("a TCP overlay needs a CURVE certificate (see `fluxlite "
                                "keygen`); plain TCP only with the insecure test flag")
        sock.setsockopt(zmq.CURVE_SERVERKEY, self.curve.parent_public or self.curve.public)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, self.curve.public)
        sock.setsockopt(zmq.CURVE_SECRETKEY, self.curve.secret)
        # a cut link is noticed by the keepalives; TCP gives up on unacknowledged
        # data after the lost timeout too, so a send never hangs longer
        if self.lost_timeout:
            sock.setsockopt(zmq.TCP_MAXRT, int(self.lost_timeout * 1000))

    def start_timer(self) -> None:
        self.schedule_report()
        self._timer = asyncio.get_running_loop().create_task(self._keepalive_loop())

    def close(self) -> None:
        if self._timer:
            self._timer.cancel()
        for ch in self._monitors:
            ch.close()
        if self.zap is not None:
            self.zap.close()
        for ch in (self.down, self.up):
            if ch is not None:
                ch.close()

    # ------------------------------------------------------------- sends
    def parent_connected(self) -> bool:
        return self.up is not None and self.parent_state == ONLINE

    def send_parent(self, frames: list[bytes]) -> None:
        if self.up is None:
            return
        self.liveness.sent(self.parent_times)
        try:
            self.up.send(frames)
        except zmq.ZMQError as exc:
            log.warning("send to parent failed", error=str(exc))

    def _send_parent_control(self, topic: str, payload=None) -> None:
        self.send_parent(m.encode(Message.control(topic, payload)))

    def send_child(self, rank: int, frames: list[bytes]) -> bool:
        """Send to a direct child; False (and the child is lost) if it has vanished."""
        c = self.children.get(rank)
        if c is None or c.ident is None or c.state not in (ONLINE, TORPID):
            return False
        try:
            self.down.send([c.ident] + frames)
        except zmq.ZMQError as exc:
            if exc.errno == zmq.EHOSTUNREACH:
                self._child_lost(c, "lost connection")
                return False
            log.warning("send to child failed", child=rank, error=str(exc))
            return False
        self.liveness.sent(c)
        return True

    def _send_child_control(self, c: ChildLink, topic: str, payload=None) -> bool:
        return self.send_child(c.rank, m.encode(Message.control(topic, payload)))

    def send_children(self, frames: list[bytes]) -> None:
        for c in self.children.values():
            if c.state in (ONLINE, TORPID):
                self.send_child(c.rank, frames)

    # ----------------------------------------------------------- receives
    def _on_child_frames(self, got) -> None:
        frames, peer, fd, *user = got
        self.guard.spoke(fd)
        if len(frames) < 2:
            return
        ident = frames[0]
        try:
            msg = m.decode(frames[1:], self.max_message)
        except ProtocolError as exc:
            c = self.by_ident.get(ident)
            log.warning("malformed message dropped", peer=f"rank {c.rank}" if c else "unknown",
                        error=exc.message)
            return
        c = self.by_ident.get(ident)
        if c is None:
            if msg.type == m.CONTROL and msg.topic == "hello":
                self._on_hello(ident, msg, peer_uid(peer), user[0] if user else None)
            else:
                self._refuse(ident, "message from a peer that has not said hello")
            return
        self.liveness.seen(c)
        if c.state == TORPID:
            log.info("broker is responsive now", peer=c.rank)
            c.state = ONLINE
            self.schedule_report()
        if msg.type == m.CONTROL:
            self._on_child_control(c, msg)
        else:
            self.cb.message(msg, c.rank)

    def _refuse(self, ident: bytes, reason: str) -> None:
        try:
            self.down.send([ident] + m.encode(Message.control("disconnect", {"reason": reason})))
        except zmq.ZMQError:
            pass

    def _on_hello(self, ident: bytes, msg: Message, uid: int | None,
                  key_user: str | None = None) -> None:
        """A child's hello.  `key_user` is what ZAP said of the key the connection
        authenticated with: "rank:N" when the key is good for rank N only."""
        if uid is not None and uid != os.getuid():
            # an ipc peer of another user (only root could reach the socket) is no broker
            # of this instance, whatever its hello says
            log.error("hello refused: not the instance owner", peer_uid=uid)
            self._refuse(ident, f"uid {uid} may not join: the instance belongs to uid "
                                f"{os.getuid()}")
            return
        try:
            p = msg.payload if isinstance(msg.payload, dict) else {}
        except ProtocolError:
            p = {}
        version, rank = p.get("version"), p.get("rank")
        if version != m.PROTOCOL_VERSION:
            log.error("hello refused: protocol version mismatch", peer_version=version,
                      version=m.PROTOCOL_VERSION, peer=rank)
            self._refuse(ident, f"protocol version {version!r} does not match "
                                f"this broker's version {m.PROTOCOL_VERSION}")
            return
        c = self.children.get(rank) if type(rank) is int else None
        if c is None:
            log.error("hello refused: not a child of this rank", peer_rank=rank)
            self._refuse(ident, f"rank {rank!r} is not a child of rank {self.rank}: "
                                "mismatched topology?")
            return
        if key_user and key_user.startswith("rank:") and key_user != f"rank:{rank}":
            log.error("hello refused: the key is another rank's", peer_rank=rank,
                      key=key_user)
            self._refuse(ident, f"this connection's key belongs to {key_user.replace(':', ' ')}, "
                                f"not to rank {rank}")
            return
        if self.shutting_down:
            self._refuse(ident, f"rank {self.rank} is shutting down")
            return
        if c.state in (ONLINE, TORPID) and c.ident != ident:
            # a second hello for a rank: the rank online keeps its place unless its
            # connection is gone (a broker restarted after a crash)
            if self._send_child_control(c, "keepalive"):
                log.error("hello refused: that rank is online on another connection",
                          peer_rank=rank)
                self._refuse(ident, f"rank {rank} is online on another connection")
                return
            log.warning("broker reconnected after crash, dropping old connection state",
                        peer=rank)
            self._child_lost(c, "reconnected after crash")
        if c.ident is not None:
            self.by_ident.pop(c.ident, None)
        c.ident = ident
        c.pid = p.get("pid", 0)
        c.hostname = str(p.get("hostname", ""))
        c.state = ONLINE
        c.since = time.time()
        self.liveness.seen(c)
        c.error = ""
        c.report = {ONLINE: {rank}, OFFLINE: set(self.topology.descendants(rank))}
        self.by_ident[ident] = c
        log.debug("accepting connection", peer=rank, hostname=c.hostname)
        self._send_child_control(c, "hello-ok", {"rank": self.rank})
        self.schedule_report()

    def _on_child_control(self, c: ChildLink, msg: Message) -> None:
        topic = msg.topic
        if topic == "keepalive":
            return
        if topic == "status":
            p = msg.payload
            if isinstance(p, dict):
                # a child speaks for its own subtree only: ranks outside it are ignored
                mine = {c.rank, *self.topology.descendants(c.rank)}
                try:
                    c.report = members.child_report(p, mine, self.size)
                except ValueError:
                    log.warning("malformed status report dropped", peer=c.rank)
                    return
                self.schedule_report()
        elif topic == "goodbye":
            self._child_offline(c, "administrative shutdown")
        else:
            log.debug("unknown control from child", peer=c.rank, topic=topic)

    def _on_parent_frames(self, frames: list[bytes]) -> None:
        try:
            msg = m.decode(frames, self.max_message)
        except ProtocolError as exc:
            log.warning("malformed message from parent dropped", error=exc.message)
            return
        self.liveness.seen(self.parent_times)
        if msg.type == m.CONTROL:
            self._on_parent_control(msg)
            return
        if self._hello_done is None or not self._hello_done.done():
            log.debug("message received before hello handshake completed", topic=msg.topic)
            return
        self.cb.message(msg, -1)

    def _on_parent_control(self, msg: Message) -> None:
        topic = msg.topic
        if topic == "keepalive":
            return
        if topic == "hello-ok":
            if self._hello_done is not None and not self._hello_done.done():
                self._hello_done.set_result(True)
        elif topic == "disconnect":
            reason = (msg.payload or {}).get("reason", "") if isinstance(msg.payload, dict) else ""
            if self._hello_done is not None and not self._hello_done.done():
                log.error("parent refused connection", reason=reason)
                self._hello_done.set_exception(ConnectFailed(f"parent refused us: {reason}"))
            else:
                log.critical("parent sent disconnect", reason=reason)
                self._parent_lost(f"parent sent disconnect: {reason}")
        elif topic == "shutdown":
            self.cb.shutdown("parent is shutting down")

    # ------------------------------------------------------ liveness

    def _on_child_event(self, event: int, value: int) -> None:
        """The child socket's monitor.  Every accepted connection (the event's value
        is its descriptor) is bounded by the guard until it speaks.  On TCP, a peer
        whose CURVE handshake fails before ZAP is asked (it holds another
        certificate, so it encrypted to another server key) is refused by libzmq
        alone, and the event names no peer: its address is taken when the
        connection is accepted and logged when that connection closes after a
        failed handshake."""
        if event == zmq.EVENT_ACCEPTED:
            self.guard.accepted(value)
            if self.zap is not None:
                entry = self.guard.pending.get(value)
                self._accepted[value] = entry[1] if entry else _peer_address(value)
        elif event & HANDSHAKE_FAILED:
            if self.zap is not None:
                self._handshake_failures.append(event)
        elif event == zmq.EVENT_DISCONNECTED:
            ours = self.guard.closed(value)
            address = self._accepted.pop(value, None)
            if self._handshake_failures:
                failed = self._handshake_failures.pop(0)
                # ZAP logs the peers it refuses itself; the guard those it closed
                if failed != zmq.EVENT_HANDSHAKE_FAILED_AUTH and address and self.zap \
                        and not ours:
                    self.zap.refused_handshake(address)
            self._on_child_disconnect_hint(event, value)

    # ------------------------------------------------------ shutdown
    def shutdown_children(self) -> None:
        self.shutting_down = True
        for c in self.children.values():
            if c.state in (ONLINE, TORPID):
                self._send_child_control(c, "shutdown")

    def goodbye(self) -> None:
        if self.parent_connected():
            self._send_parent_control("goodbye")
            self.parent_state = OFFLINE


def _peer_address(fd: int) -> str | None:
    """The remote address of the TCP connection on descriptor `fd` (libzmq's), or
    None if it is already closed."""
    try:
        dup = os.dup(fd)
    except OSError:
        return None
    try:
        with _socket.socket(fileno=dup) as s:
            return s.getpeername()[0]
    except OSError:
        return None

"""The local endpoint: the socket clients on this machine connect to, and who they are.

One ROUTER socket bound at `ipc://<rundir>/local-<rank>`, created owner-only
(umask 077 while binding, then mode 0600) inside a 0700 run directory.  For
every message the endpoint reads the sender's credentials from the connection
itself (libzmq reports an ipc peer's uid from SO_PEERCRED) and stamps them on
the message: the instance owner gets role owner; any other uid (only root
could reach the socket) is a guest, as Flux's `[access]` table says
(`role_of`): root gets role owner with `allow-root-owner`, a guest role user
with `allow-guest-user`, and otherwise no role, so that every service refuses
it (EPERM).  Whatever userid or role a client wrote in its header is replaced:
credentials come from the connection, never from the message.

Bounds, so that no client can grow this broker's memory without limit:
- a message larger than `broker.max-message-size` is refused by libzmq
  (ZMQ_MAXMSGSIZE: the connection is closed, the message never buffered whole);
- at most `broker.client-queue` messages, and `broker.client-queue-bytes` bytes
  it has not acknowledged reading (a client says `ack {bytes}` every
  ACK_BYTES it reads), wait for one client.  A client that lets that many pile
  up without reading is dropped: the broker
  forgets it as if it had disconnected (its streams and waits end, its RPCs in
  flight fail), and it is sent a `disconnect` control message with the reason as
  soon as it reads again, however long that takes, so its handle fails every RPC
  instead of hanging (the requests it sent after the drop, which were not taken,
  as refused);
- nothing is taken from clients while many of their requests wait for this
  broker's services (`busy`, Router.busy): requests wait in their senders'
  sockets until the broker can handle them, so a client's flood costs this
  broker a bounded backlog, and one dropped for not reading leaves its
  requests not taken.

- at most PENDING_LIMIT connections that have not sent a message are kept
  (the oldest is closed), and none is accepted when descriptors run short
  (protocol/admission.py): a broker never runs out of descriptors.

A client killed without a word is noticed when its connection closes: the
endpoint then probes every client it knows with a `keepalive` control message,
which the vanished one's socket refuses (see docs/protocol.md section 3).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

import zmq

from ..errors import ProtocolError
from ..protocol import message as m
from ..protocol.admission import ConnectionGuard
from ..protocol.frames import monitor_event, peer_uid, recv_frames_from
from ..protocol.message import Message
from ..protocol.transport import Channel
from ..util.log import get_logger

log = get_logger("local")

# ZeroMQ drops a closed connection's pipe a moment after reporting it, so the
# clients are probed a little later (one probe for a burst of disconnects)
PROBE_DELAY = 0.05
# a dropped slow client's `disconnect` is retried this often until it is sent or the
# connection closes: a client stopped for any time learns it was dropped when it resumes
_OVERFLOW_RETRY = 0.25
# connections that have not sent a message yet, kept at most (the oldest is closed)
PENDING_LIMIT = 256


def role_of(uid: int, owner: int, *, guests: bool, root_owner: bool) -> int:
    """The role of a client of `uid` (Flux's access.allow-guest-user and
    allow-root-owner): 0, no role at all, for a guest the instance does not admit."""
    if uid == owner or (uid == 0 and root_owner):
        return m.ROLE_OWNER
    return m.ROLE_USER if guests else 0


class LocalEndpoint:
    def __init__(self, ctx: zmq.Context, path: str, *, owner: int, max_message: int,
                 queue_limit: int, on_message: Callable[[Message, bytes], None],
                 on_client_gone: Callable[[bytes, str], None],
                 known_clients: Callable[[], list[bytes]], byte_limit: int = 64 << 20,
                 busy: Callable[[], bool] | None = None,
                 allow_guest_user: bool = False, allow_root_owner: bool = False):
        self.path = path
        self.owner = owner
        self.allow_guest_user = allow_guest_user
        self.allow_root_owner = allow_root_owner
        self.max_message = max_message
        self.queue_limit = queue_limit
        self.byte_limit = byte_limit
        # bytes sent to each client that it has not said it read (its `ack`s)
        self.unread: dict[bytes, int] = {}
        self.on_message = on_message            # (msg, ident): a request or response
        self.on_client_gone = on_client_gone    # (ident, reason)
        self.known_clients = known_clients      # the identities the router remembers
        sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        sock.setsockopt(zmq.SNDHWM, queue_limit)
        sock.setsockopt(zmq.RCVHWM, queue_limit)
        sock.setsockopt(zmq.MAXMSGSIZE, max_message)
        sock.setsockopt(zmq.LINGER, 0)
        old = os.umask(0o077)
        try:
            sock.bind("ipc://" + path)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        self.sock = sock
        # nothing is taken while the broker is `busy` (many requests wait in the router)
        self.channel = Channel(sock, self._on_frames, recv=recv_frames_from, hold=busy)
        # connections that never speak are bounded (any owner process may open them)
        self.guard = ConnectionGuard("local", pending=PENDING_LIMIT)
        # a client killed without saying goodbye: only its connection closing tells us
        self.monitor = Channel(sock.get_monitor_socket(
            events=zmq.EVENT_DISCONNECTED | zmq.EVENT_ACCEPTED), self._on_monitor)
        self._probe_timer: asyncio.TimerHandle | None = None
        self._last_disconnect = 0.0
        # ident -> [reason, matchtag of the first request not taken since (or None)]
        self._overflowed: dict[bytes, list] = {}
        self._overflow_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------ receiving
    def _on_frames(self, got) -> None:
        frames, peer, fd = got
        self.guard.spoke(fd)
        if len(frames) != 3:
            log.warning("malformed message from local client dropped", nframes=len(frames))
            return
        ident = frames[0]
        try:
            msg = m.decode(frames[1:], self.max_message)
        except ProtocolError as exc:
            log.warning("malformed message from local client dropped", error=exc.message,
                        client=ident.hex())
            return
        uid = peer_uid(peer)
        if uid is None:  # not an ipc peer: no credentials, no rights
            log.warning("message from a client without credentials dropped",
                        client=ident.hex(), peer=str(peer))
            return
        msg.userid = uid
        msg.role = role_of(uid, self.owner, guests=self.allow_guest_user,
                           root_owner=self.allow_root_owner)
        if msg.type == m.CONTROL:
            if msg.topic == "ack":
                # the client read that many bytes of what was sent to it
                n = msg.payload.get("bytes") if isinstance(msg.payload, dict) else None
                if type(n) is int and n > 0 and ident in self.unread:
                    self.unread[ident] = max(0, self.unread[ident] - n)
            elif msg.topic == "disconnect":
                self.unread.pop(ident, None)
                self.on_client_gone(ident, "client closed its connection")
            return
        if msg.type == m.EVENT:
            log.warning("event from local client dropped (publish with event.publish)")
            return
        dropped = self._overflowed.get(ident)
        if dropped is not None:
            # dropped as too slow: nothing more is taken; its `disconnect` will say
            # from which request on nothing was (matchtags rise in sending order)
            if dropped[1] is None and msg.type == m.REQUEST \
                    and not msg.flags & m.NORESPONSE:
                dropped[1] = msg.matchtag
            return
        self.on_message(msg, ident)

    # -------------------------------------------------------------- sending
    def send(self, ident: bytes, frames: list[bytes]) -> bool:
        """Send to a client; False if it is gone (or was just dropped as too slow)."""
        if ident in self._overflowed:
            return False
        unread = self.unread.get(ident, 0) + sum(map(len, frames))
        if unread > self.byte_limit:
            self._drop_slow(ident, f"{self.byte_limit} bytes were waiting for it "
                                   "(broker.client-queue-bytes)")
            return False
        try:
            self.channel.send([ident] + frames)
        except zmq.Again:
            self._drop_slow(ident, f"{self.queue_limit} messages were waiting for it "
                                   "(broker.client-queue)")
            return False
        except zmq.ZMQError:
            self.unread.pop(ident, None)
            return False
        self.unread[ident] = unread
        return True

    def _drop_slow(self, ident: bytes, what: str) -> None:
        reason = f"client too slow: {what}"
        self.unread.pop(ident, None)
        log.warning("dropping a client that does not read", client=ident.hex(),
                    reason=reason)
        self._overflowed[ident] = [reason, None]
        self._arm_overflow()

    def _arm_overflow(self) -> None:
        if self._overflow_timer is None and self._overflowed:
            self._overflow_timer = asyncio.get_running_loop().call_later(
                _OVERFLOW_RETRY, self._retry_overflowed)

    def _retry_overflowed(self) -> None:
        """Tell each dropped client why, once it has room to hear it."""
        self._overflow_timer = None
        for ident, (reason, refused_from) in list(self._overflowed.items()):
            p = {"reason": reason}
            if refused_from is not None:
                p["refused_from"] = refused_from
            try:
                self.channel.send([ident] + m.encode(Message.control("disconnect", p)))
            except zmq.Again:
                continue        # still not reading: try again
            except zmq.ZMQError:
                pass            # its connection closed
            del self._overflowed[ident]
        self._arm_overflow()

    # ------------------------------------------------------------- liveness
    def _on_monitor(self, frames: list[bytes]) -> None:
        try:
            event, fd = monitor_event(frames)
        except ValueError:
            return
        if event == zmq.EVENT_ACCEPTED:
            self.guard.accepted(fd)
            return
        self.guard.closed(fd)
        self._last_disconnect = time.monotonic()
        self._schedule_probe()

    def _schedule_probe(self) -> None:
        if self._probe_timer is None:
            self._probe_timer = asyncio.get_running_loop().call_later(PROBE_DELAY,
                                                                      self._probe)

    def _probe(self) -> None:
        self._probe_timer = None
        self.probe_clients()
        if time.monotonic() - self._last_disconnect < PROBE_DELAY / 2:
            self._schedule_probe()  # one that closed just now may not be dropped yet

    def probe_clients(self) -> None:
        """Send every remembered client a `keepalive`; one that vanished without a
        goodbye (killed) refuses it and is forgotten (clients ignore control messages)."""
        frames = m.encode(Message.control("keepalive"))
        for ident in self.known_clients():
            try:
                self.channel.send([ident] + frames)
            except zmq.Again:
                pass  # alive but not reading: the queue limit decides
            except zmq.ZMQError:
                self.unread.pop(ident, None)
                self.on_client_gone(ident, "client connection closed")

    def close(self, linger: int = 100) -> None:
        for t in (self._probe_timer, self._overflow_timer):
            if t is not None:
                t.cancel()
        self.monitor.close()
        # answers already queued (e.g. to `fluxlite shutdown`) get a moment to leave
        self.channel.close(linger=linger)

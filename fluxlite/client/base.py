"""What both handles share: building and sending requests, answering, and
routing what arrives (responses to their RPC, requests to a registered
service, events to a subscriber).  A handle only says how frames leave
(`_transmit`) and how it waits; see sync.py and aio.py."""

from __future__ import annotations

import errno

import zmq

from ..errors import FluxliteError, HostUnreachable
from ..protocol import message as m
from ..protocol.message import Message
from ..protocol.rpc import PendingRPC, RPCTracker
from .connect import credentials, not_a_client_socket

# a handle tells the broker it read this many bytes (the broker's byte bound per client)
ACK_BYTES = 1 << 20


class HandleCore:
    def __init__(self):
        self.userid, self.role = credentials()
        self.tracker = RPCTracker()
        self.on_event = None    # callback(Message) for subscribed events
        self.on_request = None  # callback(Message) for requests to a service we registered
        self.connected = False
        self.answered = False   # a message came from the broker
        self.uri: str | None = None
        self._unacked = 0       # bytes received since the last `ack`
        self.request_flags = 0  # flags every request carries (a job shell's: INSTANCE)

    def _transmit(self, frames: list[bytes]) -> None:
        raise NotImplementedError

    def _send(self, msg: Message) -> None:
        if not self.connected:
            raise HostUnreachable("connection to broker lost")
        self._transmit(m.encode(msg))

    def _request(self, topic: str, payload, nodeid: int | None, flags: int,
                 matchtag: int = 0) -> Message:
        return Message.request(topic, payload, nodeid=m.NODEID_ANY if nodeid is None else nodeid,
                               flags=flags | self.request_flags, matchtag=matchtag,
                               userid=self.userid, role=self.role)

    def rpc(self, topic: str, payload=None, *, nodeid: int | None = None,
            streaming: bool = False, flags: int = 0) -> PendingRPC:
        """Send a request; the PendingRPC collects its response(s)."""
        pending = self.tracker.new(topic, streaming)
        msg = self._request(topic, payload, nodeid, flags | (m.STREAMING if streaming else 0),
                            pending.matchtag)
        try:
            self._send(msg)
        except FluxliteError:
            self.tracker.forget(pending.matchtag)
            raise
        return pending

    def send(self, topic: str, payload=None, *, nodeid: int | None = None) -> None:
        """A request that wants no response."""
        self._send(self._request(topic, payload, nodeid, m.NORESPONSE))

    def respond(self, req: Message, payload=None, errnum: int = 0, errstr: str = "") -> None:
        if req.flags & m.NORESPONSE or not self.connected:
            return
        self._send(req.response(payload, errnum, errstr))

    def send_message(self, msg: Message) -> None:
        """Send a message already built (a response from a service this client serves)."""
        self._send(msg)

    def _deliver(self, frames: list[bytes]) -> None:
        # what was read is acknowledged now and then: the broker holds at most
        # broker.client-queue-bytes that this client has not read
        self._unacked += sum(map(len, frames))
        if self._unacked >= ACK_BYTES and self.connected:
            n, self._unacked = self._unacked, 0
            try:
                self._transmit(m.encode(Message.control("ack", {"bytes": n})))
            except (FluxliteError, zmq.ZMQError):
                pass            # the connection is going: its end says the rest
        try:
            msg = m.decode(frames)
        except FluxliteError:
            return
        answered, self.answered = self.answered, True
        if msg.type == m.RESPONSE:
            self.tracker.dispatch(msg)
        elif msg.type == m.REQUEST:
            if self.on_request is not None:
                self.on_request(msg)
            else:
                self.respond(msg, None, errno.ENOSYS, f"no handler for {msg.topic}")
        elif msg.type == m.EVENT and self.on_event is not None:
            self.on_event(msg)
        elif msg.type == m.CONTROL and msg.topic == "disconnect":
            # the broker dropped this connection (e.g. it did not read fast enough)
            p = msg.payload if isinstance(msg.payload, dict) else {}
            why = p.get('reason') or 'no reason'
            if not answered:  # refused at once: not a socket where clients are served
                self._lost(f"{not_a_client_socket(self.uri or self.endpoint)} (the broker "
                           f"refused this connection: {why})")
            else:
                refused_from = p.get("refused_from")
                if type(refused_from) is int and self.connected:
                    # requests from that matchtag on reached the broker after the drop
                    # and were not taken: refused, not lost
                    self.tracker.fail_from(refused_from, errno.ECONNREFUSED,
                                           f"request refused, not carried out: the broker "
                                           f"dropped this connection: {why}")
                self._lost(f"the broker dropped this connection: {why}")

    def _lost(self, reason: str = "connection to broker lost") -> None:
        if not self.answered:
            # nothing ever answered: no connection was lost, none was made
            reason = (f"no instance answering at {self.uri or self.endpoint}: the "
                      "connection closed before any answer (is it a fluxlite instance's "
                      "URI?)")
        if self.connected:
            self.connected = False
            self.tracker.fail_all(errno.EHOSTUNREACH, reason)

    def _goodbye(self) -> list[bytes]:
        return m.encode(Message.control("disconnect"))

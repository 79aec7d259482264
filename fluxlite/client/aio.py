"""The asyncio handle: what job shells (and tests) use to talk to their broker.

Same RPC core as the blocking handle (rpc.py), driven by the event loop
through the shared transport Channel.  Besides RPCs it can register a service
(requests for it arrive at `on_request`) and receive subscribed events.
"""

from __future__ import annotations

import asyncio
import errno
import os

import zmq

from ..errors import FluxliteError
from ..protocol import message as m
from ..protocol.message import Message
from ..protocol.transport import Channel
from .connect import credentials, resolve_uri
from .rpc import PendingRPC, RPCTracker


class AsyncHandle:
    def __init__(self, uri: str | None = None, ctx: zmq.Context | None = None, *,
                 monitor: bool = True):
        self.endpoint = resolve_uri(uri)
        self.ctx = ctx or zmq.Context()
        self._own_ctx = ctx is None
        self.userid, self.role = credentials()
        self.tracker = RPCTracker()
        self.on_event = None
        self.on_request = None
        self.connected = False
        self.lost = asyncio.Event()
        self.monitor = monitor  # notice the broker going away (job shells need not: they die with it)

    async def connect(self) -> "AsyncHandle":
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 2000)
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        if self.monitor:
            mon = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
            self.mon = Channel(mon, lambda frames: self._lost())
        sock.connect(self.endpoint)
        self.sock = Channel(sock, self._on_frames)
        self.connected = True
        return self

    def _on_frames(self, frames: list[bytes]) -> None:
        try:
            msg = m.decode(frames)
        except FluxliteError:
            return
        if msg.type == m.RESPONSE:
            self.tracker.dispatch(msg)
        elif msg.type == m.REQUEST:
            if self.on_request is not None:
                self.on_request(msg)
            elif not msg.flags & m.NORESPONSE:
                self.respond(msg, None, errno.ENOSYS, f"no handler for {msg.topic}")
        elif msg.type == m.EVENT and self.on_event is not None:
            self.on_event(msg)

    def _lost(self) -> None:
        if self.connected:
            self.connected = False
            self.tracker.fail_all(errno.EHOSTUNREACH, "connection to broker lost")
            self.lost.set()

    def _send(self, msg: Message) -> None:
        if not self.connected:
            raise FluxliteError("connection to broker lost", errno.EHOSTUNREACH)
        self.sock.send(m.encode(msg))

    def rpc(self, topic: str, payload=None, *, nodeid: int | None = None,
            streaming: bool = False, flags: int = 0) -> PendingRPC:
        pending = self.tracker.new(topic, streaming)
        self._send(Message.request(topic, payload,
                                   nodeid=m.NODEID_ANY if nodeid is None else nodeid,
                                   flags=flags | (m.STREAMING if streaming else 0),
                                   matchtag=pending.matchtag, userid=self.userid,
                                   role=self.role))
        return pending

    async def call(self, topic: str, payload=None, *, nodeid: int | None = None,
                   timeout: float | None = None):
        p = self.rpc(topic, payload, nodeid=nodeid)
        if timeout is None:
            return await p.get()
        return await asyncio.wait_for(p.get(), timeout)

    def send(self, topic: str, payload=None, *, nodeid: int | None = None) -> None:
        self._send(Message.request(topic, payload,
                                   nodeid=m.NODEID_ANY if nodeid is None else nodeid,
                                   flags=m.NORESPONSE, userid=self.userid, role=self.role))

    def respond(self, req: Message, payload=None, errnum: int = 0, errstr: str = "") -> None:
        if req.flags & m.NORESPONSE or not self.connected:
            return
        self._send(req.response(payload, errnum, errstr))

    async def register_service(self, name: str) -> None:
        await self.call("broker.service-add", {"name": name, "pid": os.getpid()})

    async def subscribe(self, topic: str) -> None:
        await self.call("broker.subscribe", {"topic": topic})

    def close(self) -> None:
        if self.connected:
            try:
                self.sock.send(m.encode(Message.control("disconnect")))
            except zmq.ZMQError:
                pass
        self.connected = False
        for ch in (getattr(self, "mon", None), getattr(self, "sock", None)):
            if ch is not None:
                ch.close()
        if self._own_ctx:
            self.ctx.term()

"""The asyncio handle: what job shells (and tests) use to talk to their broker.

Same RPC core as the blocking handle (rpc.py), driven by the event loop
through the shared transport Channel.  Besides RPCs it can register a service
(requests for it arrive at `on_request`) and receive subscribed events.
"""

from __future__ import annotations

import asyncio

import zmq

from ..protocol.transport import Channel
from .base import HandleCore
from .connect import resolve_uri


class AsyncHandle(HandleCore):
    def __init__(self, uri: str | None = None, ctx: zmq.Context | None = None, *,
                 monitor: bool = True):
        super().__init__()
        self.uri = uri
        self.endpoint = resolve_uri(uri)
        self.ctx = ctx or zmq.Context()
        self._own_ctx = ctx is None
        self.lost = asyncio.Event()
        # notice the broker going away (job shells need not: they die with it)
        self.monitor = monitor

    async def connect(self) -> AsyncHandle:
        sock = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 2000)
        sock.setsockopt(zmq.SNDHWM, 0)
        sock.setsockopt(zmq.RCVHWM, 0)
        if self.monitor:
            mon = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
            self.mon = Channel(mon, lambda frames: self._lost())
        sock.connect(self.endpoint)
        self.sock = Channel(sock, self._deliver)
        self.connected = True
        return self

    def _transmit(self, frames: list[bytes]) -> None:
        self.sock.send(frames)

    def _lost(self, reason: str = "connection to broker lost") -> None:
        super()._lost(reason)
        self.lost.set()

    async def call(self, topic: str, payload=None, *, nodeid: int | None = None,
                   timeout: float | None = None):
        p = self.rpc(topic, payload, nodeid=nodeid)
        if timeout is None:
            return await p.get()
        return await asyncio.wait_for(p.get(), timeout)

    async def subscribe(self, topic: str) -> None:
        await self.call("event.subscribe", {"topic": topic})

    def close(self) -> None:
        if self.connected:
            try:
                self.sock.send(self._goodbye())
            except zmq.ZMQError:
                pass
        self.connected = False
        mon, sock = getattr(self, "mon", None), getattr(self, "sock", None)
        if mon is not None and sock is not None and not sock.sock.closed:
            # stop the monitor before its reader closes: an event posted to a closed
            # reader blocks the context's I/O thread for good (see close_monitored)
            try:
                sock.sock.disable_monitor()
            except zmq.ZMQError:
                pass
        for ch in (mon, sock):
            if ch is not None:
                ch.close()
        if self._own_ctx:
            self.ctx.term()

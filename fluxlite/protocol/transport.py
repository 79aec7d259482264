"""The socket boundary: ZeroMQ sockets driven from an asyncio loop.

`Channel` registers a socket's FD with the loop and drains it without
blocking.  ZeroMQ's FD is edge-triggered, so after every send the channel
asks the socket whether input is waiting (a send can consume the readiness
edge) and drains it on the next turn of the loop if so.  Frames are
handed to the owner raw; decoding, and the conversion of garbage into a logged
ProtocolError, happen in the owner's dispatch so the peer can be named.
"""

from __future__ import annotations

import asyncio
from typing import Callable

import zmq

from .frames import has_input, recv_frames, send_frames

# how many messages one drain handles before yielding to other work
_DRAIN_BUDGET = 256


class Channel:
    def __init__(self, sock: zmq.Socket, on_frames: Callable[[list[bytes]], None],
                 loop: asyncio.AbstractEventLoop | None = None):
        self.sock = sock
        self.on_frames = on_frames
        self.loop = loop or asyncio.get_running_loop()
        self._scheduled = False
        self._closed = False
        self.loop.add_reader(sock.FD, self._drain)
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled and not self._closed:
            self._scheduled = True
            self.loop.call_soon(self._drain_scheduled)

    def _drain_scheduled(self) -> None:
        self._scheduled = False
        self._drain()

    def _drain(self) -> None:
        sock = self.sock
        for _ in range(_DRAIN_BUDGET):
            if self._closed:
                return
            try:
                if not has_input(sock):
                    return
                frames = recv_frames(sock)
            except zmq.ZMQError:
                return
            try:
                self.on_frames(frames)
            except Exception:  # one bad message must not stall the rest of the queue
                from ..util.log import get_logger
                get_logger("transport").error("message handler failed", exc_info=True)
        self._schedule()

    def send(self, frames: list[bytes]) -> None:
        """Send without blocking.  Raises zmq.ZMQError (e.g. EHOSTUNREACH on a ROUTER)."""
        try:
            send_frames(self.sock, frames)
        finally:
            # a send can consume the FD's readiness edge: if input is already waiting,
            # drain it soon; otherwise the next arrival will signal the FD again
            try:
                if has_input(self.sock):
                    self._schedule()
            except zmq.ZMQError:
                pass

    def close(self, linger: int | None = None) -> None:
        """Stop reading and close; `linger` (ms) defaults to the socket's LINGER option."""
        if self._closed:
            return
        self._closed = True
        try:
            self.loop.remove_reader(self.sock.FD)
        except Exception:
            pass
        self.sock.close(linger=linger)

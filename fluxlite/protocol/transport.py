"""The socket boundary: ZeroMQ sockets driven from an asyncio loop.

`Channel` registers a socket's FD with the loop and drains it without
blocking.  ZeroMQ's FD is edge-triggered, so after every send the channel
asks the socket whether input is waiting (a send can consume the readiness
edge) and drains it on the next turn of the loop if so.  Frames are
handed to the owner raw; decoding, and the conversion of garbage into a logged
ProtocolError, happen in the owner's dispatch so the peer can be named.

A channel given `hold` takes nothing while `hold()` is true: what waits stays
in the socket (bounded by its RCVHWM, then by the sender's own queue), and the
channel looks again on the next turn of the loop.  The broker's local endpoint
holds while many clients' requests wait for the broker's services, so that a
client sending faster than the broker answers is slowed by its own socket
instead of growing the broker: requests taken are handled, not piled up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import zmq

from ..util.log import get_logger
from .frames import has_input, recv_frames, send_frames

# how many messages one drain handles, and for how long, before yielding to other work
# (a flood of requests on one socket must not hold up a ping on another, or a timer)
_DRAIN_BUDGET = 256
_DRAIN_SLICE = 0.01   # seconds


class Channel:
    """`recv` reads one whole message (recv_frames by default) and `on_frames` gets
    what it returns; `on_frames` never sees a partial message."""

    def __init__(self, sock: zmq.Socket, on_frames: Callable, *, recv=recv_frames,
                 hold: Callable[[], bool] | None = None,
                 loop: asyncio.AbstractEventLoop | None = None):
        self.sock = sock
        self.on_frames = on_frames
        self.recv = recv
        self.hold = hold
        self.loop = loop or asyncio.get_running_loop()
        self._scheduled = False
        self._closed = False
        self._draining = False
        self.loop.add_reader(sock.FD, self._drain)
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled and not self._closed:
            self._scheduled = True
            self.loop.call_soon(self._drain_scheduled)

    def _drain_scheduled(self) -> None:
        self._scheduled = False
        self._drain()

    def _drain(self, budget: int = _DRAIN_BUDGET) -> int:
        """Handle up to `budget` waiting messages; returns how many were handled."""
        if self._draining:   # a handler asked for the backlog: the drain under way has it
            return 0
        self._draining = True
        try:
            return self._drain_some(budget)
        finally:
            self._draining = False

    def _drain_some(self, budget: int) -> int:
        sock, recv, hold = self.sock, self.recv, self.hold
        n = 0
        # drain_backlog's larger budget is "everything waiting, now": no time limit
        deadline = None if budget > _DRAIN_BUDGET else time.monotonic() + _DRAIN_SLICE
        while n < budget:
            if deadline is not None and time.monotonic() > deadline:
                break
            if self._closed:
                return n
            if hold is not None and hold():
                break       # the owner is busy: look again on the next turn
            try:
                if not has_input(sock):
                    return n
                got = recv(sock)
            except zmq.ZMQError:
                return n
            n += 1
            try:
                self.on_frames(got)
            except Exception:  # one bad message must not stall the rest of the queue
                get_logger("transport").error("message handler failed", exc_info=True)
        self._schedule()
        return n

    def drain_backlog(self, limit: int = 100_000) -> int:
        """Handle everything already waiting (up to `limit` messages) now, before a
        decision that depends on it, e.g. judging a peer's silence after the loop
        itself was stalled."""
        return self._drain(limit)

    def send(self, frames: list[bytes]) -> None:
        """Send without blocking.  Raises zmq.ZMQError (e.g. EHOSTUNREACH on a ROUTER)."""
        try:
            send_frames(self.sock, frames)
        finally:
            # a send can consume the FD's readiness edge: if input is already waiting,
            # drain it soon; otherwise the next arrival will signal the FD again.  A
            # send from a handler of this channel's drain needs no look: the drain
            # asks the socket before it returns.
            if not self._draining:
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

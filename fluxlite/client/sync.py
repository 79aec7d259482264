"""The blocking handle the CLI uses: one DEALER socket, one poll loop.

    h = Handle()                         # $FLUXLITE_URI
    h.call("attr.get", {"name": "size"})
    for entry in h.stream("kvs-watch.lookup", {...}): ...
    p1 = h.rpc(...); p2 = h.rpc(..., streaming=True); h.run_until(lambda: done)

No asyncio here: the CLI's start-up time is part of every command's latency.
Responses are routed by the shared RPCTracker; callers either wait on one
PendingRPC or give it an `on_response` callback and drive `run_until()`.
A socket monitor notices the broker going away, and every outstanding RPC
then fails with EHOSTUNREACH instead of hanging.

The handles of a process share one ZeroMQ context, and so its I/O thread: if
that thread ever stops (a blocked monitor once did it), a new handle whose
connection gets no answer finds that out (connect.context_works) and opens
again in a new context, instead of every handle failing from then on.

A Handle belongs to the thread that created it (a ZeroMQ socket must not be
used by two threads): from any other thread every call raises WrongThread at
once, instead of racing on the socket.  Open one Handle per thread, or share a
fluxlite.jobapi.Executor, which is safe to share.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
import weakref

import zmq

from ..errors import ConnectionRefused, EndOfStream, FluxliteError, RPCTimeout, WrongThread
from ..protocol.frames import has_input, recv_frames, send_frames
from ..protocol.rpc import PendingRPC
from .base import HandleCore
from .connect import (
    ENV_URI,
    MONITOR_EVENTS,
    await_connection,
    close_monitored,
    context_works,
    monitor_address,
    next_monitor_event,
    resolve_uri,
)

_context: zmq.Context | None = None
# contexts given up because their I/O thread stopped (see Handle._reopen): kept, never
# terminated (that waits for sockets nobody will close) nor collected (collecting a
# context terminates it), and few: past this many, a handle no longer gets a new one
_abandoned: list[zmq.Context] = []
_MAX_ABANDONED = 4


def zmq_context() -> zmq.Context:
    """The ZeroMQ context of this process's blocking handles, made by the first one."""
    global _context
    if _context is None or _context.closed:
        _context = zmq.Context()
    return _context


_replacing = threading.Lock()   # handles of several threads may find it stopped at once


def _replace_context(stopped: zmq.Context) -> zmq.Context | None:
    """A new shared context in place of `stopped`, whose I/O thread no longer works
    (None once too many were given up)."""
    global _context
    with _replacing:
        if _context is stopped:
            if len(_abandoned) >= _MAX_ABANDONED:
                return None
            _abandoned.append(stopped)
            _context = zmq.Context()
            # seen in a test run's warnings summary: it should never happen
            warnings.warn("the ZeroMQ context of this process's handles stopped making "
                          "connections (its I/O thread is blocked); handles use a new one "
                          f"({len(_abandoned)} given up)", RuntimeWarning, stacklevel=4)
        return zmq_context()


def term_context() -> None:
    """End that context, if a handle made one: waits until the messages of closed
    handles (their goodbye) are sent, within their linger."""
    if _context is not None and not _context.closed:
        _context.term()


class Handle(HandleCore):
    def __init__(self, uri: str | None = None, *, connect_timeout: float = 5.0):
        super().__init__()
        self.owner = threading.current_thread()
        self._owner_ident = threading.get_ident()   # cheaper to compare on every call
        self.uri = uri
        self.endpoint = resolve_uri(uri)
        self.connect_timeout = connect_timeout
        self.fd_callbacks: dict[int, object] = {}
        self.ctx = zmq_context()
        if not self._open() and not context_works(self.ctx):
            self._reopen()
        self.connected = True
        self._sent_any = False

    def _open(self) -> bool:
        """This handle's socket and its monitor, in self.ctx, connected; False if a
        local connection got no answer within connect_timeout."""
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 100)
        self.sock.setsockopt(zmq.SNDHWM, 0)
        self.sock.setsockopt(zmq.RCVHWM, 0)
        self.sock.setsockopt(zmq.IMMEDIATE, 1)
        self.sock.setsockopt(zmq.SNDTIMEO, int(self.connect_timeout * 1000))
        # one connection: once it closes the handle is lost (`_lost`), so nothing may
        # reconnect behind it.  A socket retrying a dead instance posts a monitor event
        # on every try (several a second); unread (a handle nobody polls any more), about
        # 2000 of them fill the monitor's pipe, and then the I/O thread of the context
        # that all of this process's handles share blocks: none of them can connect
        # to any instance again.
        self.sock.setsockopt(zmq.RECONNECT_IVL, -1)
        self.monitor = self.sock.get_monitor_socket(MONITOR_EVENTS, monitor_address())
        # the monitor is stopped before its reader closes (see close_monitored), also
        # for a handle dropped without close(): garbage collection would close the two
        # sockets in any order, and an event posted to the closed reader blocks the
        # context's I/O thread for good
        self._release = weakref.finalize(self, close_monitored, self.sock, self.monitor)
        self._release.atexit = False
        self.sock.connect(self.endpoint)
        answered = True
        if self.endpoint.startswith("ipc://"):
            try:
                answered = await_connection(
                    self.monitor, self.uri or os.environ.get(ENV_URI) or self.endpoint,
                    self.connect_timeout)
            except FluxliteError:
                self._release.detach()
                close_monitored(self.sock, self.monitor, linger=0)
                raise
        self.poller = zmq.Poller()
        self.poller.register(self.sock, zmq.POLLIN)
        self.poller.register(self.monitor, zmq.POLLIN)
        for fd in self.fd_callbacks:
            self.poller.register(fd, zmq.POLLIN)
        return answered

    def _reopen(self) -> bool:
        """The context's I/O thread no longer makes connections (blocked for good: no
        handle of this process would reach any instance again): open this handle
        again in a new context.  Only before its first message left, so nobody can
        tell.  False if no new context is to be had."""
        ctx = _replace_context(self.ctx)
        if ctx is None:
            return False
        self._release.detach()
        close_monitored(self.sock, self.monitor, linger=0)
        self.ctx = ctx
        self._open()
        return True

    def adopt(self) -> None:
        """Make the calling thread this handle's owner: for a handle made in one
        thread and handed to another before that one uses it (an executor's worker
        thread).  The thread that made it must not use it afterwards."""
        self.owner = threading.current_thread()
        self._owner_ident = threading.get_ident()

    def _check_thread(self) -> None:
        if threading.get_ident() != self._owner_ident:
            raise WrongThread(
                f"this Handle belongs to thread {self.owner.name!r} and was used from "
                f"{threading.current_thread().name!r}: a Handle cannot be shared between "
                "threads (open one per thread, or share a fluxlite.jobapi.Executor)")

    def _transmit(self, frames: list[bytes]) -> None:
        self._check_thread()
        try:
            send_frames(self.sock, frames, 0)
        except zmq.Again:
            # the connection never completed: the instance does not answer, or (the
            # first message only) this process's context stopped working
            if self._sent_any or context_works(self.ctx) or not self._reopen():
                raise self._no_answer() from None
            try:
                send_frames(self.sock, frames, 0)
            except zmq.Again:
                raise self._no_answer() from None
        self._sent_any = True

    def _no_answer(self) -> ConnectionRefused:
        return ConnectionRefused(f"no instance answering at {self.uri or self.endpoint}: "
                                 "is it running?")

    def rpc(self, *args, **kwargs):
        self._check_thread()  # before the tracker hands out a matchtag
        return super().rpc(*args, **kwargs)

    def call(self, topic: str, payload=None, *, nodeid: int | None = None,
             timeout: float | None = None):
        """Send a request and wait for its one response; raises FluxliteError on error."""
        p = self.rpc(topic, payload, nodeid=nodeid)
        self.wait(p, timeout)
        return p.take()

    def stream(self, topic: str, payload=None, *, nodeid: int | None = None,
               timeout: float | None = None):
        """Yield each response payload of a streaming RPC until it ends (ENODATA)."""
        p = self.rpc(topic, payload, nodeid=nodeid, streaming=True)
        try:
            while True:
                self.wait(p, timeout)
                try:
                    yield p.take()
                except EndOfStream:
                    return
        finally:
            if not p.done:
                p.cancel()

    # ----------------------------------------------------------- receiving
    def wait(self, pending: PendingRPC, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not pending.ready():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise RPCTimeout(f"{pending.topic}: no response within {timeout:g}s")
            self.poll(left)

    def run_until(self, predicate, timeout: float | None = None) -> bool:
        """Dispatch messages until predicate() is true; False if the timeout passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not predicate():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            self.poll(left)
        return True

    def poll(self, timeout: float | None = None) -> int:
        self._check_thread()
        ms = None if timeout is None else max(0, int(timeout * 1000))
        n = 0
        for sock, _ in self.poller.poll(ms):
            if sock is self.sock:
                n += self._drain()
            elif sock is self.monitor:
                if next_monitor_event(self.monitor) == zmq.EVENT_DISCONNECTED:
                    self._lost()
            elif isinstance(sock, int) and sock in self.fd_callbacks:
                self.fd_callbacks[sock]()
        return n

    def _drain(self) -> int:
        n = 0
        while True:
            if not has_input(self.sock):
                return n
            try:
                frames = recv_frames(self.sock)
            except zmq.Again:
                return n
            n += 1
            self._deliver(frames)

    def add_fd(self, fd: int, callback) -> None:
        """Also wake for `fd` (e.g. a signal wakeup pipe) and call `callback()`."""
        self.fd_callbacks[fd] = callback
        self.poller.register(fd, zmq.POLLIN)

    def remove_fd(self, fd: int) -> None:
        if self.fd_callbacks.pop(fd, None) is not None:
            self.poller.unregister(fd)

    # ------------------------------------------------------------ services
    def subscribe(self, topic: str) -> None:
        self.call("event.subscribe", {"topic": topic})

    def getattr(self, name: str, rank: int | None = None) -> str:
        return self.call("attr.get", {"name": name}, nodeid=rank)["value"]

    def close(self) -> None:
        if self.sock.closed:
            return
        self._check_thread()
        if self.connected and self._sent_any:
            try:
                self.sock.send_multipart(self._goodbye(), zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
        self._release()     # the goodbye leaves within the socket's LINGER

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

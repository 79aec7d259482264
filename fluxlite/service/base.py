"""Base class for in-broker services: decorated handlers and one dispatch path.

    class KVS(Service):
        name = "kvs"
        @request("kvs.get")
        def get(self, msg): ...            # return a payload, or raise FluxliteError
        @request("kvs.watch", streaming=True)
        async def watch(self, msg): ...    # call self.respond() many times

`dispatch()` is the only way a request reaches a handler.  It turns an
unknown method into ENOSYS, a FluxliteError into its errno, a payload of the
wrong shape into EPROTO, and any other exception into a logged EIO reply:
a peer's bad message never takes the broker down.
"""

from __future__ import annotations

import asyncio
import errno
import inspect

from ..util.log import get_logger
from ..errors import FluxliteError, ProtocolError
from ..protocol.message import NORESPONSE, STREAMING, Message

_NO_REPLY = object()


def request(topic: str, *, streaming: bool = False):
    """Mark a method as the handler of `topic`."""
    def deco(fn):
        fn._fluxlite_topic = topic
        fn._fluxlite_streaming = streaming
        return fn
    return deco


def fields(msg: Message, **spec):
    """Pull typed fields out of a request payload, or raise EPROTO naming the bad one.

    `fields(msg, id=int, ranks=str)` returns (id, ranks).  A type of
    `(int, type(None))` makes a field optional.
    """
    payload = msg.payload
    if not isinstance(payload, dict):
        raise ProtocolError(f"{msg.topic}: payload must be a map")
    out = []
    for key, typ in spec.items():
        optional = isinstance(typ, tuple) and type(None) in typ
        if key not in payload:
            if optional:
                out.append(None)
                continue
            raise ProtocolError(f"{msg.topic}: payload is missing {key!r}")
        val = payload[key]
        if typ is int and isinstance(val, bool) or not isinstance(val, typ):
            raise ProtocolError(f"{msg.topic}: {key!r} has the wrong type")
        out.append(val)
    return out[0] if len(out) == 1 else tuple(out)


class Service:
    name = ""

    def __init__(self, broker):
        self.broker = broker
        self.router = broker.router
        self.log = get_logger(self.name)
        self._handlers: dict[str, tuple] = {}
        self._tasks: set[asyncio.Task] = set()
        for _, fn in inspect.getmembers(type(self), predicate=inspect.isfunction):
            topic = getattr(fn, "_fluxlite_topic", None)
            if topic:
                self._handlers[topic] = (getattr(self, fn.__name__), fn._fluxlite_streaming)
        # streams opened by clients, so a vanished client's watchers can be dropped
        self._streams: dict[tuple, list] = {}

    # lifecycle hooks ------------------------------------------------------
    async def start(self) -> None:
        """Called once the broker's sockets are up, before the broker enters quorum."""

    async def cleanup(self) -> None:
        """Called when the instance is shutting down, before brokers leave."""

    def stop(self) -> None:
        for t in list(self._tasks):
            t.cancel()

    # dispatch -------------------------------------------------------------
    def dispatch(self, msg: Message) -> None:
        try:
            self._dispatch(msg)
        except Exception as exc:  # a peer's bad message must never escape to the loop
            self._reply_exception(msg, exc)

    def _dispatch(self, msg: Message) -> None:
        entry = self._handlers.get(msg.topic)
        if entry is None:
            if msg.topic == f"{self.name}.ping":
                payload = msg.payload if isinstance(msg.payload, dict) else {}
                hops = [_hop_name(h) for h in msg.route]
                self.respond(msg, {**payload, "rank": self.broker.rank, "route": hops})
                return
            if msg.topic == f"{self.name}.disconnect":
                self.disconnect(msg)
                return
            self.respond_error(msg, errno.ENOSYS, f"unknown method {msg.topic}")
            return
        handler, streaming = entry
        result = handler(msg)
        if inspect.iscoroutine(result):
            self.spawn(self._finish(msg, result, streaming))
        elif not streaming and result is not _NO_REPLY:
            self.respond(msg, result)

    async def _finish(self, msg: Message, coro, streaming: bool) -> None:
        try:
            result = await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._reply_exception(msg, exc)
            return
        if not streaming and result is not _NO_REPLY:
            self.respond(msg, result)

    def _reply_exception(self, msg: Message, exc: Exception) -> None:
        if isinstance(exc, FluxliteError):
            self.respond_error(msg, exc.errnum, exc.message)
        else:
            self.log.error("handler failed", topic=msg.topic, error=repr(exc), exc_info=True)
            self.respond_error(msg, errno.EIO, f"{msg.topic}: internal error: {exc!r}")

    def spawn(self, coro) -> asyncio.Task:
        """Run a coroutine owned by this service (cancelled when the service stops)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            self.log.error("task failed", error=repr(exc),
                           traceback="".join(__import__("traceback").format_exception(exc))[-3000:])

    # replies ----------------------------------------------------------------
    def respond(self, msg: Message, payload=None) -> None:
        if msg.flags & NORESPONSE:
            return
        self.router.respond(msg.response(payload))

    def respond_error(self, msg: Message, errnum: int, errstr: str = "") -> None:
        if msg.flags & NORESPONSE:
            return
        self.router.respond(msg.response(None, errnum, errstr))

    def end_stream(self, msg: Message) -> None:
        self.respond_error(msg, errno.ENODATA)

    no_reply = _NO_REPLY

    # streams and client disconnects ---------------------------------------
    def track_stream(self, msg: Message, on_cancel) -> None:
        """Remember a streaming request so a disconnect from its client cancels it."""
        self._streams.setdefault(tuple(msg.route), []).append((msg.matchtag, on_cancel))

    def untrack_stream(self, msg: Message) -> None:
        key = tuple(msg.route)
        entries = self._streams.get(key)
        if entries:
            entries[:] = [e for e in entries if e[0] != msg.matchtag]
            if not entries:
                del self._streams[key]

    def disconnect(self, msg: Message) -> None:
        """A client went away: cancel every stream it opened here."""
        key = tuple(msg.route)
        self.drop_streams(lambda route: route == key)

    def drop_streams(self, match) -> None:
        """Cancel the streams whose route satisfies `match` (a vanished client or subtree)."""
        for route in [r for r in self._streams if match(r)]:
            for _, on_cancel in self._streams.pop(route, []):
                try:
                    on_cancel()
                except Exception:
                    self.log.error("stream cancel failed", exc_info=True)

    # calling other services -------------------------------------------------
    def rpc(self, topic: str, payload=None, *, nodeid=None, streaming: bool = False):
        """Start an RPC from this broker; await `.get()` or iterate the result."""
        return self.router.rpc(topic, payload, nodeid=nodeid, streaming=streaming)

    def send(self, topic: str, payload=None, *, nodeid=None) -> None:
        """A request that wants no response."""
        self.router.send_noresponse(topic, payload, nodeid=nodeid)


def _hop_name(hop) -> str:
    if isinstance(hop, bytes):
        return "client" if hop else "self"
    return "parent" if hop == -1 else str(hop)


__all__ = ["Service", "request", "fields", "STREAMING"]

"""The one dispatcher: how a request reaches its handler, in a broker service or a job shell.

    class KVS(Service):
        @handler("kvs.lookup", schema=LookupRequest, roles=ANY)
        def lookup(self, msg, req): ...        # return a payload, or raise FluxliteError
        @handler("kvs-watch.lookup", schema=WatchLookupRequest, streaming=True, roles=ANY)
        async def watch(self, msg, req): ...   # answer many times itself

Each handler declares, beside its code, its topic, whether it streams, the shape
of its payload (a msgspec Struct from protocol/schema.py, checked before the
handler runs) and the roles that may call it: the instance owner only, unless it
says otherwise (libflux's rolemask).  `dispatch()` is the only way in, and the one
boundary where failures become errnos:

    payload too large         EINVAL   "TOPIC: payload: N bytes (at most M for this method)"
    unknown method            ENOSYS   "unknown method TOPIC"
    role not allowed          EPERM    "TOPIC: permission denied (owner only)"
    payload of the wrong type EPROTO   "TOPIC: id: expected `int`, got `str`"
    value out of bounds       EINVAL   "TOPIC: id: expected `int` >= 0"
    FluxliteError             its errno and sentence
    anything else             EIO      logged with its traceback

The size check comes first and costs nothing: decoding is the one piece of work
that grows with what a peer sent (a megabyte of empty msgpack arrays takes rank 0
~0.1 s to build), so each method bounds the payload bytes it will decode at all
(`max_payload`, DEFAULT_MAX_PAYLOAD unless it says otherwise).

Coroutine handlers run as tasks the dispatcher owns: a failure is answered and
logged (nothing is dropped), and `stop()` cancels what still runs.  A request
marked NORESPONSE is never answered, not even with an error.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import inspect
import traceback
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from ..errors import FluxliteError, ProtocolError, UsageError
from .message import NORESPONSE, ROLE_OWNER, ROLE_USER, Message
from .schema import DEFAULT_MAX_PAYLOAD, describe

OWNER = ROLE_OWNER
ANY = ROLE_OWNER | ROLE_USER

NO_REPLY = object()  # a handler returns this when it answers later (or never) itself


class Method(NamedTuple):   # (built for every handler of every job shell: cheap)
    topic: str
    fn: Callable
    schema: type | None
    streaming: bool
    roles: int
    max_payload: int = DEFAULT_MAX_PAYLOAD   # bytes of payload it decodes at all


def handler(topic: str, *, schema: type | None = None, streaming: bool = False,
            roles: int = OWNER, max_payload: int = DEFAULT_MAX_PAYLOAD):
    """Mark a method as the handler of `topic` (a full topic, or a shell method name)."""
    def deco(fn):
        fn.__fluxlite_method__ = (topic, schema, streaming, roles, max_payload)
        return fn
    return deco


@functools.cache
def declared_handlers(cls: type) -> tuple[tuple[str, tuple], ...]:
    """(attribute name, @handler arguments) of each handler a class declares: looked
    up once per class (a job shell asks for each of its plugins, and a class walk
    costs ~0.2 ms); shell.main.preload fills it before shells are forked."""
    return tuple((name, fn.__fluxlite_method__)
                 for name, fn in inspect.getmembers(cls, predicate=inspect.isfunction)
                 if hasattr(fn, "__fluxlite_method__"))


def declared_methods(obj, prefix: str = "") -> list[Method]:
    """The handlers an object's class declares with @handler, bound to the object (their
    topics after `prefix`)."""
    return [Method(prefix + topic, getattr(obj, name), schema, streaming, roles, max_payload)
            for name, (topic, schema, streaming, roles, max_payload)
            in declared_handlers(type(obj))]


def parse(msg: Message, schema: type | None):
    """The request's payload as `schema`, or ProtocolError / UsageError naming the field."""
    if schema is None:
        return None
    payload = msg.payload  # ProtocolError if undecodable
    try:
        return msgspec.convert({} if payload is None else payload, schema)
    except msgspec.ValidationError as exc:
        what, wrong_type = describe(exc)
        err = ProtocolError if wrong_type else UsageError
        raise err(f"{msg.topic}: {what}") from None


class Dispatcher:
    """A table of methods and the one path a request takes to reach them.

    `respond(msg)` sends a response message on its way (the router, or a client
    handle); `fallback(msg)` may answer topics the table does not hold (a service's
    built-in ping and disconnect) and returns False when it does not."""

    def __init__(self, respond: Callable[[Message], None], log, *,
                 fallback: Callable[[Message], bool] | None = None):
        self._send = respond
        self.log = log
        self.fallback = fallback
        self.methods: dict[str, Method] = {}
        self._tasks: set[asyncio.Task] = set()

    def add(self, method: Method) -> None:
        self.methods[method.topic] = method

    def add_object(self, obj, prefix: str = "") -> None:
        for m in declared_methods(obj, prefix):
            self.add(m)

    # ------------------------------------------------------------- answers
    def respond(self, msg: Message, payload=None) -> None:
        if not msg.flags & NORESPONSE:
            self._send(msg.response(payload))

    def respond_error(self, msg: Message, errnum: int, errstr: str = "") -> None:
        if not msg.flags & NORESPONSE:
            self._send(msg.response(None, errnum, errstr))
        elif errnum != errno.ENODATA:
            # no one hears the answer: the log is the only trace of a refused report
            self.log.debug("unanswerable request refused", topic=msg.topic,
                           errnum=errnum, error=errstr)

    def end_stream(self, msg: Message) -> None:
        self.respond_error(msg, errno.ENODATA)

    def respond_exception(self, msg: Message, exc: BaseException) -> None:
        if isinstance(exc, FluxliteError):
            self.respond_error(msg, exc.errnum, exc.message)
            return
        self.log.error("handler failed", topic=msg.topic, error=repr(exc),
                       traceback="".join(traceback.format_exception(exc))[-3000:])
        self.respond_error(msg, errno.EIO, f"{msg.topic}: internal error: {exc!r}")

    # ------------------------------------------------------------ dispatch
    def dispatch(self, msg: Message) -> bool:
        """Handle a request; True if its handler may answer it later (it streams, is a
        coroutine, or returned NO_REPLY): the caller's disconnect must then reach it."""
        try:
            return self._dispatch(msg)
        except Exception as exc:  # a peer's bad message must never escape to the loop
            self.respond_exception(msg, exc)
            return False

    def _dispatch(self, msg: Message) -> bool:
        m = self.methods.get(msg.topic)
        limit = DEFAULT_MAX_PAYLOAD if m is None else m.max_payload
        size = msg.payload_size()
        if size > limit:
            raise UsageError(f"{msg.topic}: payload: {size} bytes (at most {limit} for "
                             "this method)")
        if m is None:
            if self.fallback is None or not self.fallback(msg):
                self.respond_error(msg, errno.ENOSYS, f"unknown method {msg.topic}")
            return False
        if not msg.role & m.roles:
            who = "the instance owner" if m.roles == OWNER else "this role"
            why = (f"only {who} may call it" if msg.role
                   else "this instance admits no guests: access.allow-guest-user")
            self.respond_error(msg, errno.EPERM, f"{msg.topic}: permission denied ({why})")
            return False
        req = parse(msg, m.schema)
        rv = m.fn(msg, req)
        if inspect.iscoroutine(rv):
            self.spawn(self._finish(msg, rv, m.streaming))
            return True
        if m.streaming or rv is NO_REPLY:
            return True
        self.respond(msg, rv)
        return False

    async def _finish(self, msg: Message, coro, streaming: bool) -> None:
        try:
            rv = await coro
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.respond_exception(msg, exc)
            return
        if not streaming and rv is not NO_REPLY:
            self.respond(msg, rv)

    # -------------------------------------------------------- owned tasks
    def spawn(self, coro) -> asyncio.Task:
        """Run a coroutine owned by this dispatcher: its failure is logged, never lost."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.log.error("task failed", error=repr(exc),
                           traceback="".join(traceback.format_exception(exc))[-3000:])

    def stop(self) -> None:
        for t in list(self._tasks):
            t.cancel()

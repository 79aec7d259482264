"""`flux.Flux`: a handle to a fluxlite instance as Flux's Python code uses one.

It wraps fluxlite's blocking Handle (`.handle`), which belongs to the thread
that made it, as a Flux handle does.  rpc() reaches any service topic (the
services answer Flux's topics themselves; nothing is translated here); the
reactor (reactor_run/reactor_stop) drives watchers and future callbacks over
that handle's one poll loop."""

from __future__ import annotations

import json
import os
import sys
import threading
import time

from fluxlite.client.sync import Handle
from fluxlite.errors import NoService
from fluxlite.protocol.message import event_publish_payload

from .. import future as _future
from ..constants import (
    FLUX_MSGTYPE_ANY,
    FLUX_MSGTYPE_EVENT,
    FLUX_NODEID_ANY,
    FLUX_RPC_NORESPONSE,
    FLUX_RPC_STREAMING,
)
from ..future import Future, FutureState, rpc_future
from ..message import Message
from .watchers import FDWatcher, MessageWatcher, SignalWatcher, TimerWatcher


def _text(value, what: str) -> str:
    if isinstance(value, bytes):
        return value.decode()
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str or bytes, not {type(value).__name__}")
    return value


def _payload(payload):
    if isinstance(payload, bytes):
        payload = payload.decode()
    if isinstance(payload, str):
        return json.loads(payload) if payload else None
    return payload


_SEVERITIES = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")


class RPC(Future):
    """An RPC's future: get() is the response payload (None if it had none),
    get_str() its JSON text."""

    def get(self):
        return self._result()

    def get_str(self) -> str | None:
        value = self._result()
        return None if value is None else json.dumps(value)


class Flux:
    """A handle to the instance at `url` (default $FLUXLITE_URI, else $FLUX_URI)."""

    _tls = threading.local()

    def __init__(self, url: str | bytes | None = None, flags: int = 0, handle=None):
        if flags:
            raise NoService("flux.Flux(flags=...): fluxlite has no handle flags")
        if isinstance(url, bytes):
            url = url.decode()
        if url and url.startswith("loop://"):
            raise NoService("flux.Flux('loop://'): fluxlite has no loop connector "
                                "(a handle always reaches a running instance)")
        self.handle = handle if handle is not None else Handle(
            url or os.environ.get("FLUXLITE_URI") or os.environ.get("FLUX_URI"))
        self.handle.on_event = self._on_message
        self.handle.on_request = self._on_message
        self._watchers: set = set()        # started watchers (the reactor holds them)
        self._futures: set = set()         # futures with a then-callback still to run
        self._readyq: list = []            # future states whose then-callback is due
        self._events: list = []            # messages no watcher took, for recv()
        self._stop: int | None = None
        self._conf = None

    @classmethod
    def default(cls) -> Flux:
        """This thread's shared handle (what a future made without one uses)."""
        h = getattr(cls._tls, "handle", None)
        if h is None:
            h = cls._tls.handle = cls()
        return h

    # -- RPC ------------------------------------------------------------------
    def rpc(self, topic, payload=None, nodeid=FLUX_NODEID_ANY, flags: int = 0) -> RPC:
        """A request to `topic` (any service's); its future."""
        topic = _text(topic, "topic")
        payload = _payload(payload)
        node = None if nodeid in (None, FLUX_NODEID_ANY) else int(nodeid)
        if flags & FLUX_RPC_NORESPONSE:
            self.handle.send(topic, payload, nodeid=node)
            state = FutureState(self)
            state.fulfill(None)
            return RPC(state)
        pending = self.handle.rpc(topic, payload, nodeid=node,
                                  streaming=bool(flags & FLUX_RPC_STREAMING))
        return RPC(rpc_future(self, pending))

    def respond(self, message, payload=None) -> int:
        self.handle.respond(message.msg, _payload(payload))
        return 0

    def future_create(self, init=None, arg=None) -> FutureState:
        return FutureState(self)

    def future_get(self, future, _ptr=None) -> int:
        future.get()
        return 0

    def service_register(self, name) -> Future:
        return Future(self.rpc("service.add", {"service": _text(name, "name")}))

    def service_unregister(self, name) -> Future:
        return Future(self.rpc("service.remove", {"service": _text(name, "name")}))

    # -- attributes and config --------------------------------------------------
    def attr_get(self, name) -> str:
        """A broker attribute of this rank (rank, size, local-uri, rundir...)."""
        return self.rpc("attr.get", {"name": _text(name, "name")}).get()["value"]

    def attr_set(self, name, value) -> None:
        if not isinstance(name, (str, bytes)):
            raise ValueError("Attribute name must be a string")
        if not isinstance(value, (str, bytes)):
            raise ValueError("Attribute value must be a string")
        self.rpc("attr.set", {"name": _text(name, "name"),
                              "value": _text(value, "value")}).get()

    def attr_remove(self, name) -> None:
        if not isinstance(name, (str, bytes)):
            raise ValueError("Attribute name must be a string")
        self.rpc("attr.rm", {"name": _text(name, "name")}).get()

    def get_rank(self) -> int:
        return int(self.attr_get("rank"))

    def get_size(self) -> int:
        return int(self.attr_get("size"))

    def conf_get(self, key=None, default=None, update: bool = False):
        """The instance's config (cached; update=True reads it again), or the value
        at dotted `key` in it (`default` if unset)."""
        if self._conf is None or update:
            self._conf = self.rpc("config.get").get() or {}
        if key is None:
            return self._conf
        node = self._conf
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def log(self, level: int, fstring) -> None:
        """A line in the instance's log (`fluxlite dmesg`) at a syslog level (0-7),
        through the log service's log.append; no answer is awaited, as in Flux."""
        text = _text(fstring, "message")
        severity = _SEVERITIES[min(max(int(level), 0), 7)]
        self.rpc("log.append", {"appname": os.path.basename(sys.argv[0] or "python"),
                                "severity": severity, "message": text},
                 flags=FLUX_RPC_NORESPONSE)

    # -- events ---------------------------------------------------------------
    def event_subscribe(self, topic) -> int:
        self.handle.subscribe(_text(topic, "topic"))
        return 0

    def event_unsubscribe(self, topic) -> int:
        self.rpc("event.unsubscribe", {"topic": _text(topic, "topic")}).get()
        return 0

    def event_send(self, topic, payload=None) -> int:
        self.rpc("event.publish", event_publish_payload(_text(topic, "topic"),
                                                        _payload(payload))).get()
        return 0

    def event_recv(self, topic=None):
        return self.recv(FLUX_MSGTYPE_EVENT, topic)

    def recv(self, type_mask: int = FLUX_MSGTYPE_ANY, topic_glob=None, **_):
        """The next message no watcher took (an event, a request to our service)."""
        import fnmatch
        glob = _text(topic_glob, "topic") if topic_glob is not None else "*"
        while True:
            for i, m in enumerate(self._events):
                if m.type & type_mask and fnmatch.fnmatchcase(m.topic, glob):
                    return self._events.pop(i)
            self.handle.poll(None)

    def _on_message(self, msg) -> None:
        message = Message(msg)
        for w in list(self._watchers):
            if isinstance(w, MessageWatcher) and w.matches(message):
                w.callback(self, message.type, message, w.args)
                return
        self._events.append(message)

    # -- watchers -------------------------------------------------------------
    def timer_watcher_create(self, after, callback, repeat=0.0, args=None):
        return TimerWatcher(self, after, callback, repeat=repeat, args=args)

    def signal_watcher_create(self, signum, callback, args=None):
        return SignalWatcher(self, signum, callback, args)

    def fd_watcher_create(self, fd_int, callback, events=None, args=None):
        return FDWatcher(self, fd_int, events, callback, args=args)

    def msg_watcher_create(self, callback, type_mask=FLUX_MSGTYPE_ANY, topic_glob="*",
                           args=None, match_tag=None, rolemask=None):
        return MessageWatcher(self, type_mask, callback, topic_glob, args, match_tag,
                              rolemask)

    # -- the reactor ------------------------------------------------------------
    def _watch_future(self, state) -> None:
        self._futures.add(state)

    def _ready(self, state) -> None:
        if state not in self._readyq:
            self._readyq.append(state)

    def _run_ready(self, reactor: bool) -> bool:
        """Run the due then-callbacks; True if any ran.  Outside reactor_run (a
        blocking get) those of reactor-only futures (watches, journal callbacks)
        wait for the reactor, as in Flux."""
        ran, kept = False, []
        while self._readyq:
            state = self._readyq.pop(0)
            if state.then is None or not state.results:
                continue
            if state.reactor_only and not reactor:
                kept.append(state)
                continue
            if not state.streaming or state.ended:
                self._futures.discard(state)
            future, callback, args, kwargs = state.then
            ran = True
            callback(future, *args, **kwargs)
        self._readyq[:0] = kept
        return ran

    def _run_once(self, timeout: float | None, reactor: bool = False) -> None:
        """One turn: due then-callbacks, else wait for a message, fd or (in the
        reactor) a timer."""
        if self._run_ready(reactor):
            return
        timers = [w for w in self._watchers if isinstance(w, TimerWatcher)] if reactor \
            else []
        if timers:
            left = max(0.0, min(w.due for w in timers) - time.monotonic())
            timeout = left if timeout is None else min(timeout, left)
        self.handle.poll(timeout)
        now = time.monotonic()
        for w in sorted(timers, key=lambda w: w.due):
            if w.active and w.due <= now:
                w.fire()
        self._run_ready(reactor)

    def reactor_run(self, reactor=None, flags: int = 0) -> int:
        """Run watchers and future callbacks until reactor_stop() (0),
        reactor_stop_error() (-1), or until nothing is left to run (0).  An
        exception raised by a callback ends it and is raised here.  There is one
        reactor per handle; `reactor` and `flags` are Flux's and change nothing."""
        del reactor, flags
        self._stop = None
        while self._stop is None:
            if not (self._readyq or self._futures
                    or any(not w.daemon for w in self._watchers)):
                return 0
            self._run_once(None, reactor=True)
        rc, self._stop = self._stop, None
        return rc

    def reactor_stop(self, reactor=None) -> None:
        del reactor
        self._stop = 0

    def reactor_stop_error(self, reactor=None) -> None:
        del reactor
        self._stop = -1

    def get_reactor(self):
        return self

    def fatal_error(self, message) -> None:
        raise RuntimeError(f"fatal error: {message}")

    # -- lifetime -----------------------------------------------------------------
    def close(self) -> None:
        self.handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getattr__(self, name):
        from .. import missing
        raise missing("flux.Flux", name)


_future.default_handle = Flux.default
__all__ = ["Flux", "RPC"]

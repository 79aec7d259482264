"""What a service's messages look like from outside: counters, debug flags, tracers.

Each Service has one Traffic.  It counts the messages the service receives
(`rx`: requests handed to it, responses to its RPCs) and sends (`tx`: its
responses, its requests), by type, as Flux's module message counters do
(`flux module stats NAME` prints them as "#request (tx)" and so on), and hands
each message to the tracers `module.trace` attached (`flux module trace NAME`):
one record per message, {timestamp, prefix (rx/tx), name, type, topic,
payload_size, errnum, errstr, payload (when the tracer asked for it)}.

The debug flags are Flux's per-module integer (`flux module debug NAME`): set,
cleared and read back; fluxlite's services read none of them today.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable

from ..protocol import message as m
from ..protocol.message import Message

TYPES = {m.REQUEST: "request", m.RESPONSE: "response", m.EVENT: "event",
         m.CONTROL: "control"}


class Tracer:
    """One `module.trace` stream's wishes: which types, which topics, and whether the
    payloads go too; `send(record)` answers the stream."""

    __slots__ = ("typemask", "glob", "full", "send")

    def __init__(self, typemask: int, glob: str, full: bool, send: Callable[[dict], None]):
        self.typemask, self.glob, self.full, self.send = typemask, glob, full, send

    def wants(self, msg: Message) -> bool:
        return bool(msg.type & self.typemask) and (
            self.glob == "*" or fnmatch.fnmatchcase(msg.topic, self.glob))


class Traffic:
    __slots__ = ("name", "counts", "debug_flags", "tracers")

    def __init__(self, name: str):
        self.name = name
        self.counts = dict.fromkeys(((t, d) for t in TYPES.values() for d in ("tx", "rx")), 0)
        self.debug_flags = 0
        self.tracers: list[Tracer] = []

    def note(self, direction: str, msg: Message) -> None:
        """A message passed the service's boundary ("rx": in, "tx": out)."""
        kind = TYPES.get(msg.type)
        if kind is None:
            return
        self.counts[(kind, direction)] += 1
        if self.tracers:
            self._trace(direction, msg)

    def note_request(self, topic: str, payload, nodeid) -> None:
        """A request the service sends (its message is built by the router: one like
        it is made here only for a tracer)."""
        self.counts[("request", "tx")] += 1
        if self.tracers:
            self._trace("tx", Message.request(
                topic, payload, nodeid=m.NODEID_ANY if nodeid is None else nodeid))

    def _trace(self, direction: str, msg: Message) -> None:
        base = None
        for t in list(self.tracers):
            if not t.wants(msg):
                continue
            if base is None:
                base = {"timestamp": time.time(), "prefix": direction, "name": self.name,
                        "type": msg.type, "topic": msg.topic,
                        "payload_size": len(msg.payload_bytes())}
                if msg.type == m.RESPONSE:
                    base["errnum"] = msg.errnum
                    if msg.errnum and msg.errstr:
                        base["errstr"] = msg.errstr
            record = base
            if t.full and msg.payload is not None and not msg.errnum:
                record = {**base, "payload": msg.payload}
            t.send(record)

    def stats(self) -> dict:
        """Flux's module message counters ("#request (tx)": N, ...)."""
        return {f"#{kind} ({d})": n for (kind, d), n in self.counts.items()}

    def clear(self) -> None:
        for k in self.counts:
            self.counts[k] = 0

    def debug(self, op: str, flags: int) -> int:
        """Flux's module.debug ops: setbit, clrbit, set, clr; the flags after."""
        if op == "setbit":
            self.debug_flags |= flags
        elif op == "clrbit":
            self.debug_flags &= ~flags
        elif op == "set":
            self.debug_flags = flags
        elif op == "clr":
            self.debug_flags = 0
        else:
            raise ValueError(op)
        return self.debug_flags

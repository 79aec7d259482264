"""The `broker` service, on every rank: ping, attributes, the log ring, client
service registration, event subscription and publishing, shutdown.

Where Flux has a topic for it, that topic is the one: `attr.get/set/rm/list`,
`service.add/remove` {service}, `event.subscribe/unsubscribe` {topic} and
`event.publish` {topic, flags, payload?: base64} (Flux's broker answers those
itself too)."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from ..errors import NotFound, PermissionDenied, UsageError
from ..protocol.message import event_publish_bytes
from ..protocol.schema import Name, Pid, Struct, Text, Topic, TopicPrefix
from .base import ANY, Service, handler


class ClientRegistry(Protocol):
    """What service.add/remove and event.subscribe change: the services and
    subscriptions of this rank's local clients (the broker passes its Router)."""

    def add_client_service(self, ident: bytes, name: str, pid: int | None) -> None: ...
    def remove_client_service(self, ident: bytes, name: str) -> None: ...
    def subscribe_client(self, ident: bytes, topic: str) -> None: ...
    def unsubscribe_client(self, ident: bytes, topic: str) -> bool: ...


class NameRequest(Struct, kw_only=True):
    name: Name


class SetattrRequest(Struct, kw_only=True):
    name: Name
    value: Text


class DmesgRequest(Struct, kw_only=True):
    clear: bool = False


class DmesgFollowRequest(Struct, kw_only=True):
    new: bool = False   # only entries logged from now on


class ServiceAddRequest(Struct, kw_only=True):
    service: Name
    pid: Pid | None = None      # fluxlite's: the process that answers (a job shell)


class ServiceRemoveRequest(Struct, kw_only=True):
    service: Name


class SubscribeRequest(Struct, kw_only=True):
    topic: TopicPrefix    # events whose topic starts so ("" all, as Flux's)


class PublishRequest(Struct, kw_only=True):
    topic: Topic
    flags: int = 0              # Flux's FLUX_MSGFLAG_PRIVATE: events reach the owner only here
    payload: str | None = None  # base64 of the event's raw payload (JSON text for JSON)


class ShutdownRequest(Struct, kw_only=True):
    reason: Text = ""


class BrokerService(Service):
    name = "broker"
    aliases = ("attr", "service", "event")   # Flux's attr.*, service.*, event.* topics

    def __init__(self, ctx, *, attributes: dict, check_attr, clients: ClientRegistry,
                 on_setattr, request_shutdown, start_time: float, logs=None):
        super().__init__(ctx)
        self.logs = logs                        # the process's util.log.LogSink (None: no ring)
        self.attributes = attributes            # name -> spec with .writable and .help
        self.check_attr = check_attr            # (name, value) -> checked value, or UsageError
        self.clients = clients
        self.on_setattr = on_setattr            # (name, value) after a change
        self.request_shutdown = request_shutdown
        self.start_time = start_time
        self._followers: list[list] = []        # [request, last seq sent] per `dmesg -f`
        self._follow_task = None
        self.user_attrs: dict[str, str] = {}    # attributes made by attr.set

    def _client_ident(self, msg) -> bytes:
        if len(msg.route) != 1 or not isinstance(msg.route[0], bytes) or not msg.route[0]:
            raise PermissionDenied(f"{msg.topic} is only for clients of this rank")
        return msg.route[0]

    # Flux's attr.* topics, the one way to read and change attributes (the CLI's
    # getattr/setattr/lsattr and flux.Flux's attr_get/attr_set/attr_remove).  As in
    # Flux, a name outside the table of attributes is a user's own attribute:
    # attr.set creates it, attr.rm removes it; the table's are read-only or writable
    # as they say, and cannot be removed.
    @handler("attr.get", schema=NameRequest, roles=ANY)
    def attr_get(self, msg, req):
        name = req.name
        if name in self.user_attrs:
            return {"value": self.user_attrs[name], "flags": 0}
        if name not in self.attributes:
            raise NotFound(f"unknown attribute {name!r} (see `fluxlite lsattr`)")
        value = self.ctx.attrs.get(name)
        if value is None:
            raise NotFound(f"attribute {name!r} is not set on rank {self.ctx.rank}")
        return {"value": value, "flags": 0}

    @handler("attr.set", schema=SetattrRequest)
    def attr_set(self, msg, req):
        if req.name not in self.attributes:
            self.user_attrs[req.name] = req.value
            return None
        value = self.check_attr(req.name, req.value)
        self.ctx.attrs[req.name] = value
        if self.logs is not None and req.name == "log-level":
            self.logs.set_levels(level=value)
        elif self.logs is not None and req.name == "log-stderr-level":
            self.logs.set_levels(stderr_level=value)
        self.on_setattr(req.name, value)
        self.log.info("attribute set", name=req.name, value=value)
        return None

    @handler("attr.rm", schema=NameRequest)
    def attr_rm(self, msg, req):
        if req.name in self.attributes:
            raise PermissionDenied(f"attribute {req.name!r} is the broker's; only "
                                   "attributes set with attr.set can be removed")
        if self.user_attrs.pop(req.name, None) is None:
            raise NotFound(f"no attribute {req.name!r}")
        return None

    @handler("attr.list", schema=None, roles=ANY)
    def attr_list(self, msg, req):
        """Every attribute's name, as Flux's: those of the table (an unset one's
        attr.get is ENOENT) and the user's."""
        return {"names": sorted([*self.attributes, *self.user_attrs])}

    @handler("broker.dmesg", schema=DmesgRequest)
    def dmesg(self, msg, req):
        entries = [] if self.logs is None else self.logs.entries()
        if req.clear and self.logs is not None:
            self.logs.clear()
        return {"entries": entries}

    @handler("broker.dmesg-follow", schema=DmesgFollowRequest, streaming=True)
    def dmesg_follow(self, msg, req):
        """The ring (unless `new`), then each new entry as it is logged: {entries}."""
        entries = [] if self.logs is None else self.logs.entries()
        last = entries[-1].get("seq", 0) if entries else 0
        if entries and not req.new:
            self.respond(msg, {"entries": entries})
        if self.logs is None:
            return self.no_reply
        follower = [msg, last]
        self._followers.append(follower)
        self.track_stream(msg, lambda: self._unfollow(follower))
        if self._on_log not in self.logs.listeners:
            self.logs.listeners.append(self._on_log)
        return self.no_reply

    def _unfollow(self, follower) -> None:
        self._followers.remove(follower)
        if not self._followers and self._on_log in self.logs.listeners:
            self.logs.listeners.remove(self._on_log)

    def _on_log(self, entry) -> None:
        # called inside a log call: answer on the next loop turn, so that sending
        # (which may log) never runs inside logging, and a burst goes in one response
        if self._follow_task is None:
            self._follow_task = asyncio.get_running_loop().call_soon(self._send_new_entries)

    def _send_new_entries(self) -> None:
        self._follow_task = None
        entries = self.logs.entries()
        newest = entries[-1].get("seq", 0) if entries else 0
        for follower in list(self._followers):
            if newest > follower[1]:
                fresh = [e for e in entries if e.get("seq", 0) > follower[1]]
                follower[1] = newest
                self.respond(follower[0], {"entries": fresh})

    @handler("service.add", schema=ServiceAddRequest)
    def service_add(self, msg, req):
        self.clients.add_client_service(self._client_ident(msg), req.service, req.pid)
        return {}

    @handler("service.remove", schema=ServiceRemoveRequest)
    def service_remove(self, msg, req):
        self.clients.remove_client_service(self._client_ident(msg), req.service)
        return {}

    @handler("event.subscribe", schema=SubscribeRequest, roles=ANY)
    def subscribe(self, msg, req):
        self.clients.subscribe_client(self._client_ident(msg), req.topic)
        return {}

    @handler("event.unsubscribe", schema=SubscribeRequest, roles=ANY)
    def unsubscribe(self, msg, req):
        if not self.clients.unsubscribe_client(self._client_ident(msg), req.topic):
            raise NotFound(f"not subscribed to {req.topic!r} (No such file or directory)")
        return {}

    @handler("event.publish", schema=PublishRequest)
    def publish(self, msg, req):
        # the event carries the bytes as published (`event sub` prints them so) and
        # their value for subscribers that want it
        seq = self.ctx.publish(req.topic, published=event_publish_bytes(req.payload))
        return {} if seq is None else {"seq": seq}

    @handler("broker.state", schema=None, roles=ANY)
    def state(self, msg, req):
        return {"state": self.ctx.state(), "rank": self.ctx.rank,
                "uptime": time.time() - self.start_time}

    @handler("broker.shutdown", schema=ShutdownRequest)
    def shutdown(self, msg, req):
        if self.ctx.rank != 0:
            raise UsageError("shutdown must be sent to rank 0")
        self.request_shutdown(req.reason or "fluxlite shutdown", deliberate=True)
        return {}

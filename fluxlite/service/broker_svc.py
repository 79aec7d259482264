"""The `broker` service, on every rank: ping, attributes, the log ring, client
service registration, event subscription and publishing, shutdown."""

from __future__ import annotations

import errno
import time

from ..broker import attrs as battrs
from ..util import log as blog
from ..errors import FluxliteError
from .base import Service, fields, request


class BrokerService(Service):
    name = "broker"

    def _client_ident(self, msg) -> bytes:
        if len(msg.route) != 1 or not isinstance(msg.route[0], bytes) or not msg.route[0]:
            raise FluxliteError(f"{msg.topic} is only for clients of this rank", errno.EPERM)
        return msg.route[0]

    @request("broker.getattr")
    def getattr(self, msg):
        name = fields(msg, name=str)
        if name not in battrs.ATTRIBUTES:
            raise FluxliteError(f"unknown attribute {name!r} (see `fluxlite lsattr`)",
                                errno.ENOENT)
        value = self.broker.attrs.get(name)
        if value is None:
            raise FluxliteError(f"attribute {name!r} is not set on rank {self.broker.rank}",
                                errno.ENOENT)
        return {"name": name, "value": value}

    @request("broker.setattr")
    def setattr(self, msg):
        name, value = fields(msg, name=str, value=str)
        value = battrs.check(name, value, at_runtime=True)
        self.broker.attrs[name] = value
        if name == "log-level":
            blog.set_levels(level=value)
        elif name == "log-stderr-level":
            blog.set_levels(stderr_level=value)
        if name.startswith("tbon."):
            self.broker.overlay.timeouts_changed()
        self.log.info("attribute set", name=name, value=value)
        return {}

    @request("broker.lsattr")
    def lsattr(self, msg):
        return {"attrs": [{"name": n, "value": self.broker.attrs.get(n),
                           "writable": a.writable, "help": a.help}
                          for n, a in sorted(battrs.ATTRIBUTES.items())]}

    @request("broker.dmesg")
    def dmesg(self, msg):
        payload = msg.payload if isinstance(msg.payload, dict) else {}
        entries = blog.ring_entries()
        if payload.get("clear"):
            blog.clear_ring()
        return {"entries": entries}

    @request("broker.service-add")
    def service_add(self, msg):
        ident = self._client_ident(msg)
        name, pid = fields(msg, name=str, pid=(int, type(None)))
        self.router.add_client_service(ident, name, pid)
        return {}

    @request("broker.service-remove")
    def service_remove(self, msg):
        ident = self._client_ident(msg)
        self.router.remove_client_service(ident, fields(msg, name=str))
        return {}

    @request("broker.subscribe")
    def subscribe(self, msg):
        ident = self._client_ident(msg)
        topic = fields(msg, topic=str)
        self.router._client(ident).subscriptions.append(topic)
        return {}

    @request("broker.unsubscribe")
    def unsubscribe(self, msg):
        ident = self._client_ident(msg)
        topic = fields(msg, topic=str)
        subs = self.router._client(ident).subscriptions
        if topic in subs:
            subs.remove(topic)
        return {}

    @request("broker.publish")
    def publish(self, msg):
        topic = fields(msg, topic=str)
        self.router.publish(topic, msg.payload.get("payload"))
        return {}

    @request("broker.state")
    def state(self, msg):
        return {"state": self.broker.sm.state, "rank": self.broker.rank,
                "uptime": time.time() - self.broker.start_time}

    @request("broker.shutdown")
    def shutdown(self, msg):
        if self.broker.rank != 0:
            raise FluxliteError("shutdown must be sent to rank 0", errno.EINVAL)
        reason = (msg.payload or {}).get("reason", "") if isinstance(msg.payload, dict) else ""
        self.broker.request_shutdown(reason or "fluxlite shutdown", deliberate=True)
        return {}

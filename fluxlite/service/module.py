"""The `module` service, on every rank: this broker's modules, under Flux's topics.

- `module.list` (`module list`): the services this broker runs, as Flux lists
  its broker modules: {mods: [{name, path, idle, status, services, sendqueue,
  recvqueue}]}, services naming the other topics' services each answers.
- `module.remove` {name} / `module.load` {path, args} (`module remove/load/
  reload`): stop a service, or build a removed one again (broker/modules.py
  decides what may stop and how a module comes back).
- `module.trace` {names, typemask, topic_glob, full} (`module trace`), a
  stream: one answer per message to or from the named modules, as it passes
  (traffic.py), until the caller cancels or goes away.  A module removed and
  loaded again keeps being traced.  `module stats module` counts the streams
  open on each module ("tracers").

The per-module methods (NAME.stats-get, NAME.debug, ...) are each service's own
(modstats.py).
"""

from __future__ import annotations

import time
from typing import Annotated, Protocol

from msgspec import Meta

from ..errors import NotFound
from ..protocol import message as m
from ..protocol.schema import Name, Struct, Text
from .base import ANY, Service, handler
from .traffic import Tracer

ALL_TYPES = m.REQUEST | m.RESPONSE | m.EVENT | m.CONTROL


class Modules(Protocol):
    """What the service uses of the broker's module table (broker/modules.py)."""
    loaded: list
    tracers: dict

    def find(self, name: str): ...
    async def remove(self, name: str) -> None: ...
    async def load(self, name: str, args: list[str]) -> list[str]: ...


class RemoveRequest(Struct, kw_only=True):
    name: Name
    cancel: bool = False     # Flux's --cancel (a stuck module thread): nothing to cancel


class LoadRequest(Struct, kw_only=True):
    path: Annotated[str, Meta(min_length=1, max_length=4096)]   # a name, or Flux's path
    args: list[Annotated[str, Meta(max_length=4096)]] = []
    name: Name | None = None


class TraceRequest(Struct, kw_only=True):
    names: list[Name]
    typemask: int = ALL_TYPES
    topic_glob: Text = "*"
    full: bool = False


class ModuleService(Service):
    name = "module"
    busy = "it is what loads and removes the others"

    def __init__(self, ctx, *, modules: Modules):
        super().__init__(ctx)
        self.modules = modules

    @handler("module.list", schema=None, roles=ANY)
    def list(self, msg, req):
        now = time.monotonic()
        mods = []
        for svc in sorted(self.modules.loaded, key=lambda s: s.name):
            idle = int(now - svc.last_active)
            mods.append({"name": svc.name, "path": "builtin", "idle": idle, "status": 2,
                         "services": [svc.name, *svc.aliases], "sendqueue": 0,
                         "recvqueue": 0})
        return {"mods": mods}

    @handler("module.remove", schema=RemoveRequest)
    async def remove(self, msg, req):
        await self.modules.remove(req.name)
        return {}

    @handler("module.load", schema=LoadRequest)
    async def load(self, msg, req):
        name = req.path if req.name is None else req.name
        ignored = await self.modules.load(name, req.args)
        return {"ignored": ignored} if ignored else {}

    @handler("module.trace", schema=TraceRequest, streaming=True)
    def trace(self, msg, req):
        if not req.names:
            raise NotFound("module.trace: name at least one module")
        targets = []
        for name in req.names:
            svc = self.modules.find(name)
            if svc is None:
                raise NotFound(f"{name}: No such file or directory: no module of that "
                               "name is loaded")
            if svc is self:
                raise NotFound("module: its own messages are the trace's: trace "
                               "another module")
            if svc not in targets:   # a name twice, or a module and its alias: once
                targets.append(svc)
        tracer = Tracer(req.typemask or ALL_TYPES, req.topic_glob or "*", req.full,
                        lambda record: self.respond(msg, record))
        for svc in targets:
            svc.traffic.tracers.append(tracer)
        self.track_stream(msg, lambda: self._untrace(tracer))
        return self.no_reply

    def module_stats(self) -> dict:
        """What `module stats module` adds to the counters: the trace streams open on
        each module (a removed one's too, kept for its return)."""
        open_ = {svc.name: len(svc.traffic.tracers) for svc in self.modules.loaded
                 if svc.traffic.tracers}
        for name, kept in self.modules.tracers.items():
            if kept:
                open_[name] = len(kept)
        return {"tracers": open_}

    def _untrace(self, tracer: Tracer) -> None:
        for tracers in [svc.traffic.tracers for svc in self.modules.loaded] + \
                list(self.modules.tracers.values()):
            tracers[:] = [t for t in tracers if t is not tracer]

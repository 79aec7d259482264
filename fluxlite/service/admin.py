"""Small services for administrative commands, on every rank, under Flux's topics.

- `module.list` (`fluxlite module list`): the services this broker runs, as
  Flux lists its broker modules: {mods: [{name, path, idle, status, services}]},
  services naming the other topics' services it answers (broker: attr).
- `log.append` (`fluxlite logger`, flux.Flux().log): an entry in this broker's
  log, which `fluxlite dmesg` then shows as APPNAME.LEVEL[RANK]: MESSAGE.
- `config.get` (`fluxlite config get`): the instance configuration in effect, as
  one object of tables (`{"tbon": {"topo": "kary:2"}}`): every configurable
  attribute whose value is not its default.

They own nothing but what they read: the broker hands each one a callable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from ..errors import UsageError
from ..protocol.schema import Name, Struct, Text
from .base import ANY, Service, handler

# Flux's syslog severities -> the levels of fluxlite's log
SEVERITIES = {"emerg": "critical", "alert": "critical", "crit": "critical", "err": "error",
              "warning": "warning", "notice": "info", "info": "info", "debug": "debug"}

class Module(Protocol):
    """What `module list` reads of each service of the rank (and nothing else)."""
    name: str
    aliases: tuple[str, ...]
    last_active: float


class ModuleService(Service):
    name = "module"

    def __init__(self, ctx, *, services: Callable[[], dict[str, Module]]):
        super().__init__(ctx)
        self.services = services            # this rank's services by topic

    @handler("module.list", schema=None, roles=ANY)
    def list(self, msg, req):
        now = time.monotonic()
        # the table also routes to clients' services (broker.service-add): not modules
        unique = {id(svc): svc for svc in self.services().values()
                  if isinstance(svc, Service)}.values()
        mods = []
        for svc in sorted(unique, key=lambda s: s.name):
            idle = int(now - svc.last_active)
            mods.append({"name": svc.name, "path": "builtin", "idle": idle, "status": 2,
                         "services": [svc.name, *svc.aliases], "sendqueue": 0,
                         "recvqueue": 0})
        return {"mods": mods}


class LogAppend(Struct, kw_only=True):
    appname: Name = "logger"
    severity: Name = "notice"
    message: Text


class LogService(Service):
    name = "log"

    @handler("log.append", schema=LogAppend, roles=ANY)
    def append(self, msg, req):
        level = SEVERITIES.get(req.severity)
        if level is None:
            raise UsageError(f"invalid severity {req.severity!r}: one of "
                             f"{', '.join(SEVERITIES)}")
        from ..util.log import get_logger
        getattr(get_logger(req.appname), level)(req.message)
        return {}


class ConfigService(Service):
    name = "config"

    def __init__(self, ctx, *, config):
        super().__init__(ctx)
        self.config = config                # () -> {dotted name: value} set by config

    @handler("config.get", schema=None, roles=ANY)
    def get(self, msg, req):
        out: dict = {}
        for dotted, value in sorted(self.config().items()):
            *tables, key = dotted.split(".")
            node = out
            for t in tables:
                node = node.setdefault(t, {})
                if not isinstance(node, dict):
                    break
            else:
                node[key] = value
        return out

"""Small services for administrative commands, on every rank, under Flux's topics.

- `module.list` (`fluxlite module list`): the services this broker runs, as
  Flux lists its broker modules: {mods: [{name, path, idle, status, services}]},
  services naming the other topics' services it answers (broker: attr).
- `log.append` (`fluxlite logger`, flux.Flux().log): an entry in this broker's
  log, which `fluxlite dmesg` then shows as APPNAME.LEVEL[RANK]: MESSAGE.
- `config.get` (`fluxlite config get`): the instance configuration in effect, as
  one object of tables (`{"tbon": {"topo": "kary:2"}}`): every configurable
  attribute whose value is not its default, and the tables fluxlite does not read
  that the last `config.load` gave.
- `config.load` (Flux's `flux config load`, the owner's): a config object replaces
  this rank's.  Its keys that are attributes are checked first, all of them; one
  that changes an attribute fixed at start refuses the whole object, as Flux's
  modules refuse a change they cannot take; the others are set through attr.set,
  the one writer of attributes.  Tables and keys fluxlite does not read are kept
  for config.get, as Flux keeps what its modules ignore.  Keys the object leaves
  out keep their values (those came from --conf or -S at start).

They own nothing but what they read: the broker hands each one a callable.
"""

from __future__ import annotations

import copy
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
        # the table also routes to clients' services (service.add): not modules
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

    def __init__(self, ctx, *, config, attributes, check):
        super().__init__(ctx)
        self.config = config                # () -> {dotted name: value} set by config
        self.attributes = attributes        # name -> spec with .writable (the table)
        self.check = check                  # (name, value) -> value as configured, or error
        self.unread: dict = {}              # the last config.load's tables fluxlite ignores

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
        _merge(out, self.unread)
        return out

    @handler("config.load", schema=None)
    async def load(self, msg, req):
        if not isinstance(msg.payload, dict):
            raise UsageError("config.load: the payload must be a config object "
                             "(a table of tables), as `flux config load` sends")
        known: dict[str, object] = {}
        unread = self._split(msg.payload, "", known)
        changes = {}
        for name, value in known.items():
            if isinstance(value, bool):
                value = "1" if value else "0"
            checked = self.check(name, value)
            if checked == self.ctx.attrs.get(name):
                continue
            if not self.attributes[name].writable:
                raise UsageError(f"config.load: {name} cannot change while the instance "
                                 f"runs (it is {self.ctx.attrs.get(name)!r}, the config "
                                 f"says {checked!r})")
            changes[name] = checked
        for name, value in changes.items():
            await self.rpc("attr.set", {"name": name, "value": value},
                           nodeid=self.ctx.rank).get()
        self.unread = unread
        return None

    def _split(self, table: dict, prefix: str, known: dict) -> dict:
        """Put the attributes' values of `table` in `known` by dotted name; what is
        left (tables and keys fluxlite does not read), as a table."""
        rest = {}
        for key, value in table.items():
            name = f"{prefix}{key}"
            if name in self.attributes:
                known[name] = value
            elif isinstance(value, dict):
                left = self._split(value, f"{name}.", known)
                if left or not value:
                    rest[key] = left
            else:
                rest[key] = value
        return rest


def _merge(into: dict, extra: dict) -> None:
    """Add `extra`'s tables and keys to `into` (a key both have stays `into`'s)."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into.setdefault(key, copy.deepcopy(value))

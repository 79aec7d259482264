"""Small services for administrative commands, on every rank, under Flux's topics.

- `log.append` (`fluxlite logger`, flux.Flux().log): an entry in this broker's
  log, which `fluxlite dmesg` then shows as APPNAME.LEVEL[RANK]: MESSAGE.
- `config.get` (`fluxlite config get`): the config object in effect, as Flux's
  (`{"tbon": {"topo": "kary:2"}}`): at start, the config file as written (with
  the tables fluxlite does not read) and the configurable attributes -S or the
  enclosing instance set; then what the last `config.load`/`config.reload` gave.
- `config.load` (`fluxlite config load/set/unset`, the owner's, rank 0 only as in
  Flux): an object replaces the config (one nested deeper than MAX_DEPTH tables
  and arrays is refused whole).  Every key is checked first (one that
  is not right refuses the whole object).  Then, for each key whose value
  changed (or that the object no longer sets: back to its default): [queues]
  and [policy] go to the services that read them (job-manager, sched) through
  their `config-reload`, as Flux's modules get theirs; an attribute that may
  change at run time (tbon timeouts, exec.*, job-manager limits, ...) is set
  through attr.set, the one writer of attributes, on every rank (`config.update`
  to the others, and to a rank that joins again after a change); a key read
  only at start (tbon.topo, resource.*, ...) stays as it is until the next
  start, which the broker's log says (flux-config(5): changes take effect at
  restart unless noted).
- `config.reload` (`fluxlite config reload`): the config the instance started
  with, made again: its -c/--conf paths read again and its --conf objects merged
  after them in order, over what -S set; loaded as above.  Without a source, as
  Flux, nothing changes.

They own nothing but what they read: the broker hands each one a callable.
"""

from __future__ import annotations

import asyncio
import copy

from ..errors import FluxliteError, UsageError
from ..protocol.schema import Name, Struct, Text
from .base import ANY, Service, handler

# Flux's syslog severities -> the levels of fluxlite's log
SEVERITIES = {"emerg": "critical", "alert": "critical", "crit": "critical", "err": "error",
              "warning": "warning", "notice": "info", "info": "info", "debug": "debug"}

class LogAppend(Struct, kw_only=True):
    appname: Name = "logger"
    severity: Name = "notice"
    message: Text


class LogService(Service):
    name = "log"
    busy = None   # holds nothing: `module remove log` / `module load log` as any module

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
    busy = "it holds the configuration in effect (config load changes it)"

    def __init__(self, ctx, *, configured, read, values, attributes, on_membership=None):
        super().__init__(ctx)
        self.configured = configured        # () -> {dotted name: value} set at start
        self.read = read                    # path -> the config object written there
        self.values = values                # (object, where) -> {name: value}, checked
        self.attributes = attributes        # name -> spec (.default, .writable, .config)
        self.sources = self._sources(ctx.attrs)
        self._base: dict = {}               # set at start by other than the sources
        self.current = self._initial()
        self._changing = asyncio.Lock()     # one replacement at a time
        self._replaced = False              # rank 0: the config changed since the start
        if ctx.rank == 0 and on_membership is not None:
            on_membership(self._membership)

    @staticmethod
    def _sources(attrs) -> list:
        """The config sources the instance started with, in order: paths (read again
        by reload) and config objects (start --conf KEY=VALUE or text)."""
        if attrs.get("config.sources"):
            import json
            return json.loads(attrs["config.sources"])
        return [attrs["config.path"]] if attrs.get("config.path") else []

    def _read_sources(self) -> dict:
        """The sources merged in order, each path read now."""
        out: dict = {}
        for source in self.sources:
            _merge(out, copy.deepcopy(source) if isinstance(source, dict)
                   else self.read(source))
        return out

    def _initial(self) -> dict:
        """The object in effect at start: the config sources as written (the tables
        fluxlite does not read too), and what -S or the enclosing instance set."""
        written: dict = {}
        try:
            written = self._read_sources()
        except FluxliteError as exc:    # changed since the start checked it
            self.log.warning("config path unreadable", error=exc.message)
        try:
            from_file = set(self._settings(written, "config"))
        except FluxliteError:
            from_file = set()
        for dotted, value in sorted(self.configured().items()):
            if dotted not in from_file:
                _set_path(self._base, dotted, value)
        out = copy.deepcopy(self._base)
        _merge(out, written)
        return out

    def _settings(self, obj: dict, where: str) -> dict[str, str]:
        """What `obj` sets of the configurable attributes (a [bootstrap] table is read
        only at start: flux-config-bootstrap(5))."""
        return self.values({k: v for k, v in obj.items() if k != "bootstrap"}, where)

    @handler("config.get", schema=None, roles=ANY)
    def get(self, msg, req):
        return self.current

    @handler("config.load", schema=None)
    async def load(self, msg, req):
        self._leader_only()
        if not isinstance(msg.payload, dict):
            raise UsageError("config.load: the payload must be a config object "
                             "(a table of tables), as `flux config load` sends")
        _check_depth(msg.payload, "config.load")
        await self._replace(msg.payload, "")
        return None

    @handler("config.reload", schema=None)
    async def reload(self, msg, req):
        """Read the config sources again (the paths as they are now, the start's
        --conf objects after them, in order, over what -S set) and put the result in
        effect: the config the instance started with, with the files' changes.
        Without a source, as Flux: the config stays as it is."""
        self._leader_only()
        if not self.sources:
            return None
        try:
            written = self._read_sources()
        except FluxliteError as exc:
            raise UsageError(f"Config file error: {exc.message}") from None
        where = f"config {', '.join(self._paths()) or '--conf'}"
        obj = copy.deepcopy(self._base)
        _merge(obj, written)
        _check_depth(obj, where)
        await self._replace(obj, where)
        return None

    def _paths(self) -> list[str]:
        return [s for s in self.sources if isinstance(s, str)]

    @handler("config.update", schema=None)
    async def update(self, msg, req):
        """From rank 0 after a change: this rank takes the same object (followers
        track the leader's config, as Flux's)."""
        if not isinstance(msg.payload, dict) or not isinstance(msg.payload.get("config"),
                                                               dict):
            raise UsageError("config.update: expected {config: object}")
        _check_depth(msg.payload["config"], "config.update")
        async with self._changing:
            await self._apply(msg.payload["config"], "", leader=False)
        return None

    def _leader_only(self) -> None:
        if self.ctx.rank != 0:
            raise UsageError("configuration can only be changed on rank 0")

    async def _replace(self, obj: dict, where: str) -> None:
        async with self._changing:
            if obj == self.current:
                return
            await self._apply(obj, where, leader=True)
            self._replaced = True
            if self.ctx.size > 1:
                await self._tell_followers(obj, range(1, self.ctx.size))

    async def _apply(self, obj: dict, where: str, *, leader: bool) -> None:
        """Put `obj` in effect on this rank: every key is checked first (one bad key
        refuses the whole object, nothing changes); then the services that take
        a change of their tables at run time are given theirs, the attributes that
        may change at run time are set, and a changed key that is read only at
        start is logged as waiting for the next start."""
        new = self._settings(obj, where)
        try:
            old = self._settings(self.current, "config")
        except FluxliteError:
            old = {}
        changed = {n for n in new.keys() | old.keys() if new.get(n) != old.get(n)}
        target = {n: new.get(n, self.attributes[n].default) for n in changed}
        reloaded = {n for n in changed if n in RELOADED_BY} if leader else set()
        if reloaded:
            await self._reload_services(obj, reloaded)
        for name in sorted(changed):
            spec = self.attributes[name]
            if name in reloaded:
                # the services took it: the attribute says what is in effect
                self.ctx.attrs[name] = target[name]
            elif spec.writable:
                await self.rpc("attr.set", {"name": name, "value": target[name]},
                               nodeid=self.ctx.rank).get()
            elif name not in RELOADED_BY and leader:
                self.log.warning(f"{name} changed in the config: read only at start, it "
                                 "takes effect when the instance next starts", key=name)
        self.current = copy.deepcopy(obj)

    async def _reload_services(self, obj: dict, names: set[str]) -> None:
        """Flux's `<module>.config-reload`: each service that owns a changed table
        gets the whole object; one that refuses it refuses the load, and those that
        took it already get the old object back."""
        services = []
        for name in sorted(names):
            services += [s for s in RELOADED_BY[name] if s not in services]
        done = []
        try:
            for service in services:
                await self.rpc(f"{service}.config-reload", obj, nodeid=0).get()
                done.append(service)
        except FluxliteError:
            for service in done:
                try:
                    await self.rpc(f"{service}.config-reload", self.current, nodeid=0).get()
                except FluxliteError as exc:
                    self.log.error("config revert failed", service=service,
                                   error=exc.message)
            raise

    async def _tell_followers(self, obj: dict, ranks) -> list[int]:
        """`ranks` take the new object; one that does not answer in time (lost,
        stopped) keeps the config it had, and the log says so (it gets the config
        when it joins again).  Returns the ranks that took it."""
        async def one(rank: int) -> int | None:
            try:
                await asyncio.wait_for(
                    self.rpc("config.update", {"config": obj}, nodeid=rank).get(),
                    FOLLOWER_TIMEOUT)
                return rank
            except (TimeoutError, FluxliteError) as exc:
                self.log.warning("config not taken by a rank", to_rank=rank,
                                 error=getattr(exc, "message", "no answer"))
                return None
        return [r for r in await asyncio.gather(*(one(r) for r in ranks)) if r is not None]

    def _membership(self, changes: dict) -> None:
        """Rank 0: a broker that joins (again: restarted) after the config changed
        started with the config file; it gets the leader's object, as Flux's
        followers sync theirs at join."""
        joined = sorted(set(changes.get("online", ())) - {0})
        if self._replaced and joined:
            self.spawn(self._give_joined(joined))

    async def _give_joined(self, ranks: list[int]) -> None:
        async with self._changing:
            took = await self._tell_followers(self.current, ranks)
        if took:
            self.log.info("config given to ranks that joined", ranks=",".join(map(str, took)))


# tables a service takes at run time (its config-reload), not through an attribute
RELOADED_BY = {"queues": ("job-manager", "sched"), "policy": ("job-manager",)}

# how long rank 0 waits for another rank to take a new config
FOLLOWER_TIMEOUT = 10.0


# how deeply tables and arrays may nest in a config object (TOML files nest a few
# levels; the checks and copies of a deeper one would exhaust the interpreter's stack)
MAX_DEPTH = 32


def _check_depth(obj, what: str) -> None:
    """EINVAL if tables and arrays nest deeper than MAX_DEPTH in `obj` (walked without
    recursion, so that the check itself cannot overflow)."""
    level = [obj]
    for _ in range(MAX_DEPTH):
        level = [v for node in level
                 for v in (node.values() if isinstance(node, dict) else node)
                 if isinstance(v, (dict, list))]
        if not level:
            return
    raise UsageError(f"{what}: tables and arrays nest deeper than {MAX_DEPTH} levels")


def _set_path(into: dict, dotted: str, value) -> None:
    *tables, key = dotted.split(".")
    node = into
    for t in tables:
        node = node.setdefault(t, {})
        if not isinstance(node, dict):
            return
    node[key] = value


def _merge(into: dict, extra: dict) -> None:
    """Add `extra`'s tables and keys to `into` (a key both have: `extra`'s)."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)

"""This rank's services seen as Flux's broker modules: loaded, removed, loaded again.

Flux's broker loads modules from files and unloads them on request
(`flux module load/remove/reload`).  fluxlite's services are built in, so here
a module is one of them, by its name (or a Flux name meaning the same module:
`sched-simple` is fluxlite's `sched`):

- `remove NAME` unregisters the service's names, so requests for it fail with
  ENOSYS as in Flux; it answers what it holds (Service.unload) and stops.  A
  service whose `busy` says why it cannot stop (the KVS holds the instance's
  data, the job-manager its jobs, ...) is refused with EBUSY and keeps running.
- `load NAME` builds a removed one again (its factory, given at construction)
  and starts it; one that is loaded already is EEXIST, and anything that is not
  a module of this broker (a name, or a path to a compiled Flux module, which
  fluxlite cannot load) is ENOENT.

The broker hands the table its router (whose service table routes requests)
and a factory per service that can be loaded again; the table owns the list of
services the broker runs (`loaded`), in start order.
"""

from __future__ import annotations

import errno
from collections.abc import Callable

from ..errors import AlreadyExists, FluxliteError, NotFound
from ..util.log import get_logger

# Flux's module names for fluxlite's modules
FLUX_NAMES = {"sched-simple": "sched"}

log = get_logger("module")


class ModuleTable:
    def __init__(self, router):
        self.router = router
        self.loaded: list = []          # the services running, in start order
        self.factories: dict[str, Callable[[list[str]], object]] = {}
        self.tracers: dict[str, list] = {}   # removed module -> its tracers, for its return

    def find(self, name: str):
        """The loaded module NAME, or the one that answers the service NAME (Flux's
        module names fluxlite serves within another: kvs-watch is the kvs's)."""
        name = FLUX_NAMES.get(name, name)
        for svc in self.loaded:
            if svc.name == name:
                return svc
        for svc in self.loaded:
            if name in svc.aliases:
                return svc
        return None

    def names(self) -> list[str]:
        return sorted({s.name for s in self.loaded} | set(self.factories))

    def register(self, svc) -> None:
        """Route the service's names to it (at start, and when loaded again)."""
        for name in (svc.name, *svc.aliases):
            owner = self.router.services.get(name)
            if owner is not None and owner is not svc:
                raise AlreadyExists(f"{svc.name}: the service name {name} is taken")
        for name in (svc.name, *svc.aliases):
            self.router.services[name] = svc

    async def remove(self, name: str) -> None:
        svc = self.find(name)
        if svc is None:
            raise NotFound(f"{name}: No such file or directory: no module of that name "
                           f"is loaded on rank {self.router.rank} (loaded: "
                           f"{', '.join(sorted(s.name for s in self.loaded))})")
        if svc.busy is not None:
            raise FluxliteError(f"{svc.name}: Device or resource busy: {svc.busy}",
                                errno.EBUSY)
        for n in (svc.name, *svc.aliases):
            if self.router.services.get(n) is svc:
                del self.router.services[n]
        svc.unloaded = True
        self.loaded.remove(svc)
        if svc.traffic.tracers:
            self.tracers[svc.name] = list(svc.traffic.tracers)
        try:
            await svc.unload()
        finally:
            svc.stop()
        log.info("module removed", module=svc.name)

    async def load(self, name: str, args: list[str]) -> list[str]:
        """Build and start the module NAME again; returns the arguments it ignored."""
        if "/" in name or name.endswith(".so") or ".so." in name:
            raise NotFound(f"{name}: No such file or directory: fluxlite loads no compiled "
                           "modules; its modules are built in (by name: "
                           f"{', '.join(self.names())})")
        key = FLUX_NAMES.get(name, name)
        if self.find(key) is not None:
            raise AlreadyExists(f"{name}: File exists: the module is loaded already")
        factory = self.factories.get(key)
        if factory is None:
            raise NotFound(f"{name}: No such file or directory: not a module of this "
                           f"broker (its modules: {', '.join(self.names())})")
        svc, ignored = factory(list(args))
        self.register(svc)
        self.loaded.append(svc)
        svc.traffic.tracers.extend(self.tracers.pop(svc.name, ()))
        await svc.start()
        log.info("module loaded", module=svc.name)
        return ignored

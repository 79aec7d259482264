"""The `resource` service (rank 0): the inventory and each rank's state.

Every rank offers cores and GPUs, and may have properties (job/inventory.py:
Flux's `[resource]` config, or all of this machine's, as Flux's test
instances do; `resource.cores-per-rank` or a nested instance's allocation
says otherwise).  A rank is up while its broker is online and not drained;
torpid ranks are down; a lost rank, or one whose broker left while the
instance runs (nothing restarts a broker), is removed for good (shrink), so
work that can no longer fit fails at once instead of waiting.  Ranks that
`resource.exclude` names are never offered to the scheduler and cannot be
drained (an excluded rank drained in an earlier run is not drained now), as
in Flux; `resource status` shows them as excluded.

The scheduler follows `resource.acquire` (RFC 28 style): first the whole
inventory and the up set, then {up, down, shrink} updates.  Changes are also
recorded in the `resource.eventlog` KVS key.  Flux's testing aids are here too:
`resource.reload` (a new inventory from an R, or hwloc XML per rank, while no
job holds resources; the scheduler gets the whole set again) and
`resource.acquire-mute` (the scheduler hears no more updates);
`resource.acquire-cancel` {matchtag} ends a scheduler's stream (`module remove`).
`resource.sched-status` is the scheduler's view made here (the inventory, the
ranks' states, what jobs hold), for `resource list` with no scheduler loaded.
"""

from __future__ import annotations

import errno
import json
import time

from ..errors import AlreadyExists, FluxliteError, UsageError
from ..job.eventlog import entry
from ..protocol.schema import AnyMap, Idset, Struct, Text
from ..util import idset
from .base import ANY, Service, handler


class ReloadRequest(Struct, kw_only=True):
    R: AnyMap | None = None                 # an RFC 20 resource set
    xml: dict[str, Text] | None = None      # or each rank's hwloc XML, by rank
    force: bool = False                     # leave ranks the instance lacks out


class AcquireCancel(Struct, kw_only=True):
    matchtag: int


class TargetsRequest(Struct, kw_only=True):
    targets: Idset
    reason: Text = ""


class DrainRequest(TargetsRequest, kw_only=True):
    # as Flux's: "" fails if a target is drained already, "overwrite" replaces its
    # reason and time (drain --force), "update" keeps them (drain --update)
    mode: Text = ""


class ResourceService(Service):
    name = "resource"
    busy = "the scheduler's resources and the ranks' states come from it"

    def __init__(self, ctx, *, inventory, membership, on_membership, kvs):
        super().__init__(ctx)
        self.inventory = inventory              # job.inventory.Inventory
        self.cores: dict[int, list[int]] = inventory.cores
        self.excluded: set[int] = inventory.excluded
        self._membership_now = membership      # () -> {rank: state}, the overlay's view
        self._on_membership = on_membership    # register hook(changes)
        self.kvs = kvs
        self.online: set[int] = set()
        self.torpid: set[int] = set()
        self.lost: set[int] = set()   # removed for good (shrink): lost, or left
        self.left: set[int] = set()   # of those, the ones whose broker left cleanly
        self.drained: dict[int, tuple[float, str]] = {}
        self.acquirers: list = []
        self.muted = False            # resource.acquire-mute: acquirers hear no more
        self._last_up: set[int] = set()

    async def start(self) -> None:
        if self.kvs.durable:
            self._restore_drained()
        self._on_membership(self._membership)
        now: dict[str, set[int]] = {}
        for r, state in self._membership_now().items():
            now.setdefault(state, set()).add(r)
        self._membership(now)
        self._eventlog("resource-define", {"method": "dynamic",
                                           "ranks": idset.encode(self.cores)})

    def _restore_drained(self) -> None:
        """A restart from a state directory: ranks drained in an earlier run stay
        drained, with their reason and time (the resource eventlog's drain and
        undrain entries, replayed as Flux's resource module does)."""
        try:
            entries = self.kvs.lookup("resource.eventlog")
        except FluxliteError:
            return
        for e in entries:
            ctx = e.get("context") or {}
            if e["name"] == "drain":
                for r in idset.decode(ctx["idset"]) & set(self.cores) - self.excluded:
                    self.drained[r] = (e["timestamp"], ctx.get("reason", ""))
            elif e["name"] == "undrain":
                for r in idset.decode(ctx["idset"]):
                    self.drained.pop(r, None)

    def _eventlog(self, name: str, context: dict) -> None:
        self.kvs.append("resource.eventlog", entry(name, context))

    # ----------------------------------------------------------- states
    def up(self) -> set[int]:
        return {r for r in self.cores if r in self.online and r not in self.torpid
                and r not in self.drained and r not in self.lost and r not in self.excluded}

    def _membership(self, changes: dict) -> None:
        for state, ranks in changes.items():
            ranks = set(ranks) & set(self.cores)
            if not ranks:
                continue
            if state == "online":
                newly = ranks - self.online - self.lost
                lively = ranks & self.torpid
                self.online |= ranks - self.lost
                self.torpid -= ranks
                if newly:
                    self._eventlog("online", {"idset": idset.encode(newly)})
                if lively:
                    self._eventlog("lively", {"idset": idset.encode(lively)})
            elif state == "torpid":
                self.torpid |= ranks
                self._eventlog("torpid", {"idset": idset.encode(ranks)})
            elif state == "lost":
                self._shrink(ranks - self.lost, "lost")
            elif state == "offline":
                gone = ranks & self.online
                if self.ctx.at_least("cleanup"):
                    # the instance is shutting down: its ranks leave, nothing to shrink for
                    self.online -= ranks
                    if gone:
                        self._eventlog("offline", {"idset": idset.encode(gone)})
                else:
                    # a broker that left cleanly never comes back (nothing restarts it):
                    # shrink as for a lost one, or full-size work would wait forever
                    self.left |= gone
                    self._shrink(gone, "offline")
        self._notify()

    def _shrink(self, ranks: set[int], why: str) -> None:
        """Remove ranks for good; the scheduler fails what no longer fits."""
        self.lost |= ranks
        self.online -= ranks
        self.torpid -= ranks
        if ranks:
            self.log.warning(f"ranks {why}: removing them from the resource set",
                             ranks=idset.encode(ranks))
            self._eventlog("offline", {"idset": idset.encode(ranks)})
            self._eventlog("shrink", {"idset": idset.encode(ranks)})
            self._notify(shrink=ranks)

    def _notify(self, shrink: set[int] | None = None) -> None:
        up = self.up()
        update = {}
        if shrink:
            update["shrink"] = idset.encode(shrink)
        if up - self._last_up:
            update["up"] = idset.encode(up - self._last_up)
        if self._last_up - up:
            update["down"] = idset.encode(self._last_up - up)
        self._last_up = up
        if update and not self.muted:
            for msg in list(self.acquirers):
                self.respond(msg, update)

    # ------------------------------------------------------------- RPCs
    @handler("resource.acquire", schema=None, streaming=True)
    def acquire(self, msg, req):
        self.acquirers.append(msg)
        self.track_stream(msg, lambda: self.acquirers.remove(msg))
        self._last_up = self.up()
        self.respond(msg, {**self.inventory.wire(),
                           "up": idset.encode(self._last_up),
                           "shrink": idset.encode(self.lost)})

    @handler("resource.acquire-cancel", schema=AcquireCancel)
    def acquire_cancel(self, msg, req):
        """End the caller's resource.acquire stream of that matchtag (a scheduler that
        `module remove` stops), as kvs-watch.cancel ends a watch."""
        route = tuple(msg.route)
        for w in list(self.acquirers):
            if tuple(w.route) == route and w.matchtag == req.matchtag:
                self.acquirers.remove(w)
                self.untrack_stream(w)
                self.end_stream(w)
        return {}

    @handler("resource.reload", schema=ReloadRequest)
    async def reload(self, msg, req):
        """Flux's `resource reload`: a new inventory from an R (or hwloc XML per rank),
        while no job holds resources; the scheduler is sent the whole new set, as a
        resource.acquire's first answer."""
        inv = self._inventory_from(req)
        held = (await self.rpc("job-manager.sched-hello", nodeid=0).get())["allocs"]
        if held:
            raise FluxliteError(f"Device or resource busy: {len(held)} job(s) hold "
                                "resources; reload while none runs",
                                errno.EBUSY)
        inv.excluded = self.excluded & set(inv.cores)
        self.inventory, self.cores, self.excluded = inv, inv.cores, inv.excluded
        self._last_up = self.up()
        self._eventlog("resource-define", {"method": "reload",
                                           "ranks": idset.encode(self.cores)})
        if not self.muted:
            for w in list(self.acquirers):
                self.respond(w, {**inv.wire(), "up": idset.encode(self._last_up),
                                 "shrink": idset.encode(self.lost)})
        return {}

    def _inventory_from(self, req):
        from ..job import inventory
        size = self.ctx.size
        if (req.R is None) == (req.xml is None):
            raise UsageError("resource.reload: give R or xml (one of them)")
        if req.R is not None:
            if not req.force:
                inventory.check_ranks(req.R, size, "the R given")
            return inventory.from_R(req.R, size, "the R given")
        texts = {}
        for rank, text in req.xml.items():
            if not rank.isdigit():
                raise UsageError(f"hwloc XML: {rank!r} is not a rank")
            if int(rank) >= size:
                if req.force:
                    continue
                raise UsageError(f"hwloc XML: rank {rank} is not in this instance of size "
                                 f"{size} (--force leaves it out)")
            texts[int(rank)] = text
        return inventory.from_hwloc_xml(texts, size, "hwloc XML")

    @handler("resource.acquire-mute", schema=None)
    def acquire_mute(self, msg, req):
        """Flux's testing aid: send the scheduler no more resource.acquire responses
        (ranks going up, down or away are no longer told to it)."""
        self.muted = True
        return {}

    def _targets(self, text: str) -> set[int]:
        try:
            ranks = idset.decode(text)   # bounded by idset.MAX_IDS
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        bad = ranks - set(self.cores)
        if bad or not ranks:
            raise UsageError(f"invalid ranks {text!r}: this instance has ranks "
                             f"{idset.encode(self.cores)}")
        return ranks

    @handler("resource.drain", schema=DrainRequest)
    def drain(self, msg, req):
        ranks = self._targets(req.targets)
        if ranks & self.excluded:
            raise UsageError(f"rank {idset.encode(ranks & self.excluded)} is excluded by "
                             "the configuration (resource.exclude): it cannot be drained")
        if req.mode not in ("", "overwrite", "update"):
            raise UsageError(f"invalid drain mode {req.mode!r}: expected overwrite or "
                             "update")
        already = sorted(r for r in ranks if r in self.drained)
        if already and not req.mode:
            raise AlreadyExists(f"rank{'s' if len(already) > 1 else ''} "
                                f"{idset.encode(already)} already drained (--force replaces "
                                "the reason, --update keeps it)")
        if req.mode == "update":
            ranks = ranks - set(already)
        reason = req.reason
        now = time.time()
        for r in ranks:
            self.drained[r] = (now, str(reason))
        if not ranks:
            return {}
        self._eventlog("drain", {"idset": idset.encode(ranks), "reason": reason})
        self._notify()
        return {}

    @handler("resource.undrain", schema=TargetsRequest)
    def undrain(self, msg, req):
        ranks = self._targets(req.targets)
        not_drained = [r for r in ranks if r not in self.drained]
        if not_drained:
            raise UsageError(f"rank {idset.encode(not_drained)} is not drained")
        for r in ranks:
            del self.drained[r]
        self._eventlog("undrain", {"idset": idset.encode(ranks)})
        self._notify()
        return {}

    @handler("resource.sched-status", schema=None, roles=ANY)
    async def sched_status(self, msg, req):
        """Flux's resource.sched-status: the scheduler's view of the resources
        (sched.resource-status's shape: all, free, allocated and down cores and
        GPUs per rank, properties, each queue's ranks) made here from the
        inventory, the ranks' states and what the job-manager's jobs hold, so that
        `resource list` answers while no scheduler is loaded, as Flux's does."""
        try:
            held = (await self.rpc("job-manager.sched-hello", nodeid=0).get())["allocs"]
        except FluxliteError:       # as Flux: no job-manager, nothing allocated
            held = []
        used: dict[str, dict[int, set]] = {"cores": {}, "gpus": {}}
        for alloc in held:
            for kind, where in used.items():
                for r, ids in (alloc.get(kind) or {}).items():
                    where.setdefault(int(r), set()).update(ids)
        up, gone = self.up(), self.lost | self.excluded
        views = {kind: {"all": {}, "free": {}, "allocated": {}, "down": {}} for kind in used}
        pools = {"cores": self.cores, "gpus": self.inventory.gpus}
        for rank in sorted(set(self.cores) - gone):
            for kind, view in views.items():
                total = set(pools[kind].get(rank, ()))
                busy, key = used[kind].get(rank, set()) & total, str(rank)
                for name, ids in (("all", total), ("allocated", busy),
                                  ("down" if rank not in up else "free",
                                   total if rank not in up else total - busy)):
                    if ids:
                        view[name][key] = sorted(ids)
        from ..job import constraint
        everyone = set(self.cores) - gone
        props = {p: s - gone for p, s in self.inventory.properties.items()}
        queues = json.loads(self.ctx.attrs.get("queues") or "{}")
        return {**views["cores"], "gpus": views["gpus"],
                "properties": {p: idset.encode(s) for p, s in sorted(props.items())},
                "queues": {q: idset.encode(constraint.ranks(
                    constraint.combine([{"properties": list(t.get("requires") or [])}]
                                       if t.get("requires") else []),
                    everyone, props, self.ctx.hosts)) for q, t in queues.items()},
                "removed": idset.encode(self.lost)}

    @handler("resource.status", schema=None, roles=ANY)
    def status(self, msg, req):
        return {"hostname": self.ctx.hostname,
                "ranks": {str(r): {"hostname": self.ctx.hosts[r], "cores": idset.encode(c),
                                   "gpus": idset.encode(self.inventory.gpus.get(r, ())),
                                   "properties": self.inventory.props_of(r),
                                   "online": r in self.online, "torpid": r in self.torpid,
                                   "lost": r in self.lost and r not in self.left,
                                   "excluded": r in self.excluded,
                                   "drained": self.drained.get(r, (None, None))[1],
                                   "drain_time": self.drained.get(r, (None, None))[0]}
                          for r, c in self.cores.items()}}


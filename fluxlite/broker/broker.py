"""One broker: its sockets, its services, and its walk through the lifecycle.

The broker owns three ZeroMQ sockets (parent DEALER and child ROUTER through
the overlay, a local ROUTER for clients on this machine), hosts its services
in-process, and drives the state machine in state.py:

    join      connect to the parent and say hello (rank 0: nothing to join)
    init      start services
    quorum    rank 0 waits until every rank has joined (or broker.quorum-timeout)
    run       rank 0 runs the initial program; everyone serves
    cleanup   rank 0's services wind down (running jobs are cancelled)
    shutdown  children leave first; then this broker says goodbye upstream
    exit      the process exits with the initial program's status

A broker that loses its parent shuts down at once, killing its job shells
(its spawner kills every process below it), like a node that died.

This is the one place where the parts are wired together: the overlay reports
through callbacks, the router sends through the overlay and the local
endpoint, and each service gets a ServiceContext plus exactly the objects it
needs, named at construction (see _build_services).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import time

import zmq

from .. import __version__
from ..errors import ConnectFailed, FluxliteError
from ..overlay.overlay import Overlay, OverlayCallbacks, Timeouts
from ..router.local import LocalEndpoint
from ..router.router import Router
from ..service.base import ServiceContext
from ..util import fsd, hostlist, procs
from ..util import log as blog
from . import attrs as battrs
from . import state as st
from .initial_program import program_env, run_initial_program
from .links import BrokerLinks
from .modules import ModuleTable
from .placement import BrokerConfig, Runtime

log = blog.get_logger("broker")


class Broker:
    def __init__(self, cfg: BrokerConfig, runtime: Runtime):
        self.cfg = cfg
        self.place = place = cfg.placement
        self.runtime = runtime
        self.rank = place.rank
        self.size = place.size
        self.attrs = dict(cfg.attrs)
        self.topology = place.topology
        self.userid = os.getuid()
        self.rundir = cfg.rundir
        self.local_uri = "local://" + cfg.local_path
        self.spawner = runtime.spawner
        self.sm = st.StateMachine()
        self.overlay: Overlay | None = None
        self.local: LocalEndpoint | None = None
        self.links = BrokerLinks(self)
        self.router = Router(rank=self.rank, topology=self.topology,
                             userid=self.userid, links=self.links)
        self.modules = ModuleTable(self.router)
        self.services: list = self.modules.loaded   # (`module remove/load` change it)
        self.exit_code = 0
        self.start_time = time.time()
        self._shutdown = asyncio.Event()
        self._shutdown_reason = ""
        self._asked_to_stop = False  # by `fluxlite shutdown`, not by a signal
        self._children_changed = asyncio.Event()
        self._membership_hooks: list = []
        self._quorum = asyncio.Event()
        self.parent_failed = False
        self._critical_lost = False     # nested rank 0: a critical rank's loss was reported
        self._set_identity_attrs()

    def _set_identity_attrs(self) -> None:
        a = self.attrs
        a["rank"] = str(self.rank)
        a["size"] = str(self.size)
        a["broker.pid"] = str(os.getpid())
        a["version"] = __version__
        self.hosts = self.place.hosts
        a["hostname"] = self.hosts[self.rank]
        a["hostlist"] = hostlist.encode(self.hosts)
        a["local-uri"] = self.local_uri
        a["rundir"] = self.rundir
        a["tbon.level"] = str(self.topology.level(self.rank))
        a["tbon.maxlevel"] = str(self.topology.maxlevel)
        a["tbon.descendants"] = str(len(self.topology.descendants(self.rank)))
        a["tbon.endpoint"] = self.place.bind_endpoint or ""
        a["tbon.parent-endpoint"] = self.place.parent_endpoint or ""

    # ---------------------------------------------------------------- run
    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        self.ctx = zmq.Context(io_threads=1)
        max_message = battrs.parse_size(self.attrs["broker.max-message-size"])
        self.overlay = Overlay(
            rank=self.rank, topology=self.topology, ctx=self.ctx,
            bind_endpoint=self.place.bind_endpoint, parent_endpoint=self.place.parent_endpoint,
            timeouts=self._timeouts(), max_message=max_message,
            curve=self.place.curve, insecure=self.place.insecure, bind_fd=self.place.bind_fd,
            callbacks=OverlayCallbacks(message=self.router.deliver,
                                       parent_lost=self.parent_lost,
                                       child_gone=self.child_gone,
                                       membership=self.membership_changed,
                                       shutdown=self.request_shutdown))
        self.overlay.bind()
        self.local = LocalEndpoint(
            self.ctx, self.cfg.local_path, owner=self.userid, max_message=max_message,
            queue_limit=int(self.attrs["broker.client-queue"]),
            byte_limit=battrs.parse_size(self.attrs["broker.client-queue-bytes"]),
            on_message=self.router.deliver, on_client_gone=self.router.client_gone,
            busy=self.router.busy,
            known_clients=lambda: list(self.router.clients),
            allow_guest_user=self.attrs["access.allow-guest-user"] == "1",
            allow_root_owner=self.attrs["access.allow-root-owner"] == "1")
        if self.spawner is not None:
            self.spawner.attach()
            self.spawner.on_exit = self.router.client_gone_by_pid
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            await self._lifecycle()
        except Exception:
            log.critical("broker failed", exc_info=True)
            self.exit_code = self.exit_code or 1
        finally:
            self._teardown()
        return self.exit_code

    def _timeouts(self) -> Timeouts:
        a = self.attrs
        return Timeouts(keepalive=fsd.parse(a["tbon.keepalive-period"]),
                        torpid=fsd.parse(a["tbon.torpid-timeout"]),
                        lost=fsd.parse_timeout(a["tbon.lost-timeout"]),
                        connect=fsd.parse(a["tbon.connect-timeout"]))

    def _attr_changed(self, name: str, value: str) -> None:
        if name.startswith("tbon."):
            self.overlay.set_timeouts(self._timeouts())

    def transition(self, event: str) -> str:
        old, new = self.sm.post(event)
        log.info(f"{event}: {old}->{new}", event_name=event, old=old, new=new)
        return new

    async def _lifecycle(self) -> None:
        # join
        if self.rank == 0:
            self.transition("parent-none")
        else:
            try:
                await self.overlay.join()
            except ConnectFailed as exc:
                log.error("cannot join the instance", reason=exc.message)
                self.exit_code = 1
                self.transition("parent-fail")
                await self._shutdown_phase()
                return
            self.transition("parent-ready")
        self.overlay.start_timer()
        # init
        try:
            await self._start_services()
            self.router.open()
        except (OSError, sqlite3.Error) as exc:
            # the run directory's file system (full, read-only): one line says it
            log.critical("service start failed", error=str(exc), rundir=self.cfg.rundir)
            self.exit_code = 1
            self.transition("init-fail")
            await self._shutdown_phase()
            return
        except Exception:
            log.critical("service start failed", exc_info=True)
            self.exit_code = 1
            self.transition("init-fail")
            await self._shutdown_phase()
            return
        self.transition("init-success")
        # quorum
        if self.rank == 0:
            event = await self._wait_quorum()
        else:
            event = "quorum-full"
        if self._shutdown.is_set():
            self.transition("parent-fail" if self.parent_failed else "shutdown")
        else:
            self.transition(event)
        # run
        if self.sm.state == st.RUN:
            await self._run_phase()
        # cleanup
        if self.sm.state == st.CLEANUP:
            await self._cleanup_phase()
        await self._shutdown_phase()

    def _context(self) -> ServiceContext:
        r = self.router
        return ServiceContext(rank=self.rank, size=self.size, owner=self.userid,
                              hostname=self.attrs["hostname"], hosts=self.hosts,
                              attrs=self.attrs,
                              rpc=r.rpc, send=r.send_noresponse, respond=r.respond,
                              publish=r.publish, state=lambda: self.sm.state,
                              at_least=self.sm.at_least)

    def _build_services(self) -> list:
        """Every service of this rank, in start order, each with what it needs."""
        from ..service import admin, broker_svc, module, overlay, rexec
        ctx = self._context()
        out = [broker_svc.BrokerService(ctx, attributes=battrs.ATTRIBUTES,
                                        check_attr=lambda n, v: battrs.check(n, v,
                                                                             at_runtime=True),
                                        clients=self.router, on_setattr=self._attr_changed,
                                        request_shutdown=self.request_shutdown,
                                        start_time=self.start_time, logs=self.runtime.logs),
               rexec.RexecService(ctx, spawner=self.spawner, local_uri=self.local_uri,
                                  rundir=self.rundir, durable=self.links)]
        if self.rank == 0:
            from ..service import job_exec, job_manager, kvs, kvs_direct, resource, sched
            store = kvs.KVSService(ctx)
            if store.durable:
                self.links.hold_until_durable(store.store)
            records = kvs_direct.view(store)   # the services' one direct way into the KVS
            out += [store,
                    resource.ResourceService(ctx, inventory=self._inventory(),
                                             membership=lambda: self.overlay.membership,
                                             on_membership=self.on_membership, kvs=records),
                    sched.SchedService(ctx),
                    job_exec.JobExecService(ctx, kvs=records),
                    job_manager.JobManagerService(ctx, kvs=records)]
            # `module load sched`: a scheduler that first asks which jobs hold resources
            self.modules.factories["sched"] = lambda args: (
                sched.SchedService(ctx, rejoin=True), args)
        out.append(overlay.OverlayService(ctx, overlay=self.overlay,
                                          on_membership=self.on_membership))
        self.modules.factories["log"] = lambda args: (admin.LogService(ctx), args)
        out += [module.ModuleService(ctx, modules=self.modules),
                admin.LogService(ctx), admin.ConfigService(
                    ctx, configured=self._config_in_effect, read=battrs.read_toml,
                    values=battrs.config_values, attributes=battrs.ATTRIBUTES,
                    on_membership=self.on_membership)]
        return out

    def _config_in_effect(self) -> dict:
        """The configured tables' keys whose value is not the default (`config get`);
        a whole table ([queues], [policy], [[resource.config]]) as its object."""
        specs = battrs.ATTRIBUTES
        return {n: json.loads(v) if n in battrs.STRUCTURED else v
                for n, v in self.attrs.items()
                if ("." in n or n in battrs.STRUCTURED) and n in specs and specs[n].config
                and v != specs[n].default}

    def _inventory(self):
        """Cores, GPUs and properties per rank: a nested instance's allocation, else the
        `[resource]` config or what this machine has (job/inventory.py)."""
        from ..job import inventory
        given = self.cfg.resources
        if given:
            return inventory.Inventory(cores={int(r): list(c) for r, c in given.items()},
                                       gpus=dict(self.cfg.gpus or {}))
        return inventory.from_attrs(self.attrs, self.hosts)

    async def _start_services(self) -> None:
        self.services[:] = self._build_services()
        for svc in self.services:
            self.modules.register(svc)
        for svc in list(self.services):
            await svc.start()

    async def _wait_quorum(self) -> str:
        self.membership_changed({})
        timeout = fsd.parse_timeout(self.attrs["broker.quorum-timeout"])
        waiter = asyncio.ensure_future(self._quorum.wait())
        stopper = asyncio.ensure_future(self._shutdown.wait())
        done, pending = await asyncio.wait({waiter, stopper}, timeout=timeout,
                                           return_when=asyncio.FIRST_COMPLETED)
        for t in pending:
            t.cancel()
        if self._quorum.is_set():
            return "quorum-full"
        missing = [r for r in range(self.size)
                   if self.overlay.membership.get(r) not in ("online", "torpid")]
        log.warning("quorum delayed: starting without every rank",
                    missing=",".join(map(str, missing)))
        return "quorum-timeout"

    async def _tell_parent(self) -> None:
        """Nested rank 0: record our URI in the parent job and declare our critical ranks."""
        from ..client.aio import AsyncHandle
        from ..util import fluid, idset
        from .attrs import critical_ranks
        jobid = fluid.parse(self.attrs["jobid"])
        crit = critical_ranks(self.attrs, self.size)
        h = AsyncHandle(self.attrs["parent-uri"], ctx=self.ctx)
        await h.connect()
        try:
            # critical ranks first: once the URI is visible, the declaration is done
            if crit != set(range(self.size)):
                try:
                    await h.call("job-exec.critical-ranks",
                                 {"id": jobid, "ranks": idset.encode(crit)}, timeout=30)
                    log.info("critical ranks declared to the parent", ranks=idset.encode(crit))
                except FluxliteError as exc:
                    log.error("could not declare critical ranks; all ranks stay critical",
                              error=exc.message)
            await h.call("job-manager.memo", {"id": jobid, "memo": {"uri": self.local_uri}},
                         timeout=30)
        finally:
            h.close()

    async def _run_phase(self) -> None:
        if self.rank == 0 and self.cfg.nested:
            try:
                await self._tell_parent()
            except Exception as exc:
                log.error("cannot reach the parent instance", error=repr(exc))
        if self.rank == 0 and self.cfg.initial_program and \
                self.attrs.get("broker.rc2-none") != "1":
            await self._run_initial_program()
            if self.sm.state == st.RUN:
                self.transition("rc2-success" if self.exit_code == 0 else "rc2-fail")
            return
        await self._shutdown.wait()
        self.transition("parent-fail" if self.parent_failed else "shutdown")

    async def _run_initial_program(self) -> None:
        status = await run_initial_program(self.spawner, self.cfg,
                                           program_env(self.runtime.env, self.local_uri),
                                           self._shutdown, lambda: self._shutdown_reason)
        if status is None:
            self.exit_code = 127
            return
        self.exit_code = procs.wait_status_to_exit_code(status)
        if self._asked_to_stop and os.WIFSIGNALED(status) and \
                os.WTERMSIG(status) in (signal.SIGTERM, signal.SIGHUP):
            # `fluxlite shutdown` ended it on purpose: that is a clean end, not a failure
            self.exit_code = 0

    async def _cleanup_phase(self) -> None:
        timeout = fsd.parse(self.attrs["broker.cleanup-timeout"])
        try:
            await asyncio.wait_for(self._cleanup_services(), timeout)
            self.transition("cleanup-success")
        except TimeoutError:
            log.warning("cleanup timed out", timeout=fsd.format(timeout))
            self.transition("cleanup-timeout")

    async def _cleanup_services(self) -> None:
        for svc in reversed(self.services):
            try:
                await svc.cleanup()
            except Exception:
                log.error("service cleanup failed", service=svc.name, exc_info=True)

    async def _shutdown_phase(self) -> None:
        if self.sm.state != st.SHUTDOWN:
            return
        if self.spawner is not None:
            self.spawner.killall()
        if self.parent_failed:
            # like a dead node: no goodbyes; children notice our sockets closing
            self.transition("children-none")
            return
        if not self.overlay.live_children():
            self.transition("children-none")
        else:
            self.overlay.shutdown_children()
            timeout = fsd.parse(self.attrs["broker.shutdown-timeout"])
            deadline = time.monotonic() + timeout
            while self.overlay.live_children():
                self._children_changed.clear()
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    await asyncio.wait_for(self._children_changed.wait(), left)
                except TimeoutError:
                    break
            if self.overlay.live_children():
                log.warning("shutdown: children did not leave in time",
                            ranks=",".join(map(str, self.overlay.live_children())))
                self.transition("children-timeout")
            else:
                self.transition("children-complete")
        self.overlay.goodbye()

    def _teardown(self) -> None:
        for svc in self.services:
            try:
                svc.stop()
            except Exception:
                pass
        if self.sm.state != st.EXIT:
            log.debug("teardown", state=self.sm.state)
        if self.spawner is not None:
            self.spawner.close()
        self.overlay.close()
        self.local.close()
        self.ctx.term()

    # ---------------------------------------------------------- events in
    def _on_signal(self, sig: int) -> None:
        self.request_shutdown(f"signal {signal.Signals(sig).name}")

    def request_shutdown(self, reason: str, deliberate: bool = False) -> None:
        """Begin shutting down; `deliberate` (fluxlite shutdown) makes ending rc2 a clean exit."""
        self._asked_to_stop = self._asked_to_stop or deliberate
        if not self._shutdown.is_set():
            log.info("shutdown requested", reason=reason)
            self._shutdown_reason = reason
            self._shutdown.set()

    def parent_lost(self, reason: str) -> None:
        log.error("lost parent: shutting down", reason=reason)
        self.router.fail_inflight(-1, f"overlay disconnect: {reason}")
        self.parent_failed = True
        if self.exit_code == 0:
            self.exit_code = 1
        if self.spawner is not None:
            self.spawner.killall()
        self.request_shutdown(reason)

    def child_gone(self, rank: int, state: str, reason: str) -> None:
        self.router.fail_inflight(rank, f"rank {rank} {state}: {reason}")
        self.router.subtree_gone(rank)
        self._children_changed.set()

    def _check_critical_lost(self, lost: set[int]) -> None:
        """Nested rank 0: a lost rank that is critical (broker.critical-ranks; every
        rank under batch/alloc --no-persist) ends this instance at once: its job in
        the parent gets a fatal exception naming the rank."""
        from .attrs import critical_ranks
        hit = sorted(lost & critical_ranks(self.attrs, self.size))
        if not hit or self._critical_lost or self.sm.state != st.RUN:
            return
        self._critical_lost = True
        r = hit[0]
        host = self.hosts[r] if self.hosts and r < len(self.hosts) else "?"
        setting = self.attrs.get("broker.critical-ranks") or "default"
        note = (f"broker rank {r} (host {host}) of this instance was lost, and it is a "
                f"critical rank (broker.critical-ranks={setting})")
        log.error("critical rank lost: ending the instance", lost_rank=r, host=host)
        asyncio.get_running_loop().create_task(self._raise_in_parent(note))

    async def _raise_in_parent(self, note: str) -> None:
        from ..client.aio import AsyncHandle
        from ..util import fluid
        try:
            h = AsyncHandle(self.attrs["parent-uri"], ctx=self.ctx)
            await h.connect()
            try:
                # node-failure, as the parent's own view of a lost rank is: whichever
                # of the two sees the loss first, the job ends with the same type
                await h.call("job-manager.raise", {"id": fluid.parse(self.attrs["jobid"]),
                                                   "type": "node-failure", "severity": 0,
                                                   "note": note}, timeout=30)
            finally:
                h.close()
        except Exception as exc:   # the parent is unreachable: end here at least
            log.error("cannot tell the parent instance; shutting down", error=repr(exc))
            if self.exit_code == 0:
                self.exit_code = 1
            self.request_shutdown(note)

    def on_membership(self, hook) -> None:
        """Rank 0: call hook(changes) whenever ranks change state (online, lost, ...)."""
        self._membership_hooks.append(hook)

    def membership_changed(self, changes: dict) -> None:
        if self.rank != 0:
            return
        if self.overlay.online_count() >= int(self.attrs.get("broker.quorum") or self.size):
            self._quorum.set()
        if self.cfg.nested and changes.get("lost"):
            self._check_critical_lost(changes["lost"])
        for hook in list(self._membership_hooks):
            try:
                hook(changes)
            except Exception:
                log.error("membership hook failed", exc_info=True)

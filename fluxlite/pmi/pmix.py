"""pmix: a PMIx server for one job shell's tasks, on OpenPMIx's server library.

OpenPMIx serves the PMIx wire protocol to the tasks itself, on its own
progress thread; this module is the host side it calls back (the C part and
why cffi is pmix_build.py).  Every callback from that thread only queues an
Event on the shell's event loop (call_soon_threadsafe); the shell answers
through the methods here, from its own thread.  A process may hold one
server (OpenPMIx's rule): a job shell is one process per job per node.

Pure helpers (the maps OpenPMIx is given) are here too, unit tested.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

from ..errors import FluxliteError
from . import pmix_build

CONNECTED, FINALIZED, ABORT, FENCE = 1, 2, 3, 4


class PMIxError(FluxliteError):
    """OpenPMIx refused an operation or could not be loaded."""


@dataclass
class Event:
    """One call from OpenPMIx's thread, for the shell's loop: `kind` is one of
    CONNECTED, FINALIZED, ABORT (status = the code, data = the message) or FENCE
    (status = 1 when data is to be collected, data = this node's blob); `done`
    completes the library's callback where it gave one."""
    kind: int
    rank: int
    status: int
    data: bytes
    cbfunc: object = None
    cbdata: object = None


def node_names(hosts: list[str]) -> list[str]:
    """One name per node for PMIx's node map: host names, made distinct with the
    node's index where hosts repeat (several brokers on one machine), as flux-pmix
    does; PMIx takes same-named nodes for one."""
    if len(set(hosts)) == len(hosts):
        return list(hosts)
    return [f"{h}{i}" for i, h in enumerate(hosts)]


def proc_map(counts: list[int]) -> str:
    """PMIx_generate_ppn's input for block-placed tasks: '0,1;2,3' is ranks 0-1
    on node 0 and 2-3 on node 1."""
    out, first = [], 0
    for n in counts:
        out.append(",".join(str(r) for r in range(first, first + n)))
        first += n
    return ";".join(out)


_target: tuple[asyncio.AbstractEventLoop, object] | None = None


# Read by OpenPMIx (and the hwloc it asks for the machine's topology) as the server
# starts, in the shell's own environment only.  hwloc would otherwise look at every
# PCI and block device (and try X displays) in every job shell: three quarters of
# the server's start-up CPU.  OpenPMIx's shared-memory job store (gds ds12/ds21)
# makes and unmaps segments for every job: the hash store serves the same data over
# the tasks' connections, for ~2.5 ms less CPU a shell.  A setting already in the
# environment wins.
SERVER_ENV = {"HWLOC_COMPONENTS": "-gl,-opencl,-pci,-linuxio", "PMIX_MCA_gds": "hash"}


class Server:
    """The process's PMIx server, for one namespace (the job).  Made on the shell's
    loop; start() and register_job() may run on another thread (they block)."""

    def __init__(self, on_event):
        self.loop = asyncio.get_running_loop()
        self.on_event = on_event
        self.ffi = self.lib = None
        self.nspace = ""
        self.live = False

    def start(self, tmpdir: str) -> None:
        global _target
        try:
            mod = pmix_build.load()
        except pmix_build.PMIxUnavailable as exc:
            raise PMIxError(str(exc)) from None
        self.ffi, self.lib = mod.ffi, mod.lib
        _install_callback(mod)
        _target = (self.loop, self.on_event)
        added = [k for k in SERVER_ENV if k not in os.environ]
        os.environ.update({k: SERVER_ENV[k] for k in added})
        try:
            rc = self.lib.fl_server_init(tmpdir.encode())
        finally:
            for k in added:
                del os.environ[k]
        self._check("PMIx_server_init", rc)
        self.live = True

    def _check(self, what: str, rc: int) -> None:
        if rc != self.lib.PMIX_SUCCESS:
            why = self.ffi.string(self.lib.PMIx_Error_string(rc)).decode(errors="replace")
            raise PMIxError(f"{what}: {why}")

    def register_job(self, nspace: str, jobid: str, size: int, counts: list[int],
                     node: int, hosts: list[str], tmpdir: str,
                     placed: tuple[list[int], str] | None = None) -> None:
        """`placed`: this node's ranks and every node's (proc_map's form) when the tasks
        are not placed in blocks (--taskmap)."""
        names = node_names(hosts)
        if placed is None:
            first = sum(counts[:node])
            local = list(range(first, first + counts[node]))
            ranks_per_node = proc_map(counts)
        else:
            local, ranks_per_node = placed
        self.nspace = nspace
        self._check("PMIx_server_register_nspace", self.lib.fl_register_nspace(
            nspace.encode(), len(local), size, len(counts), node, names[node].encode(),
            ",".join(names).encode(), ranks_per_node.encode(),
            ",".join(map(str, local)).encode(), self.ffi.new("unsigned int[]", local),
            tmpdir.encode(), jobid.encode()))

    def client_env(self, rank: int) -> dict[str, str]:
        """Register task `rank` (as this user) and return the environment its PMIx
        client needs to find this server."""
        self._check(f"PMIx_server_register_client rank {rank}", self.lib.fl_register_client(
            self.nspace.encode(), rank, os.getuid(), os.getgid()))
        rc = self.ffi.new("int *")
        env = self.lib.fl_setup_fork(self.nspace.encode(), rank, rc)
        try:
            self._check(f"PMIx_server_setup_fork rank {rank}", rc[0])
            out = {}
            i = 0
            while env != self.ffi.NULL and env[i] != self.ffi.NULL:
                name, _, value = self.ffi.string(env[i]).decode(errors="replace").partition("=")
                out[name] = value
                i += 1
            return out
        finally:
            self.lib.fl_free_env(env)

    def fence_done(self, ev: Event, ok: bool, data: bytes = b"") -> None:
        status = self.lib.PMIX_SUCCESS if ok else self.lib.PMIX_ERROR
        self.lib.fl_fence_done(ev.cbfunc, ev.cbdata, status, data, len(data))

    def op_done(self, ev: Event) -> None:
        if ev.cbfunc is not None:
            self.lib.fl_op_done(ev.cbfunc, ev.cbdata, self.lib.PMIX_SUCCESS)
            ev.cbfunc = None

    def close(self) -> None:
        global _target
        if self.live:
            self.live = False
            self.lib.fl_server_finalize()
            _target = None


def _install_callback(mod) -> None:
    """The one extern "Python" callback: runs on OpenPMIx's thread, copies what it
    was given and queues it on the shell's loop; nothing else happens there."""
    if getattr(mod, "_fl_installed", False):
        return
    ffi = mod.ffi

    @ffi.def_extern(name="fl_event")
    def _on_pmix_event(kind, rank, status, data, ndata, cbfunc, cbdata):
        target = _target
        if target is None:      # finalizing: nothing listens any more
            return
        loop, handler = target
        ev = Event(kind, rank, status, ffi.buffer(data, ndata)[:] if ndata else b"",
                   cbfunc if cbfunc != ffi.NULL else None, cbdata)
        try:
            loop.call_soon_threadsafe(handler, ev)
        except RuntimeError:    # the loop closed: the shell is exiting
            pass

    mod._fl_installed = True

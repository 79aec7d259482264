"""A broker started by a PMI launcher: one broker of an instance that runs as a job.

`fluxlite broker` (what batch and alloc run as their job's tasks) and
`fluxlite start` under a PMI launcher (`fluxlite run -n4 fluxlite start ...`,
MPICH's `mpiexec -n 4 fluxlite start ...`) both come here.  Each broker is one
task of its launcher; it learns its rank and the instance's size from PMI
(PMI-1, or PMI-2 under `srun --mpi=pmi2`: fluxlite/pmi/client.py from_env()), puts its endpoint (`fluxlite.ep.RANK`, only a rank
with children binds one) and, in a batch/alloc job, the cores its job shell
gave it (`fluxlite.cores.RANK`), enters the barrier, and gets its parent's
endpoint (rank 0: everybody's cores) back.  Then the brokers form their tree
exactly as `fluxlite start` brokers do.  Nothing here uses ZeroMQ before the
spawner is forked (run_broker does that first).

A batch/alloc instance's attributes say where it sits: instance-level (the
parent's + 1), jobid (its id in the parent), parent-uri.  Its resources are the
job's allocation, rank by rank.  An instance started by `start` under PMI
offers on each rank what a `fluxlite start` rank offers.

Its run directory lives inside its job's private directory (FLUXLITE_RUNDIR_BASE
from the shell's instance plugin, else FLUXLITE_JOB_TMPDIR), which the parent's
spawner removes when the job shell is reaped, so a broker killed with its job
leaves nothing behind; under another launcher it is a fresh private directory,
removed at exit.  When its initial program runs on the job's terminal (an
interactive alloc), the broker ends it with SIGHUP, as for an interactive
`fluxlite start`.
"""

from __future__ import annotations

import os
import shutil

from ..errors import FluxliteError
from ..pmi import client as pmi
from ..util import idset, tree
from .broker import BrokerConfig
from ..util.paths import make_rundir
from .attrs import critical_ranks

# what a PMI launcher and the instance plugin put in a broker's environment;
# none of it is for the instance's own jobs
LAUNCHER_ENV = ("PMI_FD", "PMI_PORT", "PMI_ID", "PMI_RANK", "PMI_SIZE", "PMI_SPAWNED", "PMI_JOBID",
                "FLUXLITE_RUNDIR_BASE", "FLUXLITE_INSTANCE_CORES")


def _exchange(client: pmi.PMIClient, attrs: dict[str, str], cores: str | None):
    """Put this rank's endpoint (and cores), barrier, get the parent's endpoint and,
    on rank 0, everybody's cores.  Returns (rundir, bind, parent_ep, resources)."""
    rank, size = client.rank, client.size
    k = tree.parse_topo(attrs["tbon.topo"])
    base = os.environ.get("FLUXLITE_RUNDIR_BASE") or os.environ.get("FLUXLITE_JOB_TMPDIR")
    rundir = _make_rundir(base, rank)
    bind = f"ipc://{rundir}/tbon" if tree.children(rank, size, k) else None
    try:
        client.init()
        if bind:
            client.put(f"fluxlite.ep.{rank}", bind)
        if cores is not None:
            client.put(f"fluxlite.cores.{rank}", cores)
        client.barrier()
        parent_ep = None
        if rank != 0:
            parent_ep = client.get(f"fluxlite.ep.{tree.parent(rank, k)}")
            if not parent_ep:
                raise FluxliteError(f"bootstrap: no endpoint for rank {tree.parent(rank, k)}")
        resources = None
        if cores is not None and rank == 0:
            resources = {}
            for r in range(size):
                got = client.get(f"fluxlite.cores.{r}")
                if got is None:
                    raise FluxliteError(f"bootstrap: no cores for rank {r}")
                resources[r] = sorted(idset.decode(got))
        client.finalize()
    except BaseException:
        shutil.rmtree(rundir, ignore_errors=True)
        raise
    finally:
        client.close()
    return rundir, bind, parent_ep, resources


def run_pmi_broker(attrs: dict[str, str], command: list[str], *, nested: bool) -> int:
    """One broker of a PMI-launched instance.  `nested`: a batch/alloc job's broker
    (tells its parent where it is); else `fluxlite start` under a PMI launcher."""
    if not pmi.in_environment():
        raise FluxliteError("`fluxlite broker` runs as a task of a batch or alloc job: "
                            "PMI_FD, PMI_RANK and PMI_SIZE are not set (use `fluxlite "
                            "start` for a standalone instance)")
    client = pmi.from_env()
    rank, size = client.rank, client.size
    crit = attrs.get("broker.critical-ranks", "")
    if crit not in ("", "all") and max(idset.decode(crit), default=0) >= size:
        client.close()
        raise FluxliteError(f"invalid value for broker.critical-ranks={crit!r}: "
                            f"this instance has ranks 0-{size - 1}")
    cores = os.environ.get("FLUXLITE_INSTANCE_CORES") if nested else None
    rundir, bind, parent_ep, resources = _exchange(client, attrs, cores)
    if nested:
        attrs["instance-level"] = os.environ.get("FLUXLITE_INSTANCE_LEVEL", "1")
        attrs["jobid"] = os.environ.get("FLUXLITE_JOB_ID", "")
        attrs["parent-uri"] = os.environ.get("FLUXLITE_URI", "")
    attrs["broker.critical-ranks"] = idset.encode(critical_ranks(attrs, size))
    cfg = BrokerConfig(rank=rank, size=size, attrs=attrs, rundir=rundir,
                       bind_endpoint=bind, parent_endpoint=parent_ep,
                       local_path=f"{rundir}/local", initial_program=command or None,
                       initial_pgid=0 if nested else os.getpgrp(),
                       interactive=os.isatty(0))  # the job's terminal (pty plugin)
    cfg.resources = resources
    cfg.nested = nested
    # inside the child, FLUXLITE_URI means the child; the parent stays in parent-uri
    os.environ["FLUXLITE_URI"] = f"local://{rundir}/local"
    for var in LAUNCHER_ENV:
        os.environ.pop(var, None)
    from .main import run_broker
    try:
        return run_broker(cfg)
    finally:
        shutil.rmtree(rundir, ignore_errors=True)


def _make_rundir(base: str | None, rank: int) -> str:
    """A short run directory inside the job's private directory (`base`), so it goes
    when the job does; a fresh one in the system temp dir without it."""
    if not base or not os.path.isdir(base):
        return make_rundir(None)
    path = os.path.join(base, f"b{rank}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        path = make_rundir(base)
    if len(os.path.join(path, "local")) > 100:
        shutil.rmtree(path, ignore_errors=True)
        raise FluxliteError(f"instances nested too deeply: the run directory {path} is too "
                            "long for a socket path")
    return path

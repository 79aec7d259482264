"""`fluxlite broker`: one broker of an instance that runs as a job (batch, alloc).

Each broker is a task of its job shell.  The shell's bootstrap plugin gives it
a channel (FLUXLITE_BOOTSTRAP_FD) and its rank and size; the brokers put their
endpoints and cores there, fence, and read everybody's back, then form their
own tree exactly as `fluxlite start` brokers do.  Nothing here uses ZeroMQ
before the spawner is forked (run_broker does that first).

The instance's attributes say where it sits: instance-level (the parent's + 1),
jobid (its id in the parent), parent-uri.  Its resources are the job's
allocation, rank by rank.

Its run directory lives inside its job's private directory (the shell's
`tmpdir`, FLUXLITE_RUNDIR_BASE), which the parent's spawner removes when the
job shell is reaped, so a broker killed with its job leaves nothing behind.
When its initial program runs on the job's terminal (an interactive alloc),
the broker ends it with SIGHUP, as for an interactive `fluxlite start`.
"""

from __future__ import annotations

import json
import os
import shutil
import socket

from ..errors import FluxliteError
from ..util import idset, tree
from .broker import BrokerConfig
from ..util.paths import make_rundir
from .attrs import critical_ranks


class BootstrapChannel:
    """The task side of the shell's bootstrap exchange: JSON lines over a socket."""

    def __init__(self, fd: int):
        self.sock = socket.socket(fileno=fd)
        self.file = self.sock.makefile("rwb")

    def _call(self, req: dict) -> dict:
        self.file.write(json.dumps(req).encode() + b"\n")
        self.file.flush()
        line = self.file.readline()
        if not line:
            raise FluxliteError("bootstrap: the job shell closed the exchange")
        resp = json.loads(line)
        if not resp.get("ok"):
            raise FluxliteError(f"bootstrap: {resp.get('error', 'failed')}")
        return resp

    def put(self, key: str, value) -> None:
        self._call({"op": "put", "key": key, "value": value})

    def fence(self) -> dict:
        return self._call({"op": "fence"})["kvs"]

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def _env_int(name: str) -> int:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        raise FluxliteError(f"`fluxlite broker` runs as a task of a batch or alloc job: "
                            f"{name} is not set (use `fluxlite start` for a standalone "
                            "instance)") from None


def run_nested_broker(attrs: dict[str, str], command: list[str]) -> int:
    rank = _env_int("FLUXLITE_BOOTSTRAP_RANK")
    size = _env_int("FLUXLITE_BOOTSTRAP_SIZE")
    chan = BootstrapChannel(_env_int("FLUXLITE_BOOTSTRAP_FD"))
    k = tree.parse_topo(attrs["tbon.topo"])
    rundir = _make_rundir(os.environ.get("FLUXLITE_RUNDIR_BASE"), rank)
    bind = f"ipc://{rundir}/tbon" if tree.children(rank, size, k) else None
    try:
        chan.put(f"ep.{rank}", bind)
        chan.put(f"cores.{rank}", os.environ.get("FLUXLITE_BOOTSTRAP_CORES", "0"))
        kvs = chan.fence()
    finally:
        chan.close()
    parent_ep = None if rank == 0 else kvs.get(f"ep.{tree.parent(rank, k)}")
    if rank != 0 and not parent_ep:
        shutil.rmtree(rundir, ignore_errors=True)
        raise FluxliteError(f"bootstrap: no endpoint for rank {tree.parent(rank, k)}")
    resources = {r: sorted(idset.decode(kvs.get(f"cores.{r}", "0"))) for r in range(size)}
    attrs["instance-level"] = os.environ.get("FLUXLITE_INSTANCE_LEVEL", "1")
    attrs["jobid"] = os.environ.get("FLUXLITE_JOB_ID", "")
    attrs["parent-uri"] = os.environ.get("FLUXLITE_URI", "")
    crit = attrs.get("broker.critical-ranks", "")
    if crit not in ("", "all") and max(idset.decode(crit), default=0) >= size:
        shutil.rmtree(rundir, ignore_errors=True)
        raise FluxliteError(f"invalid value for broker.critical-ranks={crit!r}: "
                            f"this instance has ranks 0-{size - 1}")
    attrs["broker.critical-ranks"] = idset.encode(critical_ranks(attrs, size))
    cfg = BrokerConfig(rank=rank, size=size, attrs=attrs, rundir=rundir,
                       bind_endpoint=bind, parent_endpoint=parent_ep,
                       local_path=f"{rundir}/local", initial_program=command or None,
                       initial_pgid=0,
                       interactive=os.isatty(0))  # the job's terminal (pty plugin)
    cfg.resources = resources
    cfg.nested = True
    # inside the child, FLUXLITE_URI means the child; the parent stays in parent-uri
    os.environ["FLUXLITE_URI"] = f"local://{rundir}/local"
    for var in ("FLUXLITE_BOOTSTRAP_FD", "FLUXLITE_BOOTSTRAP_RANK", "FLUXLITE_BOOTSTRAP_SIZE",
                "FLUXLITE_BOOTSTRAP_CORES", "FLUXLITE_RUNDIR_BASE"):
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

"""A broker started by a PMI launcher: one broker of an instance that runs as a job.

`fluxlite broker` (what batch and alloc run as their job's tasks) and
`fluxlite start` under a PMI launcher (`fluxlite run -n4 fluxlite start ...`,
MPICH's `mpiexec -n 4 fluxlite start ...`) both come here.  Each broker is one
task of its launcher; it learns its rank and the instance's size from PMI
(PMI-1, or PMI-2 under `srun --mpi=pmi2`: fluxlite/pmi/client.py from_env()),
exchanges host names, endpoints (`fluxlite.ep.RANK`: ipc:// when a parent's
children share its host, else tcp:// secured by CURVE) and public keys with the
others (see _exchange) and, in a batch/alloc job, the cores its job shell gave
it (`fluxlite.cores.RANK`, which rank 0 collects).  Then the brokers form their tree
exactly as `fluxlite start` brokers do.  Nothing here uses ZeroMQ before the
spawner is forked (run_broker does that first).

A batch/alloc instance's attributes say where it sits: instance-level (the
parent's + 1), jobid (its id in the parent), parent-uri, parent-kvs-namespace
(the job's guest namespace there).  Its resources are the job's allocation,
rank by rank.  An instance started by `start` under PMI
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

import ipaddress
import os
import shutil
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from zmq.utils import z85

from ..errors import FluxliteError
from ..overlay.overlay import Curve
from ..pmi import client as pmi
from ..pmi import pmix_env
from ..util import curve as curve_cert
from ..util import idset, tree
from ..util.compat import kvs_namespace
from ..util.paths import make_rundir
from .attrs import critical_ranks
from .placement import BrokerConfig, Placement

# what a PMI launcher and the instance plugin put in a broker's environment;
# none of it is for the instance's own jobs
LAUNCHER_ENV = ("PMI_FD", "PMI_PORT", "PMI_ID", "PMI_RANK", "PMI_SIZE", "PMI_SPAWNED",
                "PMI_JOBID", "FLUXLITE_RUNDIR_BASE", "FLUXLITE_INSTANCE_CORES",
                "FLUXLITE_INSTANCE_GPUS")


@dataclass
class _Boot:
    rundir: str
    bind: str | None = None              # the endpoint this broker's children connect to
    bind_fd: int | None = None           # its listening socket, when it is TCP
    parent_ep: str | None = None
    resources: dict[int, list[int]] | None = None
    gpus: dict[int, list[int]] | None = None   # nested: each rank's GPUs, renumbered
    hosts: tuple[str, ...] = ()          # every rank's host name, in rank order
    curve: Curve | None = None           # keys of the TCP links, if there are any


def _exchange(client: pmi.PMIClient, attrs: dict[str, str], cores: str | None) -> _Boot:
    """Two rounds over PMI, as Flux's boot_pmi does.  First every broker puts its
    host name (and, nested, its cores), and reads everybody's.  Then a broker with
    children binds ipc:// if they all share its host, else tcp://ADDRESS:PORT on
    its host's address, and every broker puts that endpoint and the public half
    of a CURVE keypair made for this instance.  After the second barrier each
    broker gets its parent's endpoint and key and, if it listens on TCP, its
    children's keys: only they may connect (ZAP).  Rank 0 of a nested instance
    also gets everybody's cores."""
    rank, size = client.rank, client.size
    k = tree.parse_topo(attrs["tbon.topo"])
    children = tree.children(rank, size, k)
    parent = tree.parent(rank, k) if rank else None
    base = os.environ.get("FLUXLITE_RUNDIR_BASE") or os.environ.get("FLUXLITE_JOB_TMPDIR")
    boot = _Boot(_make_rundir(base, rank))
    host = socket.gethostname()
    keys = curve_cert.generate()
    try:
        client.init()
        client.put(f"fluxlite.host.{rank}", host)
        if cores is not None:
            client.put(f"fluxlite.cores.{rank}", cores)
        client.barrier()
        # everybody's host, as Flux's brokers read every business card: the hostlist
        # attribute, and whether this broker's children share its host
        boot.hosts = tuple(_get(client, "host", r) for r in range(size))
        if children:
            if all(boot.hosts[c] == host for c in children):
                boot.bind = f"ipc://{boot.rundir}/tbon"
            else:
                boot.bind, boot.bind_fd = _listen_tcp(host)
            client.put(f"fluxlite.ep.{rank}", boot.bind)
        client.put(f"fluxlite.key.{rank}", _key_word(keys.public))
        client.barrier()
        parent_key = allowed = None
        if parent is not None:
            boot.parent_ep = _get(client, "ep", parent)
            if boot.parent_ep.startswith("tcp://"):
                parent_key = _key_from_word(_get(client, "key", parent))
        if boot.bind_fd is not None:
            # each child's key is good for that child's rank only
            allowed = {_key_from_word(_get(client, "key", c)): c for c in children}
        if parent_key or allowed:
            boot.curve = Curve(keys.public, keys.secret, parent_public=parent_key,
                               allowed=allowed)
        if cores is not None and rank == 0:
            # "CORES" or "CORES/GPUS" (idsets); a rank's GPUs are numbered from 0 here, as
            # its broker sees them through the CUDA_VISIBLE_DEVICES its shell set
            given = {r: _get(client, "cores", r).partition("/") for r in range(size)}
            boot.resources = {r: sorted(idset.decode(c)) for r, (c, _, g) in given.items()}
            boot.gpus = {r: list(range(len(idset.decode(g))))
                         for r, (c, _, g) in given.items() if g}
        client.finalize()
    except BaseException as exc:
        if isinstance(exc, FluxliteError):
            # the others wait in a barrier this broker never enters: end the job
            # (Slurm keeps a step's other tasks running when one exits)
            try:
                client.abort(1, f"fluxlite broker rank {rank}: {exc.message}")
            except FluxliteError:
                pass            # the server is gone already
        shutil.rmtree(boot.rundir, ignore_errors=True)
        if boot.bind_fd is not None:
            os.close(boot.bind_fd)
        raise
    finally:
        client.close()
    return boot


def _get(client: pmi.PMIClient, what: str, rank: int) -> str:
    got = client.get(f"fluxlite.{what}.{rank}")
    if not got:
        raise FluxliteError(f"bootstrap: rank {rank} put no {what} in PMI")
    return got


def _key_word(key: bytes) -> str:
    """A public key as hex: Z85 has '=' and other characters PMI servers may split on."""
    return z85.decode(key).hex()


def _key_from_word(word: str) -> bytes:
    try:
        raw = bytes.fromhex(word)
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise FluxliteError(f"bootstrap: a CURVE public key from PMI is malformed: {word!r}")
    return z85.encode(raw)


def _listen_tcp(host: str) -> tuple[str, int]:
    """A listening TCP socket on `host`'s address, any port: the endpoint children are
    given, and its file descriptor, which the overlay's ZeroMQ socket then uses
    (so the port is this broker's from before the exchange on)."""
    try:
        infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise FluxliteError(f"bootstrap: cannot resolve this host's name {host!r}: "
                            f"{exc.strerror}") from None
    addrs = [i[4][0] for i in infos if not ipaddress.ip_address(i[4][0]).is_loopback]
    if not addrs:
        raise FluxliteError(f"bootstrap: this host's name {host!r} resolves only to a "
                            "loopback address, which brokers on other hosts cannot reach")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((addrs[0], 0))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise FluxliteError.from_oserror(exc, f"bootstrap: cannot listen on {addrs[0]}") \
            from None
    port = sock.getsockname()[1]
    return f"tcp://{addrs[0]}:{port}", sock.detach()


def run_pmi_broker(attrs: dict[str, str], command: list[str], *, nested: bool,
                   env: Mapping[str, str] | None = None) -> int:
    """One broker of a PMI-launched instance.  `nested`: a batch/alloc job's broker
    (tells its parent where it is); else `fluxlite start` under a PMI launcher.
    `env` is the environment to hand on (default: this process's)."""
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
    if cores is not None and os.environ.get("FLUXLITE_INSTANCE_GPUS"):
        cores += "/" + os.environ["FLUXLITE_INSTANCE_GPUS"]
    boot = _exchange(client, attrs, cores)
    rundir = boot.rundir
    if nested:
        attrs["instance-level"] = os.environ.get("FLUXLITE_INSTANCE_LEVEL", "1")
        attrs["jobid"] = os.environ.get("FLUXLITE_JOB_ID", "")
        attrs["parent-uri"] = os.environ.get("FLUXLITE_URI", "")
        # the job's guest namespace its shell named (Flux's: FLUX_KVS_NAMESPACE)
        attrs["parent-kvs-namespace"] = kvs_namespace(os.environ if env is None else env) \
            or ""
    attrs["broker.critical-ranks"] = idset.encode(critical_ranks(attrs, size))
    k = tree.parse_topo(attrs["tbon.topo"])
    place = Placement(rank=rank, size=size, topology=tree.Topology.kary(size, k),
                      hosts=boot.hosts, bind_endpoint=boot.bind, parent_endpoint=boot.parent_ep,
                      curve=boot.curve, bind_fd=boot.bind_fd)
    cfg = BrokerConfig(place, attrs=attrs, rundir=rundir, local_path=f"{rundir}/local",
                       initial_program=command or None,
                       initial_pgid=0 if nested else os.getpgrp(),
                       interactive=os.isatty(0),  # the job's terminal (pty plugin)
                       nested=nested, resources=boot.resources, gpus=boot.gpus)
    env = instance_env(os.environ if env is None else env, f"local://{rundir}/local")
    from .main import run_broker
    try:
        return run_broker(cfg, env)
    finally:
        shutil.rmtree(rundir, ignore_errors=True)


def instance_env(env: Mapping[str, str], uri: str) -> dict[str, str]:
    """The environment a PMI-launched instance hands its processes: the broker's own,
    without what its launcher put there, and with FLUXLITE_URI naming this instance
    (the parent's stays in the parent-uri attribute)."""
    out = {k: v for k, v in env.items()
           if k not in LAUNCHER_ENV and not pmix_env.from_launcher(k)}
    out["FLUXLITE_URI"] = uri
    return out


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

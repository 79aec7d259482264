"""`fluxlite start`: bring up an instance of N brokers on this machine.

The launcher imports the broker and job-shell code once, then forks every
broker from that warm image (no interpreter start-up per rank).  Each broker
gets its own process group, so a Ctrl-C on the terminal reaches the launcher
and the initial program, not the brokers; the initial program joins the
launcher's (foreground) process group so an interactive shell owns the
terminal.  The launcher returns when rank 0 exits, with its exit code, after
reaping every broker and removing the run directory (unless the user named it).

Ctrl-C or SIGTERM: the launcher asks rank 0 to shut down (SIGTERM), which ends
the initial program and takes the instance down leaves first; a second Ctrl-C
kills every broker.  An instance taken down by Ctrl-C exits 130 (128+SIGINT),
as a command interrupted on a terminal does, unless the initial program chose
its own exit code.

A run directory the user names with --rundir is kept; any part of its path
that fluxlite creates is made mode 0700, whatever the umask, and an existing
one that others may write (or that is not the user's) is refused: see
util/paths.py.  Everything the brokers create in it is owner-only.

Flux's flux-start test options (StartMode): --wrap runs each broker as a
command (`fluxlite broker --rank=R --size=N --rundir=DIR -SNAME=VALUE...`, the
line -v prints for each rank) under the wrapper's arguments instead of forking
it, -X starts nothing, --test-start-mode=leader starts rank 0 alone, and the
exit timer (--test-exit-timeout, --test-exit-mode) kills the brokers still
running that long after the leader (or, in `any` mode, any broker) exited.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import sys
from dataclasses import dataclass

from ..errors import UsageError
from ..util import procs, tree
from ..util.paths import check_private_dir, make_private_dirs, make_rundir
from .placement import BrokerConfig, local_placement
from .supervise import Supervisor

MAX_SIZE = 1024


@dataclass(frozen=True)
class StartMode:
    """How the launcher runs its brokers: Flux's flux-start options."""
    wrap: tuple[str, ...] = ()          # --wrap: run each broker as a command under these
    noexec: bool = False                # -X: start nothing (-v still prints the commands)
    verbose: int = 0                    # -v: each rank's broker command line on stderr
    start_mode: str = "all"             # --test-start-mode: all, or leader (rank 0 alone)
    exit_mode: str = "leader"           # --test-exit-mode: what arms the exit timer
    exit_timeout: float | None = 20.0   # --test-exit-timeout (None: never kill)
    remove_rundir: bool = False         # --test-rundir-cleanup: remove a named run dir
    pmi_clique: str = "single"          # --test-pmi-clique: the broker.mapping attribute


def launch(size: int, attrs: dict[str, str], command: list[str], *,
           rundir: str | None = None, interactive: bool = False,
           env: dict[str, str] | None = None,
           hosts: tuple[str, ...] | None = None, mode: StartMode = StartMode()) -> int:
    """Start `size` brokers on this machine, rank 0 running `command`; returns its exit
    code.  `env` is the environment the instance hands its processes (default: this
    process's); `hosts` names each rank's host (start --test-hosts; default: this
    machine's name for all)."""
    if not 1 <= size <= MAX_SIZE:
        raise UsageError(f"--size must be between 1 and {MAX_SIZE}, got {size}")
    k = tree.parse_topo(attrs["tbon.topo"])
    attrs = {n: v for n, v in attrs.items() if n != "broker.mapping"}
    attrs.update(broker_mapping(mode.pmi_clique, size))
    if mode.wrap and shutil.which(mode.wrap[0]) is None:
        raise UsageError(f"--wrap: {mode.wrap[0]}: command not found")
    if not mode.noexec:
        from ..service import statedir
        statedir.preflight(attrs)   # in use, damaged or foreign: one line, before any broker
    owns_rundir = rundir is None
    if rundir is None:
        rundir = make_rundir()
    else:
        make_private_dirs(rundir)
        check_private_dir(rundir)
    remove = rundir if owns_rundir or mode.remove_rundir else None
    if len(os.path.join(rundir, f"local-{size}")) > 100:
        raise UsageError(f"run directory path is too long for a socket: {rundir}")
    launcher_pgid = os.getpgrp()
    ranks = range(size) if mode.start_mode == "all" else range(1)
    if mode.verbose or mode.wrap:
        argvs = {rank: broker_argv(rank, size, attrs, rundir, command, wrap=mode.wrap,
                                   hosts=hosts, initial_pgid=launcher_pgid,
                                   interactive=interactive) for rank in range(size)}
        if mode.verbose:
            for rank in range(size):
                print(f"fluxlite start: {rank}: {shlex.join(argvs[rank])}", file=sys.stderr)
            sys.stderr.flush()
    if mode.noexec:
        if remove:
            shutil.rmtree(remove, ignore_errors=True)
        return 0

    pids: dict[int, int] = {}
    if mode.wrap:
        env = dict(os.environ if env is None else env)
        for rank in ranks:
            pids[_spawn(rank, lambda r=rank: os.execvpe(argvs[r][0], argvs[r], env))] = rank
        return _supervise(pids, mode, remove, interactive)

    # warm image: everything a broker and a job shell need, imported once
    import importlib

    from .. import service as _svc
    from ..broker.main import run_broker
    from ..overlay import overlay as _o  # noqa: F401
    from ..router import router as _r  # noqa: F401
    from . import broker as _b  # noqa: F401
    for name in _svc.MODULES:
        importlib.import_module(f"{_svc.__name__}.{name}")
    from ..shell.main import preload
    preload()

    hosts = hosts or (os.uname().nodename,) * size
    topology = tree.Topology.kary(size, k)
    for rank in ranks:
        cfg = _broker_config(rank, topology, attrs, rundir, hosts, command,
                             launcher_pgid, interactive)
        pids[_spawn(rank, lambda c=cfg: run_broker(c, env))] = rank
    return _supervise(pids, mode, remove, interactive)


def _supervise(pids: dict[int, int], mode: StartMode, remove: str | None,
               interactive: bool) -> int:
    return Supervisor(pids, exit_mode=mode.exit_mode,
                      exit_timeout=mode.exit_timeout).wait(remove, interactive)


def broker_mapping(clique: str, size: int) -> dict[str, str]:
    """--test-pmi-clique: the broker.mapping attribute (an RFC 34 taskmap) that Flux's
    brokers read from the PMI_process_mapping flux-start's PMI server gives them.
    single: every broker on one node; per-broker: each on a node of its own; none:
    not set ({}); else a taskmap, which must place the instance's `size` brokers."""
    import json
    if clique == "none":
        return {}
    if clique in ("single", "per-broker"):
        block = [0, 1, size, 1] if clique == "single" else [0, size, 1, 1]
        return {"broker.mapping": json.dumps([block], separators=(",", ":"))}
    from .attrs import ATTRIBUTES
    try:
        text = ATTRIBUTES["broker.mapping"].check(clique)
    except ValueError:
        raise UsageError(f"--test-pmi-clique={clique}: expected single, per-broker, none "
                         "or an RFC 34 taskmap such as [[0,2,2,1]]") from None
    placed = sum(nnodes * ppn * repeat for _, nnodes, ppn, repeat in json.loads(text))
    if placed != size:
        raise UsageError(f"--test-pmi-clique={clique}: the taskmap places {placed} "
                         f"broker{'s' if placed != 1 else ''}, the instance has {size}")
    return {"broker.mapping": text}


def _broker_config(rank: int, topology: tree.Topology, attrs: dict[str, str], rundir: str,
                   hosts: tuple[str, ...], command: list[str], initial_pgid: int,
                   interactive: bool) -> BrokerConfig:
    return BrokerConfig(local_placement(rank, topology, rundir, hosts), attrs=dict(attrs),
                        rundir=rundir, local_path=f"{rundir}/local-{rank}",
                        initial_program=command if rank == 0 else None,
                        initial_pgid=initial_pgid, interactive=interactive)


def _spawn(rank: int, run) -> int:
    """Fork one broker: its own process group (a Ctrl-C on the terminal is the
    launcher's), killed with the launcher, stdin closed but on rank 0; `run()` runs
    it (or execs it) and returns its exit code."""
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setpgid(0, 0)
        procs.set_pdeathsig(signal.SIGTERM)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        if rank != 0:
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
        code = run()
    except OSError as exc:
        print(f"fluxlite start: rank {rank}: {exc.strerror or exc}", file=sys.stderr)
        code = 127
    except BaseException:
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os._exit(code)


def broker_argv(rank: int, size: int, attrs: dict[str, str], rundir: str,
                command: list[str], *, wrap: tuple[str, ...] = (),
                hosts: tuple[str, ...] | None = None, initial_pgid: int | None = None,
                interactive: bool = False) -> list[str]:
    """The command line that runs rank `rank` of this instance as its own process
    (what --wrap runs and -v prints): the attributes that differ from the defaults
    as -S options; rank 0 also gets the initial program."""
    from .attrs import ATTRIBUTES, defaults
    base = defaults()
    argv = [*wrap, sys.executable, "-m", "fluxlite", "broker", f"--rank={rank}",
            f"--size={size}", f"--rundir={rundir}"]
    if hosts:
        from ..util import hostlist
        argv.append(f"--test-hosts={hostlist.encode(hosts)}")
    if "broker.mapping" in attrs:
        argv.append(f"--mapping={attrs['broker.mapping']}")
    from .attrs import conf_options
    argv += conf_options(attrs)     # read again there: config.path, config.sources
    argv += [f"-S{name}={value}" for name, value in attrs.items()
             if base.get(name) != value and ATTRIBUTES[name].config]
    if rank == 0:
        if initial_pgid is not None:
            argv.append(f"--initial-pgid={initial_pgid}")
        if interactive:
            argv.append("--interactive")
        argv += ["--", *command]
    return argv


def run_rank(rank: int, size: int, attrs: dict[str, str], rundir: str, command: list[str],
             *, hosts: tuple[str, ...] | None = None, initial_pgid: int | None = None,
             interactive: bool = False, mapping: str | None = None) -> int:
    """This process as rank `rank` of a `fluxlite start` instance (the command line
    broker_argv() wrote, run under --wrap); returns its exit code."""
    if not 0 <= rank < size <= MAX_SIZE:
        raise UsageError(f"--rank={rank}: the instance has ranks 0-{size - 1}")
    if mapping is not None:
        from .attrs import ATTRIBUTES
        try:
            attrs["broker.mapping"] = ATTRIBUTES["broker.mapping"].check(mapping)
        except ValueError as exc:
            raise UsageError(f"--mapping: {exc}") from None
    from .main import run_broker
    topology = tree.Topology.kary(size, tree.parse_topo(attrs["tbon.topo"]))
    hosts = hosts or (os.uname().nodename,) * size
    return run_broker(_broker_config(rank, topology, attrs, rundir, hosts, command,
                                     initial_pgid if initial_pgid is not None
                                     else os.getpgrp(), interactive))

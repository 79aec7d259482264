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
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time

from ..errors import UsageError
from ..util import procs, tree
from ..util.paths import check_private_dir, make_private_dirs, make_rundir
from .placement import BrokerConfig, local_placement

MAX_SIZE = 1024


def launch(size: int, attrs: dict[str, str], command: list[str], *,
           rundir: str | None = None, interactive: bool = False,
           env: dict[str, str] | None = None,
           hosts: tuple[str, ...] | None = None) -> int:
    """Start `size` brokers on this machine, rank 0 running `command`; returns its exit
    code.  `env` is the environment the instance hands its processes (default: this
    process's); `hosts` names each rank's host (start --test-hosts; default: this
    machine's name for all)."""
    if not 1 <= size <= MAX_SIZE:
        raise UsageError(f"--size must be between 1 and {MAX_SIZE}, got {size}")
    k = tree.parse_topo(attrs["tbon.topo"])
    from ..service import statedir
    statedir.preflight(attrs)   # in use, damaged or foreign: one line, before any broker
    owns_rundir = rundir is None
    if rundir is None:
        rundir = make_rundir()
    else:
        make_private_dirs(rundir)
        check_private_dir(rundir)
    if len(os.path.join(rundir, f"local-{size}")) > 100:
        raise UsageError(f"run directory path is too long for a socket: {rundir}")

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

    launcher_pgid = os.getpgrp()
    hosts = hosts or (os.uname().nodename,) * size
    topology = tree.Topology.kary(size, k)
    pids: dict[int, int] = {}
    for rank in range(size):
        cfg = BrokerConfig(local_placement(rank, topology, rundir, hosts), attrs=dict(attrs),
                           rundir=rundir, local_path=f"{rundir}/local-{rank}",
                           initial_program=command if rank == 0 else None,
                           initial_pgid=launcher_pgid, interactive=interactive)
        pid = os.fork()
        if pid == 0:
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
                code = run_broker(cfg, env)
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
        pids[pid] = rank
    return _supervise(pids, rundir if owns_rundir else None, interactive)


def _supervise(pids: dict[int, int], remove_rundir: str | None, interactive: bool) -> int:
    rank0 = next(pid for pid, r in pids.items() if r == 0)
    interrupts: list[float] = []

    def on_signal(sig, frame):
        if sig == signal.SIGINT:
            now = time.monotonic()
            interrupts.append(now)
            if len(interrupts) >= 2 and now - interrupts[-2] < 2.0:
                for pid in pids:
                    _kill(pid, signal.SIGKILL)
                return
        _kill(rank0, signal.SIGTERM)

    if interactive:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    status = None
    remaining = set(pids)
    while status is None:
        try:
            pid, st = os.wait()
        except ChildProcessError:
            break
        remaining.discard(pid)
        if pid == rank0:
            status = st
    # the other brokers leave before rank 0 does; give stragglers a moment, then kill them
    _reap_within(remaining, 5.0)
    for pid in remaining:
        _kill(pid, signal.SIGKILL)
    _reap_within(remaining, 5.0)
    if remove_rundir:
        shutil.rmtree(remove_rundir, ignore_errors=True)
    if status is not None and os.WIFSIGNALED(status):
        print(f"fluxlite start: rank 0 broker (pid {rank0}) "
              f"{procs.signal_name(os.WTERMSIG(status))}", file=sys.stderr, flush=True)
    code = 1 if status is None else procs.wait_status_to_exit_code(status)
    if interrupts and code > 128:  # the shutdown Ctrl-C asked for killed the program
        code = 128 + signal.SIGINT
    return code


def _reap_within(pids: set[int], timeout: float) -> None:
    """Wait up to `timeout` for `pids` to exit; reap them and drop them from the set."""
    procs.wait_gone(pids, timeout)
    for pid in list(pids):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            pids.discard(pid)


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass

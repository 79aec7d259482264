"""`fluxlite start` (an instance of N brokers on this machine, or, under a PMI
launcher, one broker of an instance of the launcher's size) and `fluxlite broker`
(one broker of an instance that runs as a job, started by batch/alloc)."""

from __future__ import annotations

import os
import sys

import click

from .common import NO_INTERSPERSED


def _build_attrs(conf: str | None, setattrs: tuple[str, ...], **direct) -> dict[str, str]:
    from ..broker import attrs as battrs
    values = battrs.defaults()
    if conf:
        values.update(battrs.load_config(conf))
    for name, value in direct.items():
        if value is not None:
            values[name] = battrs.check(name, value)
    for item in setattrs:
        name, value = battrs.parse_setattr(item)
        values[name] = value
    return values


@click.command(context_settings=NO_INTERSPERSED)
@click.option("-s", "--size", "--test-size", "size", type=click.IntRange(1, 1024), default=None,
              help="Number of brokers (ranks), 1 to 1024 (default 1; under a PMI launcher, "
                   "the launcher's size).")
@click.option("--topo", metavar="kary:K", help="Tree shape (default kary:32; kary:0 is flat).")
@click.option("--cores-per-rank", type=click.IntRange(1, 4096), default=None,
              help="Cores each rank offers (default: all of this machine's cores).")
@click.option("-S", "--setattr", "setattrs", multiple=True, metavar="NAME=VALUE",
              help="Set a broker attribute (repeatable); see `fluxlite lsattr`.")
@click.option("--conf", type=click.Path(dir_okay=False), metavar="FILE",
              help="Instance config in TOML (see etc/fluxlite.toml).")
@click.option("--rundir", "--test-rundir", "rundir", type=click.Path(file_okay=False),
              help="Run directory to use and keep (default: a private temporary one, removed).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def start(size, topo, cores_per_rank, setattrs, conf, rundir, command):
    """Start an instance of SIZE brokers on this machine and run COMMAND in it.

    COMMAND runs on rank 0 once every rank has joined, with FLUXLITE_URI set;
    when it exits the instance shuts down and `start` exits with its status.
    With no COMMAND on a terminal, your $SHELL runs inside the instance.

    Under a PMI launcher (PMI_FD or PMI_PORT, with PMI_RANK and PMI_SIZE, in the
    environment: `fluxlite run -n4 fluxlite start ...`, `mpiexec -n 4 fluxlite
    start ...`, `srun -N4 --mpi=pmi2 fluxlite start ...`) each launched process
    is one broker of one instance, its rank and the size from PMI; rank 0 runs
    COMMAND.  Brokers on different hosts link over TCP with CURVE keys they
    exchange through PMI.
    """
    from ..broker.launcher import launch
    from ..errors import UsageError
    from ..pmi.client import in_environment
    attrs = _build_attrs(conf, setattrs, **{
        "tbon.topo": topo,
        "resource.cores-per-rank": None if cores_per_rank is None else str(cores_per_rank)})
    if in_environment():
        if rundir is not None:
            raise UsageError("--rundir cannot be used under a PMI launcher (each broker "
                             "makes its own)")
        from ..broker.nested import run_pmi_broker
        if size is not None and size != int(os.environ.get("PMI_SIZE") or size):
            raise UsageError(f"--size={size}: the PMI launcher started "
                             f"{os.environ['PMI_SIZE']} brokers")
        command = list(command) or [os.environ.get("SHELL") or "/bin/sh"]
        return run_pmi_broker(attrs, command, nested=False)
    size = 1 if size is None else size
    crit = attrs.get("broker.critical-ranks", "")
    if crit not in ("", "all"):
        from ..util import idset
        if max(idset.decode(crit), default=0) >= size:
            raise UsageError(f"invalid value for broker.critical-ranks={crit!r}: "
                             f"this instance has ranks 0-{size - 1}")
    interactive = False
    command = list(command)
    if not command:
        command = [os.environ.get("SHELL") or "/bin/sh"]
        interactive = sys.stdin.isatty()
    return launch(size, attrs, command, rundir=rundir, interactive=interactive)

@click.command(context_settings=NO_INTERSPERSED, hidden=True)
@click.option("-S", "--setattr", "setattrs", multiple=True, metavar="NAME=VALUE",
              help="Set a broker attribute (repeatable).")
@click.option("--conf", type=click.Path(dir_okay=False), metavar="FILE",
              help="Instance config in TOML.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def broker(setattrs, conf, command):
    """Run one broker of an instance that runs as a job (batch/alloc start these)."""
    from ..broker.nested import run_pmi_broker
    return run_pmi_broker(_build_attrs(conf, setattrs), list(command), nested=True)


def check_broker_opts(opts: list[str]) -> None:
    """Refuse, at submit, --broker-opts that the new instance's brokers would refuse."""
    from ..errors import UsageError
    for o in opts:
        if not o.startswith("-"):
            raise UsageError(f"--broker-opts {o!r}: broker options start with '-', e.g. "
                             "-Stbon.topo=kary:2")
    try:
        ctx = broker.make_context("broker", list(opts) + ["--", "true"])
    except click.UsageError as exc:
        raise UsageError(f"--broker-opts: {exc.format_message().rstrip('.')} (allowed: -S NAME=VALUE, "
                         "--setattr NAME=VALUE, --conf FILE)") from None
    try:
        _build_attrs(ctx.params["conf"], ctx.params["setattrs"])
    except UsageError as exc:
        raise UsageError(f"--broker-opts: {exc.message}") from None


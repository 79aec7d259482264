"""`fluxlite start` (an instance of N brokers on this machine, or, under a PMI
launcher, one broker of an instance of the launcher's size) and `fluxlite broker`
(one broker of an instance that runs as a job, started by batch/alloc; or, with
--config-path, one broker of an instance of fixed hosts)."""

from __future__ import annotations

import os
import re
import sys

import click

from . import startopts
from .common import NO_INTERSPERSED


class _StartCommand(click.Command):
    """Flux's `-v, --verbose=[LEVEL]`: given several times (-v, -vv) or with an
    attached value (--verbose=2, -v2, -v=2), read as that many -v; a bare -v never
    takes the next word (the initial program)."""

    def parse_args(self, ctx, args):
        takes_value = {n for p in self.params if isinstance(p, click.Option)
                       and not p.is_flag and not p.count for n in p.opts}
        out = list(args)
        i = 0
        while i < len(out):
            a = out[i]
            if a == "--" or not a.startswith("-") or a == "-":
                break           # the initial program and its arguments: not ours
            m = re.fullmatch(r"(--verbose=|-v=?)(\d*)(.*)", a)
            if m and (m.group(2) or m.group(1) != "-v"):
                if m.group(3) or not m.group(2):
                    raise click.UsageError(f"{a}: the verbosity LEVEL is a number "
                                           "(-v, -vv, --verbose=2)")
                level = int(m.group(2))
                out[i:i + 1] = ["-v"] * level
                i += level
                continue
            if a in takes_value:
                i += 1          # its value is the next word
            i += 1
        return super().parse_args(ctx, out)


@click.command(cls=_StartCommand, context_settings=NO_INTERSPERSED)
@click.option("-s", "--size", "--test-size", "size", type=click.IntRange(1, 1024), default=None,
              help="Number of brokers (ranks), 1 to 1024 (default 1; under a PMI launcher, "
                   "the launcher's size).")
@click.option("--topo", metavar="kary:K", help="Tree shape (default kary:32; kary:0 is flat).")
@click.option("--cores-per-rank", type=click.IntRange(0, 4096), default=None,
              help="Cores each rank offers (default, or 0: all of this machine's cores).")
@click.option("-S", "--setattr", "setattrs", multiple=True, metavar="NAME=VALUE",
              help="Set a broker attribute (repeatable); see `fluxlite lsattr`.")
@click.option("-c", "--config-path", "config_path", type=click.Path(), metavar="PATH",
              help="Instance config in TOML (see etc/fluxlite.toml): attributes and Flux's "
                   "[resource], [queues] and [policy] tables; a directory: its *.toml "
                   "files, as Flux reads one.")
@click.option("--conf", "conf", multiple=True, metavar="VALUE",
              help="Update the config, after --config-path, as Flux's --conf: KEY=VALUE, "
                   "a .toml or .json file, TOML or JSON text, or a named config; a file "
                   "or directory that exists is read as --config-path reads one "
                   "(repeatable).")
@click.option("--sysconfig", is_flag=True,
              help=f"Read the system instance's config ({startopts.SYSCONFIG}), as "
                   "--config-path would.")
@click.option("-r", "--recovery", is_flag=False, flag_value="", default=None,
              metavar="[TARGET]",
              help="Start rank 0 alone in recovery mode on TARGET: a state directory "
                   "(kept), or a dump archive (a copy; not kept); none: the system "
                   f"instance's ({startopts.SYSTEM_STATEDIR}).")
@click.option("--test-hosts", metavar="HOSTLIST",
              help="Name each rank's host, in rank order (e.g. node[0-3]), so that a "
                   "config for several nodes can be tried on this machine.")
@click.option("--rundir", "--test-rundir", "rundir", type=click.Path(file_okay=False),
              help="Run directory to use and keep (default: a private temporary one, removed).")
@click.option("--test-rundir-cleanup", is_flag=True,
              help="Remove the --test-rundir directory when the instance ends.")
@click.option("--test-exit-timeout", metavar="FSD", default=None,
              help="After a broker exits, kill the others this long after (default 20s; "
                   "none: never).")
@click.option("--killer-timeout", metavar="FSD", default=None, hidden=True,
              help="Flux's older name of --test-exit-timeout.")
@click.option("--test-exit-mode", type=click.Choice(["any", "leader"]), default=None,
              help="What starts the exit timer: the leader's exit (default here: the "
                   "instance outlives other brokers) or any broker's; `any` also makes the "
                   "exit code the highest of all brokers'.")
@click.option("--test-start-mode", type=click.Choice(["all", "leader"]), default="all",
              help="Start every broker (default), or rank 0 alone (with -Sbroker.quorum=1 "
                   "it runs the initial program at once).")
@click.option("--test-pmi-clique", metavar="single|per-broker|none|TASKMAP", default=None,
              help="How the brokers are said to sit on nodes (the broker.mapping "
                   "attribute): all on one (default), one each, not said, or an RFC 34 "
                   "taskmap.")
@click.option("--wrap", "wrap", multiple=True, metavar="ARGS,...",
              help="Run each broker under these comma-separated arguments, e.g. "
                   "--wrap=valgrind,--tool=memcheck.")
@click.option("-X", "--noexec", is_flag=True,
              help="Start nothing (with -v: print each broker's command line).")
@click.option("--flux-compat", is_flag=True,
              help="Flux compatibility for this instance, as `eval \"$(fluxlite compat env)\"` "
                   "gives: a `flux` command and Python package, FLUX_* variables.")
@click.option("-o", "--broker-opts", multiple=True, metavar="OPTS",
              help="Options for every broker, comma-separated (as Flux's): -S NAME=VALUE, "
                   "--setattr=NAME=VALUE, --conf FILE (repeatable).")
@click.option("-v", "--verbose", count=True, metavar="[=LEVEL]",
              help="Say what is started, and each broker's command line, on stderr "
                   "(repeat, or give a LEVEL: 2 adds every attribute).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def start(size, topo, cores_per_rank, setattrs, config_path, conf, sysconfig, recovery,
          test_hosts, rundir, test_rundir_cleanup, test_exit_timeout, killer_timeout,
          test_exit_mode,
          test_start_mode, test_pmi_clique, wrap, noexec, flux_compat, broker_opts, verbose,
          command):
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
    from ..broker import entry
    from ..pmi.client import in_environment
    env = dict(os.environ)   # what the instance hands its processes
    if broker_opts:
        setattrs, conf, config_path = _with_broker_opts(broker_opts, setattrs, conf,
                                                        config_path)
    if flux_compat:
        from ..util.compat import enable
        enable(env)  # the initial program and jobs get it
    rescue = startopts.Recovery.check(recovery) if recovery is not None else None
    config_path = startopts.config_path(config_path, sysconfig or (rescue and rescue.system),
                                        "--sysconfig" if sysconfig else "--recovery")
    sources = startopts.conf_sources((config_path, *conf) if config_path else conf)
    attrs = entry.build_attrs(sources, setattrs, **{
        "tbon.topo": topo,
        "resource.cores-per-rank": None if cores_per_rank is None else str(cores_per_rank)})
    if in_environment():
        _check_under_pmi(size, rundir, {
            "--test-exit-timeout": test_exit_timeout or killer_timeout,
            "--test-exit-mode": test_exit_mode,
            "--test-start-mode": None if test_start_mode == "all" else test_start_mode,
            "--test-pmi-clique": test_pmi_clique,
            "--test-rundir-cleanup": test_rundir_cleanup or None, "--recovery": recovery})
        command = list(command) or [os.environ.get("SHELL") or "/bin/sh"]
        if wrap or noexec or verbose:   # Flux's normal mode: print, then exec, the broker
            code = startopts.exec_broker(startopts.start_mode(
                wrap, noexec, verbose, "all", None, None, False, None),
                attrs, entry.build_attrs(None, ()), entry.conf_options(attrs), command, env)
            if code is not None:
                return code
        return entry.run_pmi_broker(attrs, command, nested=False, env=env)
    size = 1 if size is None else size
    mode = startopts.start_mode(wrap, noexec, verbose, test_start_mode, test_exit_mode,
                                test_exit_timeout or killer_timeout,
                                test_rundir_cleanup and rundir is not None, test_pmi_clique)
    _check_size(attrs, size)
    hosts = _test_hosts(test_hosts, size)
    _check_resources(attrs, hosts or (os.uname().nodename,) * size)
    interactive = False
    command = list(command)
    if not command:
        command = [os.environ.get("SHELL") or "/bin/sh"]
        interactive = sys.stdin.isatty()
    if verbose:
        import shlex
        print(f"fluxlite start: {size} broker{'s' if size > 1 else ''} on this machine, "
              f"run directory {rundir or '(private, removed at exit)'}; rank 0 runs "
              f"{shlex.join(command)}", file=sys.stderr)
        if verbose > 1:
            for name in sorted(attrs):
                print(f"fluxlite start: {name}={attrs[name]}", file=sys.stderr)
    if rescue is None:
        return entry.launch(size, attrs, command, rundir=rundir, interactive=interactive,
                            env=env, hosts=hosts, mode=mode)
    with rescue.statedir(noexec) as statedir:
        rescue.enter(attrs, statedir, config_path, mode, noexec)
        return entry.launch(size, attrs, command, rundir=rundir, interactive=interactive,
                            env=env, hosts=hosts, mode=mode)


def _check_under_pmi(size: int | None, rundir: str | None, local_only: dict) -> None:
    """Refuse, under a PMI launcher, what only an instance started here can do."""
    from ..errors import UsageError
    for name, value in local_only.items():
        if value is not None:
            raise UsageError(f"{name} is for an instance started here, not under a "
                             "PMI launcher")
    if rundir is not None:
        raise UsageError("--rundir cannot be used under a PMI launcher (each broker "
                         "makes its own)")
    if size is not None and size != int(os.environ.get("PMI_SIZE") or size):
        raise UsageError(f"--size={size}: the PMI launcher started "
                         f"{os.environ['PMI_SIZE']} brokers")


def _check_size(attrs: dict[str, str], size: int) -> None:
    """Attributes that name ranks or counts of brokers fit an instance of `size`."""
    from ..errors import UsageError
    crit = attrs.get("broker.critical-ranks", "")
    if crit not in ("", "all"):
        from ..util import idset
        if max(idset.decode(crit), default=0) >= size:
            raise UsageError(f"invalid value for broker.critical-ranks={crit!r}: "
                             f"this instance has ranks 0-{size - 1}")
    if int(attrs.get("broker.quorum") or 0) > size:
        raise UsageError(f"invalid value for broker.quorum={attrs['broker.quorum']}: "
                         f"this instance has {size} broker{'s' if size > 1 else ''}")


def _test_hosts(text: str | None, size: int) -> tuple[str, ...] | None:
    """--test-hosts: the first `size` names of a hostlist (as Flux, it may have more)."""
    if text is None:
        return None
    from ..errors import UsageError
    from ..util import hostlist
    try:
        names = hostlist.decode(text)
    except ValueError as exc:
        raise UsageError(f"--test-hosts: {exc}") from None
    if len(names) < size:
        raise UsageError(f"--test-hosts={text}: {len(names)} host(s) for an instance of "
                         f"size {size} (one per rank is needed)")
    return tuple(names[:size])


def _check_resources(attrs: dict[str, str], hosts) -> None:
    """Refuse, before any broker starts, resources that rank 0 could not set up (a
    config naming hosts the instance does not have, an unreadable R file) or queues
    and policy that do not agree."""
    import json

    from ..job import inventory, policy
    if attrs.get("resource.path") or json.loads(attrs.get("resource.config") or "[]"):
        inventory.from_attrs(attrs, hosts)
    inventory.exclude_ranks(attrs.get("resource.exclude") or "", hosts)
    policy.Policy(json.loads(attrs.get("queues") or "{}"),
                  json.loads(attrs.get("policy") or "{}"))


def _with_broker_opts(values, setattrs, conf, config_path):
    """start -o OPTS: the brokers' options (-S, --setattr, --conf; -cPATH or
    --config-path=PATH, which start's own -c overrides, as Flux's) added to start's."""
    opts = []
    for o in split_broker_opts(values):
        if o.startswith("--config-path="):
            config_path = config_path or o.removeprefix("--config-path=")
        else:
            opts.append(o)
    check_broker_opts(opts)
    ctx = broker.make_context("broker", opts + ["--", "true"])
    return (tuple(setattrs) + tuple(ctx.params["setattrs"]),
            tuple(conf) + tuple(ctx.params["conf"]), config_path)

@click.command(context_settings=NO_INTERSPERSED)
@click.option("-S", "--setattr", "setattrs", multiple=True, metavar="NAME=VALUE",
              help="Set a broker attribute (repeatable).")
@click.option("--conf", multiple=True, metavar="VALUE",
              help="Instance config, merged in order: a TOML or JSON file, a directory "
                   "of *.toml files, KEY=VALUE, or JSON or TOML text (repeatable).")
@click.option("--config-path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Boot from FILE's [bootstrap] table (fixed hosts; see "
                   "etc/bootstrap-example.toml); its other tables are attributes.")
@click.option("--hostname", metavar="NAME",
              help="With --config-path: find this broker's rank as NAME rather than "
                   "this machine's host name.")
@click.option("--rundir", type=click.Path(file_okay=False),
              help="With --config-path: run directory to use and keep (clients reach "
                   "the broker at local://RUNDIR/local).")
@click.option("--insecure-plain-tcp", is_flag=True,
              help="With --config-path: allow TCP links without curve_cert (unencrypted, "
                   "anyone may join; for tests only).")
@click.option("--rank", type=click.IntRange(0), default=None, hidden=True,
              help="This broker's rank in a `fluxlite start` instance (start --wrap).")
@click.option("--size", type=click.IntRange(1, 1024), default=None, hidden=True)
@click.option("--test-hosts", metavar="HOSTLIST", default=None, hidden=True)
@click.option("--initial-pgid", type=click.IntRange(0), default=None, hidden=True)
@click.option("--interactive", is_flag=True, hidden=True)
@click.option("--mapping", metavar="TASKMAP", default=None, hidden=True)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def broker(setattrs, conf, config_path, hostname, rundir, insecure_plain_tcp, rank, size,
           test_hosts, initial_pgid, interactive, mapping, command):
    """Run one broker of an instance.

    With --config-path FILE, on each host listed in FILE's [bootstrap] table:
    the broker finds its rank from its host name, binds and connects as the
    table says (TCP links use CURVE with curve_cert), and on rank 0 runs
    COMMAND, then shuts the instance down; without COMMAND rank 0 serves until
    `fluxlite shutdown`.  Without it, the broker is a task of a batch or alloc
    job and bootstraps through PMI.
    """
    if rank is not None:
        return _local_broker(rank, size, rundir, test_hosts, initial_pgid, interactive,
                             mapping, setattrs, conf, list(command))
    if config_path is not None:
        return _config_broker(config_path, setattrs, conf, hostname, rundir,
                              insecure_plain_tcp, list(command))
    from ..errors import UsageError
    for name, value in (("--hostname", hostname), ("--rundir", rundir),
                        ("--insecure-plain-tcp", insecure_plain_tcp or None)):
        if value is not None:
            raise UsageError(f"{name} is used only with --config-path")
    from ..broker import entry
    return entry.run_pmi_broker(entry.build_attrs(startopts.conf_sources(conf), setattrs),
                                list(command), nested=True)


def _local_broker(rank, size, rundir, test_hosts, initial_pgid, interactive, mapping,
                  setattrs, conf, command) -> int:
    """One rank of a `fluxlite start` instance, as the launcher runs it under --wrap."""
    from ..broker import entry
    from ..errors import UsageError
    if size is None or rundir is None:
        raise UsageError("--rank needs --size and --rundir (the command line `fluxlite "
                         "start -v` prints for each rank)")
    return entry.run_local_rank(rank, size,
                                entry.build_attrs(startopts.conf_sources(conf), setattrs),
                                rundir,
                                command, hosts=_test_hosts(test_hosts, size),
                                initial_pgid=initial_pgid, interactive=interactive,
                                mapping=mapping)


def _config_broker(path, setattrs, conf, hostname, rundir, insecure, command) -> int:
    from ..broker import entry
    from ..errors import UsageError
    if conf:
        raise UsageError("--conf and --config-path cannot be used together (put the "
                         "attribute tables in the --config-path file)")
    return entry.run_config_broker(path, setattrs, command, hostname=hostname,
                                   rundir=rundir, insecure=insecure)


def split_broker_opts(values) -> list[str]:
    """Flux's broker options from -o/--broker-opts values, each of which may hold
    several separated by commas, as in Flux (a comma inside a value,
    -Sbroker.critical-ranks=0,2, stays): -SNAME=VALUE and --setattr as -S, -cPATH
    and --config-path as --config-path=PATH, --conf as --conf=VALUE (an option and
    its value may be two comma-separated words: -S,NAME=VALUE); Flux's broker
    -v/--verbose[=LEVEL] (its own chatter) is taken and has no effect here."""
    out: list[str] = []
    for v in values:
        for o in (o for o in re.split(r",(?=-)", v) if o):   # -o,-Sx=1 as Flux writes it
            m = re.fullmatch(r"(?:(--config-path|--setattr|--conf)[=,]|(-S|-c),?)(.+)", o,
                             re.S)
            if m:
                name = {"--setattr": "-S", "-c": "--config-path"}.get(
                    m.group(1) or m.group(2), m.group(1) or m.group(2))
                out.append(f"{name}{m.group(3)}" if name == "-S" else f"{name}={m.group(3)}")
            elif not re.fullmatch(r"-v+|-v=?\d+|--verbose(=\d+)?", o):
                out.append(o)
    return out


def instance_broker_opts(values) -> list[str]:
    """batch/alloc --broker-opts as the new instance's brokers take them: a config
    path (-cPATH, --config-path=PATH) is read as --conf PATH, which makes it the
    instance's config.path (config reload reads it again), as Flux's broker -c."""
    return [f"--conf={o.removeprefix('--config-path=')}"
            if o.startswith("--config-path=") else o for o in split_broker_opts(values)]


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
        raise UsageError(f"--broker-opts: {exc.format_message().rstrip('.')} (allowed: "
                         "-S NAME=VALUE, --setattr=NAME=VALUE, -c PATH, --conf VALUE, "
                         "-v)") from None
    for name in ("config_path", "hostname", "rundir", "insecure_plain_tcp", "rank", "size",
                 "test_hosts", "initial_pgid", "interactive", "mapping"):
        if ctx.params[name]:
            raise UsageError(f"--broker-opts: --{name.replace('_', '-')} is not for a "
                             "batch or alloc instance (allowed: -S NAME=VALUE, -c PATH, "
                             "--conf VALUE)")
    from ..broker import entry
    try:
        entry.build_attrs(startopts.conf_sources(ctx.params["conf"]), ctx.params["setattrs"])
    except UsageError as exc:
        raise UsageError(f"--broker-opts: {exc.message}") from None


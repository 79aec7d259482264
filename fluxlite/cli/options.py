"""The one table of job submission options, shared by run, submit, batch and alloc.

Options are lists of click.Option applied with `apply()`; `jobspec_from()`
is the single place that turns them into a jobspec.  batch/alloc swap the task
options for slot ones (-n slots, -c cores per slot) and drop the I/O options,
as Flux's do.
"""

from __future__ import annotations

import json
import os

import click

from ..errors import UsageError
from . import jobenv


def _setopt_list(ctx, param, values):
    from ..job.shell_options import parse_setopt
    out = {}
    for v in values:
        k, val = parse_setopt(v)
        out[k] = val
    return out


def _setattr_list(ctx, param, values):
    out = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not key or key == "^":
            raise click.BadParameter(f"expected KEY[=VALUE], got {v!r}")
        if key.startswith("^"):  # as Flux: ^KEY=FILE, the value is FILE's JSON
            key, val = key[1:], _json_file(val)
        elif sep:
            try:
                val = json.loads(val)
            except ValueError:
                pass
        else:
            val = 1
        out[key] = val
    return out


def _json_file(path: str):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise click.BadParameter(f"{path} is not JSON: {exc}") from None


def _duration(ctx, param, value):
    if value is None:
        return None
    from ..job.jobspec import parse_duration
    try:
        return parse_duration(value)
    except UsageError as exc:
        raise click.BadParameter(exc.message.replace("invalid time limit: ", "")) from None


class UrgencyType(click.ParamType):
    """N (0-31), hold, expedite or default."""
    name = "URGENCY"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        from ..job.depend import parse_urgency
        try:
            return parse_urgency(value)
        except UsageError as exc:
            self.fail(exc.message.removeprefix("invalid urgency "), param, ctx)


URGENCY = UrgencyType()


def _taskmap(value: str | None) -> dict | None:
    """--taskmap SCHEME[:VALUE] as Flux's shell option: block, cyclic[:N], manual:MAP,
    hostfile:FILE (its host names read here, at submit, and carried in the option)."""
    if value is None:
        return None
    from ..job import taskmap
    scheme, _, arg = value.partition(":")
    try:
        taskmap.check_option(scheme, arg)
        if scheme == "hostfile":
            return {"scheme": scheme, "value": arg, "hosts": taskmap.read_hostfile(arg)}
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return {"scheme": scheme, "value": arg}


def _warning_signal(value: str | None) -> dict | None:
    """--signal=SIG@TIME: {"signum", "timeleft"} (defaults SIGUSR1, 60 s), as Flux."""
    if value is None:
        return None
    import signal

    from ..util import fsd
    sig, _, when = value.partition("@")
    out = {"signum": int(signal.SIGUSR1), "timeleft": 60.0}
    if sig:
        name = sig.upper()
        try:
            out["signum"] = int(sig) if sig.isdigit() else int(
                signal.Signals[name if name.startswith("SIG") else "SIG" + name])
        except KeyError:
            raise click.BadParameter(f"invalid signal {sig!r}: a number or a name such "
                                     "as SIGUSR1 or USR1") from None
        if not 0 < out["signum"] < signal.NSIG:
            raise click.BadParameter(f"invalid signal number {sig}")
    if when:
        try:
            out["timeleft"] = fsd.parse(when)
        except ValueError:
            raise click.BadParameter(f"invalid time {when!r}: a Flux Standard Duration "
                                     "such as 30s or 1h") from None
    return out


def _dependencies(ctx, param, values):
    from ..job.depend import parse_uri
    try:
        return [parse_uri(v) for v in values]
    except UsageError as exc:
        raise click.BadParameter(exc.message.removeprefix("invalid dependency ")) from None


def _begin_time(ctx, param, value):
    if value is None:
        return None
    import time

    from ..job.depend import MAX_TIME, parse_begin_time
    if value.strip().lower() == "now":  # as Flux's (parsedatetime) word
        return time.time()
    try:
        when = parse_begin_time(value)
    except UsageError as exc:
        raise click.BadParameter(exc.message.removeprefix("invalid begin-time ")) from None
    if when > MAX_TIME:
        last = time.strftime("%Y-%m-%d", time.localtime(MAX_TIME))
        raise click.BadParameter(f"{value!r} is too far in the future: the latest begin "
                                 f"time is {last}")
    return when


def _requires(ctx, param, values):
    """--requires: each an RFC 31 constraint (job/constraint.py), all of them and-ed."""
    if not values:
        return None
    from ..job import constraint
    try:
        return constraint.combine([constraint.parse(v) for v in values])
    except UsageError as exc:
        raise click.BadParameter(exc.message.removeprefix("--requires ")) from None


def _nonempty(ctx, param, value):
    """A path option given as `--output=` names nothing: refused, not ignored."""
    if value is not None and not str(value).strip():
        what = {"DIR": "a directory", "FILE|RANKS": "a file name (or, for run, task ranks)"}
        raise click.BadParameter(f"empty: expected {what.get(param.metavar, 'a file name')}")
    return value


def _flags(ctx, param, values):
    """Flux's --flags (repeatable, comma-separated): debug, waitable, novalidate; none
    changes what is submitted here (every job is waitable, every jobspec checked)."""
    for value in values:
        for flag in value.split(","):
            if flag not in ("debug", "waitable", "novalidate"):
                raise click.BadParameter(f"Unknown flag {flag!r}: debug, waitable or "
                                         "novalidate")
    return None


def _list_plugins(ctx, param, value):
    """--list-plugins: Flux lists the command-line plugins it loaded; fluxlite loads none."""
    if value and not ctx.resilient_parsing:
        click.echo("Options provided by plugins:\n  (none: fluxlite loads no command-line "
                   "plugins)")
        ctx.exit(0)


COMMON = [
    click.Option(["-N", "--nodes"], type=click.IntRange(1, None), default=None,
                 help="Number of nodes (ranks), each wholly allocated to the job."),
    click.Option(["-t", "--time-limit"], callback=_duration, default=None,
                 metavar="MINUTES|FSD",
                 help="Time limit: minutes when a bare number (-t 5 is five minutes), "
                      "else a duration such as 30s, 10m, 1.5h; 0 or none: no limit (the job "
                      "gets a timeout exception when it expires)."),
    click.Option(["-o", "--setopt", "setopt"], multiple=True, callback=_setopt_list,
                 metavar="KEY[=VAL]",
                 help="Shell option, e.g. -o exit-timeout=none, -o exit-on-error "
                      "(repeatable)."),
    click.Option(["-S", "--setattr", "setattr"], multiple=True, callback=_setattr_list,
                 metavar="KEY[=VAL]",
                 help="Jobspec attribute; 'system.' is implied unless the key starts "
                      "with 'user.' (repeatable)."),
    click.Option(["--env", "env_rules"], multiple=True, metavar="RULE",
                 help="Environment (default: the whole current one), as Flux's rules: "
                      "VAR=VAL sets ($VAR expands), -PATTERN removes, PATTERN copies from "
                      "the current environment, ^FILE reads rules from FILE; a PATTERN is "
                      "a glob or /REGEX/ (repeatable)."),
    click.Option(["--env-remove", "env_remove"], multiple=True, metavar="PATTERN",
                 help="Remove variables matching PATTERN from the job's environment."),
    click.Option(["--env-file", "env_files"], multiple=True, metavar="FILE",
                 help="Read environment rules from FILE, one a line (as --env=^FILE)."),
    click.Option(["--cwd"], default=None, metavar="DIR", callback=_nonempty,
                 help="Working directory of the tasks (default: the current one)."),
    click.Option(["--job-name"], default=None, metavar="NAME", help="Name shown by `jobs`."),
    click.Option(["--urgency"], type=URGENCY, default="default", metavar="N|hold|expedite|default",
                 help="Urgency 0-31 (default 16): 0 or hold holds the job until `job "
                      "urgency` raises it, 31 or expedite runs it before all others."),
    click.Option(["--dependency", "dependencies"], multiple=True, callback=_dependencies,
                 metavar="SCHEME:JOBID",
                 help="Start only after job JOBID: after (it started), afterany (it "
                      "ended), afterok (it completed), afternotok (it failed), "
                      "afterexcept (an exception ended it); or `singleton`: when no other "
                      "job of this --job-name is active (repeatable)."),
    click.Option(["--begin-time"], callback=_begin_time, default=None,
                 metavar="now|+FSD|H:MM[:SS]|DATE|WORDS",
                 help="Start no earlier than this: now, +FSD from now (+30s, +2h), the "
                      "next clock time H:MM[:SS], YYYY-MM-DD[ HH:MM[:SS]], or words such "
                      "as tomorrow, 'in 5 minutes' (as Flux reads them)."),
    click.Option(["-x", "--exclusive"], is_flag=True, help="Ask for whole nodes."),
    click.Option(["-B", "--bank"], default=None, metavar="NAME",
                 help="Submit under the named bank (attributes.system.bank, for an "
                      "accounting plugin; fluxlite's scheduler does not read it)."),
    click.Option(["--flags"], multiple=True, metavar="FLAGS", expose_value=False,
                 callback=_flags,
                 help="Submit flags, comma-separated: debug, waitable, novalidate "
                      "(accepted; every job is waitable and checked here)."),
    click.Option(["--debug"], is_flag=True, expose_value=False,
                 help="Flux's job debug events (accepted: no effect here)."),
    click.Option(["--list-plugins"], is_flag=True, expose_value=False, is_eager=True,
                 callback=_list_plugins, help="List the command-line plugins and exit."),
    click.Option(["-q", "--queue"], default=None, metavar="NAME",
                 help="Submit to the named queue (attributes.system.queue)."),
    click.Option(["--gpus-per-node"], type=click.IntRange(0, None), default=None,
                 help="With -N: GPUs on each node, shared among its tasks."),
    click.Option(["--requires"], multiple=True, callback=_requires, metavar="CONSTRAINT",
                 help="Run only on nodes that satisfy CONSTRAINT (RFC 31): a property "
                      "name, host:HOSTLIST, rank:IDSET; -TERM or not TERM negates; and, "
                      "or, parentheses combine (repeatable: all must hold)."),
    click.Option(["--add-file", "add_files"], multiple=True, metavar="[NAME=]ARG",
                 help="Put a file in the job (RFC 37 archive): the file ARG, or ARG "
                      "itself when it holds a newline; the shell writes it to "
                      "{{tmpdir}}/NAME (repeatable)."),
    click.Option(["--signal"], default=None, metavar="SIG@TIME", callback=
                 lambda ctx, param, value: _warning_signal(value),
                 help="Send SIG (default SIGUSR1) TIME (an FSD, default 60s) before the "
                      "time limit."),
    click.Option(["--rlimit", "rlimits"], multiple=True, metavar="RULE",
                 help="Resource limits of the tasks: NAME=VALUE sets one (unlimited, or "
                      "a number), NAME passes on this process's soft limit, -NAME or -* "
                      "passes nothing (repeatable, applied in order)."),
]

# run, submit, batch and alloc (bulksubmit has its own --dry-run and -v)
SUBMITTING = [
    click.Option(["--dry-run"], is_flag=True,
                 help="Print the jobspec (JSON) instead of submitting it."),
    click.Option(["-v", "--verbose"], count=True,
                 help="run/alloc: -v prints the job id on stderr, -vv the job's events, -vvv its "
                      "exec events too."),
]

TASKS = [
    click.Option(["-n", "--ntasks"], type=click.IntRange(1, None), default=None,
                 help="Number of tasks (default 1, or one per node with -N)."),
    click.Option(["-c", "--cores-per-task"], type=click.IntRange(1, None), default=None,
                 help="Cores for each task (default 1)."),
    # Flux's per-resource options: resources first, tasks placed on them
    click.Option(["--cores"], type=click.IntRange(1, None), default=None, metavar="N",
                 help="Total cores (per-resource: one task per node unless "
                      "--tasks-per-node/--tasks-per-core say otherwise)."),
    click.Option(["--tasks-per-node"], type=click.IntRange(1, None), default=None,
                 metavar="N", help="N tasks on each node (per-resource; -N whole nodes)."),
    click.Option(["--tasks-per-core"], type=click.IntRange(1, None), default=None,
                 metavar="N", help="N tasks on each allocated core (per-resource: for "
                                   "oversubscribing)."),
    click.Option(["--taskmap"], default=None, metavar="SCHEME[:VALUE]", callback=
                 lambda ctx, param, value: _taskmap(value),
                 help="How task ranks map to nodes: block (the default: consecutive "
                      "ranks share a node)."),
    click.Option(["-u", "--unbuffered"], is_flag=True,
                 help="Pass output on as it comes, not a line at a time."),
    click.Option(["-g", "--gpus-per-task"], type=click.IntRange(0, None), default=None,
                 help="GPUs for each task (CUDA_VISIBLE_DEVICES names them)."),
]

SLOTS = [
    click.Option(["-n", "--nslots", "ntasks"], type=click.IntRange(1, None), default=None,
                 help="Number of slots (default: one per node)."),
    click.Option(["-c", "--cores-per-slot", "cores_per_task"], type=click.IntRange(1, None),
                 default=1, show_default=True, help="Cores in each slot."),
    click.Option(["-g", "--gpus-per-slot", "gpus_per_task"], type=click.IntRange(0, None),
                 default=None, help="GPUs in each slot."),
]

def output_options(default: str = "the job's output log") -> list[click.Option]:
    """--output and --error; `default` says where stdout goes without --output (batch's
    instance writes to a file)."""
    return [
        click.Option(["--output"], default=None, metavar="FILE", callback=_nonempty,
                     help=f"Write stdout to FILE instead of {default} (mustache "
                          "templates such as {{id}} and {{taskid}} expand)."),
        click.Option(["--error"], default=None, metavar="FILE", callback=_nonempty,
                     help="Write stderr to FILE (default: with stdout)."),
    ]


IO = [
    click.Option(["--input"], default=None, metavar="FILE|RANKS", callback=_nonempty,
                 help="Tasks read standard input from FILE (run forwards its own stdin "
                      "otherwise, when it is a pipe or a file; run --input=RANKS, e.g. 0, "
                      "forwards it to those task ranks only)."),
    *output_options(),
    click.Option(["-l", "--label-io"], is_flag=True,
                 help="Prefix output lines with the task rank."),
]


def apply(options: list[click.Option]):
    """Decorator adding `options` to a click command."""
    def deco(f):
        if isinstance(f, click.Command):
            f.params[:0] = options
            return f
        if not hasattr(f, "__click_params__"):
            f.__click_params__ = []
        # click reverses this list when it builds the command
        f.__click_params__.extend(reversed(options))
        return f
    return deco


_warned: set[str] = set()  # each unknown shell option is warned about once a command


def _warn_unknown_options(options: dict) -> None:
    from ..job import shell_options
    for name, close in shell_options.unknown(options):
        if name not in _warned:
            _warned.add(name)
            prog = " ".join(click.get_current_context().command_path.split()[:2]) \
                if click.get_current_context(silent=True) else "fluxlite"
            click.echo(f"{prog}: {shell_options.warning(name, close)}", err=True)


def _shell_options(params: dict, extra_options: dict | None) -> dict:
    """The shell options of the job: the command's own, then -o's, then what -l, -u,
    --signal, --taskmap and --rlimit mean."""
    options = dict(extra_options or {})
    options.update(params.get("setopt") or {})
    if isinstance(options.get("plugins"), str):  # relative to where the user is
        options["plugins"] = ",".join(os.path.abspath(p) for p in options["plugins"].split(",")
                                      if p)
    if params.get("label_io") and (params.get("output") or params.get("error")):
        options["output.label"] = 1
    if params.get("unbuffered"):  # as Flux's -u
        options.update({"output.stdout.buffer.type": "none",
                        "output.stderr.buffer.type": "none"})
    for key in ("signal", "taskmap"):
        if params.get(key) is not None:
            options[key] = params[key]
    if "rlimits" in params:  # a command with --rlimit: the submitter's limits, as Flux's
        from . import optvalues
        options["rlimit"] = optvalues.rlimits(params["rlimits"] or ())
    from ..job.shell_options import canonical  # -o signal.signum=N: one signal object
    return canonical(options)


def _task_counts(params: dict, per_node: int | None) -> tuple[dict, bool]:
    """num_tasks, num_nodes, cores_per_task and per_node for the builder, the
    per-resource options (--cores, --tasks-per-node, --tasks-per-core) turned into
    them; and whether the tasks share one slot (--cores with --tasks-per-core)."""
    from . import optvalues
    counts = {"num_tasks": params.get("ntasks"), "num_nodes": params.get("nodes"),
              "cores_per_task": params.get("cores_per_task") or 1, "per_node": per_node}
    res = optvalues.per_resource(params) if per_node is None else None
    if not res:
        return counts, False
    total = res.pop("total", False)
    per_core = res.pop("per_core", None)
    if per_core:
        res["per_node"] = per_core * optvalues.cores_per_node()
    counts.update(res, num_nodes=res.pop("nodes", params.get("nodes")))
    if counts.get("per_node") is not None:
        counts["num_tasks"] = None
    return counts, total


def _system_attributes(params: dict, system: dict | None) -> dict:
    """attributes.system.* from the options that set one (and the command's own)."""
    out = dict(system or {})
    if params.get("add_files"):
        from . import optvalues
        out["files"] = dict(optvalues.file_entry(a) for a in params["add_files"])
    for key, attr in (("queue", "queue"), ("bank", "bank"), ("requires", "constraints")):
        if params.get(key):
            out[attr] = params[key]
    deps = list(params.get("dependencies") or [])
    if params.get("begin_time") is not None:
        deps.append({"scheme": "begin-time", "value": params["begin_time"]})
    if deps:
        out["dependencies"] = deps
    return out


def jobspec_from(command: list[str], params: dict, *, per_node: int | None = None,
                 extra_options: dict | None = None, system: dict | None = None) -> dict:
    """Build the jobspec for a submitting command from its parsed options (with
    fluxlite.job.jobspec.Jobspec, the one builder).  It is checked once, by the
    job-manager at submit, whose message the command prints."""
    from ..job.jobspec import Jobspec
    options = _shell_options(params, extra_options)
    counts, total = _task_counts(params, per_node)
    spec = Jobspec.from_command(
        command, num_tasks=counts["num_tasks"], num_nodes=counts["num_nodes"],
        cores_per_task=counts["cores_per_task"],
        gpus_per_task=params.get("gpus_per_task"), gpus_per_node=params.get("gpus_per_node"),
        exclusive=bool(params.get("exclusive")), per_node=counts["per_node"],
        duration=params.get("time_limit") or 0.0, cwd=params.get("cwd"),
        environment=jobenv.job_environment(params.get("env_rules") or (),
                                    params.get("env_remove") or (),
                                    params.get("env_files") or ()),
        name=params.get("job_name"), input=params.get("input"),
        output=params.get("output"), error=params.get("error"), validate=False)
    if total:  # --cores with --tasks-per-core: the tasks share one slot of the cores
        from . import optvalues
        cores = counts["num_tasks"] // params["tasks_per_core"] // (counts["num_nodes"] or 1)
        spec.jobspec["resources"] = optvalues.one_slot(spec.jobspec["resources"], cores)
        spec.jobspec["tasks"][0]["count"] = {"total": counts["num_tasks"]}
    for key, val in _system_attributes(params, system).items():
        spec.setattr(f"system.{key}", val)
    for key, val in options.items():
        spec.setattr_shell_option(key, val)
    if params.get("setopt"):
        _warn_unknown_options(options)
    for key, val in (params.get("setattr") or {}).items():
        spec.setattr(attribute_key(key), val)
    return spec.jobspec


def attribute_key(key: str) -> str:
    """-S KEY as Flux reads it: under attributes.system unless KEY begins with user.,
    system. or attributes.; a leading '.' names a key under attributes itself."""
    if key.startswith("."):
        return key[1:]
    if key.startswith(("user.", "system.", "attributes.")):
        return key
    return f"system.{key}"

"""Job shell options (`-o NAME[=VALUE]`): the one table, checked at submit.

Each option names the plugin that reads it and how its value is checked.  As in
Flux, shell options are an open namespace (plugins read what they like): a
malformed value of a known option is an error at submit, but a name nothing
here knows is accepted.  The submitting command warns about it once, naming
close matches (`unknown()`), unless the job loads user plugins (`-o plugins=`):
then the shell, once it has loaded them, runs the checker of the plugin that
claims the option (ShellPlugin.options) and logs one warning for a name no
plugin claims.
"""

from __future__ import annotations

import json

from ..errors import UsageError
from ..util import fsd, mustache


def _exit_timeout(v) -> None:
    if isinstance(v, bool):
        raise ValueError
    if isinstance(v, str) and v.strip().lower() == "none":
        return
    fsd.parse(v)


def flag(v) -> bool:
    """The value of a flag option: -o NAME (1), true/false, 1/0, in any case."""
    if isinstance(v, (bool, int)):
        return bool(v)
    s = str(v).lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise ValueError(f"{v!r} is not true or false")


def _flag(v) -> None:
    flag(v)


def _plugins(v) -> None:
    if isinstance(v, str):
        return
    if isinstance(v, list) and all(isinstance(p, str) for p in v):
        return
    raise ValueError


def _any(v) -> None:
    return None


def _verbose(v) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ValueError


def _text(v) -> None:
    if not isinstance(v, str) or not v:
        raise ValueError


def _signal(v) -> None:
    """Flux's `signal` option: 1 (SIGUSR1, 60 s before the time limit), or
    {"signum": N, "timeleft": SECONDS} with either key left out."""
    if isinstance(v, int) and not isinstance(v, bool) and v in (0, 1):
        return
    if not isinstance(v, dict) or set(v) - {"signum", "timeleft"}:
        raise ValueError
    signum, timeleft = v.get("signum", 10), v.get("timeleft", 60)
    if isinstance(signum, bool) or not isinstance(signum, int) or not 0 < signum < 65:
        raise ValueError
    if isinstance(timeleft, str):  # a Flux Standard Duration, as Flux's signal plugin
        timeleft = fsd.parse(timeleft)
    if isinstance(timeleft, bool) or not isinstance(timeleft, (int, float)) or timeleft < 0:
        raise ValueError


def _env_expand(v) -> None:
    if not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
        raise ValueError


def _rlimit(v) -> None:
    if not isinstance(v, dict):
        raise ValueError
    for name, val in v.items():
        _rlimit_value(val)
        if name not in RLIMITS:
            raise ValueError


def _rlimit_value(v) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < -1:
        raise ValueError


# the resource limits a job may set (-o rlimit.NAME=N, --rlimit), as Flux's rlimit plugin
RLIMITS = ("as", "core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice",
           "nofile", "nproc", "rss", "rtprio", "rttime", "sigpending", "stack")


def _taskmap(v) -> None:
    if not isinstance(v, dict) or not isinstance(v.get("scheme"), str):
        raise ValueError


def _output_path(flag: str):
    def check(v) -> None:
        if not isinstance(v, str):
            raise ValueError
        try:
            mustache.check(v, flag)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return check


OUTPUT_MODES = ("truncate", "append")


def _output_mode(v) -> None:
    if v not in OUTPUT_MODES:
        raise ValueError


PMI_METHODS = ("simple", "pmix")
PMI_OFF = ("off", "none")
PMI_ALIASES = {"pmi1": "simple", "pmi2": "simple"}  # as Flux's pmi plugin takes them


def pmi_list(v) -> list[str] | None:
    """`-o pmi=LIST` (Flux's): a comma-separated list (or a list) of methods to offer
    the tasks, 'simple' (PMI-1 on PMI_FD) and 'pmix' (OpenPMIx); 'off' (or 'none')
    offers none.  None when the option is absent: the shell's default then."""
    if v is None:
        return None
    items = v if isinstance(v, list) else str(v).split(",")
    names = [PMI_ALIASES.get(str(x).strip(), str(x).strip()) for x in items]
    if not names or any(n not in PMI_METHODS + PMI_OFF for n in names):
        raise ValueError
    if any(n in PMI_OFF for n in names):
        if len(names) > 1:
            raise ValueError
        return []
    return list(dict.fromkeys(names))


def _pmi(v) -> None:
    pmi_list(v)


AFFINITY_MODES = ("on", "off", "per-task")
AFFINITY_FLAGS = ("dry-run", "verbose")  # cpu-affinity only, before the mode, as Flux's


def affinity(v, flags: bool = False) -> tuple[object, set[str]]:
    """(mode, {'verbose', 'dry-run'}) of an affinity option's value: `verbose,per-task`
    and `dry-run,on` (Flux's cpu-affinity) put the flags first; alone they mean on."""
    found: set[str] = set()
    if not flags or not isinstance(v, str):
        return v, found
    while True:
        flag = next((f for f in AFFINITY_FLAGS if v.startswith(f)), None)
        if flag is None:
            break
        found.add(flag)
        v = v[len(flag):].removeprefix(",")
    return (v or "on"), found


def _check_affinity(v, flags: bool) -> None:
    """cpu-affinity / gpu-affinity: on, off, per-task or map:IDSET;IDSET..."""
    v, _ = affinity(v, flags)
    if v in (1, True) or v in AFFINITY_MODES:
        return
    if not isinstance(v, str) or not v.startswith("map:"):
        raise ValueError
    from ..util import idset
    for part in v[4:].split(";"):
        idset.decode(part)


def _cpu_affinity(v) -> None:
    _check_affinity(v, True)


def _gpu_affinity(v) -> None:
    _check_affinity(v, False)


def _oom_adjust(v) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not -1000 <= v <= 1000:
        raise ValueError


OPTIONS = {
    "exit-timeout": (_exit_timeout, "doom",
                     "after the first task exits, how long others may run: FSD or none"),
    "exit-on-error": (_flag, "doom", "fail the job as soon as any task fails"),
    "plugins": (_plugins, "shell", "path(s) of user plugins to load (comma separated)"),
    "instance": (_any, "instance", "tasks are brokers of a nested instance (set by batch/alloc)"),
    "pty": (_any, "pty", "run task 0 on a pseudo-terminal (pty.interactive: set by alloc)"),
    "output": (_any, "output", "output.stdout.path / output.stderr.path: write to files; "
                               "output.label: prefix lines with the task rank"),
    "output.stdout.path": (_output_path("--output"), "output",
                           "write stdout to this file (mustache tags expand)"),
    "output.stderr.path": (_output_path("--error"), "output",
                           "write stderr to this file (mustache tags expand)"),
    "output.mode": (_output_mode, "output", "truncate (default) or append: how output "
                                            "files are opened"),
    "pmi": (_pmi, "pmi", "LIST of simple (PMI-1, MPICH), pmix (PMIx, Open MPI), or off; "
                         "default simple, and pmix too for jobs of several tasks where "
                         "OpenPMIx is installed"),
    "input": (_any, "input", "tasks read stdin from the job's input log (set by run), or "
                             "input.path=FILE"),
    "verbose": (_verbose, "shell", "the shell's log lines on stderr: 1 (-o verbose), 2 more"),
    "nosetpgrp": (_flag, "shell", "tasks stay in the shell's process group"),
    "mpi": (_text, "mpi", "the MPI flavour to prepare for (none: nothing to prepare)"),
    "cpu-affinity": (_cpu_affinity, "affinity", "on (default): bind tasks to the job's "
                                                "cores; per-task: share them out; off; "
                                                "map:LIST; verbose, or dry-run, first"),
    "gpu-affinity": (_gpu_affinity, "affinity", "on (default): CUDA_VISIBLE_DEVICES names the "
                                            "job's GPUs; per-task; off; map:LIST"),
    "signal": (_signal, "signal", "send signum this many seconds (timeleft) before the time "
                                  "limit (--signal)"),
    "env-expand": (_env_expand, "shell", "variables set in each task's environment, "
                                         "their mustache tags ({{tmpdir}}...) expanded"),
    "rlimit": (_rlimit, "rlimit", "resource limits of the tasks (--rlimit)"),
    "taskmap": (_taskmap, "taskmap", "how task ranks map to nodes (--taskmap)"),
    "initrc": (_text, "shell", "a shell initrc (Flux's Lua; not read here)"),
    "userrc": (_text, "shell", "a user's shell rc (Flux's Lua; not read here)"),
    "stage-in": (_any, "stage-in", "files to stage in (Flux's stage-in plugin)"),
    "hwloc": (_any, "hwloc", "hwloc.xmlfile, hwloc.restrict (Flux's hwloc options)"),
    "pmi-simple": (_any, "pmi", "PMI-1 server tuning (Flux's pmi-simple.*)"),
    "sysmon": (_any, "sysmon", "periodic resource use logging (Flux's sysmon plugin)"),
    "oom": (_any, "oom", "oom.adjust=N: each task's oom_score_adj, -1000 to 1000"),
    "oom.adjust": (_oom_adjust, "oom", "each task's oom_score_adj, -1000 to 1000"),
    "coprocess": (_any, "coprocess", "helper processes beside the job (Flux's; not run here)"),
    "coprocess-kill-timeout": (_exit_timeout, "coprocess", "Flux's; nothing to kill here"),
    "rexec-shutdown-timeout": (_exit_timeout, "rexec", "Flux's; accepted, no effect"),
    "stop-tasks-in-exec": (_any, "shell", "Flux's debugger hook; accepted, no effect"),
}

_MESSAGES = {
    "exit-timeout": "exit-timeout is not a valid Flux Standard Duration (e.g. 30s, 1.5m, none)",
    "exit-on-error": "exit-on-error takes no value, or true/false",
    "plugins": "plugins must be a path or a list of paths",
    "output.stdout.path": "output.stdout.path must be a file name",
    "output.stderr.path": "output.stderr.path must be a file name",
    "output.mode": "output.mode must be truncate or append",
    "pmi": "pmi must be a comma-separated list of simple (or pmi1, pmi2) and pmix, or off",
    "verbose": "verbose takes no value, or a level 0, 1, 2...",
    "nosetpgrp": "nosetpgrp takes no value, or true/false",
    "mpi": "mpi must be a name, e.g. none",
    "cpu-affinity": "cpu-affinity must be on, off, per-task or map:LIST (after 'verbose,' "
                    "or 'dry-run,' if given)",
    "oom.adjust": "oom.adjust must be a number from -1000 to 1000",
    "coprocess-kill-timeout": "coprocess-kill-timeout is not a valid Flux Standard Duration",
    "rexec-shutdown-timeout": "rexec-shutdown-timeout is not a valid Flux Standard Duration",
    "gpu-affinity": "gpu-affinity must be on, off, per-task or map:LIST",
    "signal": "signal must be {\"signum\": N, \"timeleft\": SECONDS} (--signal=SIG@TIME)",
    "env-expand": "env-expand must be {VARIABLE: VALUE}",
    "rlimit": "rlimit must be {NAME: N}, NAME one of " + ", ".join(RLIMITS) +
              " and N a number (-1: unlimited)",
    "taskmap": "taskmap must be {\"scheme\": NAME, \"value\": ...} (--taskmap)",
    "initrc": "initrc must be a file name",
    "userrc": "userrc must be a file name",
}


def parse_setopt(text: str) -> tuple[str, object]:
    """'-o NAME[=VALUE]': VALUE is JSON when it parses as JSON, else a string; bare NAME is 1."""
    name, sep, value = text.partition("=")
    if not name:
        raise UsageError(f"invalid shell option {text!r}: expected NAME[=VALUE]")
    if not sep:
        return name, 1
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value


_DOTTED = ("pty.", "output.", "input.", "stage-in.", "hwloc.", "pmi-simple.", "pmi.",
           "sysmon.", "signal.", "taskmap.", "oom.")

# Flux nests dotted names (`-o output.stdout.path=F` is {"output": {"stdout": {"path":
# F}}}); these families are read here by their dotted names, so a nested table of one
# is spelled out, and these objects are read whole, so their dotted members are merged
_FLAT_FAMILIES = ("output", "input", "pty", "hwloc", "stage-in", "pmi-simple", "sysmon",
                  "oom")
_WHOLE = ("signal", "taskmap")  # rlimit.NAME is checked, and read, one limit at a time


def _spell_out(prefix: str, value, out: dict) -> None:
    if isinstance(value, dict) and value:
        for key, sub in value.items():
            _spell_out(f"{prefix}.{key}", sub, out)
    else:
        out[prefix] = value


def canonical(options: dict) -> dict:
    """The shell options as fluxlite reads them, from either spelling: Flux's nested
    tables of the dotted families made dotted names, `signal.signum`-style names merged
    into their object, and Flux's `input.stdin.path` (a file) as `input.path`."""
    if not isinstance(options, dict):
        return options
    out: dict = {}
    for name, value in options.items():
        family, dot, rest = name.partition(".")
        if family in _FLAT_FAMILIES and isinstance(value, dict):
            _spell_out(name, value, out)
        elif dot and family in _WHOLE:
            whole = out.get(family)
            whole = dict(whole) if isinstance(whole, dict) else {}
            cur = whole
            *parents, leaf = rest.split(".")
            for p in parents:
                cur = cur.setdefault(p, {})
            cur[leaf] = value
            out[family] = whole
        elif name in _WHOLE and isinstance(value, dict) and isinstance(out.get(name), dict):
            out[name] = dict(out[name], **value)
        else:
            out[name] = value
    if out.get("input.stdin.type") == "file" and "input.stdin.path" in out:
        out.setdefault("input.path", out["input.stdin.path"])
    return out


def lookup(name: str):
    """The table entry for an option name (other output.*, pty.*, input.* ... share one
    entry; rlimit.NAME is checked as one limit)."""
    if name in OPTIONS:
        return OPTIONS[name]
    if name.startswith("rlimit.") and name[7:] in RLIMITS:
        return (_rlimit_value, "rlimit", "one resource limit")
    if name.startswith(_DOTTED):
        return OPTIONS.get(name.split(".", 1)[0])
    return None


def unknown(options: dict) -> list[tuple[str, list[str]]]:
    """Options no built-in reads, each with close matches among known names; [] when
    the job loads user plugins (the shell checks those once it has loaded them)."""
    if "plugins" in options:
        return []
    import difflib
    names = [n for n in OPTIONS if n != "instance"]
    return [(name, difflib.get_close_matches(name, names, n=3, cutoff=0.6))
            for name in options if lookup(name) is None]


def warning(name: str, close: list[str]) -> str:
    """The one warning line for an option nothing here reads."""
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return (f"warning: shell option '{name}' is not known to fluxlite's shell{hint}; "
            "accepted for a plugin that reads it")


def validate(options: dict) -> None:
    """Raise UsageError for a malformed value of a known shell option (a name nothing
    here knows is a plugin's: accepted, as Flux does)."""
    if not isinstance(options, dict):
        raise UsageError("shell options must be a map")
    for name, value in canonical(options).items():
        spec = lookup(name)
        if spec is None:
            continue
        try:
            spec[0](value)
        except (ValueError, TypeError):
            raise UsageError(f"invalid shell option {name}={value!r}: "
                             f"{_MESSAGES.get(name, 'malformed value')}") from None

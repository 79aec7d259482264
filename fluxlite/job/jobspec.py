"""Jobspecs: built by `Jobspec` (from the CLI's options or the Python API),
validated at submit (schema.py).

The shape follows Flux's jobspec version 1, so Flux's documentation applies:

    {"version": 1,
     "resources": [{"type": "node", "count": 2, "exclusive": true,
                    "with": [{"type": "slot", "count": 1, "label": "task",
                              "with": [{"type": "core", "count": 1}]}]}],
     "tasks": [{"command": [...], "slot": "task", "count": {"per_slot": 1}}],
     "attributes": {"system": {"duration": 0, "cwd": "...", "environment": {...},
                               "shell": {"options": {...}}, "job": {"name": "..."}}}}

Without -N the top level is the slot.  Task counts are {"per_slot": k},
{"total": n} (more than one task per node, unevenly), or {"per_node": 1}
(batch/alloc: one broker per node).  schema.py holds the check at submit and
`request()`, which reduces a jobspec to the numbers the scheduler and job-exec
need.
"""

from __future__ import annotations

import datetime
import json
import math
import os
from collections import abc

from ..errors import InvalidType, InvalidValue, UsageError
from ..protocol.message import MAX_COUNT
from ..util import fsd


def _count(label: str, v, *, zero: bool = False) -> None:
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidValue(f"{label} must be an integer >= {0 if zero else 1}, got {v!r}")
    if not ((0 if zero else 1) <= v <= MAX_COUNT):
        raise InvalidValue(f"{label} must be between {0 if zero else 1} and {MAX_COUNT}, "
                           f"got {v}")


def _path(what: str, path) -> str:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise InvalidType(f"{what} must be a string or pathlib object, got "
                          f"{type(path).__name__}")
    return path


def broker_command() -> list[str]:
    """The command that starts a broker of a nested instance: the absolute path of
    this `fluxlite`, whatever PATH says."""
    from ..util.paths import fluxlite_bindir
    d = fluxlite_bindir()
    return [os.path.join(d, "fluxlite") if d else "fluxlite", "broker"]


def _checked(command, num_tasks, cores_per_task, gpus_per_task, gpus_per_node,
             num_nodes) -> tuple[list[str], int]:
    """from_command's arguments checked: the command's words, and the GPUs per task."""
    if isinstance(command, str):
        raise InvalidType("command must be a list of words, not a string")
    if not command:
        raise InvalidValue("a job needs a command")
    command = [_path("each word of the command", w) for w in command]
    if num_tasks is not None:
        _count("task count (num_tasks, -n/--ntasks)", num_tasks)
    _count("cores per task (cores_per_task, -c/--cores-per-task)", cores_per_task)
    gpus = 0
    if gpus_per_task is not None:
        _count("gpus per task (gpus_per_task, -g/--gpus-per-task)", gpus_per_task,
               zero=True)
        gpus = gpus_per_task
    if gpus_per_node is not None:
        _count("gpus per node (gpus_per_node, --gpus-per-node)", gpus_per_node, zero=True)
        if num_nodes is None:
            raise InvalidValue("--gpus-per-node needs -N/--nodes (num_nodes)")
        if gpus_per_task:
            raise InvalidValue("--gpus-per-node and -g/--gpus-per-task cannot be used "
                               "together")
    return command, gpus


def _on_nodes(core: dict, num_tasks, num_nodes: int, per_node, gpus: int,
              gpus_per_node) -> tuple[list[dict], dict]:
    """from_command's resources and task count when spread over `num_nodes` whole
    nodes (-N): slots per node, and `gpus_per_node` shared among a node's slots."""
    _count("node count (num_nodes, -N/--nodes)", num_nodes)
    if per_node is not None:
        if num_tasks is not None and num_tasks < num_nodes:
            raise InvalidValue(f"node count ({num_nodes}) must not be greater than "
                               f"slot count ({num_tasks})")
        slots_per_node = max(1, math.ceil((num_tasks or num_nodes) / num_nodes))
        count = {"per_node": per_node}
    else:
        num_tasks = num_nodes if num_tasks is None else num_tasks
        if num_tasks < num_nodes:
            raise InvalidValue(f"node count ({num_nodes}) must not be greater than "
                               f"task count ({num_tasks})")
        slots_per_node = math.ceil(num_tasks / num_nodes)
        count = ({"per_slot": 1} if num_tasks % num_nodes == 0
                 else {"total": num_tasks})
    if gpus_per_node:
        gpus = math.ceil(gpus_per_node / slots_per_node)
    slot = {"type": "slot", "count": slots_per_node, "label": "task",
            "with": [core] + ([{"type": "gpu", "count": gpus}] if gpus else [])}
    return [{"type": "node", "count": num_nodes, "exclusive": True, "with": [slot]}], count


class Jobspec:
    """The one jobspec builder (run, submit, batch and alloc build theirs with it).

        spec = Jobspec.from_command(["hostname"], num_tasks=4, num_nodes=2)
        spec.duration = "10m"; spec.stdout = "out.{{id}}"
        spec.setattr_shell_option("exit-timeout", "none")
        jobid = api.submit(h, spec.jobspec)

    The factories and setters follow Flux's `flux.job.JobspecV1` (same
    arguments, ValueError/TypeError for nonsense: here InvalidValue/InvalidType,
    which are also UsageError).  Unlike Flux's, a new jobspec already has this
    process's working directory and environment (what `fluxlite submit` gives a
    job); as Flux's, it
    has a name only when given one.  Shell options are fluxlite's flat names
    (`output.stdout.path`, not Flux's nested `output.stdout.{type,path}`).
    """

    def __init__(self, resources: list, tasks: list, attributes: dict | None = None,
                 version: int = 1):
        if version != 1:
            raise InvalidValue("version must be 1")
        attributes = {"system": {"duration": 0.0}} if attributes is None else attributes
        if not isinstance(attributes, dict) or not isinstance(attributes.get("system"), dict):
            raise InvalidValue("attributes.system must be a mapping")
        self.jobspec = {"version": 1, "resources": resources, "tasks": tasks,
                        "attributes": attributes}

    # ------------------------------------------------------------- factories
    @classmethod
    def from_command(cls, command, num_tasks: int | None = 1, cores_per_task: int = 1,
                     gpus_per_task: int | None = None, num_nodes: int | None = None,
                     exclusive: bool = False, duration=None, environment=None, cwd=None,
                     rlimits=None, name: str | None = None, input=None, output=None,
                     error=None, *, per_node: int | None = None,
                     gpus_per_node: int | None = None,
                     validate: bool = True) -> Jobspec:
        """`num_tasks` tasks of `cores_per_task` cores (and `gpus_per_task` GPUs), spread
        over `num_nodes` whole nodes if given (`gpus_per_node` then shares that many
        GPUs of each node among its tasks).  `per_node` (batch/alloc) runs that many tasks per node
        instead, `num_tasks` then counting slots.  With validate=False the whole
        jobspec is checked only at submit (the CLI, which submits at once)."""
        command, gpus = _checked(command, num_tasks, cores_per_task, gpus_per_task,
                                 gpus_per_node, num_nodes)
        core = {"type": "core", "count": cores_per_task}
        if num_nodes is not None:
            resources, count = _on_nodes(core, num_tasks, num_nodes, per_node, gpus,
                                         gpus_per_node)
        else:
            slot = {"type": "slot", "count": num_tasks or 1, "label": "task",
                    "with": [core] + ([{"type": "gpu", "count": gpus}] if gpus else [])}
            if exclusive:
                slot["exclusive"] = True
            resources = [slot]
            count = {"per_node": per_node} if per_node is not None else {"per_slot": 1}
        spec = cls(resources, [{"command": command, "slot": "task", "count": count}])
        spec.duration = 0.0 if duration is None else duration
        spec.cwd = os.getcwd() if cwd is None else cwd
        spec.environment = dict(os.environ) if environment is None else environment
        if rlimits:
            spec.setattr_shell_option("rlimit", dict(rlimits))
        if name is not None:   # as Flux: no name, and `jobs` shows the command's
            spec.setattr("system.job.name", name)
        if input is not None:
            spec.stdin = input
        if output is not None:
            spec.stdout = output
        if error is not None:
            spec.stderr = error
        if validate:
            spec.validate()
        return spec

    @classmethod
    def from_nest_command(cls, command, num_slots: int | None = 1, cores_per_slot: int = 1,
                          gpus_per_slot: int | None = None, num_nodes: int | None = None,
                          broker_opts=None, exclusive: bool = False, conf=None,
                          **kwargs) -> Jobspec:
        """A nested instance, one broker per node, whose initial program is `command`."""
        if conf:
            raise NotImplementedError("Jobspec.from_nest_command(conf=...): give broker "
                                      "options (broker_opts) instead")
        command = [*broker_command(), *(broker_opts or ()), "--", *command]
        spec = cls.from_command(command, num_tasks=num_slots, cores_per_task=cores_per_slot,
                                gpus_per_task=gpus_per_slot, num_nodes=num_nodes,
                                exclusive=exclusive, per_node=1, **kwargs)
        spec.setattr_shell_option("instance", 1)
        spec.setattr_shell_option("exit-timeout", "none")
        return spec

    @classmethod
    def from_batch_command(cls, script: str, jobname: str, args=None, num_slots: int = 1,
                           cores_per_slot: int = 1, gpus_per_slot: int | None = None,
                           num_nodes: int | None = None, broker_opts=None,
                           exclusive: bool = False, conf=None, **kwargs) -> Jobspec:
        """A nested instance whose rank 0 runs `script` (its text, stored in the jobspec)."""
        if not isinstance(script, str):
            raise InvalidType("script must be a string (the script's contents)")
        if not script.startswith("#!"):
            raise InvalidValue(f"{jobname} does not appear to start with '#!'")
        spec = cls.from_nest_command(["{{script}}", *(args or ())], num_slots=num_slots,
                                     cores_per_slot=cores_per_slot,
                                     gpus_per_slot=gpus_per_slot, num_nodes=num_nodes,
                                     broker_opts=broker_opts, exclusive=exclusive,
                                     conf=conf, name=jobname, **kwargs)
        spec.setattr("system.batch.script", script)
        return spec

    # --------------------------------------------------------------- setters
    @property
    def duration(self):
        return self._system.get("duration")

    @duration.setter
    def duration(self, duration) -> None:
        """Seconds (int/float), a Flux Standard Duration string, or a timedelta; 0 is none."""
        if isinstance(duration, str):
            try:
                t = fsd.parse(duration)
            except ValueError:
                raise InvalidValue(f"invalid Flux Standard Duration {duration!r}") from None
        elif isinstance(duration, datetime.timedelta):
            t = duration.total_seconds()
        elif isinstance(duration, (int, float)) and not isinstance(duration, bool):
            t = float(duration)
        else:
            raise InvalidType("duration must be an int, float, string, or timedelta")
        if math.isnan(t) or math.isinf(t):
            raise InvalidValue("duration must be a normal, finite value")
        if t < 0:
            raise InvalidValue("duration must not be negative")
        self.setattr("system.duration", t)

    @property
    def cwd(self):
        return self._system.get("cwd")

    @cwd.setter
    def cwd(self, cwd) -> None:
        if isinstance(cwd, os.PathLike):
            cwd = os.fspath(cwd)
        if not isinstance(cwd, str):
            raise InvalidValue("cwd must be a string")
        self.setattr("system.cwd", cwd)

    @property
    def environment(self):
        return self._system.get("environment")

    @environment.setter
    def environment(self, environ) -> None:
        """The whole environment (assigned, not copied, as Flux does)."""
        if not isinstance(environ, abc.Mapping):
            raise InvalidValue("environment must be a mapping")
        self.setattr("system.environment", environ)

    @property
    def stdin(self):
        return self._options.get("input.path")

    @stdin.setter
    def stdin(self, path) -> None:
        self.setattr_shell_option("input.path", os.path.abspath(_path("The path", path)))

    @property
    def stdout(self):
        return self._options.get("output.stdout.path")

    @stdout.setter
    def stdout(self, path) -> None:
        self.setattr_shell_option("output.stdout.path", _path("The path", path))

    @property
    def stderr(self):
        return self._options.get("output.stderr.path")

    @stderr.setter
    def stderr(self, path) -> None:
        self.setattr_shell_option("output.stderr.path", _path("The path", path))

    def getattr(self, key: str):
        """An attribute by dotted key (`system.duration`); KeyError if absent.
        A shell option is found under its flat name too (`system.shell.options.
        output.stdout.path`), as Flux's nested spelling names it."""
        key = key.removeprefix("attributes.")
        value = self.jobspec["attributes"]
        parts = key.split(".")
        for i, part in enumerate(parts):
            if isinstance(value, dict) and part not in value and \
                    ".".join(parts[i:]) in value:
                return value[".".join(parts[i:])]
            if not isinstance(value, dict) or part not in value:
                raise KeyError(key)
            value = value[part]
        return value

    def setattr(self, key: str, val) -> None:
        """Set an attribute by dotted key: `system.duration`, `user.tag`."""
        parts = key.removeprefix("attributes.").split(".")
        if not all(parts):
            raise InvalidValue(f"invalid attribute key {key!r}")
        d = self.jobspec["attributes"]
        for part in parts[:-1]:
            d = d.setdefault(part, {})
            if not isinstance(d, dict):
                raise InvalidValue(f"attribute key {key!r}: {part} is not a mapping")
        d[parts[-1]] = val

    def setattr_shell_option(self, key: str, val) -> None:
        """Set a job shell option (fluxlite's names, e.g. `exit-timeout`, `output.label`)."""
        self._system.setdefault("shell", {}).setdefault("options", {})[key] = val

    @property
    def _system(self) -> dict:
        return self.jobspec["attributes"]["system"]

    @property
    def _options(self) -> dict:
        return self._system.get("shell", {}).get("options", {})

    @property
    def resources(self):
        return self.jobspec["resources"]

    @property
    def tasks(self):
        return self.jobspec["tasks"]

    @property
    def attributes(self):
        return self.jobspec["attributes"]

    @property
    def version(self):
        return self.jobspec["version"]

    def validate(self):
        """Check it as the job-manager will; returns its schema.Request."""
        from .schema import validate
        return validate(self.jobspec)

    def dumps(self, **kwargs) -> str:
        return json.dumps(self.jobspec, ensure_ascii=False, **kwargs)


def parse_duration(text: str) -> float:
    """-t/--time-limit in seconds: MINUTES or a Flux Standard Duration, as Flux's -t.

    A bare number is minutes ("5" is 5m, "0.5" is 30s); with a unit it is an FSD
    ("30s", "2m", "1.5h").  0 or none means no limit.
    """
    try:
        v = fsd.parse_timeout(text)
    except ValueError:
        raise UsageError(f"invalid time limit: {text!r} is not MINUTES or a Flux Standard "
                         "Duration (e.g. 5 for five minutes, 30s, 1.5h; 0 or none for no "
                         "limit)") from None
    if v is None:
        return 0.0
    if not str(text).strip()[-1:].isalpha():  # a valid FSD ends in a letter iff it has a unit
        v *= 60.0
    return v


def command_name(spec: dict) -> str:
    return spec["attributes"]["system"].get("job", {}).get("name") or \
        os.path.basename(spec["tasks"][0]["command"][0])

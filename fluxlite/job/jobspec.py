"""Jobspecs: built by `Jobspec` (from the CLI's options or the Python API),
validated at submit.

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
(batch/alloc: one broker per node).  `request()` reduces a jobspec to the
numbers the scheduler and job-exec need.
"""

from __future__ import annotations

import datetime
import json
import math
import os
from collections import abc
from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import Meta, Struct

from ..errors import InvalidType, InvalidValue, ProtocolError, UsageError
from ..protocol.schema import MAX_COUNT, Count, describe
from . import shell_options
from .depend import BEGIN_TIME, MAX_DEPENDENCIES, MAX_TIME, SCHEMES, SINGLETON, target
from ..util import fsd


class Request(Struct, frozen=True):
    """What a jobspec asks for, reduced to the numbers sched and job-exec need.  The
    job-manager computes it once, at submit, and carries it (`wire()`) in
    `sched.alloc`, `sched.feasibility` and `job-exec.start`, which read it back as
    this Struct, with a jobspec's bounds on its counts (`shared()`)."""
    nnodes: Count | None          # -N: whole nodes (exclusive)
    slots_per_node: Count | None  # with nnodes
    nslots: Count                 # total slots
    cores_per_slot: Count
    exclusive: bool
    per_slot: Count = 1
    total: Count | None = None
    per_node: Count | None = None

    def wire(self) -> dict:
        return msgspec.structs.asdict(self)

    def shared(self) -> Request:
        """This request as the one object every request alike shares."""
        return _shared(self)

    @property
    def ntasks(self) -> int | None:
        if self.total is not None:
            return self.total
        if self.per_node is not None:
            return None if self.nnodes is None else self.nnodes * self.per_node
        return self.nslots * self.per_slot


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
                     error=None, *, per_node: int | None = None) -> "Jobspec":
        """`num_tasks` tasks of `cores_per_task` cores, spread over `num_nodes`
        whole nodes if given.  `per_node` (batch/alloc) runs that many tasks per node
        instead, `num_tasks` then counting slots."""
        if isinstance(command, str):
            raise InvalidType("command must be a list of words, not a string")
        if not command:
            raise InvalidValue("a job needs a command")
        command = [_path("each word of the command", w) for w in command]
        if num_tasks is not None:
            _count("task count (num_tasks, -n/--ntasks)", num_tasks)
        _count("cores per task (cores_per_task, -c/--cores-per-task)", cores_per_task)
        if gpus_per_task is not None:
            _count("gpus per task", gpus_per_task, zero=True)
            if gpus_per_task:
                raise NotImplementedError("Jobspec.from_command(gpus_per_task=...): fluxlite "
                                          "schedules no GPUs")
        if rlimits:
            raise NotImplementedError("Jobspec.from_command(rlimits=...): fluxlite's job "
                                      "shell sets no resource limits")
        core = {"type": "core", "count": cores_per_task}
        if num_nodes is not None:
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
            slot = {"type": "slot", "count": slots_per_node, "label": "task", "with": [core]}
            resources = [{"type": "node", "count": num_nodes, "exclusive": True,
                          "with": [slot]}]
        else:
            slot = {"type": "slot", "count": num_tasks or 1, "label": "task", "with": [core]}
            if exclusive:
                slot["exclusive"] = True
            resources = [slot]
            count = {"per_node": per_node} if per_node is not None else {"per_slot": 1}
        spec = cls(resources, [{"command": command, "slot": "task", "count": count}])
        spec.duration = 0.0 if duration is None else duration
        spec.cwd = os.getcwd() if cwd is None else cwd
        spec.environment = dict(os.environ) if environment is None else environment
        if name is not None:   # as Flux: no name, and `jobs` shows the command's
            spec.setattr("system.job.name", name)
        if input is not None:
            spec.stdin = input
        if output is not None:
            spec.stdout = output
        if error is not None:
            spec.stderr = error
        spec.validate()
        return spec

    @classmethod
    def from_nest_command(cls, command, num_slots: int | None = 1, cores_per_slot: int = 1,
                          gpus_per_slot: int | None = None, num_nodes: int | None = None,
                          broker_opts=None, exclusive: bool = False, conf=None,
                          **kwargs) -> "Jobspec":
        """A nested instance, one broker per node, whose initial program is `command`."""
        if conf is not None:
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
                           exclusive: bool = False, conf=None, **kwargs) -> "Jobspec":
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
        """An attribute by dotted key (`system.duration`); KeyError if absent."""
        key = key.removeprefix("attributes.")
        value = self.jobspec["attributes"]
        for part in key.split("."):
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

    def validate(self) -> Request:
        """Check it as the job-manager will (validate() below)."""
        return validate(self.jobspec)

    def dumps(self, **kwargs) -> str:
        return json.dumps(self.jobspec, ensure_ascii=False, **kwargs)


# ------------------------------------------------------------------ validation
# The shape of a jobspec version 1 as fluxlite accepts it, checked in one msgspec
# pass: every malformed jobspec is one error naming the field ("jobspec:
# tasks[0].count.total: expected `int` <= 1048576").  The limits are Flux's where
# it has them (counts >= 1, a finite duration >= 0, a slot with a label that the
# task names, only `system` and `user` attributes) and otherwise generous but
# finite, so that no jobspec asks rank 0 for work without limit.

MAX_TASKS = MAX_COUNT           # tasks one job may have, whatever the counts multiply to
MAX_ARGS = 1 << 16              # words of a command
MAX_ARG = 128 * 1024            # bytes of one word (Linux's MAX_ARG_STRLEN)
MAX_PATH = 4096                 # PATH_MAX
MAX_ENV = 1 << 16               # environment variables
MAX_DURATION = 1e12             # seconds: finite (NaN and inf are refused)

_Label = Annotated[str, Meta(min_length=1, max_length=255)]
_Arg = Annotated[str, Meta(max_length=MAX_ARG)]
_One = Meta(min_length=1, max_length=1)


class CoreV1(Struct, tag="core", tag_field="type", kw_only=True):
    count: Count


class SlotV1(Struct, tag="slot", tag_field="type", kw_only=True):
    count: Count
    label: _Label
    with_: Annotated[list[CoreV1], _One] = msgspec.field(name="with")
    exclusive: bool = False


class NodeV1(Struct, tag="node", tag_field="type", kw_only=True):
    count: Count
    with_: Annotated[list[SlotV1], _One] = msgspec.field(name="with")
    exclusive: bool = True


class TaskCountV1(Struct, kw_only=True, forbid_unknown_fields=True):
    per_slot: Count | None = None
    total: Count | None = None
    per_node: Count | None = None

    def __post_init__(self):
        if sum(v is not None for v in (self.per_slot, self.total, self.per_node)) != 1:
            raise ValueError("exactly one of per_slot, total or per_node must be set")


class TaskV1(Struct, kw_only=True):
    command: Annotated[list[_Arg], Meta(min_length=1, max_length=MAX_ARGS)]
    slot: _Label
    count: TaskCountV1
    attributes: dict[str, Any] = {}


class ShellV1(Struct, kw_only=True):
    options: dict[str, Any] = {}


class JobV1(Struct, kw_only=True):
    name: Annotated[str, Meta(max_length=1024)] = ""


class BatchV1(Struct, kw_only=True):
    script: str = ""


class DependencyV1(Struct, kw_only=True):
    """RFC 26: one entry of attributes.system.dependencies (other keys pass)."""
    scheme: Annotated[str, Meta(min_length=1, max_length=64)]
    value: Annotated[str, Meta(max_length=256)] | \
        Annotated[float, Meta(ge=0.0, le=MAX_TIME)]


class SystemV1(Struct, kw_only=True):
    """attributes.system: the keys fluxlite reads are typed; others (--setattr) pass."""
    duration: Annotated[float, Meta(ge=0.0, le=MAX_DURATION)] = 0.0
    cwd: Annotated[str, Meta(max_length=MAX_PATH)] = ""
    environment: Annotated[dict[Annotated[str, Meta(max_length=MAX_ARG)], _Arg],
                           Meta(max_length=MAX_ENV)] = {}
    shell: ShellV1 = msgspec.field(default_factory=ShellV1)
    job: JobV1 = msgspec.field(default_factory=JobV1)
    batch: BatchV1 = msgspec.field(default_factory=BatchV1)
    dependencies: Annotated[list[DependencyV1], Meta(max_length=MAX_DEPENDENCIES)] = []


class AttributesV1(Struct, kw_only=True, forbid_unknown_fields=True):
    system: SystemV1
    user: dict[str, Any] = {}


class JobspecV1(Struct, kw_only=True, forbid_unknown_fields=True):
    version: Literal[1]
    resources: Annotated[list[Union[NodeV1, SlotV1]], _One]
    tasks: Annotated[list[TaskV1], _One]
    attributes: AttributesV1


def _parse(spec) -> JobspecV1:
    """The jobspec as JobspecV1, or ProtocolError (wrong type) / UsageError (a value out
    of bounds) naming the field."""
    try:
        return msgspec.convert(spec, JobspecV1)
    except msgspec.ValidationError as exc:
        what, wrong_type = describe(exc)
        what = what.removeprefix("payload: ")
        raise (ProtocolError if wrong_type else UsageError)(f"jobspec: {what}") from None


_REQUESTS: dict[Request, Request] = {}   # one shared copy of each request seen
_REQUESTS_MAX = 1024


def _request(js1: JobspecV1) -> Request:
    """The request, shared with every earlier job that asked for the same (thousands of
    pending jobs mostly ask alike)."""
    return _shared(_new_request(js1))


def _shared(req: Request) -> Request:
    shared = _REQUESTS.get(req)
    if shared is not None:
        return shared
    if len(_REQUESTS) >= _REQUESTS_MAX:
        _REQUESTS.clear()
    _REQUESTS[req] = req
    return req


def _new_request(js1: JobspecV1) -> Request:
    top = js1.resources[0]
    count = js1.tasks[0].count
    counts = dict(per_slot=count.per_slot or 1, total=count.total, per_node=count.per_node)
    if isinstance(top, NodeV1):
        slot = top.with_[0]
        return Request(top.count, slot.count, top.count * slot.count, slot.with_[0].count,
                       True, **counts)
    return Request(None, None, top.count, top.with_[0].count, top.exclusive, **counts)


def request(spec: dict) -> Request:
    """The resource request of a jobspec (as validate() checks it)."""
    return _request(_parse(spec))


def validate(spec) -> Request:
    """Check a jobspec from the wire: its shape (JobspecV1), what ties its parts
    together, and its shell options.  ProtocolError or UsageError names the field."""
    js1 = _parse(spec)
    top = js1.resources[0]
    slot = top.with_[0] if isinstance(top, NodeV1) else top
    task = js1.tasks[0]
    if task.slot != slot.label:
        raise UsageError(f"jobspec: tasks[0].slot: {task.slot!r} names no slot (the slot's "
                         f"label is {slot.label!r})")
    req = _request(js1)
    if req.nslots > MAX_COUNT:
        raise UsageError(f"jobspec: resources[0]: {req.nslots} slots in all (at most "
                         f"{MAX_COUNT})")
    # per_node without -N: at most one node per slot
    most = (req.total if req.total is not None else
            req.per_node * (req.nnodes or req.nslots) if req.per_node is not None else
            req.nslots * req.per_slot)
    if most > MAX_TASKS:
        key = next(k for k in ("total", "per_node", "per_slot")
                   if getattr(task.count, k) is not None)
        raise UsageError(f"jobspec: tasks[0].count.{key}: the job would have up to {most} "
                         f"tasks (at most {MAX_TASKS})")
    if req.total is not None and req.nnodes is not None and req.total < req.nnodes:
        raise UsageError(f"jobspec: tasks[0].count.total: {req.total} tasks for "
                         f"{req.nnodes} nodes (at least one task per node)")
    for i, dep in enumerate(js1.attributes.system.dependencies):
        if dep.scheme not in SCHEMES:
            raise UsageError(f"jobspec: attributes.system.dependencies[{i}].scheme: "
                             f"dependency scheme {dep.scheme!r} is not supported (known: "
                             f"{', '.join(SCHEMES)})")
        where = f"jobspec: attributes.system.dependencies[{i}].value"
        if dep.scheme == BEGIN_TIME:
            if isinstance(dep.value, str):
                raise ProtocolError(f"{where}: begin-time takes a number (a Unix time)")
        elif not isinstance(dep.value, str):
            raise ProtocolError(f"{where}: {dep.scheme} takes a job id string")
        elif dep.scheme != SINGLETON:
            target(dep.value, dep.scheme)
    shell_options.validate(js1.attributes.system.shell.options)
    return req


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

"""Jobspecs: built from command-line options, validated at submit.

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

import math
import os
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

import msgspec
from msgspec import Meta, Struct

from ..errors import ProtocolError, UsageError
from ..protocol.schema import describe
from . import shell_options
from .depend import BEGIN_TIME, MAX_DEPENDENCIES, MAX_TIME, SCHEMES, target
from ..util import fsd

MAX_COUNT = 1 << 20


@dataclass(frozen=True)
class Request:
    nnodes: int | None          # -N: whole nodes (exclusive)
    slots_per_node: int | None  # with nnodes
    nslots: int                 # total slots
    cores_per_slot: int
    exclusive: bool
    per_slot: int = 1
    total: int | None = None
    per_node: int | None = None

    @property
    def ntasks(self) -> int | None:
        if self.total is not None:
            return self.total
        if self.per_node is not None:
            return None if self.nnodes is None else self.nnodes * self.per_node
        return self.nslots * self.per_slot

    def describe(self) -> str:
        if self.nnodes is not None:
            return f"{self.nnodes} exclusive node(s)"
        return f"{self.nslots} slot(s) of {self.cores_per_slot} core(s)"


def build(command: list[str], *, ntasks: int | None = None, nnodes: int | None = None,
          cores_per_task: int = 1, exclusive: bool = False, per_node: int | None = None,
          time_limit: float | None = None, cwd: str | None = None,
          environment: dict | None = None, options: dict | None = None,
          name: str | None = None, system: dict | None = None, user: dict | None = None) -> dict:
    """A jobspec from run/submit/batch style options; raises UsageError on nonsense."""
    if not command:
        raise UsageError("a job needs a command")
    for label, v in (("-n/--ntasks", ntasks), ("-N/--nodes", nnodes),
                     ("-c/--cores-per-task", cores_per_task)):
        if v is not None and not (1 <= v <= MAX_COUNT):
            raise UsageError(f"{label} must be between 1 and {MAX_COUNT}, got {v}")
    core = {"type": "core", "count": cores_per_task}
    if nnodes is not None:
        if per_node is not None:
            if ntasks is not None and ntasks < nnodes:
                raise UsageError(f"node count ({nnodes}) must not be greater than slot "
                                 f"count ({ntasks})")
            slots_per_node = max(1, math.ceil((ntasks or nnodes) / nnodes))
            count = {"per_node": per_node}
        else:
            ntasks = nnodes if ntasks is None else ntasks
            if ntasks < nnodes:
                raise UsageError(f"node count ({nnodes}) must not be greater than task "
                                 f"count ({ntasks})")
            slots_per_node = math.ceil(ntasks / nnodes)
            count = {"per_slot": 1} if ntasks % nnodes == 0 else {"total": ntasks}
        slot = {"type": "slot", "count": slots_per_node, "label": "task", "with": [core]}
        resources = [{"type": "node", "count": nnodes, "exclusive": True, "with": [slot]}]
    else:
        n = ntasks or 1
        slot = {"type": "slot", "count": n, "label": "task", "with": [core]}
        if exclusive:
            slot["exclusive"] = True
        resources = [slot]
        count = {"per_node": per_node} if per_node is not None else {"per_slot": 1}
    sysattrs = dict(system or {})
    sysattrs["duration"] = float(time_limit or 0)
    sysattrs["cwd"] = cwd or os.getcwd()
    sysattrs["environment"] = dict(os.environ if environment is None else environment)
    if options:
        sysattrs.setdefault("shell", {})["options"] = dict(options)
    sysattrs.setdefault("job", {})["name"] = name or os.path.basename(command[0])
    spec = {"version": 1, "resources": resources,
            "tasks": [{"command": list(command), "slot": "task", "count": count}],
            "attributes": {"system": sysattrs}}
    if user:
        spec["attributes"]["user"] = dict(user)
    validate(spec)
    return spec


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

_Count = Annotated[int, Meta(ge=1, le=MAX_COUNT)]
_Label = Annotated[str, Meta(min_length=1, max_length=255)]
_Arg = Annotated[str, Meta(max_length=MAX_ARG)]
_One = Meta(min_length=1, max_length=1)


class CoreV1(Struct, tag="core", tag_field="type", kw_only=True):
    count: _Count


class SlotV1(Struct, tag="slot", tag_field="type", kw_only=True):
    count: _Count
    label: _Label
    with_: Annotated[list[CoreV1], _One] = msgspec.field(name="with")
    exclusive: bool = False


class NodeV1(Struct, tag="node", tag_field="type", kw_only=True):
    count: _Count
    with_: Annotated[list[SlotV1], _One] = msgspec.field(name="with")
    exclusive: bool = True


class TaskCountV1(Struct, kw_only=True, forbid_unknown_fields=True):
    per_slot: _Count | None = None
    total: _Count | None = None
    per_node: _Count | None = None

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
    value: Annotated[str, Meta(min_length=1, max_length=256)] | \
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


def _request(js1: JobspecV1) -> Request:
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
        else:
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

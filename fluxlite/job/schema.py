"""A jobspec as fluxlite accepts it: its shape, checked in one msgspec pass at
submit, and the `Request` it reduces to.

The job-manager validates every jobspec it is given (`validate()`); a jobspec
built with `Jobspec` (jobspec.py) is checked with the same code when the Python
API asks for it.  This lives apart from the builder because msgspec costs ~6 ms
to import, and the CLI, which builds a jobspec and submits it at once, leaves
the check to the job-manager (whose message it prints unchanged).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from ..errors import ProtocolError, UsageError
from ..protocol.schema import MAX_COUNT, Count, describe
from . import constraint, shell_options
from .depend import BEGIN_TIME, MAX_DEPENDENCIES, MAX_TIME, SCHEMES, SINGLETON, target


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
    gpus_per_slot: Annotated[int, Meta(ge=0, le=MAX_COUNT)] = 0

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


class GpuV1(Struct, tag="gpu", tag_field="type", kw_only=True):
    count: Count


class SlotV1(Struct, tag="slot", tag_field="type", kw_only=True):
    count: Count
    label: _Label
    # one core entry, and at most one gpu entry beside it
    with_: Annotated[list[CoreV1 | GpuV1], Meta(min_length=1, max_length=2)] = \
        msgspec.field(name="with")
    exclusive: bool = False

    def __post_init__(self):
        kinds = sorted(type(w).__name__ for w in self.with_)
        if kinds not in (["CoreV1"], ["CoreV1", "GpuV1"]):
            raise ValueError("a slot holds one core entry and at most one gpu entry")


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

    def __post_init__(self):
        for i, word in enumerate(self.command):
            if "\0" in word:
                raise ValueError(f"command[{i}] contains a NUL byte, which no argument "
                                 "can hold")


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
    queue: Annotated[str, Meta(max_length=255)] | None = None
    constraints: dict[str, Any] | None = None

    def __post_init__(self):
        # what exec and chdir could not take is refused here, not by a crashed shell
        if "\0" in self.cwd:
            raise ValueError("cwd contains a NUL byte, which no path can hold")
        for name, value in self.environment.items():
            if not name or "=" in name or "\0" in name:
                raise ValueError(f"environment: name {name!r} is not allowed: a name is "
                                 "not empty and holds no '=' and no NUL byte")
            if "\0" in value:
                raise ValueError(f"environment: the value of {name} contains a NUL byte, "
                                 "which no environment variable can hold")


class AttributesV1(Struct, kw_only=True, forbid_unknown_fields=True):
    system: SystemV1
    user: dict[str, Any] = {}


class JobspecV1(Struct, kw_only=True, forbid_unknown_fields=True):
    version: Literal[1]
    resources: Annotated[list[NodeV1 | SlotV1], _One]
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


def _slot_counts(slot: SlotV1) -> tuple[int, int]:
    """(cores, gpus) of one slot."""
    cores = gpus = 0
    for w in slot.with_:
        if isinstance(w, CoreV1):
            cores = w.count
        else:
            gpus = w.count
    return cores, gpus


def _new_request(js1: JobspecV1) -> Request:
    top = js1.resources[0]
    count = js1.tasks[0].count
    counts = dict(per_slot=count.per_slot or 1, total=count.total, per_node=count.per_node)
    if isinstance(top, NodeV1):
        slot = top.with_[0]
        cores, gpus = _slot_counts(slot)
        return Request(top.count, slot.count, top.count * slot.count, cores,
                       True, gpus_per_slot=gpus, **counts)
    cores, gpus = _slot_counts(top)
    return Request(None, None, top.count, cores, top.exclusive, gpus_per_slot=gpus, **counts)


def request(spec: dict) -> Request:
    """The resource request of a jobspec (as validate() checks it)."""
    return _request(_parse(spec))


def validate(spec) -> Request:
    """Check a jobspec from the wire: its shape (JobspecV1), what ties its parts
    together, and its shell options.  ProtocolError or UsageError names the field."""
    js1 = _parse(spec)
    task = js1.tasks[0]
    # tasks[0].slot need not repeat the slot's label: Flux accepts a jobspec whose
    # task names another (t/jobspec/valid/basic_v1.yaml), the one slot is meant
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
    if js1.attributes.system.constraints is not None:
        constraint.check(js1.attributes.system.constraints,
                         "jobspec: attributes.system.constraints")
    return req

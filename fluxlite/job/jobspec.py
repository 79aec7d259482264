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

from ..errors import UsageError
from . import shell_options
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


def _count(obj, label: str) -> int:
    c = obj.get("count") if isinstance(obj, dict) else None
    if type(c) is not int or not 1 <= c <= MAX_COUNT:
        raise UsageError(f"jobspec: {label} count must be an integer from 1 to {MAX_COUNT}")
    return c


def request(spec: dict) -> Request:
    """The resource request of a valid jobspec."""
    res = spec["resources"][0]
    task_count = spec["tasks"][0]["count"]
    if res["type"] == "node":
        nnodes = _count(res, "node")
        slot = res["with"][0]
        spn = _count(slot, "slot")
        cores = _count(slot["with"][0], "core")
        return Request(nnodes, spn, nnodes * spn, cores, True,
                       per_slot=task_count.get("per_slot", 1), total=task_count.get("total"),
                       per_node=task_count.get("per_node"))
    nslots = _count(res, "slot")
    cores = _count(res["with"][0], "core")
    return Request(None, None, nslots, cores, bool(res.get("exclusive")),
                   per_slot=task_count.get("per_slot", 1), total=task_count.get("total"),
                   per_node=task_count.get("per_node"))


def validate(spec) -> Request:
    """Check a jobspec from the wire; UsageError says what is wrong."""
    if not isinstance(spec, dict) or spec.get("version") != 1:
        raise UsageError("jobspec: version must be 1")
    res = spec.get("resources")
    if not isinstance(res, list) or len(res) != 1 or not isinstance(res[0], dict):
        raise UsageError("jobspec: resources must be a list of one node or slot")
    top = res[0]
    if top.get("type") == "node":
        inner = top.get("with")
        if not isinstance(inner, list) or len(inner) != 1 or inner[0].get("type") != "slot":
            raise UsageError("jobspec: a node must contain one slot")
        slot = inner[0]
    elif top.get("type") == "slot":
        slot = top
    else:
        raise UsageError("jobspec: resources must start with a node or a slot")
    w = slot.get("with")
    if not isinstance(w, list) or len(w) != 1 or not isinstance(w[0], dict) \
            or w[0].get("type") != "core":
        raise UsageError("jobspec: a slot must contain cores")
    tasks = spec.get("tasks")
    if not isinstance(tasks, list) or len(tasks) != 1 or not isinstance(tasks[0], dict):
        raise UsageError("jobspec: tasks must be a list of one task")
    cmd = tasks[0].get("command")
    if not isinstance(cmd, list) or not cmd or not all(isinstance(a, str) for a in cmd):
        raise UsageError("jobspec: command must be a non-empty list of strings")
    count = tasks[0].get("count")
    if not isinstance(count, dict) or len(count) != 1 or \
            next(iter(count)) not in ("per_slot", "total", "per_node") or \
            type(next(iter(count.values()))) is not int or next(iter(count.values())) < 1:
        raise UsageError("jobspec: task count must be one of per_slot, total, per_node "
                         "with a positive integer")
    attrs = spec.get("attributes", {})
    sysattrs = attrs.get("system", {}) if isinstance(attrs, dict) else None
    if not isinstance(sysattrs, dict):
        raise UsageError("jobspec: attributes.system must be a map")
    dur = sysattrs.get("duration", 0)
    if isinstance(dur, bool) or not isinstance(dur, (int, float)) or dur < 0:
        raise UsageError("jobspec: duration must be a number of seconds >= 0")
    env = sysattrs.get("environment", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                            for k, v in env.items()):
        raise UsageError("jobspec: environment must map names to strings")
    if not isinstance(sysattrs.get("cwd", ""), str):
        raise UsageError("jobspec: cwd must be a string")
    opts = sysattrs.get("shell", {}).get("options", {}) if isinstance(
        sysattrs.get("shell", {}), dict) else None
    shell_options.validate(opts if opts is not None else "bad")
    req = request(spec)
    if req.total is not None and req.nnodes is not None and req.total < req.nnodes:
        raise UsageError("jobspec: task count must not be less than the node count")
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

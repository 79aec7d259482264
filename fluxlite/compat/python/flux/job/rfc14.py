"""The shape check of a canonical jobspec (RFC 14), as `flux.job.Jobspec(...)`
makes it when one is built: resources, tasks and attributes well formed, with
TypeError for a wrong type and ValueError for a wrong value.  This is the check
of any version; what a version-1 jobspec may ask of fluxlite is checked at
submit (fluxlite.job.schema)."""

from __future__ import annotations

from collections import abc

from .. import idset

TOP_LEVEL_KEYS = frozenset(("resources", "tasks", "version", "attributes"))


def keys(expected, given, *, optional: bool = False, extra: bool = False) -> None:
    """ValueError naming a required key that is absent or a key not allowed."""
    expected, given = set(expected), set(given)
    if not optional and expected - given:
        raise ValueError(f"Missing key ({sorted(expected - given)[0]})")
    if not extra and given - expected:
        raise ValueError(f"Extraneous key ({sorted(given - expected)[0]})")


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def count_range(rng: abc.Mapping) -> None:
    """A count {min, max, operand, operator}: min required, all positive
    integers, max >= min, operator one of + * ^ and given with its operand."""
    if "min" not in rng:
        raise ValueError("a count range needs min")
    keys(("min", "max", "operand", "operator"), rng.keys(), optional=True)
    for k in ("min", "max", "operand"):
        if k in rng:
            if not _is_int(rng[k]):
                raise TypeError(f"count {k} must be an integer")
            if rng[k] < 1:
                raise ValueError(f"count {k} must be at least 1")
    if "max" in rng and rng["max"] < rng["min"]:
        raise ValueError("count max must not be less than min")
    if ("operand" in rng) != ("operator" in rng):
        raise ValueError("count operand and operator go together")
    if "operator" in rng:
        op = rng["operator"]
        if not isinstance(op, str) or len(op) != 1:
            raise TypeError("count operator must be one character")
        if op not in "+*^":
            raise ValueError("count operator must be +, * or ^")
        if op in "*^" and rng["operand"] < 2:
            raise ValueError(f"count operand must be at least 2 with {op}")
        if op == "^" and rng["min"] < 2:
            raise ValueError("count min must be at least 2 with ^")


def count_string(text: str) -> None:
    """A count as text: an idset, or a range MIN+, MIN-MAX[:OPERAND[:OPERATOR]]."""
    try:
        idset.decode(text)
        return
    except (ValueError, OSError):
        pass
    parts = text.split(":")
    if len(parts) > 3 or not ("-" in parts[0] or "+" in parts[0]):
        raise ValueError(f"count {text!r} is neither an idset nor a range")
    rng = {}
    try:
        if "-" in parts[0]:
            low, _, high = parts[0].partition("-")
            rng["max"] = int(high)
        else:
            low = parts[0].rstrip("+")
        rng["min"] = int(low)
        if len(parts) > 1:
            rng["operand"], rng["operator"] = int(parts[1]), "+"
    except ValueError:
        raise ValueError(f"count {text!r} is neither an idset nor a range") from None
    if len(parts) > 2:
        rng["operator"] = parts[2]
    count_range(rng)


def resource(res) -> None:
    if not isinstance(res, abc.Mapping):
        raise TypeError("a resource must be a mapping")
    if "type" not in res:
        raise ValueError("a resource needs a type")
    if not isinstance(res["type"], str):
        raise TypeError("a resource's type must be a string")
    if "count" not in res:
        raise ValueError("a resource needs a count")
    count = res["count"]
    if isinstance(count, abc.Mapping):
        count_range(count)
    elif isinstance(count, str):
        count_string(count)
    elif not _is_int(count):
        raise TypeError("a resource's count must be an integer, a range or its text")
    elif count < (1 if res["type"] in ("node", "slot", "core") else 0):
        raise ValueError(f"a {res['type']} count of {count} is too small")
    for k in ("id", "unit", "label"):
        if k in res and not isinstance(res[k], str):
            raise TypeError(f"a resource's {k} must be a string")
    if "exclusive" in res and not isinstance(res["exclusive"], bool):
        raise TypeError("a resource's exclusive must be true or false")
    if res["type"] == "slot" and "label" not in res:
        raise ValueError("a slot needs a label")
    if "with" in res:
        children = res["with"]
        if not isinstance(children, abc.Sequence) or isinstance(children, str):
            raise TypeError("a resource's with must be a sequence")


def task(t) -> None:
    if not isinstance(t, abc.Mapping):
        raise TypeError("a task must be a mapping")
    keys(("command", "slot", "count"), t.keys(), extra=True)
    count = t["count"]
    if not isinstance(count, abc.Mapping):
        raise TypeError("a task's count must be a mapping")
    # per_node (one task per node: a nested instance's brokers) is fluxlite's
    if len(count) != 1 or count.keys().isdisjoint({"per_slot", "per_resource", "total",
                                                  "per_node"}):
        raise ValueError("a task's count has exactly one of per_slot, per_resource, total")
    for k in ("per_slot", "total", "per_node"):
        if k in count:
            if not _is_int(count[k]):
                raise TypeError(f"a task's count {k} must be an integer")
            if count[k] < 1:
                raise ValueError(f"a task's count {k} must be at least 1")
    if not isinstance(t["slot"], str):
        raise TypeError("a task's slot must be a string")
    if "attributes" in t and not isinstance(t["attributes"], abc.Mapping):
        raise TypeError("a task's attributes must be a mapping")
    command = t["command"]
    if isinstance(command, str) or not isinstance(command, abc.Sequence) \
            or not all(isinstance(w, str) for w in command):
        raise TypeError("a task's command must be a list of strings")
    if not command:
        raise TypeError("a task's command must not be empty")


def system(sysattrs: abc.Mapping) -> None:
    deps = sysattrs.get("dependencies")
    if deps is not None:
        if not isinstance(deps, abc.Sequence) or isinstance(deps, str):
            raise TypeError("attributes.system.dependencies must be a list")
        for dep in deps:
            if not isinstance(dep, abc.Mapping):
                raise TypeError("a dependency must be a mapping")
            keys(("scheme", "value"), dep.keys(), extra=True)
            if not isinstance(dep["scheme"], str) or not isinstance(dep["value"], str):
                raise TypeError("a dependency's scheme and value must be strings")
    if "constraints" in sysattrs and not isinstance(sysattrs["constraints"], abc.Mapping):
        raise TypeError("attributes.system.constraints must be a mapping")


def walk(resources, parent=None, scale: int = 1):
    """(parent, resource, count) depth first, count multiplied down the tree."""
    for res in resources:
        count = scale * res["count"]
        yield parent, res, count
        yield from walk(res.get("with", ()), res, count)


def check(resources, tasks, attributes, version) -> None:
    """Raise TypeError or ValueError for a jobspec that breaks RFC 14's shape."""
    if not isinstance(resources, abc.Sequence) or isinstance(resources, str):
        raise TypeError("resources must be a sequence")
    if not isinstance(tasks, abc.Sequence) or isinstance(tasks, str):
        raise TypeError("tasks must be a sequence")
    if not isinstance(attributes, abc.Mapping):
        raise TypeError("attributes must be a mapping")
    if not _is_int(version):
        raise TypeError("version must be an integer")
    if version < 1:
        raise ValueError("version must be at least 1")
    pending = list(resources)
    while pending:
        res = pending.pop()
        resource(res)
        pending.extend(res.get("with", ()))
    for t in tasks:
        task(t)
    keys(("system", "user"), attributes.keys(), optional=True)
    if "system" in attributes:
        if not isinstance(attributes["system"], abc.Mapping):
            raise TypeError("attributes.system must be a mapping")
        system(attributes["system"])

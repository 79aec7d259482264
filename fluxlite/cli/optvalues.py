"""What the Flux submission options that are more than a value become: the
per-resource task counts (--cores, --tasks-per-node, --tasks-per-core), --rlimit
rules, --add-file entries.  The option table itself is options.py."""

from __future__ import annotations

import functools
import os

from ..errors import UsageError

# the limits a job does not take from its submitter unless asked (as Flux's)
RLIMITS_NOT_PROPAGATED = ("memlock", "msgqueue", "nice", "rtprio", "rttime", "sigpending")


def rlimits(rules: tuple[str, ...]) -> dict[str, int]:
    """{NAME: soft limit} (-1 unlimited) for the job shell, as Flux's submission commands
    build it: the submitter's own soft limits, all but RLIMITS_NOT_PROPAGATED, then
    each --rlimit rule in order (several to an option, comma-separated): -PATTERN
    drops the limits it matches (`-*` all), NAME=VALUE sets one (unlimited, infinity
    or inf: no limit), PATTERN adds the submitter's own (`*` all, `memlock`)."""
    import fnmatch
    own = _own_limits()          # read once a command (--cc builds a jobspec a copy)
    names = list(own)

    def matching(pattern: str, rule: str) -> list[str]:
        found = fnmatch.filter(names, _rlimit_name(pattern))
        if not found and not any(c in pattern for c in "*?["):
            raise UsageError(f"--rlimit={rule}: unknown limit {pattern!r} (one of "
                             f"{', '.join(names)})")
        return found

    out = {n: v for n, v in own.items() if n not in RLIMITS_NOT_PROPAGATED}
    if not rules:
        return out
    for rule in (r.strip() for option in rules for r in option.split(",")):
        if not rule:
            continue
        if rule.startswith("-"):
            for name in matching(rule[1:], rule):
                out.pop(name, None)
            continue
        name, eq, value = rule.partition("=")
        if not eq:
            out.update({n: own[n] for n in matching(name, rule)})
            continue
        if not name or any(c in name for c in "*?["):
            raise UsageError(f"--rlimit={rule}: expected NAME=VALUE with one limit's name")
        [name] = matching(name, rule)
        if value.lower() in ("unlimited", "infinity", "inf"):
            out[name] = -1
        elif value.isdigit():
            out[name] = int(value)
        else:
            raise UsageError(f"--rlimit={rule}: {value!r} is not a number or 'unlimited'")
    return out


@functools.cache
def _own_limits() -> dict[str, int]:
    """This process's soft limit of each limit the system has (-1: unlimited); Linux
    has no RLIMIT_LOCKS to read or set."""
    import resource

    from ..job.shell_options import RLIMITS
    out = {}
    for name in RLIMITS:
        which = getattr(resource, f"RLIMIT_{name.upper()}", None)
        if which is not None:
            soft = resource.getrlimit(which)[0]
            out[name] = -1 if soft == resource.RLIM_INFINITY else soft
    return out


def _rlimit_name(text: str) -> str:
    """A limit's name as --rlimit takes it: any case, RLIMIT_ prefix or not, ofile
    for nofile (as Flux's)."""
    name = text.lower().removeprefix("rlimit_")
    return "nofile" if name == "ofile" else name


def file_entry(arg: str) -> tuple[str, dict]:
    """One --add-file: (NAME, an RFC 37 entry with the data inline)."""
    import base64
    import stat
    name, eq, data = arg.partition("=")
    if not eq or "/" in name or not name:
        name, data = None, arg
    perms = None
    if name and ":" in name:   # NAME:PERMS, octal, as Flux
        name, _, text = name.partition(":")
        try:
            perms = int(text, 8)
        except ValueError:
            raise UsageError(f"--add-file: invalid permissions {text!r} (octal, e.g. "
                             "0755)") from None
        if not 0 <= perms <= 0o7777:
            raise UsageError(f"--add-file: invalid permissions {text!r} (octal, e.g. 0755)")
    if "\n" in data:
        if name is None:
            raise UsageError("--add-file: file data given inline needs a NAME= before it")
        body, mode = data.encode(), 0o600
    else:
        try:
            with open(data, "rb") as f:
                body = f.read()
            mode = stat.S_IMODE(os.stat(data).st_mode)
        except OSError as exc:
            raise UsageError.from_oserror(exc, f"--add-file: cannot read {data}") from None
        name = name or os.path.basename(data)
    if name in ("script", "conf.json"):
        raise UsageError(f"--add-file: {name!r} is a reserved name (RFC 14)")
    try:
        entry = {"encoding": "utf-8", "data": body.decode()}
    except UnicodeDecodeError:
        entry = {"encoding": "base64", "data": base64.b64encode(body).decode()}
    entry.update(size=len(body), mode=mode if perms is None else perms)
    return name, entry


def per_resource(params: dict) -> dict:
    """Flux's per-resource options (--cores, --tasks-per-node, --tasks-per-core) as the
    task counts of the one builder: num_tasks, cores_per_task, per_node."""
    cores, tpn, tpc = (params.get("cores"), params.get("tasks_per_node"),
                       params.get("tasks_per_core"))
    nodes = params.get("nodes")
    if cores is None and tpn is None and tpc is None:
        return {}
    if tpn is not None and tpc is not None:
        raise UsageError("Do not specify both the number of tasks per node and per core")
    if params.get("ntasks") is not None or params.get("cores_per_task") is not None:
        raise UsageError("Per-resource options can't be used with per-task options "
                         "(-n, -c): see --help")
    if cores is not None:
        n = nodes or 1
        if cores % n:
            raise UsageError(f"--cores={cores} does not divide among {n} nodes")
        per_task = tpc is None
        if tpc is not None:   # tasks share the cores: one core a slot, N tasks on it
            return {"num_tasks": cores * tpc, "cores_per_task": 1, "nodes": nodes,
                    "total": True}
        if tpn is not None:
            return {"num_tasks": n * tpn, "cores_per_task": max(1, cores // (n * tpn)),
                    "nodes": nodes}
        return {"num_tasks": n, "cores_per_task": cores // n if per_task else 1,
                "nodes": nodes}
    # whole nodes (-N, default 1), tasks per node or per core of each node
    return {"nodes": nodes or 1, "per_node": tpn, "per_core": tpc}


def one_slot(resources: list, cores: int) -> list:
    """The request with its task slot replaced by one slot of `cores` cores."""
    def fix(r):
        if r["type"] == "slot":
            return dict(r, count=1, **{"with": [{"type": "core", "count": cores}]})
        return dict(r, **{"with": [fix(c) for c in r.get("with", [])]})
    return [fix(r) for r in resources]


def cores_per_node() -> int:
    """The cores of the instance's smallest node (--tasks-per-core without --cores)."""
    from ..client.sync import Handle
    from ..util import idset
    with Handle() as h:
        ranks = h.call("resource.status", {})["ranks"]
    return min(len(idset.decode(r["cores"])) for r in ranks.values()) or 1


def instance_conf(values: tuple[str, ...]) -> list[str]:
    """batch/alloc --conf values (Flux's rules, in order, each merged over the last: a
    value with a newline is JSON or TOML text, KEY=VAL a dotted key and its JSON (or
    string) value, a path ending .toml or .json that file, anything else a named
    config FILE.toml or FILE.json in $XDG_CONFIG_HOME/flux/config or
    $XDG_CONFIG_DIRS/flux/config) as the new instance's broker options, -SNAME=VALUE,
    each checked now as its brokers will."""
    config: dict = {}
    for value in values:
        _merge(config, conf_value(value))
    from ..broker import entry
    return [f"-S{name}={val}" for name, val in entry.config_attrs(config, "--conf").items()]


def json_or_text(text: str):
    """A KEY=VALUE word's VALUE as Flux reads it: JSON if it parses, else the string."""
    import json
    try:
        return json.loads(text)
    except ValueError:
        return text


def put_dotted(obj: dict, key: str, value) -> None:
    """Set dotted `key` (a.b.c) in `obj`, making the tables on the way; a part that
    already holds a value, not a table, is a UsageError."""
    node = obj
    *path, last = key.split(".")
    for part in path:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise UsageError(f"{key}: {part} is given a value and a table")
    node[last] = value


def conf_value(value: str) -> dict:
    """One --conf VALUE as a config object (Flux's forms, see instance_conf; a value
    starting with '{' is a JSON object even on one line, as Flux reads it)."""
    import json
    import tomllib
    if value.startswith("{"):
        try:
            table = json.loads(value)
        except ValueError as exc:
            raise UsageError(f"--conf: failed to parse as JSON: {exc}") from None
        if not isinstance(table, dict):
            raise UsageError("--conf: a JSON config is an object of tables")
        return table
    if "\n" in value:
        try:
            return json.loads(value)
        except ValueError:
            try:
                return tomllib.loads(value)
            except tomllib.TOMLDecodeError:
                raise UsageError("--conf: failed to parse multiline as TOML or JSON") \
                    from None
    if "=" in value:
        key, _, text = value.partition("=")
        out: dict = {}
        put_dotted(out, key, json_or_text(text))
        return out
    path = value if value.endswith((".toml", ".json")) else named_config(value)
    try:
        with open(path, "rb") as f:
            return json.load(f) if path.endswith(".json") else tomllib.load(f)
    except OSError as exc:
        raise UsageError.from_oserror(exc, f"--conf: cannot read {path}") from None
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"--conf: parse error: {path}: {exc}") from None


def named_config(name: str) -> str:
    """The file of a named config (--conf NAME), as Flux finds one."""
    home = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    dirs = [home, *(os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg").split(":")]
    for d in dirs:
        for ext in (".toml", ".json"):
            path = os.path.join(d, "flux", "config", name + ext)
            if os.path.exists(path):
                return path
    raise UsageError(f"--conf: named config '{name}' not found (a KEY=VALUE, a .toml or "
                     ".json file, or NAME.toml in $XDG_CONFIG_HOME/flux/config)")


def _merge(into: dict, new: dict) -> None:
    for key, val in new.items():
        if isinstance(val, dict) and isinstance(into.get(key), dict):
            _merge(into[key], val)
        else:
            into[key] = val



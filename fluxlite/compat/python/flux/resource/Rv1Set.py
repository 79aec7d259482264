"""`flux.resource.Rv1Set`: an RFC 20 R (version 1) held as data: each rank's
host, cores and GPUs, named properties of ranks, start and expiration times,
and the optional `scheduling` key.  Set operations (union, difference,
intersection), selection by rank or by an RFC 31 constraint (properties,
hostlist, ranks, and/or/not), and the R_lite text (`rank[0-3]/core[0-3],gpu0`)."""

from __future__ import annotations

import json
import re

from fluxlite.util import hostlist as _hostlist
from fluxlite.util import idset as _idset

__all__ = ["Rv1Set", "bracketed"]

# characters RFC 20 does not allow in a property name
_BAD_PROPERTY = re.compile(r"[\s!&'\"^`|(),]")


def bracketed(ids) -> str:
    """An idset as R_lite text names it: `0`, `[0-3]`, `[0,2-3]`."""
    text = _idset.encode(ids)
    return f"[{text}]" if len(set(ids)) > 1 else text


def _ranks_of(value) -> set[int]:
    """Ranks given as an idset string, an IDset, an int or an iterable of ints."""
    if isinstance(value, str):
        return _idset.decode(value)
    if isinstance(value, int):
        return {value}
    return {int(r) for r in value}


class _Node:
    __slots__ = ("host", "cores", "gpus")

    def __init__(self, host=None, cores=(), gpus=()):
        self.host, self.cores, self.gpus = host, set(cores), set(gpus)

    def copy(self) -> _Node:
        return _Node(self.host, self.cores, self.gpus)

    def empty(self) -> bool:
        return not self.cores and not self.gpus


class Rv1Set:
    """Rv1Set(R dict or None, keep_scheduling=False)."""

    def __init__(self, R: dict | None = None, keep_scheduling: bool = False):
        self.nodes: dict[int, _Node] = {}
        self.props: dict[str, set[int]] = {}
        self.starttime = 0.0
        self.expiration = 0.0
        self.scheduling = None
        if R is None:
            return
        if R["version"] != 1:
            raise ValueError(f"R version {R['version']} is not supported (only 1)")
        ex = R.get("execution") or {}
        hosts = []
        for text in ex.get("nodelist") or []:
            hosts.extend(_hostlist.decode(text))
        for item in ex.get("R_lite") or []:
            children = item.get("children") or {}
            cores = _idset.decode(children.get("core", ""))
            gpus = _idset.decode(children.get("gpu", ""))
            for rank in sorted(_idset.decode(item["rank"])):
                node = self.nodes.setdefault(rank, _Node())
                node.cores |= cores
                node.gpus |= gpus
        for i, rank in enumerate(sorted(self.nodes)):
            if i < len(hosts):
                self.nodes[rank].host = hosts[i]
        for name, ranks in (ex.get("properties") or {}).items():
            self.props[name] = _idset.decode(ranks) & set(self.nodes)
        self.starttime = float(ex.get("starttime") or 0.0)
        self.expiration = float(ex.get("expiration") or 0.0)
        if keep_scheduling:
            self.scheduling = R.get("scheduling")

    # -- reading ----------------------------------------------------------------
    @property
    def ranks(self) -> list[int]:
        return sorted(self.nodes)

    def count(self, kind: str) -> int:
        if kind == "core":
            return sum(len(n.cores) for n in self.nodes.values())
        if kind == "gpu":
            return sum(len(n.gpus) for n in self.nodes.values())
        if kind == "node":
            return len(self.nodes)
        return 0

    def hosts(self) -> list[str]:
        return [self.nodes[r].host for r in self.ranks if self.nodes[r].host]

    def groups(self) -> list[tuple[list[int], frozenset, frozenset]]:
        """Ranks with the same cores and GPUs, in order of their first rank."""
        out: dict[tuple, list[int]] = {}
        for r in self.ranks:
            n = self.nodes[r]
            out.setdefault((frozenset(n.cores), frozenset(n.gpus)), []).append(r)
        return [(ranks, cores, gpus) for (cores, gpus), ranks in out.items()]

    def __str__(self) -> str:
        parts = []
        for ranks, cores, gpus in self.groups():
            children = []
            if cores:
                children.append("core" + bracketed(cores))
            if gpus:
                children.append("gpu" + bracketed(gpus))
            parts.append(f"rank{bracketed(ranks)}/" + ",".join(children))
        return " ".join(parts)

    def to_dict(self) -> dict:
        lite = []
        for ranks, cores, gpus in self.groups():
            children = {}
            if cores:
                children["core"] = _idset.encode(cores)
            if gpus:
                children["gpu"] = _idset.encode(gpus)
            lite.append({"rank": _idset.encode(ranks), "children": children})
        ex = {"R_lite": lite, "starttime": self.starttime, "expiration": self.expiration}
        hosts = self.hosts()
        if hosts and len(hosts) == len(self.nodes):
            ex["nodelist"] = [_hostlist.encode(hosts)]
        if self.props:
            ex["properties"] = {k: _idset.encode(v) for k, v in self.props.items() if v}
        out = {"version": 1, "execution": ex}
        if self.scheduling is not None:
            out["scheduling"] = self.scheduling
        return out

    def encode(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    # -- copies and changes ----------------------------------------------------------
    def copy(self) -> Rv1Set:
        return self.copy_ranks(self.nodes)

    def copy_ranks(self, ranks) -> Rv1Set:
        keep = _ranks_of(ranks)
        out = Rv1Set()
        out.nodes = {r: n.copy() for r, n in self.nodes.items() if r in keep}
        out.props = {k: v & set(out.nodes) for k, v in self.props.items()}
        out.props = {k: v for k, v in out.props.items() if v}
        out.starttime, out.expiration = self.starttime, self.expiration
        out.scheduling = self.scheduling
        return out

    def remove_ranks(self, ranks) -> Rv1Set:
        for r in _ranks_of(ranks):
            self.nodes.pop(r, None)
        self._trim_props()
        return self

    def _trim_props(self) -> None:
        self.props = {k: v & set(self.nodes) for k, v in self.props.items()}
        self.props = {k: v for k, v in self.props.items() if v}

    def add(self, other: Rv1Set) -> Rv1Set:
        """Merge `other` into this set (its cores and GPUs join each rank's)."""
        for r, n in other.nodes.items():
            mine = self.nodes.setdefault(r, _Node(n.host))
            mine.host = mine.host or n.host
            mine.cores |= n.cores
            mine.gpus |= n.gpus
        for k, v in other.props.items():
            self.props[k] = self.props.get(k, set()) | v
        if other.scheduling is not None and self.scheduling is None:
            self.scheduling = other.scheduling
        return self

    def subtract(self, other: Rv1Set) -> Rv1Set:
        for r, n in other.nodes.items():
            mine = self.nodes.get(r)
            if mine is None:
                continue
            mine.cores -= n.cores
            mine.gpus -= n.gpus
            if mine.empty():
                del self.nodes[r]
        self._trim_props()
        return self

    def intersect(self, other: Rv1Set) -> Rv1Set:
        for r in list(self.nodes):
            n = other.nodes.get(r)
            mine = self.nodes[r]
            if n is None:
                del self.nodes[r]
                continue
            mine.cores &= n.cores
            mine.gpus &= n.gpus
            if mine.empty():
                del self.nodes[r]
        self._trim_props()
        return self

    # -- properties and constraints --------------------------------------------------
    def set_property(self, name: str, ranks=None) -> None:
        if not isinstance(name, str) or not name or _BAD_PROPERTY.search(name):
            raise ValueError(f"invalid property name {name!r}")
        try:
            which = set(self.nodes) if ranks is None else _ranks_of(ranks)
        except ValueError:
            raise ValueError(f"invalid ranks {ranks!r} for property {name!r}") from None
        if not which <= set(self.nodes):
            raise ValueError(f"ranks {_idset.encode(which - set(self.nodes))} are not "
                             "in this resource set")
        self.props[name] = self.props.get(name, set()) | which

    def host_ranks(self, hosts, ignore_nomatch: bool = False) -> list[int]:
        names = _hostlist.decode(hosts) if isinstance(hosts, str) else list(hosts)
        by_host = {self.nodes[r].host: r for r in self.ranks}
        out = []
        for name in names:
            if name in by_host:
                out.append(by_host[name])
            elif not ignore_nomatch:
                raise FileNotFoundError(2, f"{name} is not in this resource set")
        return out

    def matching(self, constraint) -> set[int]:
        """The ranks that meet an RFC 31 constraint (ValueError if malformed)."""
        if isinstance(constraint, str):
            constraint = json.loads(constraint)
        if not isinstance(constraint, dict):
            raise ValueError("a constraint is a JSON object")
        ranks = set(self.nodes)
        for op, arg in constraint.items():
            if op in ("and", "or", "not"):
                if not isinstance(arg, list) or (op == "not" and not arg):
                    raise ValueError(f"constraint {op!r} takes a non-empty list")
                sets = [self.matching(c) for c in arg]
                if op == "and":
                    hit = set(self.nodes).intersection(*sets)
                elif op == "or":
                    hit = set().union(*sets)
                else:
                    hit = set(self.nodes) - set(self.nodes).intersection(*sets)
            elif op == "properties":
                if not isinstance(arg, list) or not all(isinstance(p, str) for p in arg):
                    raise ValueError("constraint 'properties' takes a list of names")
                hit = set(self.nodes)
                for p in arg:
                    if p.startswith("^"):
                        hit -= self.props.get(p[1:], set())
                    else:
                        hit &= self.props.get(p, set())
            elif op == "hostlist":
                texts = [arg] if isinstance(arg, str) else arg
                names = {h for t in texts for h in _hostlist.decode(t)}
                hit = {r for r, n in self.nodes.items() if n.host in names}
            elif op == "ranks":
                texts = [arg] if isinstance(arg, (str, int)) else arg
                hit = set().union(*(_ranks_of(t) for t in texts)) & set(self.nodes)
            else:
                raise ValueError(f"unknown constraint operator {op!r} (allowed: "
                                 "properties, hostlist, ranks, and, or, not)")
            ranks &= hit
        return ranks

    def copy_constraint(self, constraint) -> Rv1Set:
        return self.copy_ranks(self.matching(constraint))

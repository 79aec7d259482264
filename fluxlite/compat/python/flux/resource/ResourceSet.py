"""`flux.resource.ResourceSet`: Flux's resource set class over Rv1Set."""

from __future__ import annotations

import json

from ..hostlist import Hostlist
from ..idset import IDset
from .Rv1Set import Rv1Set

__all__ = ["ResourceSet"]


def _impl(other) -> Rv1Set:
    return other.impl if isinstance(other, ResourceSet) else ResourceSet(other).impl


class ResourceSet:
    """ResourceSet(R as a dict or JSON text, or an Rv1Set; None: empty)."""

    def __init__(self, arg=None, version: int = 1, keep_scheduling: bool = False):
        self.state = None
        if arg is None:
            self.impl = Rv1Set()
        elif isinstance(arg, Rv1Set):
            self.impl = arg
        elif isinstance(arg, (str, bytes)):
            self.impl = Rv1Set(json.loads(arg), keep_scheduling)
        elif isinstance(arg, dict):
            self.impl = Rv1Set(arg, keep_scheduling)
        else:
            raise TypeError(f"a ResourceSet is made from R (a dict or JSON text), not "
                            f"{type(arg).__name__}")

    def _new(self, impl: Rv1Set) -> ResourceSet:
        out = ResourceSet(impl)
        out.state = self.state
        return out

    # -- reading ----------------------------------------------------------------
    def __str__(self) -> str:
        return str(self.impl)

    def __repr__(self) -> str:
        return f"ResourceSet('{self.impl}')"

    rlist = property(__str__)
    ncores = property(lambda self: self.impl.count("core"))
    ngpus = property(lambda self: self.impl.count("gpu"))
    nnodes = property(lambda self: self.impl.count("node"))
    ranks = property(lambda self: IDset(self.impl.ranks))
    nodelist = property(lambda self: Hostlist(self.impl.hosts()))

    def count(self, kind: str) -> int:
        return self.impl.count(kind)

    def encode(self) -> str:
        return self.impl.encode()

    def to_dict(self) -> dict:
        return self.impl.to_dict()

    def dumps(self) -> str:
        return str(self)

    def host_ranks(self, hosts, ignore_nomatch: bool = False) -> list[int]:
        return self.impl.host_ranks(hosts, ignore_nomatch)

    @property
    def properties(self) -> str:
        return ",".join(self.impl.props)

    def get_properties(self) -> str:
        return json.dumps(self.impl.to_dict()["execution"].get("properties", {}))

    def set_property(self, name: str, ranks=None) -> None:
        self.impl.set_property(name, ranks)

    @property
    def starttime(self) -> float:
        return self.impl.starttime

    @starttime.setter
    def starttime(self, value: float) -> None:
        self.impl.starttime = float(value)

    @property
    def expiration(self) -> float:
        return self.impl.expiration

    @expiration.setter
    def expiration(self, value: float) -> None:
        self.impl.expiration = float(value)

    # -- new sets ----------------------------------------------------------------
    def copy(self) -> ResourceSet:
        return self._new(self.impl.copy())

    def copy_ranks(self, ranks) -> ResourceSet:
        return self._new(self.impl.copy_ranks(ranks))

    def copy_constraint(self, constraint) -> ResourceSet:
        return self._new(self.impl.copy_constraint(constraint))

    def remove_ranks(self, ranks) -> ResourceSet:
        self.impl.remove_ranks(ranks)
        return self

    def union(self, *others) -> ResourceSet:
        out = self.impl.copy()
        for o in others:
            out.add(_impl(o))
        return self._new(out)

    def diff(self, *others) -> ResourceSet:
        out = self.impl.copy()
        for o in others:
            out.subtract(_impl(o))
        return self._new(out)

    def intersect(self, *others) -> ResourceSet:
        out = self.impl.copy()
        for o in others:
            out.intersect(_impl(o))
        return self._new(out)

    def add(self, *others) -> ResourceSet:
        for o in others:
            self.impl.add(_impl(o))
        return self

    def append(self, *others) -> ResourceSet:
        return self.add(*others)

    __or__ = union
    __sub__ = diff
    __and__ = intersect

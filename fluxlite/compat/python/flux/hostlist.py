"""`flux.hostlist`: Flux's Hostlist class over fluxlite's RFC 29 hostlists
(fluxlite.util.hostlist): an ordered list of host names, printed folded
("foo[0-3],bar")."""

from __future__ import annotations

import errno
import re

from fluxlite.util import hostlist as _hostlist

__all__ = ["Hostlist", "decode"]


def _hosts(value) -> list[str]:
    """The names of a Hostlist, a hostlist string or an iterable of strings."""
    if isinstance(value, Hostlist):
        return list(value._hosts)
    if isinstance(value, str):
        return _hostlist.decode(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        out = []
        for host in value:
            if not isinstance(host, str):
                raise TypeError(f"a host name must be a string, not {type(host).__name__}")
            out.extend(_hostlist.decode(host))
        return out
    raise TypeError(f"not a hostlist: {type(value).__name__}")


class Hostlist:
    """Hostlist("foo[0-3]"), Hostlist(["foo1", "foo2"]), Hostlist(other)."""

    def __init__(self, value=""):
        self._hosts = _hosts(value)

    def __str__(self) -> str:
        return _hostlist.encode(self._hosts)

    def __repr__(self) -> str:
        return f"Hostlist('{self}')"

    def __len__(self) -> int:
        return len(self._hosts)

    count = __len__

    def __iter__(self):
        return iter(list(self._hosts))

    def expand(self) -> list[str]:
        return list(self._hosts)

    def __contains__(self, name) -> bool:
        return name in self._hosts

    def __getitem__(self, index):
        """A name by position (negative from the end), or a Hostlist of the names at a
        slice, a sequence of positions or an IDset."""
        if isinstance(index, bool):
            raise TypeError("a Hostlist index is an integer, slice or set of integers")
        if isinstance(index, int):
            return self._hosts[index]
        if isinstance(index, slice):
            return Hostlist(self._hosts[index])
        if isinstance(index, str):
            raise TypeError("a Hostlist index is an integer, slice or set of integers")
        try:
            return Hostlist([self._hosts[i] for i in index])
        except TypeError:
            raise TypeError("a Hostlist index is an integer, slice or set of integers") \
                from None

    def append(self, value) -> int:
        """Add names at the end; how many were added."""
        hosts = _hosts(value)
        self._hosts.extend(hosts)
        return len(hosts)

    def delete(self, value) -> int:
        """Remove every occurrence of the names given; how many were removed."""
        gone = set(_hosts(value))
        before = len(self._hosts)
        self._hosts = [h for h in self._hosts if h not in gone]
        return before - len(self._hosts)

    def sort(self) -> Hostlist:
        self._hosts.sort(key=_natural)
        return self

    def uniq(self) -> Hostlist:
        self._hosts = sorted(set(self._hosts), key=_natural)
        return self

    def copy(self) -> Hostlist:
        return Hostlist(self)

    def find(self, name) -> int:
        """The position of `name`; FileNotFoundError (ENOENT) if absent."""
        try:
            return self._hosts.index(name)
        except ValueError:
            raise FileNotFoundError(errno.ENOENT, f"{name} is not in the hostlist") from None

    def index(self, hosts, ignore_nomatch: bool = False) -> list[int]:
        """The positions of each name given (ENOENT for one absent, unless
        ignore_nomatch)."""
        out = []
        for name in _hosts(hosts):
            if name in self._hosts:
                out.append(self._hosts.index(name))
            elif not ignore_nomatch:
                raise FileNotFoundError(errno.ENOENT, f"{name} is not in the hostlist")
        return out


def _natural(name: str):
    """Sort key: names by prefix, then their number as a number (foo2 < foo10)."""
    m = re.match(r"^(.*?)(\d+)(\D*)$", name)
    return (name, -1, "") if m is None else (m.group(1), int(m.group(2)), m.group(3))


def decode(value=None) -> Hostlist:
    """A Hostlist from a string or a list of names (ValueError if malformed)."""
    if value is None:
        raise TypeError("decode() needs a hostlist string or a list of names")
    if not isinstance(value, (str, list, tuple, set, frozenset)):
        raise TypeError(f"not a hostlist: {type(value).__name__}")
    return Hostlist(value)

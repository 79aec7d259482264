"""RFC 29 hostlists: lists of host names written as "node[0-3],login1".

The config-file bootstrap names its hosts this way (`hosts = [{host =
"node[1-64]"}]`), as Flux and Slurm do.  A hostlist is a comma-separated list
of items; an item is a plain name or `prefix[ranges]suffix`, where ranges is a
comma-separated list of numbers and `lo-hi` spans.  Numbers keep their zero
padding: `n[08-10]` is n08, n09, n10 (the width is that of the low bound).

Order and repeats are kept, as in Flux: "foo[3,1]" is foo3, foo1.  `encode`
is the inverse of `decode` (decode(encode(hosts)) == hosts) and folds runs of
names that share a prefix, a suffix and a padding into one bracket.

Parsing is strict: anything that is not a well-formed hostlist raises
ValueError with a sentence saying what was wrong.  Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

MAX_HOSTS = 1_000_000  # one bracket may not expand to more names than this

_TAIL_RE = re.compile(r"^(.*?)(\d+)(\D*)$")


def decode(text: str) -> list[str]:
    """Expand a hostlist ("node[0-3],login1", "" is empty) into a list of names."""
    if not isinstance(text, str):
        raise ValueError(f"hostlist must be a string, not {type(text).__name__}")
    hosts: list[str] = []
    for item in _split_items(text):
        hosts.extend(_expand_item(item, text))
        if len(hosts) > MAX_HOSTS:
            raise ValueError(f"invalid hostlist {text!r}: more than {MAX_HOSTS} hosts")
    return hosts


def of_ranks(hosts: Sequence[str], ranks: Iterable[int]) -> str:
    """The hostlist of some ranks, given every rank's host name in rank order (the
    `hostlist` attribute, decoded): a job's nodelist."""
    return encode(hosts[r] for r in ranks)


def encode(hosts: Iterable[str]) -> str:
    """Fold a list of names into the shortest hostlist that decodes back to it, in order."""
    groups: list[_Group] = []
    for host in hosts:
        if not isinstance(host, str) or not host or any(c in host for c in ",[]"):
            raise ValueError(f"cannot encode host name {host!r} in a hostlist")
        m = _TAIL_RE.match(host)
        if m is None:
            groups.append(_Group(host, "", None))
            continue
        prefix, digits, suffix = m.groups()
        if not prefix and not suffix:       # a name that is only a number
            groups.append(_Group(host, "", None))
            continue
        if groups and groups[-1].accepts(prefix, digits, suffix):
            groups[-1].add(digits)
        else:
            group = _Group(prefix, suffix, [])
            group.add(digits)
            groups.append(group)
    return ",".join(g.text() for g in groups)


def _split_items(text: str) -> list[str]:
    """Split at the commas that are outside brackets."""
    items: list[str] = []
    depth = 0
    start = 0
    for i, c in enumerate(text):
        if c == "[":
            if depth:
                raise ValueError(f"invalid hostlist {text!r}: brackets may not nest")
            depth = 1
        elif c == "]":
            if not depth:
                raise ValueError(f"invalid hostlist {text!r}: ']' without '['")
            depth = 0
        elif c == "," and not depth:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"invalid hostlist {text!r}: '[' is not closed")
    if text.strip():
        items.append(text[start:])
    for item in items:
        if not item.strip():
            raise ValueError(f"invalid hostlist {text!r}: an empty host name between commas")
    return [item.strip() for item in items]


def _expand_item(item: str, text: str) -> list[str]:
    if "[" not in item:
        return [item]
    prefix, _, rest = item.partition("[")
    body, _, suffix = rest.partition("]")
    if "[" in suffix:
        raise ValueError(f"invalid hostlist {text!r}: one bracket per host name ({item!r})")
    if not prefix and not suffix:
        raise ValueError(f"invalid hostlist {text!r}: {item!r} has no name around its brackets")
    names: list[str] = []
    for part in body.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"invalid hostlist {text!r}: expected numbers like [0-3,7] "
                             f"in {item!r}")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(f"invalid hostlist {text!r}: range {part} is reversed")
        if len(names) + b - a + 1 > MAX_HOSTS:
            raise ValueError(f"invalid hostlist {text!r}: more than {MAX_HOSTS} hosts")
        width = len(lo)
        names.extend(f"{prefix}{n:0{width}d}{suffix}" for n in range(a, b + 1))
    return names


class _Group:
    """Names prefix<N>suffix with one zero padding, gathered for one bracket."""

    def __init__(self, prefix: str, suffix: str, numbers: list[int] | None):
        self.prefix, self.suffix = prefix, suffix
        self.numbers = numbers          # None: a name with no number
        self.width = 0                  # the padding, once a zero-padded number fixed it
        self.min_len = 0                # shortest unpadded number so far

    def accepts(self, prefix: str, digits: str, suffix: str) -> bool:
        if self.numbers is None or (prefix, suffix) != (self.prefix, self.suffix):
            return False
        padded = len(digits) > 1 and digits[0] == "0"
        if self.width:
            # every number printed with this width must read back as itself
            return len(digits) == self.width if padded else len(digits) >= self.width
        if padded:
            return not self.numbers or self.min_len >= len(digits)
        return True

    def add(self, digits: str) -> None:
        padded = len(digits) > 1 and digits[0] == "0"
        if padded:
            self.width = len(digits)
        else:
            self.min_len = len(digits) if not self.numbers else min(self.min_len, len(digits))
        self.numbers.append(int(digits))

    def text(self) -> str:
        if self.numbers is None:
            return self.prefix
        w = self.width or 1
        if len(self.numbers) == 1:
            return f"{self.prefix}{self.numbers[0]:0{w}d}{self.suffix}"
        spans: list[str] = []
        start = prev = self.numbers[0]
        for n in self.numbers[1:] + [None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            spans.append(f"{start:0{w}d}" if start == prev else f"{start:0{w}d}-{prev:0{w}d}")
            if n is not None:
                start = prev = n
        return f"{self.prefix}[{','.join(spans)}]{self.suffix}"

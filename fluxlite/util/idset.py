"""RFC 22 idsets: sets of non-negative integers written as "0-3,7,9-10".

Used for ranks everywhere (critical ranks, resource sets, lost ranks).  Parsing
is strict: anything that is not a well-formed idset raises ValueError with a
sentence that says what was wrong.
"""

from __future__ import annotations

from typing import Iterable


def decode(text: str) -> set[int]:
    """Parse an idset string ("", "3", "0-2,5", "[0-2]") into a set of ints."""
    if not isinstance(text, str):
        raise ValueError(f"idset must be a string, not {type(text).__name__}")
    s = text.strip()
    if s.startswith("[") and s.endswith("]"):
        s = s[1:-1]
    ids: set[int] = set()
    if s == "":
        return ids
    for part in s.split(","):
        part = part.strip()
        lo, sep, hi = part.partition("-")
        if not _is_uint(lo) or (sep and not _is_uint(hi)):
            raise ValueError(f"invalid idset {text!r}: expected ids like 0-3,7")
        a = int(lo)
        b = int(hi) if sep else a
        if b < a:
            raise ValueError(f"invalid idset {text!r}: range {part} is reversed")
        if b - a > 1_000_000:
            raise ValueError(f"invalid idset {text!r}: range {part} is too large")
        ids.update(range(a, b + 1))
    return ids


def encode(ids: Iterable[int]) -> str:
    """Format ints as a compact idset string, ranges collapsed: {0,1,2,5} -> "0-2,5"."""
    out: list[str] = []
    run_start = prev = None
    for i in sorted(set(ids)):
        if prev is not None and i == prev + 1:
            prev = i
            continue
        if run_start is not None:
            out.append(_span(run_start, prev))
        run_start = prev = i
    if run_start is not None:
        out.append(_span(run_start, prev))
    return ",".join(out)


def _span(a: int, b: int) -> str:
    return str(a) if a == b else f"{a}-{b}"


def _is_uint(s: str) -> bool:
    return s.isascii() and s.isdigit()

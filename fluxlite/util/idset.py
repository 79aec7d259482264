"""RFC 22 idsets: sets of non-negative integers written as "0-3,7,9-10".

Used for ranks everywhere (critical ranks, resource sets, lost ranks).  Parsing
is strict: anything that is not a well-formed idset raises ValueError with a
sentence that says what was wrong, and bounded: an idset holds at most MAX_IDS
ids however many ranges its text lists (a 64 KiB string of large ranges must
not become a set of billions).
"""

from __future__ import annotations

from collections.abc import Iterable

MAX_IDS = 1 << 20   # ids in one idset: ranks and cores, never more than this


def decode(text: str, *, below: int | None = None) -> set[int]:
    """Parse an idset string ("", "3", "0-2,5", "[0-2]") into a set of ints.

    With `below` (e.g. an instance's size, for ranks), an id that is not below it is
    refused before any range is expanded: a peer's "0-1000000" costs nothing."""
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
            raise ValueError(f"invalid idset {text[:80]!r}: expected ids like 0-3,7")
        a = int(lo)
        b = int(hi) if sep else a
        if b < a:
            raise ValueError(f"invalid idset {text[:80]!r}: range {part} is reversed")
        if below is not None and b >= below:
            raise ValueError(f"invalid idset {text[:80]!r}: {b} is out of range "
                             f"(ids 0-{below - 1})")
        if b - a > 1_000_000 or len(ids) + (b - a + 1) > MAX_IDS:
            raise ValueError(f"invalid idset {text[:80]!r}: range {part} is too large "
                             f"(an idset holds at most {MAX_IDS} ids)")
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

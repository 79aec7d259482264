"""`flux.idset`: Flux's IDset class over fluxlite's RFC 22 idsets
(fluxlite.util.idset): a mutable set of non-negative integers, printed as
"0-3,7" (set_flags chooses ranges and brackets as Flux's IDSET_FLAG_* do)."""

from __future__ import annotations

import errno

from fluxlite.util import idset as _idset

IDSET_FLAG_BRACKETS = 1
IDSET_FLAG_RANGE = 2
IDSET_INVALID_ID = 2 ** 32 - 1

__all__ = ["IDset", "decode", "IDSET_FLAG_BRACKETS", "IDSET_FLAG_RANGE", "IDSET_INVALID_ID"]


def _check_id(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"an id must be an integer, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"an id cannot be negative ({value})")
    return value


def _ids(value) -> set[int]:
    """The ids of an IDset, an idset string, an int or an iterable of ints."""
    if isinstance(value, IDset):
        return set(value._ids)
    if isinstance(value, str):
        return _idset.decode(value)
    if isinstance(value, int):
        return {_check_id(value)}
    if isinstance(value, (list, tuple, set, frozenset, range)):
        return {_check_id(i) for i in value}
    raise TypeError(f"not an idset: {type(value).__name__}")


class IDset:
    """IDset(""), IDset("0-3"), IDset(42), IDset([1, 2]), IDset(other)."""

    def __init__(self, value=None, flags: int = IDSET_FLAG_RANGE):
        self._ids = set() if value is None else _ids(value)
        self.flags = flags

    def set_flags(self, flags: int) -> None:
        self.flags = flags

    # -- reading ----------------------------------------------------------------
    def __str__(self) -> str:
        if self.flags & IDSET_FLAG_RANGE:
            text = _idset.encode(self._ids)
        else:
            text = ",".join(map(str, sorted(self._ids)))
        if self.flags & IDSET_FLAG_BRACKETS and text and \
                (len(self._ids) > 1):
            return f"[{text}]"
        return text

    def __repr__(self) -> str:
        return f"IDset('{_idset.encode(self._ids)}')"

    def __len__(self) -> int:
        return len(self._ids)

    count = __len__

    def __iter__(self):
        return iter(sorted(self._ids))

    def expand(self) -> list[int]:
        return sorted(self._ids)

    def __contains__(self, value) -> bool:
        return _check_id(value) in self._ids

    def __getitem__(self, value) -> bool:
        return _check_id(value) in self._ids

    def __setitem__(self, index, value) -> None:
        if value not in (True, False, 0, 1) or isinstance(value, str):
            raise TypeError("an IDset entry is set to True or False")
        if value:
            self.set(index)
        else:
            self.clear(index)

    def first(self) -> int:
        return min(self._ids) if self._ids else IDSET_INVALID_ID

    def last(self) -> int:
        return max(self._ids) if self._ids else IDSET_INVALID_ID

    def next(self, after) -> int:
        after = _check_id(after)
        later = [i for i in self._ids if i > after]
        return min(later) if later else IDSET_INVALID_ID

    def equal(self, other) -> bool:
        if not isinstance(other, IDset):
            raise TypeError(f"cannot compare an IDset with {type(other).__name__}")
        return self._ids == other._ids

    __eq__ = equal

    def __ne__(self, other) -> bool:
        return not self.equal(other)

    __hash__ = None

    def copy(self) -> IDset:
        return IDset(self, self.flags)

    # -- changing ----------------------------------------------------------------
    def _span(self, start, end) -> range:
        start = _check_id(start)
        end = start if end is None else _check_id(end)
        if end < start:
            raise ValueError(f"range {start}-{end} is reversed")
        return range(start, end + 1)

    def set(self, start, end=None) -> IDset:
        self._ids.update(self._span(start, end))
        return self

    def clear(self, start, end=None) -> IDset:
        self._ids.difference_update(self._span(start, end))
        return self

    def add(self, *others) -> IDset:
        for other in others:
            self._ids |= _ids(other)
        return self

    def subtract(self, *others) -> IDset:
        for other in others:
            self._ids -= _ids(other)
        return self

    def __iadd__(self, other):
        return self.add(other)

    def __isub__(self, other):
        return self.subtract(other)

    # -- new sets -----------------------------------------------------------------
    def union(self, *others) -> IDset:
        return self.copy().add(*others)

    def difference(self, *others) -> IDset:
        return self.copy().subtract(*others)

    def intersect(self, *others) -> IDset:
        out = self.copy()
        for other in others:
            out._ids &= _ids(other)
        return out

    __add__ = __or__ = union
    __sub__ = difference
    __and__ = intersect


def decode(text: str) -> IDset:
    """An IDset from its RFC 22 text; OSError(EINVAL) names what is wrong."""
    if not isinstance(text, str):
        raise TypeError(f"an idset is decoded from a string, not {type(text).__name__}")
    try:
        return IDset(text)
    except ValueError as exc:
        raise OSError(errno.EINVAL, str(exc)) from None

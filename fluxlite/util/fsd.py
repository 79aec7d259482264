"""Flux Standard Duration (RFC 23): "30s", "2m", "0.5h", "1d", a bare number of seconds.

`parse()` returns seconds as a float; `parse_timeout()` also accepts "none"
(and "infinity"/"inf") meaning no limit, returned as None.  `format()` renders
seconds the way Flux does ("30s", "1.5m", "2h").
"""

from __future__ import annotations

import math

from ..errors import UsageError

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_NONE_WORDS = ("none", "infinity", "inf")


class FSDError(UsageError, ValueError):
    """A string that is not a Flux Standard Duration (EINVAL; still a ValueError for
    the callers that catch one)."""


def parse(text) -> float:
    """Seconds in a duration like "30s", "1.5m", "100" (seconds).  Negative is an error."""
    if isinstance(text, bool):
        raise FSDError(f"{text!r} is not a valid Flux Standard Duration")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        if not isinstance(text, str):
            raise FSDError(f"{text!r} is not a valid Flux Standard Duration")
        s = text.strip()
        unit = 1.0
        for suffix in ("ms", "s", "m", "h", "d"):
            if s.endswith(suffix):
                unit = _UNITS[suffix]
                s = s[: -len(suffix)]
                break
        try:
            if "_" in s or s != s.strip():
                raise ValueError(s)
            value = float(s) * unit
        except ValueError:
            raise FSDError(
                f"{text!r} is not a valid Flux Standard Duration "
                "(a number with an optional unit ms, s, m, h or d, e.g. 30s, 1.5m)"
            ) from None
    if not math.isfinite(value) or value < 0:
        raise FSDError(f"{text!r} is not a valid Flux Standard Duration (must be >= 0)")
    return value


def parse_timeout(text) -> float | None:
    """Like parse(), but "none" / "infinity" (any case) means no timeout: None."""
    if isinstance(text, str) and text.strip().lower() in _NONE_WORDS:
        return None
    return parse(text)


def format(seconds: float | None) -> str:  # noqa: A001 - mirrors Flux's fsd_format
    """Render seconds as a short duration: 0.5 -> "0.5s", 90 -> "1.5m", None -> "none"."""
    if seconds is None or math.isinf(seconds):
        return "none"
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.4g}{unit}"
    if 0 < seconds < 0.1:
        return f"{seconds * 1000:.4g}ms"
    return f"{seconds:.4g}s"

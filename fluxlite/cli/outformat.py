"""Flux-style `--format` strings for the listing commands (jobs, resource).

A format is a Python str.format string over named fields ("{id:>12} {name}"),
or the name of a predefined format ("long").  On top of str.format, as Flux:
  {f:...h}      print "-" when the value is empty or zero ("", "0s", "0.0")
  {f:<10.10+}   truncate to the precision and mark it with a trailing "+"
  {f!F}         seconds as a short duration ("0.050s", "1.5m")
  {f!d:%b%d %R::>12}  a timestamp through strftime, then padded as a string
  {f!D}         a timestamp in ISO 8601 (both empty for 0, a time never reached)
  {f!H}         seconds as H:MM:SS (a nonzero duration is at least 0:00:01)
  ?:{f}         drop the field (and its heading) when it is empty for every row
  +:{f:<5}      widen the field to its longest value (and heading), from its width
  ?+:{f}        both
  sort:KEYS     at the start: the order of the rows (as --sort KEYS) unless --sort
The header row prints each field's heading with the field's width and
alignment.  A field that is not in the command's table, an unknown format
name or a malformed spec is a UsageError naming what was wrong.
"""

from __future__ import annotations

import difflib
import re
import string
from datetime import datetime, timedelta

from ..errors import UsageError

_EMPTY = ("", "0s", "0.0", "0:00:00", "1970-01-01T00:00:00")


def fsd(secs) -> str:
    """A duration as Flux's listing commands print it: "0.050s", "12.5s", "1.5m"
    ("∞" for no limit)."""
    if secs == float("inf"):
        from ..util.fluid import utf8_locale
        return "∞" if utf8_locale() else "inf"
    if secs < 1.0e-3:
        return "0s"
    if secs < 10.0:
        return f"{secs:.3f}s"
    for limit, unit, size in ((60.0, "s", 1.0), (3600.0, "m", 60.0), (86400.0, "h", 3600.0)):
        if secs < limit:
            return f"{secs / size:.4g}{unit}"
    return f"{secs / 86400.0:.4g}d"


class _Formatter(string.Formatter):
    def get_field(self, field_name, args, kwargs):
        return kwargs[field_name], field_name  # dotted names are flat keys

    def convert_field(self, value, conversion):
        if conversion in ("F", "d", "D", "H") and not isinstance(value, (int, float)):
            return ""
        if conversion == "F":
            return fsd(value)
        if conversion == "H":
            return str(timedelta(seconds=round(1 if 0 < value < 1 else value)))
        if conversion == "d":
            return datetime.fromtimestamp(value)
        if conversion == "D":  # a time never reached (0) is empty, as Flux's
            return datetime.fromtimestamp(value).strftime("%FT%T") if value else ""
        return super().convert_field(value, conversion)

    def format_field(self, value, spec):
        if isinstance(value, datetime):
            dspec, _, spec = spec.partition("::")
            if value == datetime.fromtimestamp(0):  # a time never reached: empty
                value = ""
            else:
                value = value.strftime(dspec) if dspec else value.isoformat(" ")
        while spec.endswith(("h", "+")):
            if spec.endswith("h"):
                value = "-" if str(value) in _EMPTY else str(value)
            else:
                m = re.search(r"\.(\d+)", spec)
                text = str(value)
                if m and len(text) > int(m.group(1)) > 0:
                    value = text[: int(m.group(1)) - 1] + "+"
            spec = spec[:-1]
        return super().format_field(value, spec)


class OutputFormat:
    """A parsed format: `header()` and `format(values)` give one line each."""

    def __init__(self, fmt: str, headings: dict[str, str], named: dict[str, str]):
        fmt = named.get(fmt, fmt)
        # Flux's `sort:KEY[,-KEY...] ` prefix: the listing's order when no --sort
        m = re.match(r"sort:([^{\s]+) ?", fmt)
        self.sort_keys: str | None = m.group(1) if m else None
        fmt = fmt[m.end():] if m else fmt
        if "{" not in fmt:
            raise UsageError(f"--format: No such format {fmt} "
                             f"({_no_such_format(fmt, headings, named)})")
        try:
            items = list(string.Formatter().parse(fmt))
        except ValueError as exc:
            raise UsageError(f"--format: {exc} in {fmt!r}") from None
        # the ?: / +: sentinels end the text before their field
        self.items, self.sentinels = [], []
        for text, field, spec, conv in items:
            mark = ""
            if field is not None:
                for s in ("?+:", "+?:", "?:", "+:"):
                    if text.endswith(s):
                        text, mark = text[: -len(s)], s
                        break
            self.items.append((text, field, spec, conv))
            self.sentinels.append(mark)
        for _, field, spec, _ in self.items:
            for n in re.findall(r"\d+", (spec or "").rpartition("::")[2]):
                if int(n) > MAX_WIDTH:
                    raise UsageError(f"--format: width {n} of {{{field}}} is too large "
                                     f"(at most {MAX_WIDTH})")
        self.fmt = self._rebuild(self.items)
        self.headings = headings
        self.fields = [f for _, f, _, _ in self.items if f is not None]
        for field in self.fields:
            if field not in headings:
                raise UsageError(f"--format: unknown field {{{field}}}; valid fields include "
                                 + ", ".join(_suggest(field, list(headings))))

    @staticmethod
    def _rebuild(items) -> str:
        out = []
        for text, field, spec, conv in items:
            out.append(text.replace("{", "{{").replace("}", "}}"))
            if field is not None:
                out.append("{" + field + (f"!{conv}" if conv else "") +
                           (f":{spec}" if spec else "") + "}")
        return "".join(out)

    def fit(self, rows: list[dict]) -> None:
        """Apply the ?: and +: sentinels to the rows about to be printed."""
        if not any(self.sentinels):
            return
        items = []
        for (text, field, spec, conv), mark in zip(self.items, self.sentinels):
            if mark:
                one = self._rebuild([("", field, "", conv)])
                values = [self._apply(_Formatter().vformat, one, (), r) for r in rows]
                if "?" in mark and all(v.strip() in _EMPTY + ("0",)
                                       for v in values):
                    if text.strip():
                        items.append((text, None, None, None))
                    continue
                if "+" in mark:  # as Flux's: never narrower than the spec's own width
                    m = re.match(r"^(?:[^<>=^]?[<>=^])?(\d*)", spec or "")
                    width = max([len(v) for v in values] + [len(self.headings[field]),
                                                            int(m.group(1) or 0)])
                    spec = _widen(spec, width)
            items.append((text, field, spec, conv))
        self.items = items
        self.sentinels = [""] * len(items)
        self.fmt = self._rebuild(items)

    def header(self) -> str:
        out = []
        for text, field, spec, conv in self.items:
            out.append(text)
            if field is None:
                continue
            if conv == "d":  # strftime spec, then the string's
                spec = spec.partition("::")[2]
            spec = re.sub(r"(\.\d+)?[bcdoxXeEfFgGn%]$", "", spec.rstrip("h+"))
            out.append(self._apply(format, self.headings[field], spec))
        return "".join(out)

    def format(self, values: dict) -> str:
        return self._apply(_Formatter().vformat, self.fmt, (), values)

    def _apply(self, fn, *args):
        try:
            return fn(*args)
        except KeyError as exc:
            raise UsageError(f"--format: unknown field {{{exc.args[0]}}}") from None
        except (ValueError, TypeError, OverflowError, MemoryError) as exc:
            raise UsageError(f"--format: {exc or type(exc).__name__} in {self.fmt!r}") \
                from None


# the widest a field may be padded to (a width of 10**11 asked for 100 GB)
MAX_WIDTH = 10_000


def _widen(spec: str, width: int) -> str:
    """A format spec with its width (and precision, when it has one) set to `width`."""
    m = re.match(r"^([^<>=^]?[<>=^])?(\d*)(\.\d+)?", spec)
    precision = f".{width}" if m.group(3) else ""
    return f"{m.group(1) or ''}{width}{precision}{spec[m.end():]}"


def _suggest(field: str, valid: list[str], n: int = 8) -> list[str]:
    close = difflib.get_close_matches(field, valid, n=3, cutoff=0.5)
    rest = [v for v in valid if v not in close]
    shown = (close + rest)[:n]
    return [f"{{{v}}}" for v in shown] + (["..."] if len(valid) > len(shown) else [])


def _no_such_format(fmt: str, headings: dict[str, str], named: dict[str, str]) -> str:
    """What to say about a format name that is neither a named format nor a format
    string: only suggestions that exist."""
    if fmt in headings:
        return f"Did you mean '{{{fmt}}}'?"
    close = difflib.get_close_matches(fmt, list(named), n=1, cutoff=0.6)
    if close:
        return f"Did you mean '{close[0]}'?"
    close = difflib.get_close_matches(fmt, list(headings), n=1, cutoff=0.7)
    if close:
        return f"Did you mean '{{{close[0]}}}'?"
    return "named formats: " + ", ".join(named) + "; or a format string of {field}s"

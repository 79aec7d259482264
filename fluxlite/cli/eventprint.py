"""How `resource eventlog` prints entries as Flux's eventlog commands do: -f text or
json, -T raw, iso, offset or human times, --wait with -m KEY=VAL pairs, -i ranks;
and the option callbacks they share (-m pairs, --color words)."""

from __future__ import annotations

import json

import click

from ..util import idset


def match_pairs(ctx, param, values):
    out = []
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VAL, got {v!r}")
        try:
            out.append((key, json.loads(val)))
        except ValueError:
            out.append((key, val))
    return out


def color_when(ctx, param, value):
    if value is not None and value not in ("always", "never", "auto"):
        raise click.BadParameter(f"invalid argument {value!r}: always, never or auto")
    return value


class EventPrinter:
    """One resource eventlog entry a line, in -f/-T's form, and whether it is the
    --wait event (its context matching every -m pair); -i leaves out entries about
    other ranks."""

    def __init__(self, fmt, time_format, wait_for, matches, keep):
        self.fmt, self.time_format = fmt, time_format
        self.wait_for, self.matches, self.keep = wait_for, matches, keep
        self.t0 = None

    def _stamp(self, ts: float) -> str:
        import datetime
        if self.time_format == "iso":
            when = datetime.datetime.fromtimestamp(ts, datetime.UTC)
            return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        if self.time_format == "offset":
            return f"{ts - self.t0:.6f}"
        return f"{ts:.6f}"

    def __call__(self, e: dict) -> bool:
        from ..job.eventlog import format_entry
        self.t0 = e.get("timestamp") if self.t0 is None else self.t0
        ctx = e.get("context") or {}
        if self.keep is not None and "idset" in ctx and \
                not self.keep & idset.decode(str(ctx["idset"])):
            return False
        if self.fmt == "json":
            click.echo(json.dumps(e))
        elif self.time_format in ("iso", "offset"):
            line = format_entry(e)
            click.echo(self._stamp(e.get("timestamp", 0.0)) + line[line.index(" "):])
        else:
            click.echo(format_entry(e, human=self.time_format == "human", t0=self.t0))
        return self.wait_for is not None and e.get("name") == self.wait_for and all(
            _same(ctx.get(k), v) for k, v in self.matches)


def _same(a, b) -> bool:
    if isinstance(a, float | int) and isinstance(b, float | int):
        return abs(a - b) < 1e-5
    return a == b or str(a) == str(b)

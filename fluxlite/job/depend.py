"""Urgency, priority and job dependencies, as Flux has them (RFC 21, RFC 26).

Urgency is 0-31: 0 holds the job (priority 0, it never schedules until its
urgency is raised), 31 expedites it (the largest priority), 16 is the default.
The priority of any other urgency is the urgency itself, as with Flux's
default priority plugin.

A dependency is RFC 26's `{"scheme": S, "value": V}` in the jobspec's
`attributes.system.dependencies`; `--dependency=S:V` writes one.  The schemes
are Flux's `after*` ones, on a job id V (its dependency-add / dependency-remove
events name them as Flux's dependency-after plugin does, in brackets):

    after, afterstart  V has started (or already ran)          [after-start=V]
    afterany           V is inactive, whatever its result      [after-finish=V]
    afterok            V is inactive and COMPLETED             [after-success=V]
    afternotok         V ran and is inactive, not COMPLETED    [after-failure=V]
    afterexcept        V ran and a fatal exception ended it    [after-except=V]

`singleton` (no job id) is met once no other active job of the same user has
the same explicit job name (`--job-name`), except other singletons waiting:
they are let go one at a time, in submit order, as Flux's dependency-singleton
plugin does.  A job without an explicit name cannot use it.

Only afterany is met by a job that never started (canceled while pending):
the others need V to have run, as in Flux.  `verdict()` says, from what is
known of V, whether the dependency is met, may still be met, or never can be
(and why, in Flux's words: "dependency after-success=V can never be
satisfied", "... job never started").

`--begin-time` writes Flux's `{"scheme": "begin-time", "value": T}`, T a Unix
time (a number): the job waits in DEPEND until then.
"""

from __future__ import annotations

import datetime
import math
import re
import time

from ..errors import UsageError
from ..util import fluid, fsd

URGENCY_HOLD = 0
URGENCY_DEFAULT = 16
URGENCY_EXPEDITE = 31
PRIORITY_MIN = 0
PRIORITY_MAX = 4294967295
URGENCY_NAMES = {"hold": URGENCY_HOLD, "default": URGENCY_DEFAULT,
                 "expedite": URGENCY_EXPEDITE}

# each scheme and the name Flux's dependency-after plugin gives it in events and notes
AFTER_TYPES = {"after": "after-start", "afterstart": "after-start", "afterany": "after-finish",
               "afterok": "after-success", "afternotok": "after-failure",
               "afterexcept": "after-except"}
AFTER = tuple(AFTER_TYPES)
BEGIN_TIME = "begin-time"
SINGLETON = "singleton"
SCHEMES = AFTER + (BEGIN_TIME, SINGLETON)
MAX_TIME = 1e12           # a begin-time, seconds since the epoch
MAX_DEPENDENCIES = 1024   # per job

MET, WAIT, NEVER = "met", "wait", "never"


def parse_urgency(text: str) -> int:
    """`N` (0-31) or hold / expedite / default, as `--urgency` and `job urgency` take it."""
    t = str(text).strip().lower()
    if t in URGENCY_NAMES:
        return URGENCY_NAMES[t]
    if t.lstrip("-").isdigit():
        n = int(t)
        if URGENCY_HOLD <= n <= URGENCY_EXPEDITE:
            return n
    raise UsageError(f"invalid urgency {text!r}: expected an integer from 0 to 31, or "
                     "hold, expedite or default")


def priority(urgency: int) -> int:
    """The priority Flux's default priority plugin gives a job of `urgency`."""
    if urgency == URGENCY_HOLD:
        return PRIORITY_MIN
    if urgency == URGENCY_EXPEDITE:
        return PRIORITY_MAX
    return urgency


def parse_uri(text: str) -> dict:
    """`SCHEME:VALUE` (Flux's --dependency) as RFC 26's {"scheme", "value"}; the value
    must be a job id in a form the CLI takes (F58, decimal, hex, dotted hex, kvs)."""
    scheme, sep, value = str(text).partition(":")
    if scheme == SINGLETON and not value:
        return {"scheme": SINGLETON, "value": ""}
    if not sep or not scheme or not value:
        raise UsageError(f"invalid dependency {text!r}: expected SCHEME:JOBID, e.g. "
                         "afterok:ƒ2Vw8zSL")
    if scheme not in SCHEMES:
        raise UsageError(f"invalid dependency {text!r}: unknown scheme {scheme!r} "
                         f"(known: {', '.join(SCHEMES)})")
    if scheme == BEGIN_TIME:
        try:
            t = float(value)
        except ValueError:
            t = math.nan
        if not 0 <= t <= MAX_TIME:
            raise UsageError(f"invalid dependency {text!r}: begin-time takes a Unix time "
                             "in seconds")
        return {"scheme": scheme, "value": t}
    target(value, scheme)
    return {"scheme": scheme, "value": value}


_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?$")


def parse_begin_time(text: str, now: float | None = None) -> float:
    """`--begin-time`: +FSD from now ("+30s", "+2h"), a clock time ("14:30",
    "14:30:05": its next occurrence, today or tomorrow), or a date or date and time
    in ISO form ("2026-12-24", "2026-12-24 18:00", "2026-12-24T18:00:00").  A Unix
    time (seconds)."""
    now = time.time() if now is None else now
    t = str(text).strip()
    bad = UsageError(f"invalid begin-time {text!r}: expected +FSD (e.g. +30s, +2h), a "
                     "clock time HH:MM[:SS], a date YYYY-MM-DD[ HH:MM[:SS]], or words "
                     "such as 'tomorrow' or 'in 5 minutes'")
    if t.startswith("+"):
        try:
            return now + fsd.parse(t[1:])
        except ValueError:
            raise bad from None
    m = _CLOCK.match(t)
    if m:
        h, mi, sec = int(m[1]), int(m[2]), int(m[3] or 0)
        if h > 23 or mi > 59 or sec > 59:
            raise bad
        base = datetime.datetime.fromtimestamp(now)
        at = base.replace(hour=h, minute=mi, second=sec, microsecond=0)
        if at.timestamp() <= now:
            at += datetime.timedelta(days=1)
        return at.timestamp()
    try:
        at = datetime.datetime.fromisoformat(t)
    except ValueError:
        v = parse_phrase(t, now)
        if v is None:
            raise bad from None
        return v
    v = at.timestamp()
    if not 0 <= v <= MAX_TIME:
        raise bad
    return v


def parse_phrase(text: str, now: float | None = None) -> float | None:
    """A time in words, as Flux reads them (parsedatetime): "tomorrow", "in 5 minutes",
    "noon tomorrow", "yesterday"; None when the words name no time."""
    import parsedatetime
    cal = parsedatetime.Calendar(version=parsedatetime.VERSION_CONTEXT_STYLE)
    base = datetime.datetime.fromtimestamp(time.time() if now is None else now)
    at, ctx = cal.parseDT(text, sourceTime=base)
    if not ctx.hasDateOrTime:
        return None
    return at.timestamp()


def target(value: str, scheme: str) -> int:
    """The job id a dependency's value names, or UsageError."""
    try:
        return fluid.parse(str(value))
    except ValueError:
        raise UsageError(f"invalid dependency {scheme}:{value}: {value!r} is not a job "
                         "id") from None


def description(dep: dict) -> str:
    """What dependency-add / dependency-remove carry, as Flux's: 'after-success=ƒ2Vw8zSL'
    (the job id as it was written), 'begin-time=1796345768.150'."""
    if dep["scheme"] == BEGIN_TIME:
        return f"{BEGIN_TIME}={float(dep['value']):.3f}"
    if dep["scheme"] == SINGLETON:
        return SINGLETON
    return f"{AFTER_TYPES[dep['scheme']]}={dep['value']}"


_SCHEME_OF = {name: scheme for scheme, name in reversed(AFTER_TYPES.items())}


def parse_description(desc: str) -> tuple[str, int | None, float]:
    """What a dependency-add entry's description names: (scheme, the job id it
    waits on or None, the begin-time or 0.0); the inverse of `description()`, so
    that an eventlog alone says what a job waits for."""
    if desc == SINGLETON:
        return SINGLETON, None, 0.0
    name, _, value = desc.partition("=")
    if name == BEGIN_TIME:
        return BEGIN_TIME, None, float(value)
    scheme = _SCHEME_OF.get(name) or (name if name in AFTER_TYPES else None)
    if scheme is None:
        raise UsageError(f"unknown dependency description {desc!r}")
    return scheme, target(value, scheme), 0.0


def verdict(scheme: str, jobid: int, *, started: bool, inactive: bool,
            result: str | None, excepted: bool = False) -> tuple[str, str]:
    """(MET | WAIT | NEVER, why) for a dependency of `scheme` on job `jobid` whose
    state is: has it started, is it inactive, its result once inactive, and whether a
    fatal exception ended it."""
    if scheme not in AFTER_TYPES:
        raise UsageError(f"unknown dependency scheme {scheme!r}")
    if scheme in ("after", "afterstart"):
        met = started
    elif not inactive:
        return WAIT, ""
    elif scheme == "afterany":
        return MET, ""
    elif not started:
        met = False
    elif scheme == "afterok":
        met = result == "COMPLETED"
    elif scheme == "afternotok":
        met = result != "COMPLETED"
    else:   # afterexcept
        met = excepted
    if met:
        return MET, ""
    if not inactive:
        return WAIT, ""
    desc = f"dependency {AFTER_TYPES[scheme]}={fluid.f58(jobid)}"
    if not started:
        return NEVER, f"{desc} job never started"
    return NEVER, f"{desc} can never be satisfied (the job's result: {result})"

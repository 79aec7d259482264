"""Payload shapes: the types and bounds every request is checked against.

Each service method declares its payload as a msgspec Struct beside its handler
(`@handler("job-manager.info", schema=JobIdRequest)`); the dispatcher converts
the decoded payload to it before the handler runs.  msgspec does this in one
C pass (about 0.4 us a payload) and says which field was wrong, so a handler
never sees a negative job id, a boolean where a count belongs, a NaN duration
or a string a megabyte long.

The bounds are Flux's where it has them (urgency 0-31, exception severity 0-7,
kvsname/key/value limits of PMI) and otherwise generous but finite: a request
may ask for little or much, never for work without limit.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from .message import MAX_COUNT

Struct = msgspec.Struct
Meta = msgspec.Meta
ValidationError = msgspec.ValidationError

DEFAULT_MAX_PAYLOAD = 1 << 20  # bytes a method decodes unless it declares more (dispatch.py)
# a submitted jobspec (Flux takes large ones: a big environment, user attributes), a
# KVS commit, job output
BULK_PAYLOAD = 4 << 20
# methods that carry a submitted jobspec and more (its R, a shell's info): whatever
# submit accepted must also start
CARRY_PAYLOAD = 2 * BULK_PAYLOAD
MAX_OPS = 1024                 # operations in one KVS commit
MAX_ID = (1 << 63) - 1          # msgspec bounds fit in int64; FLUIDs stay below 2**63
MAX_NODEID = 0xFFFFFFFF

JobId = Annotated[int, Meta(ge=0, le=MAX_ID)]
Rank = Annotated[int, Meta(ge=0, le=MAX_NODEID)]
Count = Annotated[int, Meta(ge=1, le=MAX_COUNT)]
Signal = Annotated[int, Meta(ge=1, le=64)]
Urgency = Annotated[int, Meta(ge=0, le=31)]
Severity = Annotated[int, Meta(ge=0, le=7)]
WaitStatus = Annotated[int, Meta(ge=0, le=0xFFFF)]
Pid = Annotated[int, Meta(ge=1, le=(1 << 31) - 1)]
UserId = Annotated[int, Meta(ge=0, le=0xFFFFFFFF)]
Seq = Annotated[int, Meta(ge=0, le=MAX_ID)]
Matchtag = Annotated[int, Meta(ge=0, le=0xFFFFFFFF)]

Name = Annotated[str, Meta(min_length=1, max_length=255)]     # services, attributes, types
Topic = Annotated[str, Meta(min_length=1, max_length=255)]
TopicPrefix = Annotated[str, Meta(max_length=255)]            # a subscription ("": every topic)
Key = Annotated[str, Meta(max_length=1024)]                    # KVS keys
Text = Annotated[str, Meta(max_length=64 * 1024)]              # notes, reasons, values
Idset = Annotated[str, Meta(max_length=64 * 1024)]             # "0-3,7"

AnyMap = dict[str, Any]


class JobRequest(Struct, kw_only=True):
    """A request naming one job (job-manager, job-exec, sched)."""
    id: JobId


class KillRequest(Struct, kw_only=True):
    """Send a signal to one job's tasks (job-manager, job-exec)."""
    id: JobId
    signum: Signal


def describe(exc: ValidationError) -> tuple[str, bool]:
    """msgspec's message as 'field: what is wrong', and whether the value had the
    wrong type (EPROTO) rather than the right type out of bounds (EINVAL)."""
    text = str(exc)
    what, sep, where = text.partition(" - at `")
    what = what[:1].lower() + what[1:]
    wrong_type = ", got `" in what or "missing required field" in what or \
        what.startswith("expected `object`")
    if not sep:
        return f"payload: {what}", wrong_type
    path = where.rstrip("`")
    path = path[2:] if path.startswith("$.") else path.lstrip("$") or "payload"
    return f"{path}: {what}", wrong_type


__all__ = [name for name in dir() if not name.startswith("_")]

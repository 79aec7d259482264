"""Flux's signed jobspec, J, as job-ingest.submit takes it: fluxlite signs
nothing, so J is Flux's unsigned form, the "none" mechanism of flux-core's
sign_none: HEADER.PAYLOAD.none, HEADER the base64 of a key/value list
(version i1, userid iUID, mech snone: each key, then its value after a type
letter, each NUL-terminated), PAYLOAD the base64 of the jobspec's JSON."""

from __future__ import annotations

import base64
import binascii
import json

from ..errors import PermissionDenied, UsageError


def _header(text: str) -> dict:
    fields = base64.b64decode(text, validate=True).split(b"\0")
    if fields and fields[-1] == b"":
        fields.pop()
    if len(fields) % 2:
        raise ValueError
    out = {}
    for key, value in zip(fields[::2], fields[1::2]):
        key, kind, raw = key.decode(), value[:1], value[1:].decode()
        if key not in ("version", "userid", "mech"):
            raise ValueError
        if kind == b"i" and not raw.isdigit():
            raise ValueError
        out[key] = int(raw) if kind == b"i" else raw
    return out


def unwrap(J: str, userid: int) -> dict:
    """The jobspec in J; EINVAL for a J that is not Flux's unsigned form, EPERM
    for one that names another user."""
    parts = J.split(".")
    try:
        if len(parts) != 3 or parts[2] != "none":
            raise ValueError
        header = _header(parts[0])
        if header.get("version") != 1 or header.get("mech") != "none" or \
                not isinstance(header.get("userid"), int):
            raise ValueError
        jobspec = json.loads(base64.b64decode(parts[1], validate=True))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise UsageError("J is not an unsigned jobspec (HEADER.PAYLOAD.none, the \"none\" "
                         "mechanism: fluxlite checks no signatures)") from None
    if header.get("userid") != userid:
        raise PermissionDenied(f"J was made by userid {header.get('userid')}, not by the "
                               f"submitting user ({userid})")
    if not isinstance(jobspec, dict):
        raise UsageError("J's payload is not a jobspec (a JSON object)")
    return jobspec


def wrap(jobspec: dict, userid: int) -> str:
    """J for `jobspec` in the "none" mechanism (what a Flux client would send)."""
    header = b"".join(k.encode() + b"\0" + v + b"\0" for k, v in (
        ("version", b"i1"), ("userid", b"i%d" % userid), ("mech", b"snone")))
    return ".".join((base64.b64encode(header).decode(),
                     base64.b64encode(json.dumps(jobspec).encode()).decode(), "none"))

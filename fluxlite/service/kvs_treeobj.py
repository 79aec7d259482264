"""Flux's KVS payloads (RFC 11 tree objects) for the kvs service's Flux topics.

A value travels as {"ver": 1, "type": "val", "data": BASE64}: a map, list,
number or string as its JSON text, bytes as they are, and a log made by
appends (an eventlog) as Flux keeps one, one JSON entry per line (RFC 18).  A
directory is {"ver": 1, "type": "dir", "data": {NAME: OBJECT}}: its values
inline, each subdirectory an empty "dir" (fluxlite's KVS has no blob
references to give; look a subdirectory up by its own key).  A symbolic link is
{"ver": 1, "type": "symlink", "data": {"target": KEY, "namespace"?: NS}}.
Flux's commit operations, {key, flags, dirent}, become the kvs service's own."""

from __future__ import annotations

import base64
import binascii
import json

from ..errors import ProtocolError, UsageError
from ..protocol.kvs import APPEND, READDIR, READLINK, TREEOBJ  # noqa: F401  (Flux's flags)


def val(raw: bytes) -> dict:
    return {"ver": 1, "type": "val", "data": base64.b64encode(raw).decode()}


def encode(value, log: bool = False) -> dict:
    """A value's tree object (`log`: a list made by appends, written as RFC 18 lines)."""
    if isinstance(value, (bytes, bytearray)):
        return val(bytes(value))
    if log:
        return val("".join(json.dumps(e, separators=(",", ":")) + "\n"
                           for e in value).encode())
    return val(json.dumps(value, separators=(",", ":")).encode())


def check_storable(op: dict) -> None:
    """A client's set or append can be read back: a value is bytes or JSON (bytes
    inside a map or list, NaN or infinity have no JSON text), and an appended entry
    is JSON.  EINVAL naming the key, before anything is stored."""
    if "append" in op:
        what = op["append"]
    elif "value" in op and not isinstance(op["value"], (bytes, bytearray)):
        what = op["value"]
    else:
        return
    try:
        json.dumps(what, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise UsageError(f"kvs.commit: {op.get('key')!r}: the value cannot be stored: "
                         f"{exc} (a value is JSON, or bytes on its own)") from None


def symlink(target: str, namespace: str | None) -> dict:
    data = {"target": target}
    if namespace is not None:
        data["namespace"] = namespace
    return {"ver": 1, "type": "symlink", "data": data}


def empty_dir() -> dict:
    return {"ver": 1, "type": "dir", "data": {}}


def _value(dirent: dict):
    """The value a "val" object holds: JSON if it parses, else its bytes."""
    try:
        raw = base64.b64decode(dirent.get("data", ""), validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise ProtocolError("kvs.commit: a val object's data must be base64") from None
    try:
        return json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError):
        return raw


def op(flux_op: dict) -> dict:
    """A Flux commit operation ({key, flags, dirent}) as the service's own."""
    key, dirent, flags = flux_op.get("key"), flux_op.get("dirent"), flux_op.get("flags", 0)
    if dirent is None:
        return {"key": key, "unlink": True}
    if not isinstance(dirent, dict) or dirent.get("ver") != 1:
        raise ProtocolError("kvs.commit: dirent must be an RFC 11 tree object (ver 1)")
    kind = dirent.get("type")
    if kind == "val":
        value = _value(dirent)
        if isinstance(flags, int) and flags & APPEND:
            return {"key": key, "append": [value]}
        return {"key": key, "value": value}
    if kind == "dir" and not dirent.get("data"):
        return {"key": key, "mkdir": True}
    if kind == "symlink" and isinstance(dirent.get("data"), dict):
        data = dirent["data"]
        out = {"key": key, "symlink": data.get("target")}
        if data.get("namespace") is not None:
            out["target_namespace"] = data["namespace"]
        return out
    raise UsageError(f"kvs.commit: a {kind!r} object is not supported here (fluxlite's KVS "
                     "holds values, directories and links, with no blob references)")

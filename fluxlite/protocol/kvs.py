"""Flux's KVS read flags and the reading of a `kvs.lookup` / `kvs-watch.lookup`
answer, shared by the kvs service and every reader (CLI, job API, shell, the
`flux` package).

An answer is {namespace, key?, val}: `val` an RFC 11 tree object.  A value's
object holds its JSON text in base64; a log made by appends (an eventlog,
output) kept in the disk store, and every answer of a FLUX_KVS_WATCH_APPEND
watch, is Flux's RFC 18 text, one JSON entry per line: such an answer also
says `log: true` (fluxlite's; Flux's readers pass it by), and `value()` reads
it back as the list of its entries.
"""

from __future__ import annotations

import base64
import binascii
import json

from ..errors import ProtocolError

READDIR = 1          # FLUX_KVS_READDIR
READLINK = 2         # FLUX_KVS_READLINK
WATCH = 4            # FLUX_KVS_WATCH
WAITCREATE = 8       # FLUX_KVS_WAITCREATE
TREEOBJ = 16         # FLUX_KVS_TREEOBJ
APPEND = 32          # FLUX_KVS_APPEND (a commit's)
WATCH_FULL = 64      # FLUX_KVS_WATCH_FULL
WATCH_UNIQ = 128     # FLUX_KVS_WATCH_UNIQ
WATCH_APPEND = 256   # FLUX_KVS_WATCH_APPEND


def raw(obj: dict) -> bytes:
    """The bytes a "val" tree object holds."""
    if not isinstance(obj, dict) or obj.get("type") != "val":
        kind = obj.get("type") if isinstance(obj, dict) else type(obj).__name__
        raise ProtocolError(f"KVS answer: expected a val tree object, got {kind!r}")
    try:
        return base64.b64decode(obj.get("data", ""), validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise ProtocolError("KVS answer: a val object's data must be base64") from None


def value(answer: dict):
    """The Python value of a lookup answer: its JSON, else its bytes; for a log
    (`log: true`), the list of its entries."""
    data = raw(answer["val"])
    if answer.get("log"):
        try:
            return [json.loads(line) for line in data.splitlines() if line]
        except ValueError:
            raise ProtocolError("KVS answer: an eventlog line is not JSON") from None
    try:
        return json.loads(data)
    except (UnicodeDecodeError, ValueError):
        return data


def entries(answer: dict) -> tuple[list[str], dict[str, dict]]:
    """A FLUX_KVS_READDIR answer's names, sorted, a subdirectory's ending in ".",
    and its symbolic links' {name: {target, namespace?}}."""
    obj = answer["val"]
    if not isinstance(obj, dict) or obj.get("type") != "dir" \
            or not isinstance(obj.get("data"), dict):
        raise ProtocolError("KVS answer: expected a dir tree object")
    names, links = [], {}
    for name, sub in sorted(obj["data"].items()):
        kind = sub.get("type") if isinstance(sub, dict) else None
        names.append(name + "." if kind in ("dir", "dirref") else name)
        if kind == "symlink":
            links[name] = sub.get("data") or {}
    return names, links

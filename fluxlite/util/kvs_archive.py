"""KVS snapshots as tar archives (`fluxlite dump` / `fluxlite restore`, as Flux's).

Each key is one archive member named by its path (`job.0000.0004.b200.0000.eventlog`
is `job/0000/0004/b200/0000/eventlog`).  An eventlog (a list of entries, each
with a timestamp and a name) is written as Flux writes one: a JSON object per
line, each line ended; any other value as its JSON text, with no newline at
the end.  So reading a member back is exact: lines of entries, ended by a
newline, are an eventlog (appended, as it was made); anything else is a value.
A symbolic link is a symbolic link member whose target is the target key (its
namespace, if it names one, in the member's PAX header `FLUXLITE.namespace`).
"""

from __future__ import annotations

import io
import json
import tarfile
import time

NAMESPACE_HEADER = "FLUXLITE.namespace"


def member_name(key: str) -> str:
    return key.replace(".", "/")


def key_of(name: str) -> str:
    return name.strip("/").replace("/", ".")


def _is_eventlog(value) -> bool:
    return (isinstance(value, list) and bool(value) and
            all(isinstance(e, dict) and "timestamp" in e and "name" in e for e in value))


def encode(value) -> bytes:
    if _is_eventlog(value):
        return b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in value)
    return json.dumps(value, separators=(",", ":")).encode()


def decode(data: bytes) -> dict:
    """The KVS operation that puts a member's content back, without its key:
    {"append": entries} for an eventlog, else {"value": value}."""
    text = data.decode()
    if text.endswith("\n"):
        entries = [json.loads(line) for line in text.splitlines()]
        if _is_eventlog(entries):
            return {"append": entries}
    return {"value": json.loads(text)}


def open_for_writing(path: str) -> tarfile.TarFile:
    mode = "w:gz" if path.endswith((".tgz", ".tar.gz")) else "w"
    return tarfile.open(path, mode, format=tarfile.PAX_FORMAT)


class Link:
    """A key that is a symbolic link (what a `kvs.lookup` with FLUX_KVS_READDIR says of it)."""

    def __init__(self, target: str, namespace: str | None = None):
        self.target, self.namespace = target, namespace


def add(tar: tarfile.TarFile, key: str, value, mtime: float | None = None) -> None:
    if isinstance(value, Link):
        info = tarfile.TarInfo(member_name(key))
        info.type, info.linkname = tarfile.SYMTYPE, value.target
        info.mtime = int(time.time() if mtime is None else mtime)
        if value.namespace is not None:
            info.pax_headers = {NAMESPACE_HEADER: value.namespace}
        tar.addfile(info)
        return
    data = encode(value)
    info = tarfile.TarInfo(member_name(key))
    info.size = len(data)
    info.mtime = int(time.time() if mtime is None else mtime)
    info.mode = 0o600
    tar.addfile(info, io.BytesIO(data))


def read(path: str):
    """(key, operation, size in bytes) for every member of an archive, in order."""
    with tarfile.open(path, "r:*") as tar:
        for info in tar:
            if info.issym():
                op = {"symlink": info.linkname}
                if NAMESPACE_HEADER in info.pax_headers:
                    op["target_namespace"] = info.pax_headers[NAMESPACE_HEADER]
                yield key_of(info.name), op, 0
                continue
            if not info.isfile():
                continue
            f = tar.extractfile(info)
            yield key_of(info.name), decode(f.read()), info.size

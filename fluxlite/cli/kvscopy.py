"""`fluxlite kvs copy` and `kvs move`, as flux-kvs(1)'s: a key (a value, a link, or
a directory and all under it) copied to a new name, in one commit to the
destination namespace (-D; -S names the source's); move then unlinks the
source."""

from __future__ import annotations

import click

from ..errors import FluxliteError, NotFound
from ..protocol import kvs
from ..protocol.kvs import TREEOBJ
from .common import HELP, handle, kvs_namespace_option


def _in(namespace: str | None, payload: dict) -> dict:
    return payload if namespace is None else {**payload, "namespace": namespace}


def _ops(h, ns: str | None, src: str, dst: str) -> list[dict]:
    """Commit operations that write what is at `src` under `dst`: a link as a link, a
    list made by appends as such a list (its tree object is RFC 18 lines), a
    directory key by key."""
    obj = h.call("kvs.lookup", _in(ns, {"key": src, "flags": TREEOBJ}), nodeid=0)["val"]
    if obj.get("type") == "symlink":
        return [{"key": dst, "flags": 0, "dirent": obj}]
    if obj.get("type") not in ("dir", "dirref"):
        answer = h.call("kvs.lookup", _in(ns, {"key": src}), nodeid=0)
        if answer.get("log"):
            return [{"key": dst, "append": kvs.value(answer)}]
        return [{"key": dst, "value": kvs.value(answer)}]
    ops = [{"key": dst, "mkdir": True}]
    names, _ = kvs.entries(h.call("kvs.lookup", _in(ns, {"key": src, "flags": kvs.READDIR}),
                                  nodeid=0))
    for entry in names:
        name = entry.rstrip(".")
        ops += _ops(h, ns, f"{src}.{name}", f"{dst}.{name}")
    return ops


def _copy(src_ns, dst_ns, src: str, dst: str, *, remove: bool) -> None:
    with handle() as h:
        try:
            ops = _ops(h, src_ns, src, dst)
        except NotFound:
            raise NotFound(f"{src}: No such file or directory") from None
        try:   # DST is replaced, as Flux's copy replaces it
            h.call("kvs.lookup", _in(dst_ns, {"key": dst}), nodeid=0)
            ops.insert(0, {"key": dst, "unlink": True})
        except NotFound:
            pass
        except FluxliteError:   # a directory
            ops.insert(0, {"key": dst, "unlink": True})
        h.call("kvs.commit", _in(dst_ns, {"ops": ops}), nodeid=0)
        if remove:
            h.call("kvs.commit", _in(src_ns, {"ops": [{"key": src, "unlink": True}]}),
                   nodeid=0)


_NS = [kvs_namespace_option("-S", "--src-namespace", " for SRC"),
       kvs_namespace_option("-D", "--dst-namespace", " for DST")]


def _namespaces(fn):
    for opt in reversed(_NS):
        fn = opt(fn)
    return fn


@click.command(context_settings=HELP)
@_namespaces
@click.argument("src")
@click.argument("dst")
def copy(src_namespace, dst_namespace, src, dst):
    """Copy SRC (a value, a link or a directory) to DST."""
    _copy(src_namespace, dst_namespace, src, dst, remove=False)


@click.command(context_settings=HELP)
@_namespaces
@click.argument("src")
@click.argument("dst")
def move(src_namespace, dst_namespace, src, dst):
    """Move SRC (a value, a link or a directory) to DST."""
    _copy(src_namespace, dst_namespace, src, dst, remove=True)

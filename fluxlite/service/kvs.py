"""The `kvs` service (rank 0): hierarchical keys, atomic commits, appends, watches.

Keys are dotted paths ("job.0000.0004.b200.0000.eventlog"); directories are
implied by them.  A commit is a list of operations applied all at once:

    {key, value}           set a value
    {key, append: [...]}   extend a list (an eventlog) with entries
    {key, unlink: true}    remove a key or directory
    {key, mkdir: true}     make an empty directory (replacing what was there)
    {key, symlink: TARGET, target_namespace?: NS}
                           a symbolic link (Flux's): reading the key, or a key
                           below it, reads TARGET (in NS, else the link's own
                           namespace) instead; kvs.lookup's READLINK reads the link

As in Flux, a value set over a directory replaces the directory, and a key set
below a value replaces the value with a directory; only an append to a
directory is refused (EISDIR).
    {..., prune: true}     with unlink: also remove the directories above it that
                           are left empty, but for the top-level one (a purged
                           job's path)

`kvs.watch` streams a key: the value now (or, with `append`, the entries so
far) and then every change (with `append`, only the new entries); with
`waitcreate` it waits for a missing key instead of failing with ENOENT.
Services on rank 0 call `commit()` and `lookup()` directly; everyone else
uses the RPCs.  Jobs keep their jobspec, R, eventlogs and output here.

Maps (a jobspec, an R) and lists made by appends (eventlogs, output) live in
the on-disk store (kvs_store.py), not in rank 0's heap: the tree holds a small
node for each (`Blob`, `Log`) and reads the value back, decoded afresh for each
reader, for `kvs.get` and watches.  Where a value lives is the KVS's business
alone.  What stays in the heap per job is its directory and those nodes, so a
burst of thousands of pending jobs leaves little behind once they are purged.

Namespaces (Flux's): "primary" always exists; the instance owner makes others
with `kvs.namespace-create` {namespace, owner, flags}, removes them with
`kvs.namespace-remove` {namespace} and lists them with `kvs.namespace-list`.
Each is a tree of its own; every request takes an optional `namespace`, and a
namespace's owner (or the instance owner) may read, write and watch it,
nobody else (EPERM).  A namespace that does not exist is ENOTSUP, as Flux's.
With a state directory a namespace is kept like a key (its record and keys are
rows named `NS_ROW` + name, then NUL and the key).
"""

from __future__ import annotations

import errno
import functools
import gc
import sys
from typing import Annotated

from ..errors import (
    AlreadyExists,
    FluxliteError,
    IsADirectory,
    NotADirectory,
    NotFound,
    NotSupported,
    PermissionDenied,
    ProtocolError,
    UsageError,
)
from ..protocol.schema import BULK_PAYLOAD, MAX_OPS, Key, Matchtag, Meta, Struct
from . import kvs_treeobj as treeobj
from . import statedir
from .base import ANY, Service, handler
from .kvs_store import MKDIR, READ_BATCH, UNLINK, Blob, Log, Store, Symlink


class KeyRequest(Struct, kw_only=True):
    key: Key
    namespace: str | None = None


class CommitRequest(Struct, kw_only=True):
    ops: Annotated[list[dict], Meta(max_length=MAX_OPS)]
    namespace: str | None = None
    flags: Annotated[int, Meta(ge=0)] = 0
    name: str | None = None


class LookupRequest(Struct, kw_only=True):
    key: Key
    flags: Annotated[int, Meta(ge=0)] = 0
    namespace: str | None = None


class WatchRequest(Struct, kw_only=True):
    key: Key
    waitcreate: bool = False
    append: bool = False
    namespace: str | None = None


class UnwatchRequest(Struct, kw_only=True):
    key: Key
    matchtag: Matchtag
    namespace: str | None = None


class NamespaceCreateRequest(Struct, kw_only=True):
    namespace: Annotated[str, Meta(min_length=1, max_length=255, pattern=r"^[^\x00/]+$")]
    owner: int = -1
    flags: Annotated[int, Meta(ge=0)] = 0


class NamespaceRequest(Struct, kw_only=True):
    namespace: Annotated[str, Meta(min_length=1, max_length=255)]


_MISSING = object()
PRIMARY = "primary"
MAX_LINKS = 16          # symbolic links one lookup follows before ELOOP (a cycle)
NS_ROW = "\0ns\0"     # a state database row of a namespace (no key's name starts so)


def _row(ns: str, key: str) -> str:
    """The state database's name for `key` in namespace `ns`."""
    return key if ns == PRIMARY else f"{NS_ROW}{ns}\0{key}"


class _Dir(dict):
    """A directory node (a value is never a dict: maps are Blobs in the store)."""
    __slots__ = ()


class _Watcher:
    __slots__ = ("msg", "append", "sent")

    def __init__(self, msg, append: bool):
        self.msg = msg
        self.append = append
        self.sent = 0  # entries already sent (append mode)


def _stored(node) -> list:
    """The values in the store that a value is, or that are below a directory."""
    if isinstance(node, (Log, Blob)):
        return [node]
    if not isinstance(node, _Dir):
        return []
    out, stack = [], [node]
    while stack:
        for v in stack.pop().values():
            if isinstance(v, (Log, Blob)):
                out.append(v)
            elif isinstance(v, _Dir):
                stack.append(v)
    return out


def _split(key: str) -> tuple[str, ...]:
    if not isinstance(key, str) or not key:
        raise UsageError("invalid key: must be a non-empty dotted path")
    return _components(key)


def _is_a_directory(key: str) -> IsADirectory:
    """An append aimed at a directory: say what would be allowed instead."""
    return IsADirectory(f"key {key!r} is a directory: cannot append to it (append to a "
                        f"key below it, {key}.NAME, or set a value over it)")


@functools.lru_cache(maxsize=512)
def _components(key: str) -> tuple[str, ...]:
    """A key's path (remembered: a running job's few keys are written a dozen times)."""
    parts = key.strip(".").split(".")
    if not all(parts):
        raise UsageError(f"invalid key {key!r}: empty path component")
    # names that recur under every job ("eventlog", "jobspec", "0000") are held once
    return tuple(sys.intern(p) for p in parts)


class KVSService(Service):
    name = "kvs"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.root: _Dir = _Dir()
        self.roots: dict[str, _Dir] = {PRIMARY: self.root}
        self.ns_info: dict[str, dict] = {}      # namespace -> {owner, flags}, but primary
        self.version = 0
        self.watchers: dict[tuple[str, str], list[_Watcher]] = {}
        self.store = Store(ctx.attrs.get("rundir"), durable_path=statedir.db_path(ctx.attrs))
        if self.store.durable:
            self._load()

    def _load(self) -> None:
        """Rebuild the tree a durable store kept (a restart from a state directory)."""
        gc.disable()   # every node made here lives on: a collection would find nothing
        try:
            nodes, self.version = self.store.load()
            self._graft(nodes)
        finally:
            gc.enable()

    def _graft(self, nodes: list) -> None:
        intern = sys.intern
        for key, node in nodes:
            root = self.root
            if key.startswith(NS_ROW):
                name, _, key = key[len(NS_ROW):].partition("\0")
                if not key:           # the namespace's record
                    self.ns_info[name] = node
                    self.roots.setdefault(name, _Dir())
                    continue
                root = self.roots.setdefault(name, _Dir())
            parts = key.split(".")
            parent = root
            for part in parts[:-1]:
                nxt = parent.get(part)
                if nxt is None:
                    nxt = parent[intern(part)] = _Dir()
                parent = nxt
            if node is MKDIR:
                parent.setdefault(intern(parts[-1]), _Dir())
            else:
                parent[intern(parts[-1])] = node

    def _keep(self, value):
        """How the tree holds a value that is set: a map goes to the store."""
        return self.store.put(value) if isinstance(value, dict) else value

    @property
    def durable(self) -> bool:
        """Whether the KVS outlives the instance (a state directory)."""
        return self.store.durable

    def stop(self) -> None:
        super().stop()
        self.store.close()

    # ------------------------------------------------------------ local API
    def lookup(self, key: str):
        """Value at `key`; raises ENOENT (missing) or EISDIR (a directory)."""
        return self._value(self._node(key))

    def _value(self, node):
        """The value a tree node stands for (read from the store, or decoded)."""
        if isinstance(node, Log):
            return self.store.read(node)
        if isinstance(node, Blob):
            return self.store.get(node)
        return node

    def _node(self, key: str, root: _Dir | None = None, msg=None):
        """What the tree holds at `key` (a Log for a list on disk); ENOENT, EISDIR."""
        node = self._walk(key, self.root if root is None else root, msg)
        if isinstance(node, _Dir):
            raise IsADirectory(f"key {key!r} is a directory, not a value: read a key "
                               f"below it ({key}.NAME) or list it with kvs ls")
        return node

    def _walk(self, key: str, root: _Dir, msg=None, follow_last: bool = True,
              links: list | None = None):
        """What the tree holds at `key`, a directory too, following symbolic links
        on the way (the last one as well unless `follow_last`); ENOENT, ELOOP.  A
        link into another namespace is followed only for a user who may use it."""
        links = [0] if links is None else links
        node, parts = root, _split(key)
        for i, part in enumerate(parts):
            if not isinstance(node, _Dir) or part not in node:
                raise NotFound(f"key {key!r} not found")
            node = node[part]
            while isinstance(node, Symlink) and (follow_last or i < len(parts) - 1):
                links[0] += 1
                if links[0] > MAX_LINKS:
                    raise FluxliteError(f"key {key!r}: more than {MAX_LINKS} symbolic "
                                        "links on the way (a cycle?)", errno.ELOOP)
                there = root if node.namespace is None else self._ns(msg, node.namespace)[1]
                node = self._walk(node.target, there, msg, True, links)
        return node

    def scan(self, glob: str):
        """(key, value) of every key matching `glob`, in key order, read in one pass
        (a durable KVS only: a restart's bulk read of every job's records)."""
        if not self.store.durable:
            raise UsageError("kvs scan needs a state directory")
        return self.store.scan(glob)

    def exists(self, key: str) -> bool:
        try:
            self.lookup(key)
            return True
        except FluxliteError:
            return False

    def commit(self, ops: list[dict], namespace: str = PRIMARY) -> int:
        """Apply operations all or nothing; returns the new version.

        Each change is recorded in an undo log, so an operation that fails
        half way through (appending to a value, writing below a value) leaves
        the store exactly as it was."""
        plan = [self._check_op(op) for op in ops]
        root = self.roots[namespace]
        undo: list = []
        touched: list[str] = []
        changes: list | None = [] if self.store.durable else None   # for the state database
        try:
            for parts, op in plan:
                key = ".".join(parts)
                parent, leaf = self._parent(parts, create=not op.get("unlink"), undo=undo,
                                            changes=changes, ns=namespace)
                row = _row(namespace, key)
                if parent is None:
                    continue  # unlinking something that is not there
                old = parent.get(leaf, _MISSING)
                if op.get("unlink"):
                    if old is _MISSING:
                        continue
                    undo.append((parent, leaf, old))
                    del parent[leaf]
                    self.store.drop(_stored(old))
                    if changes is not None:
                        changes.append((row, UNLINK))
                    if op.get("prune"):
                        self._prune(parts, undo, root)
                elif op.get("mkdir"):
                    undo.append((parent, leaf, old))
                    parent[leaf] = _Dir()       # empty, whatever was there (Flux's mkdir)
                    self.store.drop(_stored(old))
                    if changes is not None:
                        if old is not _MISSING:
                            changes.append((row, UNLINK))
                        changes.append((row, MKDIR))
                elif "append" in op:
                    if isinstance(old, _Dir):
                        raise _is_a_directory(key)
                    if old is not _MISSING and not isinstance(old, (list, Log)):
                        raise UsageError(f"cannot append to {key!r}: it is not a list")
                    self._append(parent, leaf, old, op["append"], undo)
                    if changes is not None and parent[leaf] is not old:
                        changes.append((row, parent[leaf]))   # a new log
                else:
                    # a value replaces whatever was there, a directory too (as Flux's)
                    undo.append((parent, leaf, old))
                    parent[leaf] = (Symlink(op["symlink"], op.get("target_namespace"))
                                    if "symlink" in op else self._keep(op["value"]))
                    self.store.drop(_stored(old))
                    if changes is not None:
                        if isinstance(old, _Dir):
                            changes.append((row, UNLINK))
                        changes.append((row, parent[leaf]))
                touched.append(key)
        except Exception:
            self.store.finish(False)
            for parent, leaf, old in reversed(undo):
                if old is _MISSING:
                    parent.pop(leaf, None)
                else:
                    parent[leaf] = old
            raise
        self.version += 1
        self.store.finish(True, changes, self.version)
        for key in touched:
            self._notify(namespace, key)
        return self.version

    def _prune(self, parts: tuple[str, ...], undo: list, root: _Dir) -> None:
        """Remove the directories above `parts` that its unlink left empty, up to the
        top-level one, which stays ("job"): a purged job's path, job.0000.0004.b200,
        would otherwise stay behind for good."""
        chain = [root]
        for part in parts[:-2]:
            chain.append(chain[-1][part])
        for i in range(len(parts) - 2, 0, -1):
            parent, node = chain[i], chain[i][parts[i]]
            if node:
                return
            undo.append((parent, parts[i], node))
            del parent[parts[i]]

    def _append(self, parent: _Dir, leaf: str, old, entries: list, undo: list) -> None:
        """Extend the log in the store (a failed commit's store.finish(False) cuts it
        back), or start one: from nothing, or from a list that was set as a value."""
        if isinstance(old, Log):
            self.store.append(old, entries)
            return
        undo.append((parent, leaf, old))
        log = parent[leaf] = self.store.new_log()
        if old is not _MISSING:
            self.store.append(log, old)
        self.store.append(log, entries)

    def append(self, key: str, *entries) -> None:
        self.commit([{"key": key, "append": list(entries)}])

    @staticmethod
    def _check_op(op) -> tuple[tuple[str, ...], dict]:
        """An operation's shape (the tree is checked as it is applied: an append to a
        directory is refused, and the undo log takes back what came before it)."""
        if not isinstance(op, dict) or "key" not in op:
            raise ProtocolError("kvs.commit: each operation must be a map with a 'key'")
        parts = _split(op["key"])
        if not (op.get("unlink") or op.get("mkdir") or "value" in op or "append" in op
                or "symlink" in op):
            raise ProtocolError(f"kvs.commit: operation on {op['key']!r} has no value, "
                                "append, mkdir, symlink or unlink")
        if "symlink" in op:
            _split(op["symlink"])       # a target is a key
            ns = op.get("target_namespace")
            if ns is not None and (not isinstance(ns, str) or not ns):
                raise ProtocolError("kvs.commit: a symlink's target_namespace must be a "
                                    "namespace's name")
        if "append" in op and not isinstance(op["append"], list):
            raise ProtocolError("kvs.commit: 'append' must be a list")
        return parts, op

    def _parent(self, parts: tuple[str, ...], create: bool, undo: list | None = None,
                changes: list | None = None, ns: str = PRIMARY):
        """The directory holding `parts[-1]` (None if absent and not created).  As
        in Flux, a write below a value replaces that value with a directory."""
        node = self.roots[ns]
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None or not isinstance(nxt, _Dir):
                if not create:
                    return None, parts[-1]
                node[part] = _Dir()
                if undo is not None:
                    undo.append((node, part, _MISSING if nxt is None else nxt))
                if nxt is not None:
                    self.store.drop(_stored(nxt))
                    if changes is not None:
                        changes.append((_row(ns, ".".join(parts[:i + 1])), UNLINK))
                nxt = node[part]
            node = nxt
        return node, parts[-1]

    # ------------------------------------------------------------- watches
    def _notify(self, ns: str, key: str) -> None:
        """Tell the watchers of `key` and of every key below it (a directory changed)."""
        below = key + "."
        for wkey in [k for k in self.watchers
                     if k[0] == ns and (k[1] == key or k[1].startswith(below))]:
            for w in list(self.watchers.get(wkey, ())):
                self._send_watch(wkey, w)

    def _send_watch(self, wkey: tuple[str, str], w: _Watcher) -> None:
        ns, key = wkey
        try:
            value = self._node(key, self.roots[ns])
        except FluxliteError as exc:
            if w.sent or not w.append:
                self._end_watch(wkey, w, isinstance(exc, NotFound))
            return
        if w.append:
            if isinstance(value, Log):  # from disk, a batch per response
                if w.sent and w.sent >= value.n:
                    return
                while True:
                    new = self.store.read(value, w.sent, READ_BATCH)
                    w.sent += len(new)
                    self.respond(w.msg, {"entries": new})
                    if w.sent >= value.n:
                        return
            if not isinstance(value, list):
                self._drop_watch(wkey, w)
                self.respond_exception(w.msg, UsageError(f"{key!r} is not an eventlog"))
                return
            new = value[w.sent:]
            if not new and w.sent:
                return
            w.sent = len(value)
            self.respond(w.msg, {"entries": new})
        else:
            self.respond(w.msg, {"value": self._value(value)})

    def _end_watch(self, wkey: tuple[str, str], w: _Watcher, removed: bool) -> None:
        self._drop_watch(wkey, w)
        if removed:
            self.end_stream(w.msg)

    def _drop_watch(self, wkey: tuple[str, str], w: _Watcher) -> None:
        lst = self.watchers.get(wkey)
        if lst and w in lst:
            lst.remove(w)
            if not lst:
                del self.watchers[wkey]
        self.untrack_stream(w.msg)

    # ---------------------------------------------------------- namespaces
    def _ns(self, msg, namespace: str | None) -> tuple[str, _Dir]:
        """The namespace a request names (primary if none) and its tree: ENOTSUP if
        there is no such namespace, EPERM for a user who neither owns it nor the
        instance (Flux's rules; no `msg`: rank 0's own use)."""
        if namespace in (None, PRIMARY):
            return PRIMARY, self.root
        root = self.roots.get(namespace)
        if root is None:
            raise NotSupported(f"KVS namespace {namespace!r} does not exist (see "
                               "kvs namespace list)")
        if (msg is not None and not self.is_owner(msg)
                and msg.userid != self.ns_info[namespace]["owner"]):
            raise PermissionDenied(f"KVS namespace {namespace!r}: only its owner or the "
                                   "instance owner may use it")
        return namespace, root

    @handler("kvs.namespace-create", schema=NamespaceCreateRequest)
    def namespace_create(self, msg, req):
        """Make an empty namespace owned by `owner` (-1: the instance owner)."""
        if req.namespace in self.roots:
            raise AlreadyExists(f"KVS namespace {req.namespace!r} exists already")
        info = {"owner": self.ctx.owner if req.owner == -1 else req.owner,
                "flags": req.flags}
        self.roots[req.namespace], self.ns_info[req.namespace] = _Dir(), info
        self._record([(NS_ROW + req.namespace, info)])
        return {}

    @handler("kvs.namespace-remove", schema=NamespaceRequest)
    def namespace_remove(self, msg, req):
        """Remove a namespace and all its keys; its watchers are told ENOTSUP."""
        name = req.namespace
        if name == PRIMARY:
            raise UsageError("the primary KVS namespace cannot be removed")
        root = self.roots.pop(name, None)
        if root is None:
            raise NotSupported(f"KVS namespace {name!r} does not exist")
        del self.ns_info[name]
        self.store.drop(_stored(root))
        self._record([(_row(name, k), UNLINK) for k in root] + [(NS_ROW + name, UNLINK)])
        for wkey in [k for k in self.watchers if k[0] == name]:
            for w in self.watchers.pop(wkey):
                self.untrack_stream(w.msg)
                self.respond_exception(w.msg, NotSupported(
                    f"KVS namespace {name!r} was removed"))
        return {}

    @handler("kvs.namespace-list", schema=None, roles=ANY)
    def namespace_list(self, msg, req):
        """Every namespace with its owner and flags, primary first."""
        out = [{"namespace": PRIMARY, "owner": self.ctx.owner, "flags": 0}]
        out += [{"namespace": n, **info} for n, info in sorted(self.ns_info.items())]
        return {"namespaces": out}

    def _record(self, changes: list) -> None:
        """Keep a namespace change in a durable store (a new KVS version)."""
        self.version += 1
        self.store.finish(True, changes if self.store.durable else None, self.version)

    # ---------------------------------------------------------------- RPCs
    @handler("kvs.get", schema=KeyRequest, roles=ANY)
    def get(self, msg, req):
        _, root = self._ns(msg, req.namespace)
        return {"value": self._value(self._node(req.key, root, msg))}

    @handler("kvs.lookup", schema=LookupRequest, roles=ANY)
    def lookup_rpc(self, msg, req):
        """Flux's kvs.lookup: the key's RFC 11 tree object (kvs_treeobj.py); a
        directory with FLUX_KVS_READDIR, else EISDIR; with READLINK or TREEOBJ the
        last component's own object (a link not followed; READLINK: EINVAL if it is
        not a link)."""
        ns, root = self._ns(msg, req.namespace)
        whole = req.key.strip(".") == ""
        if req.flags & (treeobj.READLINK | treeobj.TREEOBJ) and not whole:
            node = self._walk(req.key, root, msg, follow_last=False)
            if req.flags & treeobj.READLINK and not isinstance(node, Symlink):
                raise UsageError(f"key {req.key!r} is not a symbolic link")
            return {"namespace": ns, "val": self._treeobj(node)}
        if whole or req.flags & treeobj.READDIR:
            node = root if whole else self._walk(req.key, root, msg)
            if not isinstance(node, _Dir):
                raise NotADirectory(f"key {req.key!r} is a value, not a directory")
            data = {name: self._treeobj(v) for name, v in node.items()}
            return {"namespace": ns, "val": {"ver": 1, "type": "dir", "data": data}}
        return {"namespace": ns, "val": self._treeobj(self._node(req.key, root, msg))}

    def _treeobj(self, node) -> dict:
        if isinstance(node, _Dir):
            return treeobj.empty_dir()
        if isinstance(node, Symlink):
            return treeobj.symlink(node.target, node.namespace)
        return treeobj.encode(self._value(node), isinstance(node, Log))

    @handler("kvs.commit", schema=CommitRequest, max_payload=BULK_PAYLOAD, roles=ANY)
    def commit_rpc(self, msg, req):
        """fluxlite's operations, or Flux's ({key, flags, dirent}: kvs_treeobj.py).
        The primary namespace is the instance owner's to write; another namespace
        its owner's too."""
        ns, _ = self._ns(msg, req.namespace)
        if ns == PRIMARY and not self.is_owner(msg):
            raise PermissionDenied("kvs.commit: permission denied (only the instance owner "
                                   "may write the primary namespace)")
        self.store.check_room()
        ops = [treeobj.op(o) if isinstance(o, dict) and "dirent" in o else o
               for o in req.ops]
        version = self.commit(ops, ns)
        return {"version": version, "rootseq": version}

    @handler("kvs.ls", schema=KeyRequest, roles=ANY)
    def ls(self, msg, req):
        key = req.key
        _, node = self._ns(msg, req.namespace)
        if key not in ("", "."):
            try:
                node = self._walk(key, node, msg)
            except NotFound:
                raise NotFound(f"directory {key!r} not found") from None
        if not isinstance(node, _Dir):
            raise NotADirectory(f"{key!r} is not a directory: it holds a value "
                                "(read it with kvs get)")
        out = {"entries": [k + ("." if isinstance(v, _Dir) else "") for k, v in
                           sorted(node.items())]}
        links = {k: treeobj.symlink(v.target, v.namespace)["data"] for k, v in node.items()
                 if isinstance(v, Symlink)}
        if links:
            out["links"] = links
        return out

    @handler("kvs.watch", schema=WatchRequest, streaming=True, roles=ANY)
    def watch(self, msg, req):
        ns, root = self._ns(msg, req.namespace)
        wkey = (ns, ".".join(_split(req.key)))
        w = _Watcher(msg, req.append)
        if not req.waitcreate:
            self._node(wkey[1], root, msg)  # ENOENT or EISDIR now, not a silent wait
        self.watchers.setdefault(wkey, []).append(w)
        self.track_stream(msg, lambda: self._drop_watch(wkey, w))
        try:
            self._node(wkey[1], root)
        except FluxliteError:
            return
        self._send_watch(wkey, w)

    @handler("kvs.stats", schema=None, roles=ANY)
    def stats(self, msg, req):
        """How much the KVS holds: its version and the number of open watches."""
        return {"version": self.version,
                "watchers": sum(len(w) for w in self.watchers.values()),
                "store_entries": self.store.count(),
                "namespaces": len(self.roots)}

    @handler("kvs.unwatch", schema=UnwatchRequest, roles=ANY)
    def unwatch(self, msg, req):
        wkey = (req.namespace or PRIMARY, req.key)
        for w in list(self.watchers.get(wkey, ())):
            if w.msg.matchtag == req.matchtag and w.msg.route == msg.route:
                self._drop_watch(wkey, w)
                self.end_stream(w.msg)
        return {}

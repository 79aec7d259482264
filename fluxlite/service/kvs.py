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

Reads are Flux's: `kvs.lookup` {key, flags, namespace?} answers a key's RFC 11
tree object (a directory's with FLUX_KVS_READDIR), and `kvs-watch.lookup`
streams a key: its value now (with FLUX_KVS_WATCH_APPEND, the entries so far)
and then every change (only the new entries); with FLUX_KVS_WAITCREATE it waits
for a missing key instead of failing with ENOENT; `kvs-watch.cancel` {matchtag}
ends it.  protocol/kvs.py holds the flags and reads an answer back.
Services on rank 0 call `commit()` and `lookup()` directly; everyone else
uses the RPCs.  The trees themselves (reading, committing, loading a durable
store) are kvs_tree.py's; this module serves them.  Jobs keep their jobspec, R,
eventlogs and output here.

Maps (a jobspec, an R) and lists made by appends (eventlogs, output) live in
the on-disk store (kvs_store.py), not in rank 0's heap: the tree holds a small
node for each (`Blob`, `Log`) and reads the value back, decoded afresh for each
reader, for lookups and watches.  Where a value lives is the KVS's business
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

Checkpoints (Flux's `content.checkpoint-get`, and `content-backing.checkpoint-get`
where a backing store answers it): with a state directory, the KVS version last
synced to disk and when, as Flux's checkpoint object {version: 1, rootref,
sequence, timestamp}; the rootref names that version of the state database
(fluxlite's store is not content-addressed: no blobref).  Without one, as Flux's
`flux start` with its default backing store in the run directory (which is
checkpointed when the KVS starts and removed with the instance): the empty KVS
of the start, sequence 0.
"""

from __future__ import annotations

import time
from typing import Annotated

from ..errors import (
    AlreadyExists,
    FluxliteError,
    NotADirectory,
    NotFound,
    NotSupported,
    PermissionDenied,
    UsageError,
)
from ..protocol import kvs as kvsflags
from ..protocol.message import STREAMING
from ..protocol.schema import BULK_PAYLOAD, MAX_OPS, Key, Matchtag, Meta, Struct
from . import kvs_treeobj as treeobj
from . import statedir
from .base import ANY, Service, handler
from .kvs_root import KVSRoot
from .kvs_store import READ_BATCH, UNLINK, Log, Store, Symlink
from .kvs_tree import NS_ROW, PRIMARY, Dir, KVSTree, row_name, split_key, stored_in


class CommitRequest(Struct, kw_only=True):
    ops: Annotated[list[dict], Meta(max_length=MAX_OPS)]
    namespace: str | None = None
    flags: Annotated[int, Meta(ge=0)] = 0
    name: str | None = None


class LookupRequest(Struct, kw_only=True):
    key: Key
    flags: Annotated[int, Meta(ge=0)] = 0
    namespace: str | None = None


class WatchLookupRequest(Struct, kw_only=True):
    key: Key
    flags: Annotated[int, Meta(ge=0)] = 0
    namespace: str | None = None


class WatchCancelRequest(Struct, kw_only=True):
    matchtag: Matchtag


class NamespaceCreateRequest(Struct, kw_only=True):
    namespace: Annotated[str, Meta(min_length=1, max_length=255, pattern=r"^[^\x00/]+$")]
    owner: int = -1
    flags: Annotated[int, Meta(ge=0)] = 0


class NamespaceRequest(Struct, kw_only=True):
    namespace: Annotated[str, Meta(min_length=1, max_length=255)]


class _Watcher:
    """A kvs-watch.lookup: answers {namespace, key, val: tree object}."""
    __slots__ = ("msg", "append", "sent", "once", "uniq", "last")

    def __init__(self, msg, append: bool, once: bool = False, uniq: bool = False):
        self.msg = msg
        self.append = append
        self.sent = 0  # entries already sent (append mode)
        self.once = once    # no FLUX_KVS_WATCH: one answer (once the key exists)
        self.uniq = uniq    # FLUX_KVS_WATCH_UNIQ: only a value that differs
        self.last = None


class KVSService(KVSRoot, KVSTree, Service):
    """The tree (kvs_tree.py) served: its RPCs, watches and namespaces (the root's
    RPCs: kvs_root.py)."""

    name = "kvs"
    busy = "it holds the instance's data, which would be lost with it"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.root: Dir = Dir()
        self.roots: dict[str, Dir] = {PRIMARY: self.root}
        self.ns_info: dict[str, dict] = {}      # namespace -> {owner, flags}, but primary
        self.version = 0
        self.watchers: dict[tuple[str, str], list[_Watcher]] = {}
        self.version_waits: list = []   # kvs.wait-version (kvs_root.py)
        self.store = Store(ctx.attrs.get("rundir"), durable_path=statedir.db_path(ctx.attrs))
        if self.store.durable:
            self._load()
        # Flux's content service and its backing store (by default in the run
        # directory) answer checkpoint-get
        self.aliases = ("content", "content-backing", "kvs-watch")
        self.started = time.time()   # when the empty KVS of a run directory began

    @property
    def durable(self) -> bool:
        """Whether the KVS outlives the instance (a state directory)."""
        return self.store.durable

    def stop(self) -> None:
        super().stop()
        self.store.close()

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
        try:   # as its watcher may read it (a link into a namespace not theirs: EPERM)
            value = self._node(key, self.roots[ns], w.msg)
        except FluxliteError as exc:
            if w.sent or not w.append or isinstance(exc, PermissionDenied):
                self._end_watch(wkey, w, exc)
            return
        if w.append:
            if isinstance(value, Log):  # from disk, a batch per response
                if w.sent and w.sent >= value.n:
                    return
                while True:
                    new = self.store.read(value, w.sent, READ_BATCH)
                    w.sent += len(new)
                    self._answer(wkey, w, new)
                    if w.sent >= value.n or w.msg is None:
                        return
            if isinstance(value, str) and len(value) >= w.sent:
                # text: what was added since the last answer, as Flux's raw appends
                new, w.sent = value[w.sent:], len(value)
                if new:
                    self._answer(wkey, w, [new])
                return
            if not isinstance(value, list):
                self._drop_watch(wkey, w)
                self.respond_exception(w.msg, UsageError(f"{key!r} is not an eventlog"))
                return
            new = value[w.sent:]
            if not new and w.sent:
                return
            w.sent = len(value)
            self._answer(wkey, w, new)
        else:
            obj = self._treeobj(value)
            if w.uniq and obj == w.last:
                return
            w.last = obj if w.uniq else None
            self._answer(wkey, w, obj, isinstance(value, Log))

    def _answer(self, wkey: tuple[str, str], w: _Watcher, got, log: bool = False) -> None:
        """One answer to a watcher: new entries (append) or a tree object (`log`: a
        log's RFC 18 lines, protocol/kvs.py); a one-time kvs-watch.lookup (no
        FLUX_KVS_WATCH) then ends."""
        answer = {"namespace": wkey[0], "key": wkey[1],
                  "val": treeobj.encode(got, log=True) if w.append else got}
        if w.append or log:
            answer["log"] = True
        self.respond(w.msg, answer)
        if w.once:
            msg = w.msg
            self._drop_watch(wkey, w)
            w.msg = None
            if msg.flags & STREAMING:
                self.end_stream(msg)

    def _end_watch(self, wkey: tuple[str, str], w: _Watcher, exc: FluxliteError) -> None:
        """The key is gone (the stream ends) or can no longer be read (its error)."""
        if w.msg is None:
            return
        self._drop_watch(wkey, w)
        if isinstance(exc, NotFound):
            self.end_stream(w.msg)
        else:
            self.respond_exception(w.msg, exc)

    def _drop_watch(self, wkey: tuple[str, str], w: _Watcher) -> None:
        lst = self.watchers.get(wkey)
        if lst and w in lst:
            lst.remove(w)
            if not lst:
                del self.watchers[wkey]
        self.untrack_stream(w.msg)

    # ---------------------------------------------------------- namespaces
    def _ns(self, msg, namespace: str | None) -> tuple[str, Dir]:
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
        self.roots[req.namespace], self.ns_info[req.namespace] = Dir(), info
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
        self.store.drop(stored_in(root))
        self._record([(row_name(name, k), UNLINK) for k in root] + [(NS_ROW + name, UNLINK)])
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
        self.version_reached(self.version)

    # ---------------------------------------------------------------- RPCs
    @handler("kvs.lookup", schema=LookupRequest, roles=ANY)
    def lookup_rpc(self, msg, req):
        """Flux's kvs.lookup: the key's RFC 11 tree object (kvs_treeobj.py); a
        directory with FLUX_KVS_READDIR, else EISDIR; with READLINK or TREEOBJ the
        last component's own object (a link not followed; READLINK: EINVAL if it is
        not a link)."""
        guest = req.namespace
        prefix = self.in_guest(msg, req)   # Flux's job-ID (kvs_root.py)
        if prefix:   # (the caller's own rights still decide where a link may lead)
            return self.from_guest(prefix, {**self.lookup_rpc(msg, req), "namespace": guest})
        ns, root = self._ns(msg, req.namespace)
        whole = req.key.strip(".") == ""
        if req.flags & (treeobj.READLINK | treeobj.TREEOBJ) and not whole:
            node = self._walk(req.key, root, msg, follow_last=False)
            if req.flags & treeobj.READLINK and not isinstance(node, Symlink):
                raise UsageError(f"key {req.key!r} is not a symbolic link")
            return {"namespace": ns, "val": self._treeobj(node)}
        if whole or req.flags & treeobj.READDIR:
            try:
                node = root if whole else self._walk(req.key, root, msg)
            except NotFound:
                raise NotFound(f"directory {req.key!r} not found") from None
            if not isinstance(node, Dir):
                raise NotADirectory(f"{req.key!r} is not a directory: it holds a value "
                                    "(read it with kvs get)")
            data = {name: self._treeobj(v) for name, v in node.items()}
            return {"namespace": ns, "val": {"ver": 1, "type": "dir", "data": data}}
        node = self._node(req.key, root, msg)
        answer = {"namespace": ns, "val": self._treeobj(node)}
        if isinstance(node, Log):
            answer["log"] = True      # RFC 18 lines (protocol/kvs.py)
        return answer

    def _treeobj(self, node) -> dict:
        if isinstance(node, Dir):
            return treeobj.empty_dir()
        if isinstance(node, Symlink):
            return treeobj.symlink(node.target, node.namespace)
        return treeobj.encode(self._value(node), isinstance(node, Log))

    @handler("kvs.commit", schema=CommitRequest, max_payload=BULK_PAYLOAD, roles=ANY)
    def commit_rpc(self, msg, req):
        """fluxlite's operations, or Flux's ({key, flags, dirent}: kvs_treeobj.py).
        The primary namespace is the instance owner's to write; another namespace
        its owner's too (a job's guest namespace: the job's owner's, kvs_root.py)."""
        guest = self.in_guest(msg, req)
        ns, _ = self._ns(msg, req.namespace)
        if ns == PRIMARY and not guest and not self.is_owner(msg):
            raise PermissionDenied("kvs.commit: permission denied (only the instance owner "
                                   "may write the primary namespace)")
        self.store.check_room()
        ops = [treeobj.op(o) if isinstance(o, dict) and "dirent" in o else o
               for o in req.ops]
        for op in ops:
            if isinstance(op, dict):
                treeobj.check_storable(op)
        version = self.commit(ops, ns)
        return {"version": version, "rootseq": version}

    @handler("kvs-watch.lookup", schema=WatchLookupRequest, streaming=True, roles=ANY)
    def watch_lookup(self, msg, req):
        """Flux's kvs-watch.lookup: with FLUX_KVS_WATCH, the key's tree object now and
        on every change (WATCH_APPEND: the entries so far, then only the new ones;
        WATCH_UNIQ: only a changed value; WATCH_FULL: a change of a directory above
        it too, as every watch here); without it, one answer; WAITCREATE waits for
        a missing key instead of ENOENT.  kvs-watch.cancel {matchtag} ends it."""
        flags = req.flags
        bad = flags & ~(kvsflags.WATCH | kvsflags.WAITCREATE | kvsflags.WATCH_APPEND
                        | kvsflags.WATCH_FULL | kvsflags.WATCH_UNIQ)
        if bad:
            raise UsageError(f"kvs-watch.lookup: flags {bad:#x} are not supported here "
                             "(allowed: FLUX_KVS_WATCH, WAITCREATE, WATCH_APPEND, "
                             "WATCH_FULL, WATCH_UNIQ)")
        if flags & kvsflags.WATCH and not msg.flags & STREAMING:
            raise UsageError("kvs-watch.lookup: FLUX_KVS_WATCH needs a streaming request")
        guest = self.in_guest(msg, req)   # Flux's job-ID (kvs_root.py)
        ns, root = self._ns(None if guest else msg, req.namespace)
        wkey = (ns, ".".join(split_key(req.key)))
        w = _Watcher(msg, bool(flags & kvsflags.WATCH_APPEND),
                     once=not flags & kvsflags.WATCH, uniq=bool(flags & kvsflags.WATCH_UNIQ))
        if not flags & kvsflags.WAITCREATE:
            self._node(wkey[1], root, msg)  # ENOENT or EISDIR now, not a silent wait
        self.watchers.setdefault(wkey, []).append(w)
        self.track_stream(msg, lambda: self._drop_watch(wkey, w))
        try:
            self._node(wkey[1], root)
        except FluxliteError:
            return
        self._send_watch(wkey, w)

    @handler("kvs-watch.cancel", schema=WatchCancelRequest, roles=ANY)
    def watch_cancel(self, msg, req):
        """End the caller's kvs-watch.lookup of that matchtag (its stream ends with
        ENODATA, as Flux's)."""
        for wkey in list(self.watchers):
            for w in list(self.watchers.get(wkey, ())):
                if w.msg.matchtag == req.matchtag and w.msg.route == msg.route:
                    self._drop_watch(wkey, w)
                    self.end_stream(w.msg)
        return {}     # (not sent where the request wants no response, as Flux's)

    @handler("kvs.stats", schema=None, roles=ANY)
    def stats(self, msg, req):
        """How much the KVS holds: its version and the number of open watches."""
        return {"version": self.version,
                "watchers": sum(len(w) for w in self.watchers.values()),
                "store_entries": self.store.count(),
                "namespaces": len(self.roots)}

    @handler("content.checkpoint-get", schema=None)
    def checkpoint_get(self, msg, req):
        """The checkpoint a restart would start from: {value: [checkpoint]}."""
        if not self.store.durable:   # the run directory's: the KVS as it began
            return {"value": [{"version": 1, "rootref": "rundir:kvs-version-0",
                               "sequence": 0, "timestamp": self.started}]}
        # nothing synced since the start yet: a restart would begin from the KVS
        # as the state directory held it when this instance started
        version, when = self.store.checkpoint or (self.store.written, self.started)
        return {"value": [{"version": 1, "rootref": f"statedir:kvs-version-{version}",
                           "sequence": version, "timestamp": when}]}

    @handler("content-backing.checkpoint-get", schema=None)
    def backing_checkpoint_get(self, msg, req):
        return self.checkpoint_get(msg, req)

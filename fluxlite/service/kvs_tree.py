"""The KVS's trees, one per namespace, as rank 0 holds them: directories, values
and symbolic links; reading a key (links followed); a commit applied all or
nothing with an undo log; and a tree rebuilt from a durable store.

`KVSTree` is the part of the `kvs` service (kvs.py) that needs no messages:
kvs.py adds the RPCs, watches and namespaces' owners on top of it.  Maps and
lists made by appends live in the store (kvs_store.py); the tree holds a small
node for each.
"""

from __future__ import annotations

import functools
import gc
import json
import sys

from ..errors import (
    FluxliteError,
    IsADirectory,
    NotFound,
    ProtocolError,
    TooManyLinks,
    UsageError,
)
from .kvs_store import MKDIR, UNLINK, Blob, Log, Store, Symlink

_MISSING = object()
PRIMARY = "primary"
MAX_LINKS = 16          # symbolic links one lookup follows before ELOOP (a cycle)
NS_ROW = "\0ns\0"     # a state database row of a namespace (no key's name starts so)


def row_name(ns: str, key: str) -> str:
    """The state database's name for `key` in namespace `ns`."""
    return key if ns == PRIMARY else f"{NS_ROW}{ns}\0{key}"


class Dir(dict):
    """A directory node (a value is never a dict: maps are Blobs in the store)."""
    __slots__ = ()


def stored_in(node) -> list:
    """The values in the store that a value is, or that are below a directory."""
    if isinstance(node, (Log, Blob)):
        return [node]
    if not isinstance(node, Dir):
        return []
    out, stack = [], [node]
    while stack:
        for v in stack.pop().values():
            if isinstance(v, (Log, Blob)):
                out.append(v)
            elif isinstance(v, Dir):
                stack.append(v)
    return out


def _item(text: str):
    """A text appended to a list: its JSON value if it parses (NaN and Infinity have
    no JSON text to read back: strings), else the string."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError:
        return text


def _no_constant(name: str):
    raise ValueError(name)


def split_key(key: str) -> tuple[str, ...]:
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


def _record(changes: list | None, *entries) -> None:
    """Note rows for the state database (None: the store is not durable)."""
    if changes is not None:
        changes.extend(entries)


def _roll_back(undo: list) -> None:
    """Put back what a failed commit changed in the tree, newest first."""
    for parent, leaf, old in reversed(undo):
        if old is _MISSING:
            parent.pop(leaf, None)
        else:
            parent[leaf] = old


class KVSTree:
    """The trees of every namespace (`roots`, "primary" in `root`), their version,
    and the store their values live in.  The service sets these up and provides
    `_ns(msg, namespace)` (a namespace's tree for a requester), which a symbolic
    link into another namespace goes through; `_notify(ns, key)` is told of every
    key a commit changed."""

    root: Dir
    roots: dict[str, Dir]
    ns_info: dict[str, dict]
    version: int
    store: Store

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
                    self.roots.setdefault(name, Dir())
                    continue
                root = self.roots.setdefault(name, Dir())
            parts = key.split(".")
            parent = root
            for part in parts[:-1]:
                nxt = parent.get(part)
                if nxt is None:
                    nxt = parent[intern(part)] = Dir()
                parent = nxt
            if node is MKDIR:
                parent.setdefault(intern(parts[-1]), Dir())
            else:
                parent[intern(parts[-1])] = node

    def _keep(self, value):
        """How the tree holds a value that is set: a map goes to the store."""
        return self.store.put(value) if isinstance(value, dict) else value

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

    def _node(self, key: str, root: Dir | None = None, msg=None):
        """What the tree holds at `key` (a Log for a list on disk); ENOENT, EISDIR."""
        node = self._walk(key, self.root if root is None else root, msg)
        if isinstance(node, Dir):
            raise IsADirectory(f"key {key!r} is a directory, not a value: read a key "
                               f"below it ({key}.NAME) or list it with kvs ls")
        return node

    def _walk(self, key: str, root: Dir, msg=None, follow_last: bool = True,
              links: list | None = None):
        """What the tree holds at `key`, a directory too, following symbolic links
        on the way (the last one as well unless `follow_last`); ENOENT, ELOOP.  A
        link into another namespace is followed only for a user who may use it."""
        links = [0] if links is None else links
        node, parts = root, split_key(key)
        for i, part in enumerate(parts):
            if not isinstance(node, Dir) or part not in node:
                raise NotFound(f"key {key!r} not found")
            node = node[part]
            while isinstance(node, Symlink) and (follow_last or i < len(parts) - 1):
                links[0] += 1
                if links[0] > MAX_LINKS:
                    raise TooManyLinks(f"key {key!r}: more than {MAX_LINKS} symbolic "
                                       "links on the way (a cycle?)")
                there = root if node.namespace is None else self._ns(msg, node.namespace)[1]
                node = self._walk(node.target, there, msg, True, links)
        return node

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
        undo: list = []
        touched: list[str] = []
        changes: list | None = [] if self.store.durable else None   # for the state database
        try:
            for parts, op in plan:
                if self._apply(parts, op, namespace, undo, changes):
                    touched.append(".".join(parts))
        except Exception:
            self.store.finish(False)
            _roll_back(undo)
            raise
        self.version += 1
        self.store.finish(True, changes, self.version)
        for key in touched:
            self._notify(namespace, key)
        return self.version

    def _apply(self, parts: tuple[str, ...], op: dict, ns: str, undo: list,
               changes: list | None) -> bool:
        """One operation of a commit; False when it changed nothing (an unlink of
        what is not there)."""
        parent, leaf = self._parent(parts, create=not op.get("unlink"), undo=undo,
                                    changes=changes, ns=ns)
        if parent is None:
            return False
        old = parent.get(leaf, _MISSING)
        row = row_name(ns, ".".join(parts))
        if op.get("unlink"):
            if old is _MISSING:
                return False
            undo.append((parent, leaf, old))
            del parent[leaf]
            self.store.drop(stored_in(old))
            _record(changes, (row, UNLINK))
            if op.get("prune"):
                self._prune(parts, undo, self.roots[ns])
        elif op.get("mkdir"):
            self._replace(parent, leaf, old, Dir(), undo)   # empty, whatever was there
            _record(changes, *([(row, UNLINK)] if old is not _MISSING else []), (row, MKDIR))
        elif "append" in op:
            if op.get("text"):
                self._append_text(parent, leaf, old, op["append"], undo, ".".join(parts))
            else:
                self._append(parent, leaf, old, op["append"], undo, ".".join(parts))
            if parent[leaf] is not old:
                _record(changes, (row, parent[leaf]))   # a new log
        else:
            # a value replaces whatever was there, a directory too (as Flux's)
            new = (Symlink(op["symlink"], op.get("target_namespace")) if "symlink" in op
                   else self._keep(op["value"]))
            self._replace(parent, leaf, old, new, undo)
            _record(changes, *([(row, UNLINK)] if isinstance(old, Dir) else []), (row, new))
        return True

    def _replace(self, parent: Dir, leaf: str, old, new, undo: list) -> None:
        """Put `new` where `old` was (or nothing was), its stored values dropped."""
        undo.append((parent, leaf, old))
        parent[leaf] = new
        self.store.drop(stored_in(old))

    def _prune(self, parts: tuple[str, ...], undo: list, root: Dir) -> None:
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

    def _append(self, parent: Dir, leaf: str, old, entries: list, undo: list,
                key: str) -> None:
        """Extend the log in the store (a failed commit's store.finish(False) cuts it
        back), or start one: from nothing, or from a list that was set as a value.
        A string is extended by the text (a JSON value's compact text), as Flux's
        raw values are; a directory or another value is no list to extend."""
        if isinstance(old, Dir):
            raise _is_a_directory(key)
        if isinstance(old, str):   # text appended to text, as Flux's raw values
            undo.append((parent, leaf, old))
            parent[leaf] = old + "".join(e if isinstance(e, str) else
                                         json.dumps(e, separators=(",", ":"))
                                         for e in entries)
            return
        if old is not _MISSING and not isinstance(old, (list, Log)):
            raise UsageError(f"cannot append to {key!r}: it is not a list")
        if isinstance(old, Log):
            self.store.append(old, entries)
            return
        undo.append((parent, leaf, old))
        log = parent[leaf] = self.store.new_log()
        if old is not _MISSING:
            self.store.append(log, old)
        self.store.append(log, entries)

    def _append_text(self, parent: Dir, leaf: str, old, texts: list, undo: list,
                     key: str) -> None:
        """Flux's append of bytes (`{key, append: [TEXT...], text: true}`, `kvs put
        -A`): a key not set becomes the text, a string or another value (its compact
        JSON text, as Flux's values are text) gets it at its end; a list or log takes
        each text as an item (JSON if it parses, as `kvs put` reads a value)."""
        if isinstance(old, (list, Log)):
            self._append(parent, leaf, old, [_item(t) for t in texts], undo, key)
            return
        if isinstance(old, Dir):
            raise _is_a_directory(key)
        if isinstance(old, Symlink):
            raise UsageError(f"cannot append to {key!r}: it is a symbolic link")
        added = "".join(texts)
        if old is _MISSING:
            new = added
        elif isinstance(old, str):
            new = old + added
        elif isinstance(old, (bytes, bytearray)):   # bytes that are no text stay bytes
            new = bytes(old) + added.encode()
        else:
            new = json.dumps(self._value(old), separators=(",", ":")) + added
        self._replace(parent, leaf, old, new, undo)

    def append(self, key: str, *entries) -> None:
        self.commit([{"key": key, "append": list(entries)}])

    @staticmethod
    def _check_op(op) -> tuple[tuple[str, ...], dict]:
        """An operation's shape (the tree is checked as it is applied: an append to a
        directory is refused, and the undo log takes back what came before it)."""
        if not isinstance(op, dict) or "key" not in op:
            raise ProtocolError("kvs.commit: each operation must be a map with a 'key'")
        parts = split_key(op["key"])
        if not (op.get("unlink") or op.get("mkdir") or "value" in op or "append" in op
                or "symlink" in op):
            raise ProtocolError(f"kvs.commit: operation on {op['key']!r} has no value, "
                                "append, mkdir, symlink or unlink")
        if "symlink" in op:
            split_key(op["symlink"])       # a target is a key
            ns = op.get("target_namespace")
            if ns is not None and (not isinstance(ns, str) or not ns):
                raise ProtocolError("kvs.commit: a symlink's target_namespace must be a "
                                    "namespace's name")
        if "append" in op and not isinstance(op["append"], list):
            raise ProtocolError("kvs.commit: 'append' must be a list")
        if op.get("text") and not all(isinstance(t, str) for t in op.get("append", ())):
            raise ProtocolError("kvs.commit: a text append's items must be strings")
        return parts, op

    def _parent(self, parts: tuple[str, ...], create: bool, undo: list | None = None,
                changes: list | None = None, ns: str = PRIMARY):
        """The directory holding `parts[-1]` (None if absent and not created).  As
        in Flux, a write below a value replaces that value with a directory."""
        node = self.roots[ns]
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None or not isinstance(nxt, Dir):
                if not create:
                    return None, parts[-1]
                node[part] = Dir()
                if undo is not None:
                    undo.append((node, part, _MISSING if nxt is None else nxt))
                if nxt is not None:
                    self.store.drop(stored_in(nxt))
                    if changes is not None:
                        changes.append((row_name(ns, ".".join(parts[:i + 1])), UNLINK))
                nxt = node[part]
            node = nxt
        return node, parts[-1]

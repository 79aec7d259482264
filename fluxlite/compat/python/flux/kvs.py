"""`flux.kvs`: Flux's KVS API over fluxlite's kvs service, by Flux's topics
(kvs.lookup, kvs.commit, kvs-watch.lookup and kvs-watch.cancel).

Writes are staged in a transaction (KVSTxn; the module functions use one per
handle) and sent as one kvs.commit: all of it or nothing.  A value is what
json.dumps accepts, or bytes (raw); a read gives raw bytes back decoded as
Flux does (JSON if it parses, else text, else the bytes).  KVSDir reads a
directory and stages writes below it.  Every call takes Flux's `namespace`
(None: $FLUX_KVS_NAMESPACE, else the primary one), sent with the request;
namespace_create, _remove and _list are kvs.namespace-create, -remove and
-list.  Symbolic links are Flux's (reads follow them).  kvs_checkpoint_lookup
asks Flux's content.checkpoint-get (an instance with a state directory keeps
one; else ENOSYS, as Flux without a backing store)."""

from __future__ import annotations

import errno
import json
from collections import abc

from fluxlite.errors import EndOfStream, IsADirectory, NotFound, UsageError
from fluxlite.protocol import kvs as lookup
from fluxlite.util.compat import kvs_namespace

from .future import Future, FutureState

__all__ = ["get", "put", "put_mkdir", "put_unlink", "put_symlink", "commit", "commit_async",
           "exists", "isdir", "get_dir", "get_key_direct", "KVSDir", "KVSTxn", "walk",
           "join", "kvs_watch_async", "KVSWatchFuture", "namespace_create",
           "namespace_remove", "namespace_list"]


def _h(flux_handle):
    from . import _handle
    return _handle(flux_handle)


def _with_ns(payload: dict, namespace) -> dict:
    """A request's payload, naming the namespace given, else the one the environment
    names (Flux's FLUX_KVS_NAMESPACE: a job's tasks work in its guest namespace)."""
    if namespace is None:
        namespace = kvs_namespace()
    if namespace is not None:
        if not isinstance(namespace, str) or not namespace:
            raise UsageError(f"invalid KVS namespace {namespace!r}: a non-empty name")
        payload["namespace"] = namespace
    return payload


def _check_key(key) -> str:
    if not isinstance(key, str) or not key:
        raise UsageError(f"invalid KVS key {key!r}: a non-empty dotted path")
    return key


def _decode(value):
    """A stored value as Flux returns it: raw bytes are JSON if they parse, else
    text if they are UTF-8, else the bytes."""
    if not isinstance(value, (bytes, bytearray)):
        return value
    try:
        text = bytes(value).decode("utf-8")
    except UnicodeDecodeError:
        return bytes(value)
    try:
        return json.loads(text)
    except ValueError:
        return text


def get_key_direct(flux_handle, key, namespace=None):
    """The value at `key` (OSError: ENOENT if none, EISDIR for a directory)."""
    return _decode(lookup.value(_h(flux_handle).call(
        "kvs.lookup", _with_ns({"key": _check_key(key)}, namespace))))


def _kind(flux_handle, key, namespace) -> str | None:
    """'value', 'dir' or None (absent)."""
    try:
        get_key_direct(flux_handle, key, namespace)
        return "value"
    except NotFound:
        return None
    except IsADirectory:
        return "dir"


def exists(flux_handle, key, namespace=None) -> bool:
    return _kind(flux_handle, key, namespace) is not None


def isdir(flux_handle, key, namespace=None) -> bool:
    return _kind(flux_handle, key, namespace) == "dir"


def get_dir(flux_handle, key=".", namespace=None, _kvstxn=None) -> KVSDir:
    return KVSDir(flux_handle, key, namespace=namespace, _kvstxn=_kvstxn)


def get(flux_handle, key, namespace=None, _kvstxn=None):
    """The value at `key`, or a KVSDir if it is a directory."""
    try:
        return get_key_direct(flux_handle, key, namespace)
    except IsADirectory:
        pass
    return get_dir(flux_handle, key, namespace=namespace, _kvstxn=_kvstxn)


class KVSTxn:
    """Staged KVS changes, relative to `path`, sent by commit() as one kvs.commit;
    `with KVSTxn(h) as txn:` commits on exit."""

    def __init__(self, flux_handle=None, path: str = ".", namespace=None):
        _with_ns({}, namespace)
        self.fhdl, self.namespace = flux_handle, namespace
        self.path = "" if path in ("", ".") else path.rstrip(".") + "."
        self.ops: list[dict] = []

    def _key(self, key) -> str:
        return self.path + _check_key(key)

    def put(self, key, value, raw: bool = False) -> None:
        if raw:
            if not isinstance(value, bytes):
                value = value.encode("utf-8")
        else:
            try:
                json.dumps(value)
            except TypeError:
                if not isinstance(value, bytes):
                    raise
        self.ops.append({"key": self._key(key), "value": value})

    def mkdir(self, key) -> None:
        self.ops.append({"key": self._key(key), "mkdir": True})

    def unlink(self, key) -> None:
        self.ops.append({"key": self._key(key), "unlink": True})

    def symlink(self, key, target) -> None:
        """Make `key` a symbolic link to the key `target` (in the same namespace)."""
        self.ops.append({"key": self._key(key), "symlink": _check_key(target)})

    def clear(self) -> None:
        self.ops = []

    def commit_async(self, flags: int = 0, namespace=None) -> Future:
        """Send the staged changes (flags are accepted; every fluxlite commit is
        applied whole and at once) to `namespace`, else the transaction's; the
        future's get() waits for the answer."""
        ops, self.ops = self.ops, []
        if not ops:
            state = FutureState(self.fhdl)
            state.fulfill(None)
            return Future(state)
        return self.fhdl.rpc("kvs.commit", _with_ns(
            {"ops": ops}, namespace if namespace is not None else self.namespace))

    def commit(self, flags: int = 0) -> None:
        self.commit_async(flags).get()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.commit()
        return False


def _txn(flux_handle, _kvstxn) -> KVSTxn:
    """The transaction a module call stages into: the one given, else the
    handle's own."""
    if _kvstxn is not None:
        return _kvstxn
    txn = getattr(flux_handle, "_kvs_txn", None)
    if txn is None:
        txn = KVSTxn(flux_handle)
        try:
            flux_handle._kvs_txn = txn
        except AttributeError:
            pass
    return txn


def put(flux_handle, key, value, _kvstxn=None, raw: bool = False) -> None:
    _txn(flux_handle, _kvstxn).put(key, value, raw=raw)


def put_mkdir(flux_handle, key, _kvstxn=None) -> None:
    _txn(flux_handle, _kvstxn).mkdir(key)


def put_unlink(flux_handle, key, _kvstxn=None) -> None:
    _txn(flux_handle, _kvstxn).unlink(key)


def put_symlink(flux_handle, key, target, _kvstxn=None) -> None:
    _txn(flux_handle, _kvstxn).symlink(key, target)


def commit_async(flux_handle, flags: int = 0, namespace=None, _kvstxn=None) -> Future:
    return _txn(flux_handle, _kvstxn).commit_async(flags, namespace)


def commit(flux_handle, flags: int = 0, namespace=None, _kvstxn=None) -> None:
    commit_async(flux_handle, flags, namespace, _kvstxn).get()


class KVSDir(abc.MutableMapping):
    """A KVS directory: items are its keys (a subdirectory is a KVSDir sharing
    this one's transaction), assignments and deletions are staged until
    commit() (or the end of a `with` block)."""

    def __init__(self, flux_handle=None, path: str = ".", handle=None, namespace=None,
                 _kvstxn=None):
        if flux_handle is None:
            raise ValueError("flux_handle must be a valid Flux object")
        if path == "":
            raise UsageError("invalid KVS directory '': use '.' for the root")
        self.fhdl, self.path, self.namespace = flux_handle, path, namespace
        self._path = "" if path == "." else path.rstrip(".") + "."
        self._entries()     # ENOENT now for a directory that is not there
        self.kvstxn = (_kvstxn if _kvstxn is not None
                       else KVSTxn(flux_handle, namespace=namespace))

    def _entries(self) -> list[str]:
        try:
            return lookup.entries(_h(self.fhdl).call("kvs.lookup", _with_ns(
                {"key": self.path, "flags": lookup.READDIR}, self.namespace)))[0]
        except NotFound:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory: KVS "
                                    f"directory {self.path!r}") from None

    def commit(self, flags: int = 0) -> None:
        try:
            self.kvstxn.commit(flags)
        finally:
            self.kvstxn.clear()

    def commit_async(self, flags: int = 0) -> Future:
        return self.kvstxn.commit_async(flags)

    def key_at(self, key: str) -> str:
        return self._path + key

    def exists(self, name: str) -> bool:
        return exists(self.fhdl, self.key_at(name), self.namespace)

    def __getitem__(self, key):
        try:
            return get(self.fhdl, self.key_at(key), self.namespace, _kvstxn=self.kvstxn)
        except OSError:
            raise KeyError(f"{key} not found under directory {self.key_at('')}") from None

    def __setitem__(self, key, value) -> None:
        self.kvstxn.put(self.key_at(key), value)

    def __delitem__(self, key) -> None:
        self.kvstxn.unlink(self.key_at(key))

    def __iter__(self):
        return iter([e.rstrip(".") for e in self._entries()])

    def __len__(self) -> int:
        return len(self._entries())

    def fill(self, contents) -> None:
        if contents is None:
            raise ValueError("contents must be non-None")
        try:
            for key, value in contents.items():
                self[key] = value
        finally:
            self.commit()

    def mkdir(self, key: str, contents=None) -> None:
        self.kvstxn.mkdir(self.key_at(key))
        self.commit()
        if contents is not None:
            KVSDir(self.fhdl, self.key_at(key), namespace=self.namespace).fill(contents)

    def files(self):
        return (e for e in self._entries() if not e.endswith("."))

    def directories(self):
        return (e.rstrip(".") for e in self._entries() if e.endswith("."))

    def list_all(self) -> tuple[list, list]:
        entries = self._entries()
        return ([e for e in entries if not e.endswith(".")],
                [e.rstrip(".") for e in entries if e.endswith(".")])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.commit()
        return False


def join(*args) -> str:
    return ".".join(a for a in args if a)


def _walk(kvsdir: KVSDir, here: str, topdown: bool):
    if topdown:
        yield here, kvsdir.directories(), kvsdir.files()
    for name in kvsdir.directories():
        yield from _walk(get_dir(kvsdir.fhdl, kvsdir.key_at(name), kvsdir.namespace),
                         join(here, name),
                         topdown)
    if not topdown:
        yield here, kvsdir.directories(), kvsdir.files()


def walk(directory, topdown: bool = False, flux_handle=None, namespace=None):
    """(path, directories, files) for a directory and each below it, as os.walk."""
    if not isinstance(directory, KVSDir):
        if flux_handle is None:
            raise ValueError("If directory is a key, flux_handle must be specified")
        directory = get_dir(flux_handle, directory, namespace=namespace)
    return _walk(directory, "", topdown)


class KVSWatchFuture(Future):
    """A watched key's values: get() is the next one (autoreset), None once the
    watch ends."""

    def __init__(self, state, pending, handle):
        super().__init__(state)
        self._pending, self._handle = pending, handle

    def get(self, autoreset: bool = True):
        try:
            value = self._result()
        except EndOfStream:
            return None
        if autoreset:
            self.reset()
        return value

    def cancel(self, stop: bool = False) -> None:
        self._cancelled = True
        if not self._pending.done:
            self._handle.send("kvs-watch.cancel", {"matchtag": self._pending.matchtag})


def kvs_watch_async(flux_handle, key, namespace=None, waitcreate: bool = False,
                    uniq: bool = False, append: bool = False, full: bool = False):
    """Watch `key`: its value now (or once made, with waitcreate) and after each
    change (uniq: only changes of value; append: the entries appended).  When
    the key is removed the watch ends: get() is None, or with `full`
    OSError(ENOENT), as Flux's full watch reports a directory above it removed."""
    from . import Flux
    fh = flux_handle if isinstance(flux_handle, Flux) else Flux(handle=flux_handle)
    h = fh.handle
    state = FutureState(fh)
    state.streaming = state.reactor_only = True
    flags = (lookup.WATCH | (lookup.WAITCREATE if waitcreate else 0)
             | (lookup.WATCH_APPEND if append else 0) | (lookup.WATCH_UNIQ if uniq else 0)
             | (lookup.WATCH_FULL if full else 0))
    pending = h.rpc("kvs-watch.lookup", _with_ns({"key": _check_key(key), "flags": flags},
                                                 namespace), streaming=True)

    def on_response(msg):
        if msg.errnum:
            state.ended = True
            errnum, errstr = msg.errnum, msg.errstr
            if full and errnum == errno.ENODATA and not future._cancelled:
                # the key went away (it, or a directory above it): a full watch
                # says so as Flux's does
                errnum, errstr = errno.ENOENT, f"key {key!r} was removed"
            state.fulfill(None, errnum, errstr)
            return
        value = lookup.value(msg.payload)
        for entry in value if append else [value]:
            state.fulfill(_decode(entry))

    pending.on_response = on_response
    future = KVSWatchFuture(state, pending, h)
    future._cancelled = False
    return future


def namespace_create(flux_handle, namespace, owner: int = -1, flags: int = 0) -> None:
    """Make a namespace owned by user `owner` (-1: the instance owner)."""
    _h(flux_handle).call("kvs.namespace-create", {"namespace": namespace,
                                                  "owner": owner, "flags": flags})


def namespace_remove(flux_handle, namespace) -> None:
    """Remove a namespace and every key in it."""
    _h(flux_handle).call("kvs.namespace-remove", {"namespace": namespace})


def namespace_list(flux_handle) -> list[str]:
    """The namespaces' names, primary first."""
    return [ns["namespace"] for ns in
            _h(flux_handle).call("kvs.namespace-list")["namespaces"]]


def kvs_checkpoint_lookup(flux_handle, cache_bypass: bool = False) -> list[dict]:
    """The KVS checkpoints (content.checkpoint-get; with cache_bypass, straight from
    the backing store): a list of {version, rootref, sequence, timestamp}.  Only an
    instance with a state directory keeps one (else OSError ENOSYS, as Flux without
    a backing store)."""
    topic = "content-backing.checkpoint-get" if cache_bypass else "content.checkpoint-get"
    value = _h(flux_handle).call(topic)["value"]
    return [value] if isinstance(value, dict) else value


def __getattr__(name):
    from . import missing
    raise missing("flux.kvs", name)

"""`fluxlite kvs get|put|ls|dir|unlink|mkdir|link|readlink|namespace|eventlog ...`:
the instance's key-value store from the shell, as flux-kvs(1).  `-N NAME` names
the namespace a command works in; without it, as Flux's, FLUXLITE_KVS_NAMESPACE or
FLUX_KVS_NAMESPACE does (a job's shell sets it to the job's guest namespace), else
the primary one."""

from __future__ import annotations

import json

import click

from ..errors import NotFound, UsageError
from ..protocol.kvs import READDIR, READLINK, TREEOBJ, WAITCREATE, WATCH, WATCH_APPEND, entries
from ..protocol.kvs import value as _value
from .common import HELP, echo_value, fsd_timeout, handle, kvs_namespace_option


@click.group(context_settings=HELP)
def kvs():
    """Read and write the key-value store."""


_namespace = kvs_namespace_option()


def _in(namespace: str | None, payload: dict) -> dict:
    """A kvs request's payload, in `namespace` when one is named."""
    return payload if namespace is None else {**payload, "namespace": namespace}


def _get(h, namespace: str | None, key: str):
    """The value at KEY (kvs.lookup); IsADirectory for a directory."""
    return _value(h.call("kvs.lookup", _in(namespace, {"key": key}), nodeid=0))


def _watch(h, namespace: str | None, key: str, flags: int, timeout=None):
    """kvs-watch.lookup's answers for KEY, a stream."""
    return h.stream("kvs-watch.lookup", _in(namespace, {"key": key, "flags": flags}),
                    nodeid=0, timeout=timeout)


def _root_refs(fn):
    """-s/--sequence (print the version the commit made) and -O/-b (refused: no
    content store), as on Flux's kvs put, mkdir, link and unlink."""
    fn = click.option("-s", "--sequence", is_flag=True,
                      help="Print the KVS version the commit made.")(fn)
    fn = click.option("-O", "--treeobj-root", is_flag=True,
                      help="Print the new root as a tree object (refused: no content "
                           "store).")(fn)
    return click.option("-b", "--blobref", is_flag=True,
                        help="Print the new root's blobref (refused: no content store).")(fn)


def _commit(h, namespace, ops: list, o: dict) -> None:
    resp = h.call("kvs.commit", _in(namespace, {"ops": ops}), nodeid=0)
    if o.get("sequence"):
        click.echo(str(resp.get("rootseq", resp.get("version"))))



@kvs.command(context_settings=HELP)
@_namespace
@click.option("-w", "--watch", is_flag=True, help="Print the value now and after each change.")
@click.option("-W", "--waitcreate", is_flag=True, help="Wait for KEY to exist.")
@click.option("-c", "--count", type=click.IntRange(1), default=None, metavar="N",
              help="With --watch, stop after N values.")
@click.option("-u", "--uniq", is_flag=True,
              help="With --watch, leave out a value equal to the one before.")
@click.option("-A", "--append", is_flag=True,
              help="With --watch, only what is appended to the value.")
@click.option("-f", "--full", is_flag=True,
              help="Accepted (every change under KEY is seen here).")
@click.option("-S", "--stream", is_flag=True,
              help="Accepted (a value comes in one response here).")
@click.option("-r", "--raw", is_flag=True, help="The value as it is, without a newline.")
@click.option("-t", "--treeobj", is_flag=True, help="The RFC 11 tree object of KEY.")
@click.option("-l", "--label", is_flag=True, help="Prefix each value with 'KEY='.")
@click.option("-a", "--at", metavar="TREEOBJ", default=None,
              help="Look up relative to a tree object (refused: no content store here).")
@click.argument("keys", nargs=-1, required=True)
def get(namespace, keys, **o):
    """Print the JSON value of each KEY."""
    if o["at"] is not None:
        raise UsageError("--at: fluxlite's KVS keeps no content store to look a tree "
                         "object up in (read the key itself)")
    # --count, --uniq and --append say how to watch: without --watch, as in Flux,
    # they change nothing

    def show(key, value):
        _show_value(key, value, label=o["label"], raw=o["raw"])
    with handle() as h:
        if o["watch"] or o["waitcreate"] and not o["treeobj"]:
            if len(keys) != 1 and o["watch"]:
                raise UsageError("--watch takes one key")
            for key in keys:
                _watch_value(h, namespace, key, o, show)
            return
        for key in keys:
            try:
                if o["treeobj"]:
                    if o["waitcreate"]:
                        _watch_value(h, namespace, key, dict(o, watch=False),
                                     lambda k, v: None)
                    obj = h.call("kvs.lookup", _in(namespace, {"key": key, "flags": TREEOBJ}),
                                 nodeid=0)["val"]
                    show(key, json.dumps(obj, separators=(",", ":")))
                else:
                    show(key, _get(h, namespace, key))
            except NotFound:   # flux-kvs's words: the key, then strerror(ENOENT)
                raise NotFound(f"{key}: No such file or directory") from None


def _show_value(key: str, value, *, label: bool, raw: bool) -> None:
    prefix = f"{key}=" if label else ""
    if raw:
        click.echo(prefix + (value if isinstance(value, str) else json.dumps(value)), nl=False)
    elif label:
        click.echo(prefix + (value if isinstance(value, str) else json.dumps(value)))
    else:
        echo_value(value)


def _watch_value(h, namespace, key: str, o: dict, show) -> None:
    """--watch (or --waitcreate alone: the first value once KEY exists)."""
    flags = WATCH | (WAITCREATE if o["waitcreate"] else 0) | (WATCH_APPEND if o["append"]
                                                               else 0)
    shown, last = 0, object()
    for resp in _watch(h, namespace, key, flags):
        # --append: each appended item as it comes (the items there first, then more)
        for value in _value(resp) if o["append"] else [_value(resp)]:
            if o["uniq"] and value == last:
                continue
            last = value
            show(key, value)
            shown += 1
            if not o["watch"] or (o["count"] and shown >= o["count"]):
                return


@kvs.command(context_settings=HELP)
@_namespace
@click.option("-a", "-A", "--append", is_flag=True,
              help="Append VALUE's text to KEY, as Flux's (a key not set becomes the "
                   "text; a list or eventlog takes it as an item).")
@click.option("-j", "--json", "as_json", is_flag=True,
              help="VALUE must be JSON (an error otherwise).")
@click.option("-r", "--raw", is_flag=True,
              help="VALUE is stored as the string given ('-': read it from stdin).")
@click.option("-n", "--no-merge", is_flag=True,
              help="Accepted for Flux scripts (every commit here stands alone).")
@click.option("-t", "--treeobj", is_flag=True,
              help="VALUE is an RFC 11 tree object, stored as it is ('-': from stdin).")
@click.option("-s", "--sequence", is_flag=True,
              help="Print the KVS version the commit made.")
@click.option("-S", "--sync", is_flag=True,
              help="Accepted (a commit is on disk when it is answered here).")
@click.option("-O", "--treeobj-root", is_flag=True,
              help="Print the new root as a tree object (refused: no content store).")
@click.option("-b", "--blobref", is_flag=True,
              help="Print the new root's blobref (refused: no content store).")
@click.argument("pairs", nargs=-1, required=True, metavar="KEY=VALUE...")
def put(namespace, append, as_json, raw, no_merge, pairs, **o):
    """Set each KEY to VALUE (JSON if it parses, else a string), in one atomic commit."""
    del no_merge
    _no_content_store(o)
    if as_json and raw:
        raise UsageError("--json and --raw do not go together")
    ops = [_put_op(pair, append=append, as_json=as_json, raw=raw, treeobj=o["treeobj"])
           for pair in pairs]
    with handle() as h:
        resp = h.call("kvs.commit", _in(namespace, {"ops": ops}), nodeid=0)
    if o["sequence"]:
        click.echo(str(resp.get("rootseq", resp.get("version"))))


def _no_content_store(o: dict) -> None:
    if o.get("treeobj_root") or o.get("blobref"):
        raise UsageError("--treeobj-root and --blobref show the root of a content store, "
                         "which fluxlite's KVS has not (use --sequence for the version)")


def _put_op(pair: str, *, append: bool, as_json: bool, raw: bool, treeobj: bool) -> dict:
    import sys
    key, sep, text = pair.partition("=")
    if not sep or not key:
        raise UsageError(f"expected KEY=VALUE, got {pair!r}")
    if raw or treeobj:
        text = sys.stdin.read() if text == "-" else text
    if treeobj:
        try:
            return {"key": key, "flags": 0, "dirent": json.loads(text)}
        except ValueError:
            raise UsageError(f"{key}: --treeobj value is not JSON: {text!r}") from None
    if raw:
        value = text
    else:
        try:
            value = json.loads(text)
        except ValueError:
            if as_json:
                raise UsageError(f"{key}: value is not valid JSON: {text!r}") from None
            value = text
    if append:
        # Flux appends the bytes as typed: the text goes, the service joins it on
        return {"key": key, "append": [text], "text": True}
    return {"key": key, "value": value}


@kvs.command(context_settings=HELP)
@_namespace
@_root_refs
@click.argument("keys", nargs=-1, required=True)
def mkdir(namespace, keys, **o):
    """Make each KEY an empty directory (whatever was there goes), in one commit."""
    _no_content_store(o)
    ops = []
    for key in keys:
        if _dirkey(key) == ".":
            raise UsageError("the root directory exists already")
        ops.append({"key": key, "mkdir": True})
    with handle() as h:
        _commit(h, namespace, ops, o)


@kvs.command(context_settings=HELP)
@_namespace
@click.option("-T", "--target-namespace", metavar="NAME",
              help="TARGET is in namespace NAME (default: the link's own).")
@_root_refs
@click.argument("target")
@click.argument("linkname")
def link(namespace, target_namespace, target, linkname, **o):
    """Make LINKNAME a symbolic link to the key TARGET (which need not exist)."""
    _no_content_store(o)
    op = {"key": linkname, "symlink": target}
    if target_namespace is not None:
        op["target_namespace"] = target_namespace
    with handle() as h:
        _commit(h, namespace, [op], o)


@kvs.command(context_settings=HELP)
@_namespace
@click.option("-o", "--namespace-only", is_flag=True,
              help="Of a link into a namespace, print only the namespace.")
@click.option("-k", "--key-only", is_flag=True,
              help="Of a link into a namespace, print only the key.")
@click.option("-a", "--at", default=None, metavar="TREEOBJ",
              help="Relative to a tree object (refused: no content store).")
@click.argument("keys", nargs=-1, required=True)
def readlink(namespace, namespace_only, key_only, at, keys):
    """Print the target of each symbolic link KEY (NAMESPACE::TARGET when the
    link names a namespace)."""
    if at is not None:
        raise UsageError("--at: fluxlite's KVS keeps no content store to look a tree "
                         "object up in")
    with handle() as h:
        for key in keys:
            val = h.call("kvs.lookup", _in(namespace, {"key": key, "flags": READLINK}),
                         nodeid=0)["val"]["data"]
            ns = val.get("namespace")
            if ns is None or key_only:
                click.echo(val["target"])
            else:
                click.echo(ns if namespace_only else f"{ns}::{val['target']}")


@kvs.command(context_settings=HELP)
@_namespace
@click.option("-R", "--recursive", is_flag=True, help="List subdirectories too, as ls -R.")
@click.option("-d", "--directory", is_flag=True,
              help="List a directory itself, not its contents.")
@click.option("-w", "--width", type=int, default=None, metavar="N",
              help="Fit the columns in N characters (0: no limit; default: the "
                   "terminal's, else $COLUMNS, else 80).")
@click.option("-1", "--1", "one", is_flag=True, help="One name a line.")
@click.option("-F", "--classify", is_flag=True,
              help="A '.' after a directory, a '@' after a link.")
@click.argument("keys", nargs=-1)
def ls(namespace, recursive, directory, width, one, classify, keys):
    """List the keys in each KEY (a directory; default the root), as flux kvs ls."""
    from .kvsls import Lister, window_width
    with handle() as h:
        code = Lister(h, namespace, recursive=recursive, directory=directory,
                      classify=classify, win=window_width(width, one)).run(keys)
    raise SystemExit(code)


@kvs.command(context_settings=HELP)
@_namespace
@click.option("-R", "--recursive", is_flag=True, help="Show the keys of subdirectories too.")
@click.option("-d", "--directory", "keys_only", is_flag=True, help="Keys only, no values.")
@click.option("-w", "--width", type=int, default=None, metavar="N",
              help="Accepted (lines are not cut here).")
@click.option("-a", "--at", default=None, metavar="TREEOBJ",
              help="Relative to a tree object (refused: no content store).")
@click.argument("key", default=".")
def dir(namespace, recursive, keys_only, width, at, key):  # noqa: A001 - the command is dir
    """Print every key under directory KEY with its value, 'KEY = VALUE', as
    flux kvs dir (a subdirectory prints as 'KEY.' unless -R)."""
    del width
    if at is not None:
        raise UsageError("--at: fluxlite's KVS keeps no content store to look a tree "
                         "object up in")
    with handle() as h:
        _dump_dir(h, _dirkey(key), recursive, keys_only, namespace)


def _dump_dir(h, key, recursive, keys_only, namespace=None):
    for name in _entries(h, key, namespace):
        if name.endswith("."):
            sub = _join(key, name[:-1])
            if recursive:
                _dump_dir(h, sub, recursive, keys_only, namespace)
            else:
                click.echo(f"{sub}.")
            continue
        full = _join(key, name)
        if keys_only:
            click.echo(full)
        else:
            value = _get(h, namespace, full)
            click.echo(f"{full} = {value if isinstance(value, str) else json.dumps(value)}")


@kvs.command(context_settings=HELP)
@_namespace
@click.option("-R", "--recursive", is_flag=True, help="Remove a directory and all under it.")
@click.option("-f", "--force", is_flag=True, help="Ignore keys that do not exist.")
@_root_refs
@click.argument("keys", nargs=-1, required=True)
def unlink(namespace, recursive, force, keys, **o):
    """Remove each KEY, in one atomic commit; a non-empty directory needs -R."""
    _no_content_store(o)
    from ..errors import FluxliteError, IsADirectory, NotFound
    ops = []
    with handle() as h:
        for key in keys:
            if _dirkey(key) == ".":
                raise UsageError("cannot unlink the root directory")
            try:
                _get(h, namespace, key)
            except NotFound:
                if force:
                    continue
                raise NotFound(f"cannot unlink {key!r}: no such key") from None
            except IsADirectory:
                if not recursive and _entries(h, key, namespace):
                    raise FluxliteError(f"cannot unlink {key!r}: it is a non-empty "
                                        "directory (use -R)") from None
            ops.append({"key": key, "unlink": True})
        if ops:
            _commit(h, namespace, ops, o)


def _entries(h, key: str, namespace: str | None = None) -> list[str]:
    """The names in directory KEY, a subdirectory's ending in "."."""
    return entries(h.call("kvs.lookup", _in(namespace, {"key": key, "flags": READDIR}),
                          nodeid=0))[0]


def _dirkey(key: str) -> str:
    return key.strip(".") or "."


def _join(directory: str, name: str) -> str:
    return name if directory == "." else f"{directory}.{name}"


@kvs.group(context_settings=HELP)
def eventlog():
    """Eventlogs (RFC 18) in the store: get, append, wait-event."""


def _printer(unformatted: bool, human: bool):
    from ..job.eventlog import format_entry
    t0 = [None]

    def show(e):
        t0[0] = e.get("timestamp") if t0[0] is None else t0[0]
        click.echo(json.dumps(e, separators=(",", ":")) if unformatted
                   else format_entry(e, human=human, t0=t0[0]))
    return show


def _check_eventlog(key: str, value) -> list:
    if not isinstance(value, list) or not all(
            isinstance(e, dict) and "name" in e for e in value):
        raise UsageError(f"{key} is not an eventlog (a list of entries with a name); "
                         "use `fluxlite kvs get` to read it")
    return value


def _entries_of(h, namespace, key: str, waitcreate: bool, timeout=None):
    """Each entry of the eventlog at KEY as it comes (the ones there first)."""
    flags = WATCH | WATCH_APPEND | (WAITCREATE if waitcreate else 0)
    for resp in _watch(h, namespace, key, flags, timeout):
        yield from _value(resp)


@eventlog.command("get", context_settings=HELP)
@_namespace
@click.option("-W", "--waitcreate", is_flag=True, help="Wait for KEY to exist.")
@click.option("-w", "--watch", is_flag=True, help="Keep printing entries as they are appended.")
@click.option("-c", "--count", type=click.IntRange(1), default=None,
              help="With --watch, exit after N entries.")
@click.option("-u", "--unformatted", is_flag=True, help="Each entry as RFC 18 JSON.")
@click.option("-H", "--human", is_flag=True, help="Times relative to the first entry.")
@click.option("-L", "--color", is_flag=False, flag_value="auto", default=None,
              type=click.Choice(["always", "never", "auto"]), metavar="[WHEN]",
              help="always, never or auto (accepted: not colored here).")
@click.option("-S", "--stream", is_flag=True, help="Accepted (one response per entry).")
@click.argument("key")
def eventlog_get(namespace, waitcreate, watch, count, unformatted, human, color, stream,
                 key):
    """Print the eventlog at KEY, one entry per line."""
    del color, stream
    show = _printer(unformatted, human)
    with handle() as h:
        if not (watch or waitcreate):
            for e in _check_eventlog(key, _get(h, namespace, key)):
                show(e)
            return
        if not watch:   # --waitcreate: what is there once it exists
            first = h.call("kvs-watch.lookup",
                           _in(namespace, {"key": key, "flags": WAITCREATE}), nodeid=0)
            for e in _check_eventlog(key, _value(first)):
                show(e)
            return
        n = 0
        try:
            for e in _entries_of(h, namespace, key, waitcreate):
                show(e)
                n += 1
                if count and n >= count:
                    return
        except KeyboardInterrupt:
            return 0


@eventlog.command("append", context_settings=HELP)
@_namespace
@click.option("-t", "--timestamp", type=float, default=None, metavar="SEC",
              help="The entry's time (seconds since the epoch; default: now).")
@click.argument("key")
@click.argument("name")
@click.argument("context", required=False)
def eventlog_append(namespace, timestamp, key, name, context):
    """Append an entry NAME, with an optional JSON object CONTEXT, to the eventlog
    at KEY (made if absent)."""
    from ..job.eventlog import entry
    ctx = None
    if context is not None:
        try:
            ctx = json.loads(context)
        except ValueError:
            ctx = None
        if not isinstance(ctx, dict):
            raise UsageError(f"context must be a JSON object, got {context!r}")
    with handle() as h:
        h.call("kvs.commit", _in(namespace, {"ops": [
            {"key": key, "append": [entry(name, ctx, timestamp)]}]}), nodeid=0)


@eventlog.command("wait-event", context_settings=HELP)
@_namespace
@click.option("-W", "--waitcreate", is_flag=True, help="Wait for KEY to exist.")
@click.option("-t", "--timeout", callback=fsd_timeout, default=None, metavar="SEC",
              help="Give up after this long (exit 1).")
@click.option("-u", "--unformatted", is_flag=True, help="Each entry as RFC 18 JSON.")
@click.option("-q", "--quiet", is_flag=True, help="Do not print the matched entry.")
@click.option("-v", "--verbose", is_flag=True, help="Print the entries before it too.")
@click.option("-H", "--human", is_flag=True, help="Times relative to the first entry.")
@click.option("-L", "--color", is_flag=False, flag_value="auto", default=None,
              type=click.Choice(["always", "never", "auto"]), metavar="[WHEN]",
              help="always, never or auto (accepted: not colored here).")
@click.argument("key")
@click.argument("name")
def eventlog_wait_event(namespace, waitcreate, timeout, unformatted, quiet, verbose, human,
                        color, key, name):
    """Wait for an entry NAME in the eventlog at KEY (it may be there already)."""
    from ..errors import EndOfStream, RPCTimeout
    del color
    show = _printer(unformatted, human)
    with handle() as h:
        try:
            for e in _entries_of(h, namespace, key, waitcreate, timeout):
                if e.get("name") == name:
                    if not quiet:
                        show(e)
                    return 0
                if verbose:
                    show(e)
        except RPCTimeout:
            raise RPCTimeout(f"timeout waiting for event '{name}' in {key}") from None
    raise EndOfStream(f"{key} was removed before event '{name}'")


@kvs.command(context_settings=HELP)
@_namespace
def version(namespace):
    """Print the KVS version: it grows with each commit (one count for every
    namespace here)."""
    del namespace
    with handle() as h:
        click.echo(str(h.call("kvs.stats", nodeid=0)["version"]))


@kvs.command(context_settings=HELP)
def sync():
    """Flux's flush of pending content to disk: a commit here is on disk when it is
    answered, so there is nothing to wait for."""


from .kvscopy import copy, move  # noqa: E402  (flux kvs copy, move)
from .kvsnamespace import namespace  # noqa: E402
from .kvsroot import getroot, wait  # noqa: E402  (flux kvs getroot, wait)

for _command in (copy, move, namespace, getroot, wait):
    kvs.add_command(_command)

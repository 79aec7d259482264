"""`fluxlite kvs get|put|ls|dir|unlink|mkdir|link|readlink|namespace|eventlog ...`:
the instance's key-value store from the shell, as flux-kvs(1).  `-N NAME` names
the namespace a command works in (the primary one without it), as Flux's."""

from __future__ import annotations

import json

import click

from ..errors import UsageError
from .common import HELP, echo_value, fsd_timeout, handle

READLINK = 2        # Flux's FLUX_KVS_READLINK: kvs.lookup answers with the link itself


@click.group(context_settings=HELP)
def kvs():
    """Read and write the key-value store."""


_namespace = click.option("-N", "--namespace", metavar="NAME",
                          help="Work in KVS namespace NAME (default: primary).")


def _in(namespace: str | None, payload: dict) -> dict:
    """A kvs request's payload, in `namespace` when one is named."""
    return payload if namespace is None else {**payload, "namespace": namespace}


@kvs.command(context_settings=HELP)
@_namespace
@click.option("-w", "--watch", is_flag=True, help="Print the value now and after each change.")
@click.argument("keys", nargs=-1, required=True)
def get(namespace, watch, keys):
    """Print the JSON value of each KEY."""
    with handle() as h:
        if watch:
            if len(keys) != 1:
                raise UsageError("--watch takes one key")
            for resp in h.stream("kvs.watch", _in(namespace, {"key": keys[0]}), nodeid=0):
                echo_value(resp["value"])
            return
        for key in keys:
            echo_value(h.call("kvs.get", _in(namespace, {"key": key}), nodeid=0)["value"])


@kvs.command(context_settings=HELP)
@_namespace
@click.option("-a", "-A", "--append", is_flag=True, help="Append VALUE to the list at KEY.")
@click.option("-j", "--json", "as_json", is_flag=True,
              help="VALUE must be JSON (an error otherwise).")
@click.option("-r", "--raw", is_flag=True,
              help="VALUE is stored as the string given ('-': read it from stdin).")
@click.option("-n", "--no-merge", is_flag=True,
              help="Accepted for Flux scripts (every commit here stands alone).")
@click.argument("pairs", nargs=-1, required=True, metavar="KEY=VALUE...")
def put(namespace, append, as_json, raw, no_merge, pairs):
    """Set each KEY to VALUE (JSON if it parses, else a string), in one atomic commit."""
    import sys
    del no_merge
    if as_json and raw:
        raise UsageError("--json and --raw do not go together")
    ops = []
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"expected KEY=VALUE, got {pair!r}")
        if raw:
            value = sys.stdin.read() if text == "-" else text
        else:
            try:
                value = json.loads(text)
            except ValueError:
                if as_json:
                    raise UsageError(f"{key}: value is not valid JSON: {text!r}") from None
                value = text
        ops.append({"key": key, "append": [value]} if append else {"key": key, "value": value})
    with handle() as h:
        h.call("kvs.commit", _in(namespace, {"ops": ops}), nodeid=0)


@kvs.command(context_settings=HELP)
@_namespace
@click.argument("keys", nargs=-1, required=True)
def mkdir(namespace, keys):
    """Make each KEY an empty directory (whatever was there goes), in one commit."""
    ops = []
    for key in keys:
        if _dirkey(key) == ".":
            raise UsageError("the root directory exists already")
        ops.append({"key": key, "mkdir": True})
    with handle() as h:
        h.call("kvs.commit", _in(namespace, {"ops": ops}), nodeid=0)


@kvs.command(context_settings=HELP)
@_namespace
@click.option("-T", "--target-namespace", metavar="NAME",
              help="TARGET is in namespace NAME (default: the link's own).")
@click.argument("target")
@click.argument("linkname")
def link(namespace, target_namespace, target, linkname):
    """Make LINKNAME a symbolic link to the key TARGET (which need not exist)."""
    op = {"key": linkname, "symlink": target}
    if target_namespace is not None:
        op["target_namespace"] = target_namespace
    with handle() as h:
        h.call("kvs.commit", _in(namespace, {"ops": [op]}), nodeid=0)


@kvs.command(context_settings=HELP)
@_namespace
@click.argument("keys", nargs=-1, required=True)
def readlink(namespace, keys):
    """Print the target of each symbolic link KEY (NAMESPACE::TARGET when the
    link names a namespace)."""
    with handle() as h:
        for key in keys:
            val = h.call("kvs.lookup", _in(namespace, {"key": key, "flags": READLINK}),
                         nodeid=0)["val"]["data"]
            ns = val.get("namespace")
            click.echo(val["target"] if ns is None else f"{ns}::{val['target']}")


@kvs.group(context_settings=HELP)
def namespace():
    """Make, list and remove KVS namespaces."""


@namespace.command("create", context_settings=HELP)
@click.option("-o", "--owner", type=int, default=-1, metavar="UID",
              help="The namespace's owner (default: the instance owner).")
@click.argument("names", nargs=-1, required=True)
def namespace_create(owner, names):
    """Make each namespace NAME, empty."""
    with handle() as h:
        for name in names:
            h.call("kvs.namespace-create", {"namespace": name, "owner": owner, "flags": 0},
                   nodeid=0)


@namespace.command("remove", context_settings=HELP)
@click.argument("names", nargs=-1, required=True)
def namespace_remove(names):
    """Remove each namespace NAME and every key in it."""
    with handle() as h:
        for name in names:
            h.call("kvs.namespace-remove", {"namespace": name}, nodeid=0)


@namespace.command("list", context_settings=HELP)
def namespace_list():
    """List the namespaces with their owners and flags."""
    with handle() as h:
        spaces = h.call("kvs.namespace-list", nodeid=0)["namespaces"]
    click.echo(f"{'NAMESPACE':<36} {'OWNER':>10} {'FLAGS':>6}")
    for ns in spaces:
        click.echo(f"{ns['namespace']:<36} {ns['owner']:>10} {ns['flags']:>#6x}")


@kvs.command(context_settings=HELP)
@_namespace
@click.option("-R", "--recursive", is_flag=True, help="List subdirectories too, as ls -R.")
@click.argument("directory", default=".")
def ls(namespace, recursive, directory):
    """List the keys in DIRECTORY (subdirectories end in '.').

    With -R, each directory's listing follows a 'KEY:' line, a blank line
    between them, as flux kvs ls -R."""
    with handle() as h:
        if not recursive:
            for name in _entries(h, directory, namespace):
                click.echo(name)
            return
        pending, first = [_dirkey(directory)], True
        while pending:
            key = pending.pop(0)
            names = _entries(h, key, namespace)
            if not first:
                click.echo("")
            first = False
            click.echo(f"{key}:")
            for name in names:
                click.echo(name)
            # depth first, in order, as ls -R
            pending[:0] = [_join(key, n[:-1]) for n in names if n.endswith(".")]


@kvs.command(context_settings=HELP)
@_namespace
@click.option("-R", "--recursive", is_flag=True, help="Show the keys of subdirectories too.")
@click.option("-d", "--directory", "keys_only", is_flag=True, help="Keys only, no values.")
@click.argument("key", default=".")
def dir(namespace, recursive, keys_only, key):  # noqa: A001 - the command is called dir
    """Print every key under directory KEY with its value, 'KEY = VALUE', as
    flux kvs dir (a subdirectory prints as 'KEY.' unless -R)."""
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
            value = h.call("kvs.get", _in(namespace, {"key": full}), nodeid=0)["value"]
            click.echo(f"{full} = {value if isinstance(value, str) else json.dumps(value)}")


@kvs.command(context_settings=HELP)
@_namespace
@click.option("-R", "--recursive", is_flag=True, help="Remove a directory and all under it.")
@click.option("-f", "--force", is_flag=True, help="Ignore keys that do not exist.")
@click.argument("keys", nargs=-1, required=True)
def unlink(namespace, recursive, force, keys):
    """Remove each KEY, in one atomic commit; a non-empty directory needs -R."""
    from ..errors import FluxliteError, IsADirectory, NotFound
    ops = []
    with handle() as h:
        for key in keys:
            if _dirkey(key) == ".":
                raise UsageError("cannot unlink the root directory")
            try:
                h.call("kvs.get", _in(namespace, {"key": key}), nodeid=0)
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
            h.call("kvs.commit", _in(namespace, {"ops": ops}), nodeid=0)


def _entries(h, key: str, namespace: str | None = None) -> list[str]:
    return h.call("kvs.ls", _in(namespace, {"key": key}), nodeid=0)["entries"]


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


def _entries_of(h, key: str, waitcreate: bool, timeout=None):
    """Each entry of the eventlog at KEY as it comes (the ones there first)."""
    stream = h.stream("kvs.watch", {"key": key, "append": True, "waitcreate": waitcreate},
                      nodeid=0, timeout=timeout)
    for resp in stream:
        if "entries" not in resp:
            _check_eventlog(key, resp.get("value"))
        yield from resp.get("entries", ())


@eventlog.command("get", context_settings=HELP)
@click.option("-W", "--waitcreate", is_flag=True, help="Wait for KEY to exist.")
@click.option("-w", "--watch", is_flag=True, help="Keep printing entries as they are appended.")
@click.option("-c", "--count", type=click.IntRange(1), default=None,
              help="With --watch, exit after N entries.")
@click.option("-u", "--unformatted", is_flag=True, help="Each entry as RFC 18 JSON.")
@click.option("-H", "--human", is_flag=True, help="Times relative to the first entry.")
@click.argument("key")
def eventlog_get(waitcreate, watch, count, unformatted, human, key):
    """Print the eventlog at KEY, one entry per line."""
    show = _printer(unformatted, human)
    with handle() as h:
        if not (watch or waitcreate):
            value = h.call("kvs.get", {"key": key}, nodeid=0)["value"]
            for e in _check_eventlog(key, value):
                show(e)
            return
        if not watch:   # --waitcreate: what is there once it exists
            stream = h.stream("kvs.watch", {"key": key, "append": True, "waitcreate": True},
                              nodeid=0)
            first = next(stream, {})
            stream.close()
            for e in first.get("entries", None) or _check_eventlog(key, first.get("value")):
                show(e)
            return
        n = 0
        try:
            for e in _entries_of(h, key, waitcreate):
                show(e)
                n += 1
                if count and n >= count:
                    return
        except KeyboardInterrupt:
            return 0


@eventlog.command("append", context_settings=HELP)
@click.option("-t", "--timestamp", type=float, default=None, metavar="SEC",
              help="The entry's time (seconds since the epoch; default: now).")
@click.argument("key")
@click.argument("name")
@click.argument("context", required=False)
def eventlog_append(timestamp, key, name, context):
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
        h.call("kvs.commit", {"ops": [{"key": key,
                                       "append": [entry(name, ctx, timestamp)]}]}, nodeid=0)


@eventlog.command("wait-event", context_settings=HELP)
@click.option("-W", "--waitcreate", is_flag=True, help="Wait for KEY to exist.")
@click.option("-t", "--timeout", callback=fsd_timeout, default=None, metavar="SEC",
              help="Give up after this long (exit 1).")
@click.option("-u", "--unformatted", is_flag=True, help="Each entry as RFC 18 JSON.")
@click.option("-q", "--quiet", is_flag=True, help="Do not print the matched entry.")
@click.option("-v", "--verbose", is_flag=True, help="Print the entries before it too.")
@click.option("-H", "--human", is_flag=True, help="Times relative to the first entry.")
@click.argument("key")
@click.argument("name")
def eventlog_wait_event(waitcreate, timeout, unformatted, quiet, verbose, human, key, name):
    """Wait for an entry NAME in the eventlog at KEY (it may be there already)."""
    from ..errors import EndOfStream, RPCTimeout
    show = _printer(unformatted, human)
    with handle() as h:
        try:
            for e in _entries_of(h, key, waitcreate, timeout):
                if e.get("name") == name:
                    if not quiet:
                        show(e)
                    return 0
                if verbose:
                    show(e)
        except RPCTimeout:
            raise RPCTimeout(f"timeout waiting for event '{name}' in {key}") from None
    raise EndOfStream(f"{key} was removed before event '{name}'")

"""`fluxlite kvs get|put|ls|dir|unlink|mkdir|eventlog get|append|wait-event`: the
instance's key-value store from the shell, as flux-kvs(1)."""

from __future__ import annotations

import json

import click

from ..errors import UsageError
from .common import HELP, echo_value, fsd_timeout, handle


@click.group(context_settings=HELP)
def kvs():
    """Read and write the key-value store."""


@kvs.command(context_settings=HELP)
@click.option("-w", "--watch", is_flag=True, help="Print the value now and after each change.")
@click.argument("keys", nargs=-1, required=True)
def get(watch, keys):
    """Print the JSON value of each KEY."""
    with handle() as h:
        if watch:
            if len(keys) != 1:
                raise UsageError("--watch takes one key")
            for resp in h.stream("kvs.watch", {"key": keys[0]}, nodeid=0):
                echo_value(resp["value"])
            return
        for key in keys:
            echo_value(h.call("kvs.get", {"key": key}, nodeid=0)["value"])


@kvs.command(context_settings=HELP)
@click.option("-a", "-A", "--append", is_flag=True, help="Append VALUE to the list at KEY.")
@click.option("-j", "--json", "as_json", is_flag=True,
              help="VALUE must be JSON (an error otherwise).")
@click.option("-r", "--raw", is_flag=True,
              help="VALUE is stored as the string given ('-': read it from stdin).")
@click.option("-n", "--no-merge", is_flag=True,
              help="Accepted for Flux scripts (every commit here stands alone).")
@click.argument("pairs", nargs=-1, required=True, metavar="KEY=VALUE...")
def put(append, as_json, raw, no_merge, pairs):
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
        h.call("kvs.commit", {"ops": ops}, nodeid=0)


@kvs.command(context_settings=HELP)
@click.argument("keys", nargs=-1, required=True)
def mkdir(keys):
    """Make each KEY an empty directory (whatever was there goes), in one commit."""
    ops = []
    for key in keys:
        if _dirkey(key) == ".":
            raise UsageError("the root directory exists already")
        ops.append({"key": key, "mkdir": True})
    with handle() as h:
        h.call("kvs.commit", {"ops": ops}, nodeid=0)


@kvs.command(context_settings=HELP)
@click.option("-R", "--recursive", is_flag=True, help="List subdirectories too, as ls -R.")
@click.argument("directory", default=".")
def ls(recursive, directory):
    """List the keys in DIRECTORY (subdirectories end in '.').

    With -R, each directory's listing follows a 'KEY:' line, a blank line
    between them, as flux kvs ls -R."""
    with handle() as h:
        if not recursive:
            for name in _entries(h, directory):
                click.echo(name)
            return
        pending, first = [_dirkey(directory)], True
        while pending:
            key = pending.pop(0)
            names = _entries(h, key)
            if not first:
                click.echo("")
            first = False
            click.echo(f"{key}:")
            for name in names:
                click.echo(name)
            # depth first, in order, as ls -R
            pending[:0] = [_join(key, n[:-1]) for n in names if n.endswith(".")]


@kvs.command(context_settings=HELP)
@click.option("-R", "--recursive", is_flag=True, help="Show the keys of subdirectories too.")
@click.option("-d", "--directory", "keys_only", is_flag=True, help="Keys only, no values.")
@click.argument("key", default=".")
def dir(recursive, keys_only, key):  # noqa: A001 - the command is called dir
    """Print every key under directory KEY with its value, 'KEY = VALUE', as
    flux kvs dir (a subdirectory prints as 'KEY.' unless -R)."""
    with handle() as h:
        _dump_dir(h, _dirkey(key), recursive, keys_only)


def _dump_dir(h, key, recursive, keys_only):
    for name in _entries(h, key):
        if name.endswith("."):
            sub = _join(key, name[:-1])
            if recursive:
                _dump_dir(h, sub, recursive, keys_only)
            else:
                click.echo(f"{sub}.")
            continue
        full = _join(key, name)
        if keys_only:
            click.echo(full)
        else:
            value = h.call("kvs.get", {"key": full}, nodeid=0)["value"]
            click.echo(f"{full} = {value if isinstance(value, str) else json.dumps(value)}")


@kvs.command(context_settings=HELP)
@click.option("-R", "--recursive", is_flag=True, help="Remove a directory and all under it.")
@click.option("-f", "--force", is_flag=True, help="Ignore keys that do not exist.")
@click.argument("keys", nargs=-1, required=True)
def unlink(recursive, force, keys):
    """Remove each KEY, in one atomic commit; a non-empty directory needs -R."""
    from ..errors import FluxliteError, IsADirectory, NotFound
    ops = []
    with handle() as h:
        for key in keys:
            if _dirkey(key) == ".":
                raise UsageError("cannot unlink the root directory")
            try:
                h.call("kvs.get", {"key": key}, nodeid=0)
            except NotFound:
                if force:
                    continue
                raise NotFound(f"cannot unlink {key!r}: no such key") from None
            except IsADirectory:
                if not recursive and _entries(h, key):
                    raise FluxliteError(f"cannot unlink {key!r}: it is a non-empty "
                                        "directory (use -R)") from None
            ops.append({"key": key, "unlink": True})
        if ops:
            h.call("kvs.commit", {"ops": ops}, nodeid=0)


def _entries(h, key: str) -> list[str]:
    return h.call("kvs.ls", {"key": key}, nodeid=0)["entries"]


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

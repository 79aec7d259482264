"""`fluxlite kvs get|put|ls|dir|unlink|eventlog`: the instance's key-value store from the shell."""

from __future__ import annotations

import json

import click

from ..errors import UsageError
from .common import HELP, echo_value, handle


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
@click.option("-a", "--append", is_flag=True, help="Append VALUE to the list at KEY.")
@click.argument("pairs", nargs=-1, required=True, metavar="KEY=VALUE...")
def put(append, pairs):
    """Set each KEY to VALUE (JSON if it parses, else a string), in one atomic commit."""
    ops = []
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"expected KEY=VALUE, got {pair!r}")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        ops.append({"key": key, "append": [value]} if append else {"key": key, "value": value})
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
    import errno

    from ..errors import FluxliteError, NotFound
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
            except FluxliteError as exc:
                if exc.errnum != errno.EISDIR:
                    raise
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


@kvs.command(context_settings=HELP)
@click.option("-w", "--watch", is_flag=True, help="Keep printing new entries.")
@click.argument("key")
def eventlog(watch, key):
    """Print the eventlog at KEY, one entry per line."""
    from ..job.eventlog import format_entry
    with handle() as h:
        if watch:
            for resp in h.stream("kvs.watch", {"key": key, "append": True, "waitcreate": True},
                                 nodeid=0):
                for e in resp["entries"]:
                    click.echo(format_entry(e))
            return
        value = h.call("kvs.get", {"key": key}, nodeid=0)["value"]
        if not isinstance(value, list) or not all(
                isinstance(e, dict) and "name" in e for e in value):
            from ..errors import UsageError
            raise UsageError(f"{key} is not an eventlog (a list of entries with a name); "
                             "use `fluxlite kvs get` to read it")
        for e in value:
            click.echo(format_entry(e))

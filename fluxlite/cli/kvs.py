"""`fluxlite kvs get|put|ls|eventlog`: the instance's key-value store from the shell."""

from __future__ import annotations

import json

import click

from ..errors import UsageError
from .common import HELP, handle


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
                click.echo(json.dumps(resp["value"]))
            return
        for key in keys:
            value = h.call("kvs.get", {"key": key}, nodeid=0)["value"]
            click.echo(value if isinstance(value, str) else json.dumps(value))


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
@click.argument("directory", default=".")
def ls(directory):
    """List the keys in DIRECTORY (subdirectories end in '.')."""
    with handle() as h:
        for name in h.call("kvs.ls", {"key": directory}, nodeid=0)["entries"]:
            click.echo(name)


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

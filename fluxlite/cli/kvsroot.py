"""`kvs getroot` and `kvs wait` (Flux's flux-kvs(1)): the KVS root and its version.

getroot prints the root of a namespace as Flux does: an RFC 11 dirref object by
default, its sequence (-s), its owner (-o) or its reference (-b).  fluxlite's KVS
has no content store, so the reference names the version the root is at
(service/kvs_root.py) rather than a blob.  wait VERSION returns once the KVS
has reached VERSION (`kvs version` prints where it is).
"""

from __future__ import annotations

import json

import click

from ..errors import UsageError
from .common import HELP, handle, kvs_namespace_option

_namespace = kvs_namespace_option()


@click.command(context_settings=HELP)
@_namespace
@click.option("-s", "--sequence", is_flag=True, help="Print the root's sequence number.")
@click.option("-o", "--owner", is_flag=True, help="Print the namespace's owner (a uid).")
@click.option("-b", "--blobref", is_flag=True, help="Print the root's reference alone.")
def getroot(namespace, sequence, owner, blobref):
    """Print the current root of the KVS namespace, as an RFC 11 dirref object."""
    if sequence + owner + blobref > 1:
        raise UsageError("give at most one of --sequence, --owner, --blobref")
    with handle() as h:
        got = h.call("kvs.getroot", {} if namespace is None else {"namespace": namespace},
                     nodeid=0)
    if sequence:
        click.echo(str(got["rootseq"]))
    elif owner:
        click.echo(str(got["owner"]))
    elif blobref:
        click.echo(got["rootref"])
    else:
        click.echo(json.dumps({"ver": 1, "type": "dirref", "data": [got["rootref"]]},
                              sort_keys=True, separators=(",", ":")))


class _Version(click.ParamType):
    name = "VERSION"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        if not str(value).isdigit() or int(value) > MAX_VERSION:
            self.fail(f"{value!r} is not a KVS version (an integer from 0 to 2**63-1: "
                      "see `kvs version`)", param, ctx)
        return int(value)


MAX_VERSION = 2 ** 63 - 1


@click.command(context_settings=HELP)
@_namespace
@click.argument("version", type=_Version())
def wait(namespace, version):
    """Wait until the KVS has reached VERSION (at once if it has)."""
    payload = {"rootseq": version}
    if namespace is not None:
        payload["namespace"] = namespace
    with handle() as h:
        h.call("kvs.wait-version", payload, nodeid=0)

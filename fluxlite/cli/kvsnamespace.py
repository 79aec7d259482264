"""`fluxlite kvs namespace create|remove|list`, as flux-kvs(1)'s: KVS namespaces
other than the primary one, each with an owner (a running job's guest namespace,
job-ID, is listed too: kvs_root.py)."""

from __future__ import annotations

import click

from .common import HELP, handle


@click.group(context_settings=HELP)
def namespace():
    """Make, list and remove KVS namespaces."""


@namespace.command("create", context_settings=HELP)
@click.option("-o", "--owner", type=int, default=-1, metavar="UID",
              help="The namespace's owner (default: the instance owner).")
@click.option("-r", "--rootref", default=None, metavar="BLOBREF",
              help="Start from this root (refused: no content store).")
@click.argument("names", nargs=-1, required=True)
def namespace_create(owner, rootref, names):
    """Make each namespace NAME, empty."""
    if rootref is not None:
        from ..errors import UsageError
        raise UsageError("--rootref: fluxlite's KVS keeps no content store to start a "
                         "namespace from")
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
    """List the namespaces with their owners and flags: the primary one, those made
    with `namespace create`, and each running job's guest namespace (job-ID, its
    owner the job's), as Flux's job-exec keeps one while the job runs."""
    from ..errors import FluxliteError
    from ..job.states import RUNNING
    from ..jobapi import api
    with handle() as h:
        spaces = h.call("kvs.namespace-list", nodeid=0)["namespaces"]
        try:
            jobs = api.list_jobs(h, "active")
        except FluxliteError:       # no job-manager: no jobs, no guest namespaces
            jobs = []
    names = {ns["namespace"] for ns in spaces}
    spaces += [{"namespace": f"job-{j['id']}", "owner": j["userid"], "flags": 0}
               for j in sorted(jobs, key=lambda j: j["id"])
               if j["state"] in RUNNING and f"job-{j['id']}" not in names]
    click.echo(f"{'NAMESPACE':<36} {'OWNER':>10}      FLAGS")
    for ns in spaces:
        click.echo(f"{ns['namespace']:<36} {ns['owner']:>10} 0x{ns['flags']:08X}")

"""`fluxlite dump` and `fluxlite restore`: the KVS to and from a tar archive (Flux's).

    fluxlite dump OUTFILE                 the running instance's KVS, every key
    fluxlite restore INFILE               into the running instance's KVS
    fluxlite restore --statedir DIR INFILE
                                          into a new state directory: an instance
                                          started on DIR afterwards has the history

A job's records restored into a running instance are seen by its job-manager
at the next start from its state directory (as Flux's restore writes the
content store for the next start).  The format: util/kvs_archive.py.
"""

from __future__ import annotations

import os
import subprocess
import sys

import click

from ..errors import UsageError
from ..util import kvs_archive
from .common import HELP, handle

BATCH = 256   # keys per commit while restoring


def _walk(h, path: str):
    """Every (key, value) below `path` ("." for the root), keys in order."""
    for name in h.call("kvs.ls", {"key": path}, nodeid=0)["entries"]:
        key = name.rstrip(".") if path == "." else f"{path}.{name.rstrip('.')}"
        if name.endswith("."):
            yield from _walk(h, key)
        else:
            yield key, h.call("kvs.get", {"key": key}, nodeid=0)["value"]


@click.command(context_settings=HELP)
@click.option("-v", "--verbose", is_flag=True, help="List each key as it is written.")
@click.option("-q", "--quiet", is_flag=True, help="Print no count at the end.")
@click.argument("outfile", type=click.Path(dir_okay=False))
def dump(verbose, quiet, outfile):
    """Write the instance's KVS to OUTFILE, a tar archive (.tgz/.tar.gz: compressed)."""
    n = 0
    with handle() as h, kvs_archive.open_for_writing(outfile) as tar:
        for key, value in _walk(h, "."):
            kvs_archive.add(tar, key, value)
            n += 1
            if verbose:
                click.echo(key, err=True)
    if not quiet:
        click.echo(f"fluxlite dump: archived {n} keys", err=True)


def _restore_into_instance(h, infile: str, verbose: bool) -> int:
    ops, n = [], 0
    for key, op in kvs_archive.read(infile):
        ops += [{"key": key, "unlink": True}, {"key": key, **op}]
        n += 1
        if verbose:
            click.echo(key, err=True)
        if len(ops) >= BATCH:
            h.call("kvs.commit", {"ops": ops}, nodeid=0)
            ops = []
    if ops:
        h.call("kvs.commit", {"ops": ops}, nodeid=0)
    return n


@click.command(context_settings=HELP)
@click.option("--statedir", type=click.Path(file_okay=False),
              help="Restore into this new state directory instead of the running instance.")
@click.option("-v", "--verbose", is_flag=True, help="List each key as it is restored.")
@click.option("-q", "--quiet", is_flag=True, help="Print no count at the end.")
@click.argument("infile", type=click.Path(exists=True, dir_okay=False))
def restore(statedir, verbose, quiet, infile):
    """Load the KVS keys archived in INFILE (by `fluxlite dump`)."""
    try:
        members = sum(1 for _ in kvs_archive.read(infile))
    except Exception as exc:   # tarfile, JSON and UTF-8 errors alike: one line
        why = str(exc).splitlines()[0].rstrip(":") if str(exc) else type(exc).__name__
        raise UsageError(f"{infile}: not an archive fluxlite dump wrote ({why})") from None
    if statedir:
        db = os.path.join(statedir, "content.sqlite")
        if os.path.exists(db) and os.path.getsize(db) > 0:
            raise UsageError(f"--statedir {statedir} already holds a state database: "
                             "restore into a new directory")
        argv = [sys.executable, "-m", "fluxlite", "start", f"-Sstatedir={statedir}",
                "--", sys.executable, "-m", "fluxlite", "restore", "-q",
                *(["-v"] if verbose else []), os.path.abspath(infile)]
        rc = subprocess.run(argv).returncode
        if rc:
            raise SystemExit(rc)
    else:
        with handle() as h:
            _restore_into_instance(h, infile, verbose)
    if not quiet:
        click.echo(f"fluxlite restore: restored {members} keys", err=True)

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

import json
import os
import subprocess
import sys

import click

from ..errors import UsageError
from ..protocol import kvs
from ..util import kvs_archive
from .common import HELP, handle

BATCH = 256                # operations per commit while restoring
CHUNK_BYTES = 1 << 20      # bytes of values per commit (a commit's limit is 4 MiB)


def _walk(h, path: str):
    """Every (key, value) below `path` ("." for the root), keys in order."""
    names, links = kvs.entries(h.call("kvs.lookup", {"key": path, "flags": kvs.READDIR},
                                      nodeid=0))
    for name in names:
        key = name.rstrip(".") if path == "." else f"{path}.{name.rstrip('.')}"
        if name in links:       # a symbolic link is archived as one, not followed
            yield key, kvs_archive.Link(links[name]["target"], links[name].get("namespace"))
        elif name.endswith("."):
            yield from _walk(h, key)
        else:
            yield key, kvs.value(h.call("kvs.lookup", {"key": key}, nodeid=0))


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


def _pieces(key: str, op: dict, size: int):
    """The commit operations that put one key back: a large eventlog (a job's
    output) in appends of at most CHUNK_BYTES, so no commit is over the limit."""
    yield {"key": key, "unlink": True}
    if "append" not in op or size <= CHUNK_BYTES:
        yield {"key": key, **op}
        return
    piece: list = []
    held = 0
    for e in op["append"]:
        n = len(json.dumps(e))
        if piece and held + n > CHUNK_BYTES:
            yield {"key": key, "append": piece}
            piece, held = [], 0
        piece.append(e)
        held += n
    if piece:
        yield {"key": key, "append": piece}


def _restore_into_instance(h, infile: str, verbose: bool) -> int:
    ops: list = []
    held = n = 0
    for key, op, size in kvs_archive.read(infile):
        n += 1
        if verbose:
            click.echo(key, err=True)
        for piece in _pieces(key, op, size):
            weight = min(size, CHUNK_BYTES) if "unlink" not in piece else 0
            if ops and (len(ops) >= BATCH or held + weight > CHUNK_BYTES):
                h.call("kvs.commit", {"ops": ops}, nodeid=0)
                ops, held = [], 0
            ops.append(piece)
            held += weight
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

"""`fluxlite uri` and `fluxlite proxy`: find an instance by URI or job id, as
flux-uri(1) and flux-proxy(1) do.

A TARGET is a native URI (`local://PATH`, `ipc://PATH`, `tcp://HOST:PORT`), or
a job id of an instance running as a job in the enclosing instance, with an
optional `jobid:` prefix and `/` between the ids of nested instances
(`ƒA/ƒB`: job ƒB in the instance that job ƒA runs).  A `?local` suffix asks
for the local:// form, as `--local` does, `?wait` waits for a job's URI, as
`--wait` does (`?local&wait` both).
"""

from __future__ import annotations

import os
import signal
import subprocess

import click

from ..errors import FluxliteError, UsageError
from .common import HELP, NO_INTERSPERSED, handle, parse_jobid

NATIVE = ("local://", "ipc://", "tcp://")
# after the instance goes away: how long COMMAND may take to end by itself (it may
# be what ended it, `fluxlite shutdown`, which sees the same end a moment later)
# before it is told (SIGHUP) and proxy says the connection was lost
LOST_GRACE = 2.0


def instance_uri(h, jobid: int, wait: bool = False) -> str:
    """The URI of the instance job `jobid` runs; with `wait`, once it has one (the
    job's `memo` event names it), as Flux's jobid resolver with ?wait."""
    from ..jobapi import api
    from ..util import fluid
    info = api.info(h, jobid)
    if wait and info.get("instance") and not (info.get("memo") or {}).get("uri") \
            and info["state"] != "INACTIVE":
        for e in api.event_watch(h, jobid):  # to the memo naming it, else to the end
            if e.get("name") == "memo" and "uri" in (e.get("context") or {}):
                break
        info = api.info(h, jobid)
    uri = (info.get("memo") or {}).get("uri")
    if not uri:
        what = "is not an instance" if not info.get("instance") else "has not started yet"
        raise FluxliteError(f"job {fluid.f58(jobid)} {what}: no URI")
    if info["state"] == "INACTIVE":
        raise FluxliteError(f"job {fluid.f58(jobid)} is no longer running")
    return uri


def resolve(target: str, *, local: bool = False, wait: bool = False) -> str:
    """The URI of the instance that TARGET names (`?local`, `?wait`, or both joined
    by `&`, as Flux's query: the local:// form, waiting for a job's URI)."""
    target, _, query = target.partition("?")
    for word in filter(None, query.split("&")):
        if word not in ("local", "wait"):
            raise UsageError(f"unsupported query ?{word}: ?local and ?wait are")
        local, wait = local or word == "local", wait or word == "wait"
    if not target:
        raise UsageError("empty target: expected a URI or a job id")
    if target.startswith(NATIVE):
        uri = target
    elif "://" in target or (target.partition(":")[0] not in ("jobid", target)):
        raise UsageError(f"unsupported target {target!r}: expected a job id, jobid:ID[/ID...], "
                         "local://PATH, ipc://PATH or tcp://HOST:PORT")
    else:
        path = target[len("jobid:"):] if target.startswith("jobid:") else target
        uri = None  # the enclosing instance: FLUXLITE_URI
        for part in path.split("/"):
            jobid = parse_jobid(part)
            with handle(uri) as h:
                uri = instance_uri(h, jobid, wait)
    return local_form(uri) if local else uri


def local_form(uri: str) -> str:
    """local://PATH for `uri`: the same socket for local:// and ipc://; for a tcp://
    URI, the local-uri of the broker that answers there (valid on its host)."""
    if uri.startswith("local://"):
        return uri
    if uri.startswith("ipc://"):
        return "local://" + uri[len("ipc://"):]
    with handle(uri) as h:
        return h.getattr("local-uri")


@click.command(context_settings=HELP)
@click.option("--local", is_flag=True, help="Print the local:// form of the URI.")
@click.option("--wait", is_flag=True,
              help="Wait for a job's instance to have its URI (`?wait`).")
@click.argument("target")
def uri(local, wait, target):
    """Print the URI of TARGET: a job id (the instance the job runs), ID/ID for a
    nested one, or a URI; `?local` or --local gives its local:// form, `?wait` or
    --wait waits for a pending or starting job's."""
    click.echo(resolve(target, local=local, wait=wait))


class _ChildExited(Exception):
    pass


@click.command(context_settings=NO_INTERSPERSED)
@click.option("-n", "--nohup", is_flag=True,
              help="If the instance goes away, do not send SIGHUP and SIGCONT to COMMAND.")
@click.argument("target")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def proxy(nohup, target, command):
    """Run COMMAND (default: $SHELL) with FLUXLITE_URI set to the instance TARGET
    names (a job id or a URI, as `fluxlite uri`).

    If the instance goes away while COMMAND runs (and COMMAND does not end within
    two seconds), proxy says so, sends it SIGHUP and SIGCONT (unless -n) and exits
    1 once it has ended; otherwise proxy exits with COMMAND's status."""
    target_uri = resolve(target)
    argv = list(command) or [os.environ.get("SHELL") or "/bin/sh"]
    with handle(target_uri) as h:
        h.call("broker.state", nodeid=0)  # an instance answers there, or a clear error now
        child = _spawn(argv, dict(os.environ, FLUXLITE_URI=target_uri))
        # as a shell does: the terminal's Ctrl-C and Ctrl-\ are for COMMAND
        old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGQUIT)}
        try:
            lost = _wait(h, child)
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
    if lost is None:
        return _status(child.returncode)
    click.echo(f"fluxlite proxy: lost connection to {target_uri}: {lost}", err=True)
    if not nohup and child.poll() is None:
        for sig in (signal.SIGHUP, signal.SIGCONT):
            try:
                child.send_signal(sig)
            except ProcessLookupError:
                pass
    child.wait()
    return 1


def _spawn(argv, env) -> subprocess.Popen:
    try:
        return subprocess.Popen(argv, env=env)
    except OSError as exc:
        # as a shell reports it: 127 command not found, 126 found but not executable
        missing = isinstance(exc, FileNotFoundError)
        raise FluxliteError(f"{argv[0]}: command not found" if missing and "/" not in argv[0]
                            else f"{argv[0]}: {exc.strerror}",
                            exit_code=127 if missing else 126) from None


def _wait(h, child: subprocess.Popen) -> str | None:
    """Until COMMAND ends (None) or the instance goes away (why, a sentence)."""
    pidfd = os.pidfd_open(child.pid)

    def exited():
        raise _ChildExited()

    h.add_fd(pidfd, exited)
    try:
        # a stream that lasts as long as the instance: membership changes on rank 0
        for _ in h.stream("overlay.watch", nodeid=0):
            pass
        why = "the instance ended the stream"
    except _ChildExited:
        child.wait()
        return None
    except FluxliteError as exc:
        why = exc.message
    finally:
        h.remove_fd(pidfd)
        os.close(pidfd)
    try:
        child.wait(LOST_GRACE)
        return None
    except subprocess.TimeoutExpired:
        return why


def _status(code: int) -> int:
    return 128 - code if code < 0 else code


def enter_enclosing(levels: int | None) -> None:
    """Point this process (and what it runs) at the instance `levels` up, the top one
    for None, as flux -p/--parent and -r/--root do: FLUXLITE_URI becomes each
    instance's parent-uri and the KVS namespace its parent-kvs-namespace (unset
    without one).  At the top there is no parent: nothing changes there."""
    from ..util.compat import KVS_NAMESPACE_VARS, flux_compat
    while levels is None or levels > 0:
        with handle() as h:
            uri = h.getattr("parent-uri")
            ns = h.getattr("parent-kvs-namespace") if uri else ""
            if levels is None:   # as many levels as this instance's depth, as Flux's
                levels = int(h.getattr("instance-level"))
        if not uri or not levels:
            return
        twins = flux_compat() or "FLUX_URI" in os.environ   # FLUX_* beside FLUXLITE_*
        for var in ("FLUXLITE_URI", "FLUX_URI")[:1 + twins]:
            os.environ[var] = uri
        for var in KVS_NAMESPACE_VARS:
            os.environ.pop(var, None)
        for var in KVS_NAMESPACE_VARS[:1 + twins] if ns else ():
            os.environ[var] = ns
        if levels is not None:
            levels -= 1

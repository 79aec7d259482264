"""The small Python API the CLI is built on (blocking handle).

    from fluxlite.client.sync import Handle
    from fluxlite.job import api
    h = Handle()
    jobid = api.submit(h, jobspec)
    for e in api.event_watch(h, jobid): print(e["name"])
    print(api.wait(h, jobid)["result"])
"""

from __future__ import annotations

import errno

from ..errors import FluxliteError
from . import eventlog as jel


def submit(h, jobspec: dict, urgency: int = 16) -> int:
    return submit_full(h, jobspec, urgency)["id"]


def submit_full(h, jobspec: dict, urgency: int = 16) -> dict:
    """Submit; the answer has the id and, if the job was refused at once, its exception."""
    return h.call("job-manager.submit", {"jobspec": jobspec, "urgency": urgency})


def wait(h, jobid: int, timeout: float | None = None) -> dict:
    """Block until the job is inactive: {id, success, errstr, result, returncode}."""
    return h.call("job-manager.wait", {"id": jobid}, timeout=timeout)


def info(h, jobid: int) -> dict:
    return h.call("job-manager.info", {"id": jobid})


def list_jobs(h, states: str = "active") -> list[dict]:
    return h.call("job-manager.list", {"states": states})["jobs"]


def cancel(h, jobid: int, note: str = "") -> None:
    h.call("job-manager.cancel", {"id": jobid, "note": note})


def raise_exception(h, jobid: int, etype: str = "cancel", severity: int = 0,
                    note: str = "") -> None:
    h.call("job-manager.raise", {"id": jobid, "type": etype, "severity": severity,
                                 "note": note})


def kill(h, jobid: int, signum: int) -> None:
    h.call("job-manager.kill", {"id": jobid, "signum": signum})


def watch_rpc(h, jobid: int, path: str = "eventlog", follow: bool = True):
    """Start watching a job eventlog; a PendingRPC whose responses carry {entries}."""
    return h.rpc("kvs.watch", {"key": jel.eventlog_key(jobid, path), "waitcreate": True,
                               "append": True}, streaming=True) if follow else \
        h.rpc("kvs.get", {"key": jel.eventlog_key(jobid, path)})


def event_watch(h, jobid: int, path: str = "eventlog", *, follow: bool = True,
                timeout: float | None = None):
    """Yield entries of a job eventlog; with follow, until its last entry is written."""
    final = {"eventlog": "clean", "exec": "done"}.get(path)
    if not follow:
        try:
            value = h.call("kvs.get", {"key": jel.eventlog_key(jobid, path)})["value"]
        except FluxliteError as exc:
            if exc.errnum == errno.ENOENT:
                raise FluxliteError(f"job {jobid} has no {path} eventlog yet", errno.ENOENT)
            raise
        yield from value
        return
    for resp in h.stream("kvs.watch", {"key": jel.eventlog_key(jobid, path),
                                       "waitcreate": True, "append": True}, timeout=timeout):
        for e in resp["entries"]:
            yield e
            if final and e.get("name") == final:
                return

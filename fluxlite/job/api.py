"""The small Python API the CLI is built on (blocking handle).

    from fluxlite.client.sync import Handle
    from fluxlite.job import api
    h = Handle()
    jobid = api.submit(h, jobspec)
    for e in api.event_watch(h, jobid): print(e["name"])
    print(api.wait(h, jobid)["result"])
"""

from __future__ import annotations

import time

from ..errors import EndOfStream, NoChild, NotFound, RPCTimeout
from ..util import fluid
from . import eventlog as jel
from . import states


def submit(h, jobspec: dict, urgency: int = 16) -> int:
    return submit_full(h, jobspec, urgency)["id"]


def submit_full(h, jobspec: dict, urgency: int = 16) -> dict:
    """Submit; the answer has the id and, if the job was refused at once, its exception."""
    return h.call("job-manager.submit", {"jobspec": jobspec, "urgency": urgency})


def wait(h, jobid: int, timeout: float | None = None) -> dict:
    """Block until the job is inactive: {id, success, errstr, result, returncode}."""
    return h.call("job-manager.wait", {"id": jobid}, timeout=timeout)


def wait_any(h, timeout: float | None = None) -> dict:
    """Wait for one of the caller's jobs not waited for yet, as wait() does: the one
    that ended first if any has, else the next to end (the job-manager decides, so
    two callers never get the same job).  NoChild (exit code 2) if there is none."""
    try:
        return h.call("job-manager.wait", {}, timeout=timeout)
    except NoChild as exc:
        raise NoChild(exc.message, exit_code=2) from None  # as `flux job wait`


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
    """Yield the entries of a job eventlog (path: eventlog, exec, output, input).

    Without `follow`, the entries there now.  With it, entries as they are
    appended, until the log can grow no more: the main log after `clean`, the
    exec log after `done`, the output log once every task's streams reached
    eof, and any log once the job is inactive (its main log's `clean` is
    watched alongside; the KVS answers in commit order, so every entry written
    before `clean` has been yielded by then).  A log the job never created
    raises NotFound saying why, at once without `follow`, once
    the job is inactive with it.  An unknown job id raises NotFound.
    `timeout` bounds the whole watch (RPCTimeout).
    """
    path = "eventlog" if path == "main" else path
    key = jel.eventlog_key(jobid, path)
    if not follow:
        try:
            value = h.call("kvs.get", {"key": key})["value"]
        except NotFound:
            raise _no_eventlog(h, jobid, path) from None
        yield from value
        return
    info(h, jobid)  # an unknown id is an error now, not a wait for a log never written
    deadline = None if timeout is None else time.monotonic() + timeout
    end = _LogEnd(path)
    watch = _watch(h, key)
    # the main log second: its `clean` arrives after everything committed before it
    main = None if path == "eventlog" else _watch(h, jel.eventlog_key(jobid))
    main_entries: list[dict] = []
    created = False
    try:
        while True:
            while watch.ready():
                try:
                    resp = watch.take()
                except EndOfStream:  # the key was removed: nothing more will come
                    return
                created = True
                for e in resp["entries"]:
                    yield e
                    if end.reached(e):
                        return
            if main is not None and main.ready():
                try:
                    resp = main.take()
                except EndOfStream:
                    return
                main_entries += resp["entries"]
                if any(e.get("name") == "clean" for e in resp["entries"]):
                    if not created:
                        raise _no_eventlog(h, jobid, path, main_entries)
                    return
                continue
            left = None if deadline is None else deadline - time.monotonic()
            if not h.run_until(lambda: watch.ready() or (main is not None and main.ready()),
                               left):
                raise RPCTimeout(f"job {fluid.f58(jobid)}: no end of its {path} eventlog "
                                 f"within {timeout:g}s")
    finally:
        _unwatch(h, key, watch)
        if main is not None:
            _unwatch(h, jel.eventlog_key(jobid), main)


class _LogEnd:
    """Recognises the entry after which an eventlog can grow no more: `clean`
    (main), `done` (exec), the last stream's eof (output); other logs end only
    with the job."""

    def __init__(self, path: str):
        self.final = {"eventlog": "clean", "exec": "done"}.get(path)
        self.output = path == "output"
        self.count: dict[str, int] | None = None
        self.eofs: dict[str, set] = {}

    def reached(self, e: dict) -> bool:
        name = e.get("name")
        if self.final is not None:
            return name == self.final
        if not self.output:
            return False
        ctx = e.get("context") or {}
        if name == "header":
            self.count = dict(ctx.get("count") or {})
        elif name == "data" and ctx.get("eof"):
            self.eofs.setdefault(ctx.get("stream"), set()).add(ctx.get("rank"))
        return bool(self.count) and all(len(self.eofs.get(s, ())) >= n
                                        for s, n in self.count.items())


def _watch(h, key: str):
    return h.rpc("kvs.watch", {"key": key, "waitcreate": True, "append": True},
                 streaming=True)


def _unwatch(h, key: str, p) -> None:
    """Stop a watch early, here and in the KVS (not only when the handle closes)."""
    if p.done:
        return
    p.cancel()
    if h.connected and not getattr(getattr(h, "sock", None), "closed", False):
        h.send("kvs.unwatch", {"key": key, "matchtag": p.matchtag})


def _no_eventlog(h, jobid: int, path: str, main: list[dict] | None = None) -> NotFound:
    """ENOENT for a missing job eventlog, saying whether the job may still write it."""
    job = fluid.f58(jobid)
    if info(h, jobid)["state"] != states.INACTIVE:
        return NotFound(f"job {job} has no {path} eventlog yet")
    if main is None:
        main = h.call("kvs.get", {"key": jel.eventlog_key(jobid)})["value"]
    if not any(e.get("name") == "start" for e in main):
        return NotFound(f"job {job} never started, so it has no {path} eventlog")
    return NotFound(f"job {job} has no {path} eventlog")

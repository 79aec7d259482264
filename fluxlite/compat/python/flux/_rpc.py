"""`flux.Flux().rpc(topic, payload)` for the topics workflow tools use, over
fluxlite's own requests: job-manager.drain (wait until no job is active),
job-list.list and job-list.list-id."""

from __future__ import annotations

import json

from fluxlite.job import api, states


class RPCFuture:
    """What Flux's rpc returns, reduced to its result: get() and get_str()."""

    def __init__(self, fn):
        self._fn, self._done, self._value = fn, False, None

    def get(self):
        if not self._done:
            self._value, self._done = self._fn(), True
        return self._value

    def get_str(self) -> str:
        return json.dumps(self.get())

    def wait_for(self, timeout: float = -1.0) -> "RPCFuture":
        self.get()
        return self


# flux-core's job state and result bits (flux/job.h), as job-list reports them
STATE_BITS = {states.NEW: 1, states.DEPEND: 2, states.PRIORITY: 4, states.SCHED: 8,
              states.RUN: 16, states.CLEANUP: 32, states.INACTIVE: 64}
RESULT_BITS = {"COMPLETED": 1, "FAILED": 2, "CANCELED": 4, "TIMEOUT": 8}


def _list_entry(job: dict) -> dict:
    """A job-manager.list entry in job-list's shape (integer state and result)."""
    ex = job.get("exception") or {}
    out = {"id": job["id"], "userid": job["userid"], "urgency": job.get("urgency"),
           "priority": job.get("priority"), "t_submit": job.get("t_submit"),
           "state": STATE_BITS[job["state"]], "name": job.get("name") or "",
           "ntasks": job.get("ntasks"), "nnodes": job.get("nnodes"),
           "ranks": job.get("ranks") or "", "expiration": job.get("expiration"),
           "exception_occurred": bool(ex.get("occurred"))}
    for key in ("t_run", "t_cleanup", "t_inactive"):
        if job.get(key):
            out[key] = job[key]
    if ex.get("occurred"):
        out.update(exception_type=ex["type"], exception_severity=ex["severity"],
                   exception_note=ex["note"])
    if job["state"] == states.INACTIVE:
        out.update(result=RESULT_BITS.get(job.get("result"), 0),
                   success=job.get("result") == "COMPLETED")
        if job.get("waitstatus") is not None:
            out.update(waitstatus=job["waitstatus"], returncode=job["returncode"])
    return out


def _drain(h) -> None:
    """Block until no job of the instance is active (each round waits on the
    active jobs' eventlogs until `clean`, then lists again: jobs submitted
    meanwhile are waited for too)."""
    while True:
        active = api.list_jobs(h, "active")
        if not active:
            return
        for job in active:
            for _ in api.event_watch(h, job["id"]):
                pass


def _list(h, payload: dict) -> dict:
    bits = payload.get("states") or 0
    out = [_list_entry(j) for j in api.list_jobs(h, "all")
           if not bits or bits & STATE_BITS[j["state"]]]
    limit = payload.get("max_entries") or 0
    return {"jobs": out[:limit] if limit else out}


def rpc(fh, topic: str, payload, nodeid, flags):
    from . import _handle
    h = _handle(fh)
    if isinstance(payload, str):
        payload = json.loads(payload)
    payload = dict(payload or {})
    if flags:
        raise NotImplementedError(f"flux.Flux.rpc({topic!r}, flags=...): not in fluxlite")
    if topic == "job-manager.drain":
        return RPCFuture(lambda: _drain(h) or {})
    if topic == "job-list.list":
        return RPCFuture(lambda: _list(h, payload))
    if topic == "job-list.list-id":
        return RPCFuture(lambda: {"job": _list_entry(api.info(h, int(payload["id"])))})
    raise NotImplementedError(f"flux.Flux.rpc({topic!r}): fluxlite's flux package "
                              "translates only job-manager.drain, job-list.list and "
                              "job-list.list-id")

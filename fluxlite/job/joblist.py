"""A job record in Flux's job-list shape (flux-core's job-list module, as
`flux.job.job_list` and `JobList` read it): state and result as flux/job.h's
bits, exception_* fields, success, waitstatus and returncode; which of them a
request wants (`attrs`), which jobs it wants (RFC 31 constraints: and, or,
not, userid, name, queue, states, results) and their order (pending, then
running, then inactive, the newest first in each).  The job manager answers
job-list.list and job-list.list-id with it."""

from __future__ import annotations

from ..errors import UsageError
from . import states

# flux-core's job state and result bits (flux/job.h)
STATE_BITS = {states.NEW: 1, states.DEPEND: 2, states.PRIORITY: 4, states.SCHED: 8,
              states.RUN: 16, states.CLEANUP: 32, states.INACTIVE: 64}
RESULT_BITS = {"COMPLETED": 1, "FAILED": 2, "CANCELED": 4, "TIMEOUT": 8}


# the attributes job-list.list-attrs names, as Flux's job-list module answers it
# ("all" asks for every one a job has)
ATTRS = ("userid", "urgency", "priority", "t_submit", "t_depend", "t_priority", "t_sched",
         "t_run", "t_cleanup", "t_inactive", "state", "name", "cwd", "queue", "project",
         "bank", "ntasks", "ncores", "duration", "nnodes", "ranks", "nodelist", "success",
         "exception_occurred", "exception_type", "exception_severity", "exception_note",
         "result", "expiration", "annotations", "waitstatus", "dependencies", "all")


def entry(job: dict) -> dict:
    """A job-manager job record (Job.info) as job-list gives it."""
    ex = job.get("exception") or {}
    out = {"id": job["id"], "userid": job["userid"], "urgency": job.get("urgency"),
           "priority": job.get("priority"), "t_submit": job.get("t_submit"),
           "state": STATE_BITS[job["state"]], "name": job.get("name") or "",
           "ntasks": job.get("ntasks"), "nnodes": job.get("nnodes"),
           "ranks": job.get("ranks") or "", "expiration": job.get("expiration"),
           "exception_occurred": bool(ex.get("occurred"))}
    for key in ("ncores", "duration", "t_depend", "t_run", "t_cleanup", "t_inactive", "cwd",
                "queue",
                "dependencies", "annotations"):
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


def _bits(values, names: dict) -> int:
    """An or of state or result values: numbers, or names (case does not matter)."""
    out = 0
    for v in values:
        if isinstance(v, int) and not isinstance(v, bool):
            out |= v
        elif isinstance(v, str) and v.upper() in names:
            out |= names[v.upper()]
        else:
            raise UsageError(f"constraint: {v!r} is not a job state or result")
    return out


_STATE_NAMES = {**{s: b for s, b in STATE_BITS.items()}, "PENDING": 14, "RUNNING": 48,
                "ACTIVE": 63}


def matches(rec: dict, constraint) -> bool:
    """Whether a job-list entry meets an RFC 31 constraint (None or {}: every job)."""
    if not constraint:
        return True
    if not isinstance(constraint, dict):
        raise UsageError("constraint: expected an object like {\"name\": [\"app\"]}")
    for op, values in constraint.items():
        if not isinstance(values, list):
            raise UsageError(f"constraint: {op!r} takes a list")
        if op == "and":
            ok = all(matches(rec, c) for c in values)
        elif op == "or":
            ok = any(matches(rec, c) for c in values)
        elif op == "not":
            ok = not all(matches(rec, c) for c in values)
        elif op in ("userid", "name", "queue"):
            ok = rec.get(op) in values
        elif op == "states":
            ok = bool(rec["state"] & _bits(values, _STATE_NAMES))
        elif op == "results":
            ok = bool(rec.get("result", 0) & _bits(values, RESULT_BITS))
        else:
            raise UsageError(f"constraint: unknown operator {op!r} (allowed: and, or, "
                             "not, userid, name, queue, states, results)")
        if not ok:
            return False
    return True


def order(rec: dict):
    """Sort key: pending jobs first, then running, then inactive; newest first."""
    if rec["state"] & 64:
        return (2, -rec.get("t_inactive", 0))
    if rec["state"] & 48:
        return (1, -rec.get("t_run", 0))
    return (0, -rec.get("t_submit", 0))


def select(rec: dict, attrs: list[str] | None, hosts: tuple[str, ...] = ()) -> dict:
    """The fields a request asked for: ["all"] (or no attrs in the request) is every
    one; `id` always comes ([] is the id alone).  With `hosts` (every rank's host
    name), a job with ranks has its `nodelist` (an RFC 29 hostlist), made only here:
    for the records that are sent."""
    every = attrs is None or "all" in attrs
    if hosts and rec["ranks"] and (every or "nodelist" in attrs):
        from ..util import hostlist, idset
        names = [hosts[r] for r in sorted(idset.decode(rec["ranks"])) if r < len(hosts)]
        rec = {**rec, "nodelist": hostlist.encode(names)}
    if every:
        return rec
    return {k: rec[k] for k in ("id", *attrs) if k in rec}

"""A job record in Flux's job-list shape (flux-core's job-list module, as
`flux.job.job_list` and `JobList` read it): state and result as flux/job.h's
bits, exception_* fields, success, waitstatus and returncode.  The job
manager answers job-list.list and job-list.list-id with it."""

from __future__ import annotations

from . import states

# flux-core's job state and result bits (flux/job.h)
STATE_BITS = {states.NEW: 1, states.DEPEND: 2, states.PRIORITY: 4, states.SCHED: 8,
              states.RUN: 16, states.CLEANUP: 32, states.INACTIVE: 64}
RESULT_BITS = {"COMPLETED": 1, "FAILED": 2, "CANCELED": 4, "TIMEOUT": 8}


def entry(job: dict) -> dict:
    """A job-manager job record (Job.info) as job-list gives it."""
    ex = job.get("exception") or {}
    out = {"id": job["id"], "userid": job["userid"], "urgency": job.get("urgency"),
           "priority": job.get("priority"), "t_submit": job.get("t_submit"),
           "state": STATE_BITS[job["state"]], "name": job.get("name") or "",
           "ntasks": job.get("ntasks"), "nnodes": job.get("nnodes"),
           "ranks": job.get("ranks") or "", "expiration": job.get("expiration"),
           "exception_occurred": bool(ex.get("occurred"))}
    for key in ("t_depend", "t_run", "t_cleanup", "t_inactive", "cwd", "queue",
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


def wanted(rec: dict, states_mask: int, results_mask: int, userid, since: float) -> bool:
    """Whether a job-list entry passes job-list.list's filters (0 masks: any)."""
    if states_mask and not states_mask & rec["state"]:
        if not (results_mask and rec.get("result", 0) & results_mask):
            return False
    elif results_mask and not rec.get("result", 0) & results_mask and not states_mask:
        return False
    if userid not in (None, -1, 0xFFFFFFFF) and rec["userid"] != userid:
        return False
    return not since or rec["state"] != 64 or rec.get("t_inactive", 0) > since

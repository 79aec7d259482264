"""What the table says about jobs: job-manager.list/info/stats/history and
Flux's job-list service (job-list.list, list-id, list-attrs, job-stats), all
answered from the one job table (job/joblist.py gives job-list's shape)."""

from __future__ import annotations

from typing import Annotated

from ...job import joblist, states
from ...protocol.schema import AnyMap, JobId, JobRequest, Meta, Name, Struct, UserId
from ..base import ANY, handler
from .effects import BUSY


class ListRequest(Struct, kw_only=True):
    states: Name = "active"
    ids: list[JobId] | None = None
    userid: UserId | None = None     # only this user's jobs (None: everyone's)


class JobListRequest(Struct, kw_only=True):
    """Flux's job-list.list: at most max_entries jobs (0: all) that meet an RFC 31
    constraint, inactive ones only if they became so after `since`; the fields
    named in attrs (["all"]: every one)."""
    max_entries: Annotated[int, Meta(ge=0)] = 0
    since: float = 0.0
    attrs: list[str] | None = None
    constraint: AnyMap | None = None


class JobListIdRequest(Struct, kw_only=True):
    id: JobId
    attrs: list[str] | None = None


class Listing:
    """The table's answers to queries (a part of JobManagerService)."""

    @handler("job-manager.list", schema=ListRequest, roles=ANY)
    def list(self, msg, r):
        which, ids = r.states, (set(r.ids) if r.ids is not None else None)
        out = []
        for job in self.jobs.values():
            if ids is not None and job.id not in ids:
                continue
            if r.userid is not None and job.userid != r.userid:
                continue
            if which == "active" and job.state == states.INACTIVE:
                continue
            if which == "inactive" and job.state != states.INACTIVE:
                continue
            out.append(job.info(self.level))
        out.sort(key=lambda j: (j["state"] == states.INACTIVE, -j["t_submit"]))
        return {"jobs": out}

    # Flux's job-list service, answered from the same job table (joblist.py: its shape)
    @handler("job-list.list", schema=JobListRequest, roles=ANY)
    def job_list(self, msg, r):
        found = [joblist.entry(j.info(self.level)) for j in self.jobs.values()]
        found = sorted((e for e in found if joblist.matches(e, r.constraint) and
                        (not r.since or e.get("t_inactive", r.since + 1) > r.since)),
                       key=joblist.order)
        if r.max_entries:
            found = found[:r.max_entries]
        return {"jobs": [joblist.select(e, r.attrs, self.ctx.hosts) for e in found]}

    @handler("job-list.job-stats", schema=None, roles=ANY)
    def job_list_stats(self, msg, r):
        """Flux's job-list.job-stats: jobs per state and per result (every user's)."""
        names = {states.NEW: "depend", states.DEPEND: "depend", states.PRIORITY: "priority",
                 states.SCHED: "sched", states.RUN: "run", states.CLEANUP: "cleanup",
                 states.INACTIVE: "inactive"}
        counts = dict.fromkeys(("depend", "priority", "sched", "run", "cleanup", "inactive"),
                               0)
        results = dict.fromkeys(("successful", "failed", "timeout", "canceled"), 0)
        by_result = {"COMPLETED": "successful", "FAILED": "failed", "TIMEOUT": "timeout",
                     "CANCELED": "canceled"}
        for job in self.jobs.values():
            counts[names[job.state]] += 1
            if job.state == states.INACTIVE and job.result in by_result:
                results[by_result[job.result]] += 1
        return {"job_states": {**counts, "total": len(self.jobs) + self.inactive_purged},
                **results, "inactive_purged": self.inactive_purged, "queues": []}

    @handler("job-list.list-attrs", schema=None, roles=ANY)
    def job_list_attrs(self, msg, r):
        """Flux's job-list.list-attrs: the attributes job-list.list may be asked for."""
        return {"attrs": list(joblist.ATTRS)}

    @handler("job-list.list-id", schema=JobListIdRequest, roles=ANY)
    def job_list_id(self, msg, r):
        return {"job": joblist.select(joblist.entry(self._job(r.id).info(self.level)),
                                      r.attrs, self.ctx.hosts)}

    @handler("job-manager.stats", schema=None, roles=ANY)
    def stats(self, msg, r):
        """Counts of every job in the instance, as `jobs --stats` prints them."""
        out = {"pending": 0, "running": 0, "successful": 0, "failed": 0,
               "inactive_purged": self.inactive_purged,
               "journal": {"listeners": len(self.journal)}}
        for job in self.jobs.values():
            if job.state in states.PENDING or job.state == states.NEW:
                out["pending"] += 1
            elif job.state in BUSY:
                out["running"] += 1
            elif job.result == "COMPLETED":
                out["successful"] += 1
            else:
                out["failed"] += 1   # failed, canceled and timeout, as Flux counts them
        return out

    @handler("job-manager.history.get", schema=None, roles=ANY)
    def history_get(self, msg, r):
        """The ids of the caller's jobs, newest first (`job last`)."""
        self.require_plugin(".history", msg.topic)
        ids = [j.id for j in self.jobs.values() if j.userid == msg.userid]
        ids.reverse()  # jobs are kept in submit order
        return {"jobs": ids}

    @handler("job-manager.info", schema=JobRequest, roles=ANY)
    def info(self, msg, r):
        return self._job(r.id).info(self.level)


"""Purging inactive jobs (flux-core's purge.c): by the age and number limits as
each job ends (and for the age, by a timer), or by job-manager.purge."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from ...errors import UsageError
from ...job import states
from ...job.actions import Job
from ...job.eventlog import job_key
from ...protocol.schema import JobId, Meta, Struct
from ...util import fluid, fsd, procs
from ..base import handler


class PurgeRequest(Struct, kw_only=True):
    age_limit: Annotated[float, Meta(ge=-1)] = -1.0   # seconds; -1: no age limit
    num_limit: Annotated[int, Meta(ge=-1)] = -1       # -1: no number limit
    force: bool = False
    ids: list[JobId] | None = None


WAITABLE = states.WAITABLE
TRIM_EVERY = 256   # purged jobs between two trims of the heap (release_free_memory)

AGE_LIMIT = "job-manager.inactive-age-limit"
NUM_LIMIT = "job-manager.inactive-num-limit"

class Purge:
    """Inactive jobs forgotten (a part of JobManagerService)."""


    # Inactive jobs are forgotten oldest first: by the job-manager.inactive-age-limit and
    # inactive-num-limit attributes as each job ends (and, for the age, by a timer), or
    # by `job-manager.purge` (`fluxlite job purge`).  A purged job leaves the job table
    # and the KVS (its output goes from the store with it): it is an unknown job.
    # A job submitted WAITABLE stays until it has been waited for.
    def _limits(self) -> tuple[float, int]:
        """The policy's (age limit in seconds, number limit); -1 for no limit."""
        age, num = (self.ctx.attrs.get(AGE_LIMIT) or ""), (self.ctx.attrs.get(NUM_LIMIT) or "")
        return (fsd.parse(age) if age else -1.0), (int(num) if num else -1)

    def _purgeable(self, age_limit: float, num_limit: int, now: float) -> list[Job]:
        """Inactive jobs beyond an age or number limit, oldest first."""
        over = len(self.inactive) - num_limit if num_limit >= 0 else 0
        out = []
        for i, job in enumerate(self.inactive.values()):
            if i >= over and (age_limit < 0 or now - job.t_inactive <= age_limit):
                break  # the rest are younger
            if job.flags & WAITABLE and not job.waited:
                continue
            out.append(job)
        return out

    def _purge(self, jobs: list[Job]) -> None:
        if not jobs:
            return
        ops = [{"key": job_key(j.id), "unlink": True, "prune": True} for j in jobs]
        self.max_purged = max(self.max_purged, *(j.id for j in jobs))
        if self.kvs.durable:
            self.checkpoint(*ops)
        else:
            self.kvs.commit(ops)
        for job in jobs:
            del self.inactive[job.id]
            del self.jobs[job.id]
        self.inactive_purged += len(jobs)
        self._untrimmed += len(jobs)
        if self._untrimmed >= TRIM_EVERY or not self.inactive:
            self._untrimmed = 0
            procs.release_free_memory()

    def _purge_by_policy(self) -> None:
        age_limit, num_limit = self._limits()
        if age_limit < 0 and num_limit < 0:
            return
        now = time.time()
        self._purge(self._purgeable(age_limit, num_limit, now))
        if age_limit >= 0 and self.inactive and self._purge_timer is None:
            oldest = next(iter(self.inactive.values()))
            delay = max(0.0, oldest.t_inactive + age_limit - now) + 0.01
            self._purge_timer = asyncio.get_running_loop().call_later(delay, self._purge_tick)

    def _purge_tick(self) -> None:
        self._purge_timer = None
        self._purge_by_policy()

    @handler("job-manager.purge", schema=PurgeRequest)
    def purge(self, msg, r):
        """Purge inactive jobs (by limits, or the given ids); without `force`, only
        count them.  Answers {count, inactive} (inactive: how many remain)."""
        if r.ids is not None:
            jobs = []
            for jobid in r.ids:
                job = self._job(jobid)
                if job.state != states.INACTIVE:
                    raise UsageError(f"job {fluid.f58(jobid)} is not inactive: only inactive "
                                     "jobs can be purged")
                jobs.append(job)
        elif r.age_limit < 0 and r.num_limit < 0:
            jobs = []
        else:
            jobs = self._purgeable(r.age_limit, r.num_limit, time.time())
        count = len(jobs)
        if r.force:
            self._purge(jobs)
        return {"count": count, "inactive": len(self.inactive)}


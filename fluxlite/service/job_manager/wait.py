"""Waiting for jobs (flux-core's wait.c): job-manager.wait for one job or for
any of the caller's, answered when the job becomes inactive."""

from __future__ import annotations

import functools

from ...errors import NoChild
from ...job import states
from ...job.actions import Job, own
from ...protocol.schema import JobId, Struct
from ..base import ANY, handler


class WaitRequest(Struct, kw_only=True):
    id: JobId | None = None


def _unwait(job: Job, msg) -> None:
    """A waiter's client went away."""
    if msg in job.waiters:
        job.waiters.remove(msg)


class Waits:
    """job-manager.wait and its answers (a part of JobManagerService)."""

    @handler("job-manager.wait", schema=WaitRequest, roles=ANY)
    def wait(self, msg, r):
        """Wait for one job (`{id}`), or without an id for any job of the caller's
        not waited for yet: the one that ended first, else the next to end."""
        if r.id is None:
            return self._wait_any(msg)
        job = self._job(r.id)
        if job.state == states.INACTIVE:
            out = self._wait_result(job)
            self._purge_by_policy()  # a waitable job may go now
            return out
        msg.drop_payload()  # kept to be answered: its route and matchtag are enough
        own(job, "waiters").append(msg)
        self.track_stream(msg, functools.partial(_unwait, job, msg))
        return self.no_reply

    def _waitable(self, msg, job: Job) -> bool:
        """A job `msg`'s sender may get from a wait for any job: its own, not waited
        for yet, and nobody waiting for it by id."""
        return job.userid == msg.userid and not job.waited and not job.waiters

    def _wait_any(self, msg):
        done = [j for j in self.jobs.values()
                if j.state == states.INACTIVE and self._waitable(msg, j)]
        if done:
            return self._wait_result(min(done, key=lambda j: j.t_inactive))
        pending = [j for j in self.jobs.values() if self._waitable(msg, j)]
        if len(pending) <= sum(1 for w in self.any_waiters if w.userid == msg.userid):
            raise NoChild("there are no waitable jobs")
        msg.drop_payload()
        self.any_waiters.append(msg)
        self.track_stream(msg, lambda: self.any_waiters.remove(msg)
                          if msg in self.any_waiters else None)
        return self.no_reply

    def _answer_waiters(self, job: Job) -> None:
        for w in job.waiters:
            self.untrack_stream(w)
            self.respond(w, self._wait_result(job))
        job.waiters = ()
        for w in list(self.any_waiters):
            if self._waitable(w, job):  # the first waiting for any job gets it
                self.any_waiters.remove(w)
                self.untrack_stream(w)
                self.respond(w, self._wait_result(job))
                break

    def _wait_result(self, job: Job) -> dict:
        job.waited = True
        info = job.info(self.level)
        ok = info["result"] == "COMPLETED"
        if ok:
            err = ""
        elif job.fatal:
            err = f"Fatal exception type={job.fatal['type']} {job.fatal['note']}"
        else:
            err = states.status_message(job.status or 0) or info["result"]
        return {"id": job.id, "success": ok, "errstr": err, "result": info["result"],
                "returncode": info["returncode"]}


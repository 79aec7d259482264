"""`flux.job.watcher`: JobStatus (a job's state in words, its exit code and the
events seen) and JobWatcher, which follows jobs from the reactor: each job's
output goes to `output_callback(jobid, stream, data)` or, without one, to the
watcher's stdout/stderr; once every job has ended (its main eventlog and its
output) the watcher has nothing left for the reactor, and exitcode is the
largest of the jobs'."""

from __future__ import annotations

import collections
import sys

from fluxlite.errors import NoService

from .event import event_watch_async
from .info import JobInfo

__all__ = ["JobStatus", "JobWatcher"]


class JobStatus:
    """JobStatus(JobInfo): `.id`, `.status` (pending, running, complete, failed),
    `.exitcode`, `.active`, and the events added (has_event, event_count)."""

    def __init__(self, job):
        if not isinstance(job, JobInfo):
            raise ValueError(f"JobStatus takes a JobInfo, not {type(job).__name__}")
        self.job = job
        self.id = job.id
        self.events: collections.Counter = collections.Counter()

    @property
    def active(self) -> bool:
        return self.job.state != "INACTIVE"

    @property
    def status(self) -> str:
        state = self.job.state
        if state in ("NEW", "DEPEND", "PRIORITY", "SCHED"):
            return "pending"
        if state in ("RUN", "CLEANUP"):
            return "running"
        return "complete" if self.job.result == "COMPLETED" else "failed"

    @property
    def exitcode(self) -> int:
        if self.active:
            return 0
        code = self.job.returncode
        if isinstance(code, int):
            return code
        return 0 if self.status == "complete" else 1

    def add_event(self, name: str) -> None:
        self.events[name] += 1

    def has_event(self, name: str) -> bool:
        return self.events[name] > 0

    def event_count(self, name: str) -> int:
        return self.events[name]


class JobWatcher:
    """Follow jobs' output from the reactor of `flux_handle` (start(), then
    add_jobid() for each job, then flux_handle.reactor_run())."""

    def __init__(self, flux_handle, jobs=None, labelio: bool = False, stdout=None,
                 stderr=None, output_callback=None, **kwargs):
        shown = sorted(k for k, v in kwargs.items() if v)
        if shown:
            raise NoService(f"flux.job.watcher.JobWatcher({', '.join(shown)}): fluxlite's "
                            "JobWatcher follows jobs' output only (no progress bar or "
                            "event log)")
        self.flux_handle = flux_handle
        self.labelio = labelio
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr
        self.output_callback = output_callback
        self.exitcode = 0
        self.started = False
        self.jobs: dict[int, dict] = {}
        for jobid in jobs or []:
            self.add_jobid(jobid)

    def start(self) -> JobWatcher:
        self.started = True
        for jobid, job in self.jobs.items():
            if job.get("watch") is None:
                self._follow(jobid)
        return self

    def add_jobid(self, jobid) -> None:
        from . import JobID
        jobid = JobID(jobid)
        self.jobs.setdefault(int(jobid), {"id": jobid, "watch": None})
        if self.started:
            self._follow(int(jobid))

    def _follow(self, jobid: int) -> None:
        job = self.jobs[jobid]
        job["watch"] = event_watch_async(self.flux_handle, jobid, "output")
        job["watch"].then(self._output, job)
        job["main"] = event_watch_async(self.flux_handle, jobid)   # ends with the job
        job["main"].then(self._main, job)

    def _main(self, future, job) -> None:
        if future.get_event() is None:
            self._done(job)

    def _output(self, future, job) -> None:
        event = future.get_event()
        if event is None:
            return
        if event.name != "data":
            return
        ctx = event.context
        data = ctx.get("data")
        if data is None:
            return
        stream = ctx.get("stream", "stdout")
        if self.labelio:
            data = "".join(f"{ctx.get('rank')}: {line}"
                           for line in data.splitlines(keepends=True))
        if self.output_callback is not None:
            self.output_callback(job["id"], stream, data)
        else:
            (self.stderr if stream == "stderr" else self.stdout).write(data)

    def _done(self, job) -> None:
        from . import job_list_id
        info = job_list_id(self.flux_handle, job["id"]).get_jobinfo()
        self.exitcode = max(self.exitcode, JobStatus(info).exitcode)

"""The job table and the driver of the per-job machine (job/actions.py): events
in, effects carried out (effects.py), eventlog entries committed, and the
answers of sched and job-exec turned back into events."""

from __future__ import annotations

import asyncio
import time

from ...errors import EndOfStream, NotFound
from ...job import actions as act
from ...job.actions import Job
from ...job.eventlog import job_key
from ...util import fluid
from ...util.log import enabled as log_enabled
from .effects import BUSY, EFFECTS, Commit


class JobTable:
    """The table's helpers and the one place events are handled (a part of
    JobManagerService)."""

    def _job(self, jobid) -> Job:
        job = self.jobs.get(jobid)
        if job is None:
            raise NotFound(f"unknown job id {fluid.f58(jobid)}")
        return job

    def _authorize(self, msg, job: Job) -> None:
        self.authorize(msg, job.userid, f"job {fluid.f58(job.id)}")

    def _jobspec(self, job: Job) -> dict:
        """The job's jobspec, from the KVS (its one copy)."""
        return self.kvs.lookup(job_key(job.id, "jobspec"))

    # ------------------------------------------------------ the one place
    def _handle(self, job: Job, event) -> None:
        """Feed one event to the job's state machine (job/actions.py) and carry out
        the effects it returns, in order.  Nothing it does calls back in: requests
        and their answers are handed over on later turns of the loop (the router),
        and so are events it makes for other jobs (`_handle_later`)."""
        old = job.state
        effects = self.actions.handle(job, event, time.time())
        if log_enabled("debug"):
            self.log.debug("job transition", jobid=fluid.f58_plain(job.id),
                           state=f"{old}->{job.state}", stimulus=type(event).__name__,
                           effects=act.describe(effects))
        self._apply(job, old, effects)

    def _handle_later(self, job: Job, event) -> None:
        """An event for another job than the one whose effects are being carried out
        (a dependent's verdict, a singleton let go), handled on a later turn of the
        loop as a message would be: a chain of ten thousand dependents is then a
        chain of turns, not of nested calls."""
        asyncio.get_running_loop().call_soon(self._handle, job, event)

    def _stamp(self, ts: float) -> float:
        """An entry's timestamp, later than every one before it, as each of Flux's
        events has its own (a state change's events share one `now`); a journal in
        timestamp order is then the order they were logged in."""
        ts = max(ts or time.time(), self._last_stamp + 1e-6)
        self._last_stamp = ts
        return ts

    def _apply(self, job: Job, old: str, effects: list) -> None:
        """Carry out the machine's effects in order, each by its interpreter
        (effects.py).  Consecutive eventlog entries go to the KVS in one commit,
        made before any other effect: what an entry leads to is done once it is
        written."""
        if (old in BUSY) != (job.state in BUSY):
            self._count_running(job.state in BUSY)
        commit = Commit()
        for e in effects:
            kind = type(e)
            if kind is not act.Post and commit.entries:
                self._commit(job, commit)
            EFFECTS[kind](self, job, e, commit)
        if commit.entries:
            self._commit(job, commit)

    def _count_running(self, busy: bool) -> None:
        """A job entered or left RUN/CLEANUP: `queue idle` and shutdown wait on this."""
        self.n_running += 1 if busy else -1
        if self.n_running:
            self._calm.clear()
        else:
            self._calm.set()
            if self.idle_waiters:
                self._answer_idle()

    def _commit(self, job: Job, commit: Commit) -> None:
        """Append entries to the job's main eventlog (with other keys of the job)."""
        entries = commit.entries
        self.kvs.commit([*commit.ops, {"key": job.key, "append": entries}])
        commit.ops, commit.entries = [], []
        if self.journal:
            self._journal_post(job, entries)

    # ------------------------------------------- answers, turned into events
    def _alloc_answer(self, job: Job, seq: int, resp) -> None:
        if resp.errnum:
            self._handle(job, act.AllocAnswered(seq, errnum=resp.errnum, errstr=resp.errstr))
        else:
            got = resp.payload
            self._handle(job, act.AllocAnswered(seq, got["alloc"], got.get("summary", ""),
                                                gpus=got.get("gpus"),
                                                properties=got.get("properties")))

    def _exec_answer(self, job: Job, resp) -> None:
        if resp.errnum:
            if not isinstance(resp.error(), EndOfStream):   # the stream's clean end
                self._handle(job, act.ExecFailed(resp.errstr))
            return
        kind, data = resp.payload.get("type"), resp.payload.get("data") or {}
        if kind == "start":
            ev = act.ExecStarted()
        elif kind == "exception":
            ev = act.ExecException(data["type"], data["severity"], data.get("note", ""),
                                   data.get("context"))
        elif kind == "finish":
            ev = act.ExecFinished(data["status"])
        elif kind == "release":
            ev = act.ExecReleased(data.get("ranks", "all"), bool(data.get("final")))
        else:
            return
        self._handle(job, ev)

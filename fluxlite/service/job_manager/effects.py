"""The interpreters of the per-job machine's effects (job/actions.py), one per
effect type, in a table checked at import (util/handlers.py): every effect the
machine can return has an interpreter named for it, so a new effect without one
is an import error, not a job stuck at run time.

Each interpreter is given the job, the effect and the commit being gathered
(only `Post` adds to it; the table's driver, table.py, writes it before any
other effect is carried out).  What they do is I/O the machine leaves out: the
KVS, requests to sched and job-exec, timers, waiters and dependents.
"""

from __future__ import annotations

import asyncio
import functools

from ...job import actions as act
from ...job import machine_io, states
from ...job.actions import Job, own
from ...job.eventlog import entry, job_key
from ...service import jm_restart
from ...util import procs
from ...util.handlers import handler_table

BUSY = (states.RUN, states.CLEANUP)   # the states `queue idle` waits out


class Commit:
    """Eventlog entries, and other keys of the job, that go to the KVS in one commit."""

    __slots__ = ("ops", "entries")

    def __init__(self):
        self.ops: list = []
        self.entries: list = []


class Effects:
    """The effect interpreters (a part of JobManagerService)."""

    def _on_Post(self, job: Job, e: act.Post, commit: Commit) -> None:
        if e.extra:
            commit.ops += [{"key": job_key(job.id, k), "value": v} for k, v in e.extra.items()]
        commit.entries.append(entry(e.name, e.context, self._stamp(e.timestamp)))

    def _on_AskAlloc(self, job: Job, e: act.AskAlloc, commit: Commit) -> None:
        ask = {"id": job.id, "request": job.req.wire(), "priority": e.priority,
               "queue": job.queue, "duration": job.duration}
        if job.constraint:
            ask["constraint"] = job.constraint
        p = self.rpc("sched.alloc", ask)
        p.on_response = functools.partial(self._alloc_answer, job, e.seq)

    def _on_CancelAlloc(self, job: Job, e: act.CancelAlloc, commit: Commit) -> None:
        self.send("sched.cancel", {"id": job.id})

    def _on_Prioritize(self, job: Job, e: act.Prioritize, commit: Commit) -> None:
        self.send("sched.prioritize", {"id": job.id, "priority": e.priority})

    def _on_Free(self, job: Job, e: act.Free, commit: Commit) -> None:
        self.send("sched.free", {"id": job.id})

    def _on_StartExec(self, job: Job, e: act.StartExec, commit: Commit) -> None:
        p = self.rpc("job-exec.start", {"id": job.id, "userid": job.userid,
                                        "request": job.req.wire(),
                                        "jobspec": self._jobspec(job), "R": e.R},
                     streaming=True)
        p.on_response = functools.partial(self._exec_answer, job)

    def _on_ForwardException(self, job: Job, e: act.ForwardException,
                             commit: Commit) -> None:
        self.send("job-exec.exception", e.payload)

    def _on_Watch(self, job: Job, e: act.Watch, commit: Commit) -> None:
        target = self.jobs.get(e.target)
        if target is not None:
            own(target, "dependents").append(job)

    def _on_BeginTimer(self, job: Job, e: act.BeginTimer, commit: Commit) -> None:
        asyncio.get_running_loop().call_later(
            e.delay, self._handle, job, act.BeginTimeReached(e.desc))

    def _on_AnswerWaiters(self, job: Job, e: act.AnswerWaiters, commit: Commit) -> None:
        self._answer_waiters(job)

    def _on_NotifyDependents(self, job: Job, e: act.NotifyDependents,
                             commit: Commit) -> None:
        self._settle_dependents(job)

    def _on_Inactive(self, job: Job, e: act.Inactive, commit: Commit) -> None:
        """Count the job out (its summary kept for a restart, with a state directory);
        the last active job to end answers `queue drain`."""
        self.n_active -= 1
        if self._named:
            self._singleton_gone(job)
        self.inactive[job.id] = job
        if self.kvs.durable:
            jm_restart.summarize(self, job)
        if self.n_active == 0:
            self._idle.set()
            for w in self.drain_waiters:
                self.untrack_stream(w)
                self.respond(w, {})
            self.drain_waiters.clear()
        self._purge_by_policy()
        if self.n_active == 0:
            procs.release_free_memory()  # the peak of a burst of jobs is over


EFFECTS = handler_table(Effects, machine_io.Effect, {
    act.Post: Effects._on_Post,
    act.AskAlloc: Effects._on_AskAlloc,
    act.CancelAlloc: Effects._on_CancelAlloc,
    act.Prioritize: Effects._on_Prioritize,
    act.Free: Effects._on_Free,
    act.StartExec: Effects._on_StartExec,
    act.ForwardException: Effects._on_ForwardException,
    act.Watch: Effects._on_Watch,
    act.BeginTimer: Effects._on_BeginTimer,
    act.AnswerWaiters: Effects._on_AnswerWaiters,
    act.NotifyDependents: Effects._on_NotifyDependents,
    act.Inactive: Effects._on_Inactive,
})

"""Submission (flux-core's job-ingest and submit.c): a jobspec checked, its queue's
policy applied, the scheduler asked whether it could ever fit (sched.feasibility),
and only then a job made, with its dependencies judged from the table."""

from __future__ import annotations

import collections
import functools
import time
from typing import Annotated

from ...errors import NoService, PermissionDenied, TryAgain, Unsatisfiable, UsageError
from ...job import actions as act
from ...job import depend, signed
from ...job import schema as jschema
from ...job.actions import Job
from ...job.states import WAITABLE
from ...protocol.schema import BULK_PAYLOAD, AnyMap, Meta, Struct, Urgency
from ..base import ANY, handler


class SubmitRequest(Struct, kw_only=True):
    jobspec: AnyMap
    urgency: Urgency = 16
    flags: Annotated[int, Meta(ge=0)] = 0   # WAITABLE: not purged until waited for


class IngestRequest(Struct, kw_only=True):
    J: str
    urgency: int = 16                        # its range is checked with Flux's message
    flags: Annotated[int, Meta(ge=0)] = 0


class Submit:
    """job-manager.submit and job-ingest.submit (a part of JobManagerService)."""

    @handler("job-manager.submit", schema=SubmitRequest, roles=ANY, max_payload=BULK_PAYLOAD)
    def submit(self, msg, r):
        """A job gets an id once sched.feasibility has checked its request against the
        instance (an unknown queue, a malformed constraint: a submit error, no job).
        One that can never fit is taken, as Flux's job-ingest takes it (no feasibility
        validator by default): the scheduler denies it, a fatal `alloc` exception
        "unsatisfiable request: ..."."""
        req = jschema.validate(r.jobspec)
        self._open(msg, r)
        system = r.jobspec["attributes"]["system"]
        deps = system.get("dependencies", [])
        self.check_schemes(deps)   # a removed jobtap plugin's scheme (jobtap.py)
        for dep in deps:   # a malformed one is an error before anything is asked
            if dep["scheme"] not in (depend.BEGIN_TIME, depend.SINGLETON):
                depend.target(dep["value"], dep["scheme"])
        queue = self._queue_policy(system, req)
        ask = {"request": req.wire(), "queue": queue}
        if system.get("constraints"):
            ask["constraint"] = system["constraints"]
        p = self.rpc("sched.feasibility", ask)
        p.on_response = functools.partial(self._feasible, msg, r, req)
        return self.no_reply

    @handler("job-ingest.submit", schema=IngestRequest, roles=ANY, max_payload=BULK_PAYLOAD)
    def ingest_submit(self, msg, r):
        """Flux's job-ingest.submit: J (signed.py: Flux's unsigned form) taken apart,
        then submitted as job-manager.submit submits a jobspec."""
        if not depend.URGENCY_HOLD <= r.urgency <= depend.URGENCY_EXPEDITE:
            raise UsageError(f"urgency range is [{depend.URGENCY_HOLD}:"
                             f"{depend.URGENCY_EXPEDITE}]")
        return self.submit(msg, SubmitRequest(jobspec=signed.unwrap(r.J, msg.userid),
                                              urgency=r.urgency, flags=r.flags))

    def _queue_policy(self, system: dict, req: jschema.Request) -> str:
        """The job's queue (named, or the default, written into its jobspec as Flux
        does), whose limits it must keep; a job without a time limit gets the queue's
        default duration (or the instance's)."""
        queue = self.policy.queue_of(system)
        state = self.queues[queue]
        if not state.enable:
            raise UsageError(f"{'queue ' + queue + ': ' if queue else ''}job submission is "
                             f"disabled: {state.disable_reason}")
        if queue:
            system["queue"] = queue
        if not system.get("duration"):
            default = self.policy.default_duration(queue)
            if default:
                system["duration"] = default
        nnodes = req.nnodes or 1
        self.policy.check_limits(queue, system.get("duration") or 0.0, {
            "nnodes": nnodes, "ncores": req.nslots * req.cores_per_slot,
            "ngpus": req.nslots * req.gpus_per_slot})
        return queue

    def _open(self, msg, r) -> None:
        """Whether a submission may be taken now, from this sender."""
        if self.ctx.at_least("cleanup"):
            raise TryAgain("the instance is shutting down: submissions are closed")
        if r.urgency > depend.URGENCY_DEFAULT and not self.is_owner(msg):
            raise PermissionDenied(f"urgency {r.urgency}: only the instance owner may submit "
                                   f"with an urgency above {depend.URGENCY_DEFAULT}")
        if r.flags & ~WAITABLE:
            raise UsageError(f"submit: unknown flags 0x{r.flags & ~WAITABLE:x}")

    def _feasible(self, msg, r, req: jschema.Request, resp) -> None:
        """sched's feasibility answer: refuse the submission, or make the job (an
        unsatisfiable one too: sched.alloc denies it; and any while no scheduler is
        loaded, as Flux takes them: they wait for one)."""
        if resp.errnum:
            error = resp.error()
            if not isinstance(error, (Unsatisfiable, NoService)):
                self.respond_exception(msg, error)
                return
        try:
            self._open(msg, r)   # the instance may have begun shutting down meanwhile
            self.respond(msg, self._new_job(msg.userid, r, req))
        except Exception as exc:
            self.dispatcher.respond_exception(msg, exc)

    def _new_job(self, userid: int, r, req: jschema.Request) -> dict:
        spec = r.jobspec
        name = spec["attributes"]["system"].get("job", {}).get("name")
        key = (userid, name) if name else None   # singleton counts explicitly named jobs
        deps = tuple(self._dep(userid, d, key) for d in
                     spec["attributes"]["system"].get("dependencies", []))
        jobid = self.gen.generate()
        job = Job(jobid, userid, spec, req, r.urgency, time.time(), r.flags)
        self.jobs[jobid] = job
        if key is not None:
            self._named[jobid] = key
            self._named_active[key] = self._named_active.get(key, 0) + 1
            if any(d.scheme == depend.SINGLETON and d.verdict == depend.WAIT for d in deps):
                self._singletons.setdefault(key, collections.deque()).append(job)
        self.n_active += 1
        self._idle.clear()
        self._handle(job, act.Submitted(spec, deps))
        out = {"id": jobid}
        if job.fatal is not None and job.fatal["type"] == "dependency":
            # ended at submit: a dependency that can never be met (a scheduler's denial
            # is the job's, as in Flux: the submission itself succeeded)
            out["exception"] = {"type": job.fatal["type"], "note": job.fatal["note"]}
        return out


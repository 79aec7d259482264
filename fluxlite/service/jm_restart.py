"""The job-manager's restart from a state directory: its table rebuilt from the KVS.

Every job's jobspec and main eventlog (and R, if it was given resources) are
replayed through the state machine's own update (job/actions.py `replay`), so
the table is the one the last run left, without anything kept beside the
eventlogs.  What the job-manager keeps that is not a job's is one KVS key,
`checkpoint.job-manager`:

    {"version": 1, "epoch": T,            the job id clock's zero: ids keep increasing
     "max_jobid": ID,                     the largest id of a job purged
     "queue": {"start": bool, "reason": str,    the queue, unless stopped --nocheckpoint;
               "enable": false, "disable_reason": str}}   a disabled queue

Then the links no eventlog holds are made again (dependents, singletons,
begin-time timers), and every active job is looked at once more (Restarted):
a pending job asks the scheduler again, in the order it was submitted; a job
that held resources when rank 0 stopped ends with an exception saying so (its
shells died with their brokers).
"""

from __future__ import annotations

import asyncio
import collections
import gc
import time

from ..errors import FluxliteError
from ..job import actions as act
from ..job import depend, states
from ..util import fluid

CHECKPOINT = "checkpoint.job-manager"


def read_checkpoint(kvs) -> dict | None:
    try:
        return kvs.lookup(CHECKPOINT)
    except FluxliteError:
        return None


RECORDS = "job.????.????.????.????.[Rej]*"   # a job's R, eventlog and jobspec keys
WANTED = ("R", "eventlog", "jobspec")


def _records(kvs):
    """(job id, {"jobspec", "eventlog", "R"}) of every job the KVS holds, in id order,
    read in one pass and one job at a time (ten thousand jobspecs are never held at
    once)."""
    jobid, records = None, {}
    for key, value in kvs.scan(RECORDS):
        parts = key.split(".")
        if len(parts) != 6 or parts[5] not in WANTED:
            continue
        try:
            this = int("".join(parts[1:5]), 16)
        except ValueError:
            continue
        if this != jobid:
            if jobid is not None:
                yield jobid, records
            jobid, records = this, {}
        records[parts[5]] = value
    if jobid is not None:
        yield jobid, records


def rebuild(jm) -> None:
    """Fill the job-manager's table from the KVS; nothing is sent anywhere yet.  The
    cyclic collector is held off meanwhile: every object made here lives on (the
    table), so its collections would find nothing and cost half the time."""
    gc.disable()
    try:
        _rebuild(jm)
    finally:
        gc.enable()


def _rebuild(jm) -> None:
    kvs = jm.kvs
    cp = read_checkpoint(kvs)
    if cp is None:
        jm.checkpoint()   # a new state directory: the id clock's zero is kept from now
        return
    jm.gen = fluid.FluidGenerator(0, epoch=cp["epoch"])
    top = jm.max_purged = cp.get("max_jobid", 0)
    jm.restore_queues(cp.get("queue") or {"start": True})
    inactive = []
    for jobid, records in _records(kvs):
        try:
            spec = records["jobspec"]
            job = act.replay(jobid, spec, records["eventlog"], records.get("R"))
        except (KeyError, TypeError, ValueError, IndexError, FluxliteError) as exc:
            jm.log.error("restart: job left out (its records are incomplete)",
                         jobid=fluid.f58_plain(jobid), error=repr(exc))
            continue
        top = max(top, jobid)
        jm.jobs[jobid] = job
        if job.state == states.INACTIVE:
            # whoever was to wait for it went with the last run (`job wait ID` still
            # answers): purge limits apply to it as to any other
            job.waited = True
            inactive.append(job)
            continue
        jm.n_active += 1
        if job.state in (states.RUN, states.CLEANUP):
            jm.n_running += 1
        name = spec["attributes"]["system"].get("job", {}).get("name")
        if name:
            key = (job.userid, name)
            jm._named[jobid] = key
            jm._named_active[key] = jm._named_active.get(key, 0) + 1
            if depend.SINGLETON in job.deps:
                jm._singletons.setdefault(key, collections.deque()).append(job)
    for job in sorted(inactive, key=lambda j: j.t_inactive):
        jm.inactive[job.id] = job
    if jm.n_active:
        jm._idle.clear()
    jm.gen.after(top)
    jm.log.info("restart: jobs rebuilt from the state directory", jobs=len(jm.jobs),
                active=jm.n_active)


def resume(jm) -> None:
    """Once every service is up: link dependents again, and look at each active job."""
    now = time.time()
    loop = asyncio.get_running_loop()
    targets = []
    for job in list(jm.jobs.values()):
        if job.state != states.DEPEND or job.fatal is not None:
            continue
        for desc, (scheme, tid) in list(job.deps.items()):
            if scheme == depend.BEGIN_TIME:
                at = depend.parse_description(desc)[2]
                loop.call_later(max(0.0, at - now), jm._handle, job,
                                act.BeginTimeReached(desc))
            elif tid is not None:
                target = jm.jobs.get(tid)
                if target is None:   # purged meanwhile: as if named now
                    jm._handle(job, act.Verdicts(((desc, depend.NEVER,
                                                   f"dependency: {desc}: job not found"),)))
                    continue
                act.own(target, "dependents").append(job)
                targets.append(target)
    for target in dict.fromkeys(targets):
        jm._settle_dependents(target)   # ended or started before the restart: judged now
    for key, waiting in list(jm._singletons.items()):
        if waiting and jm._named_active.get(key, 0) == len(waiting):
            jm._handle(waiting.popleft(), act.Verdicts(((depend.SINGLETON, depend.MET, ""),)))
    for job in list(jm.jobs.values()):
        if job.state != states.INACTIVE:
            jm._handle(job, act.Restarted())
    jm._purge_by_policy()

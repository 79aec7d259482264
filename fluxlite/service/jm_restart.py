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

An inactive job no longer changes, so replaying it at every restart would
repeat the same work: when a job becomes inactive its table entry is kept
whole beside the KVS (`summarize`: the store's `summaries` table, with the
length of the eventlog it was made from), and a restart takes an inactive job
from there (`from_summary`) when that length is still the eventlog's; any
other job (active, or whose eventlog grew since, or with no summary: a
database from an older fluxlite, or a restore) is replayed, and an inactive
one so replayed is summarized then.  A summary whose job was purged is dropped.

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
import sys
import time

from ..errors import FluxliteError
from ..job import actions as act
from ..job import depend, states
from ..job import schema as jschema
from ..protocol.message import pack, unpack
from ..util import fluid
from . import statedir

CHECKPOINT = "checkpoint.job-manager"


def read_checkpoint(kvs) -> dict | None:
    try:
        return kvs.lookup(CHECKPOINT)
    except FluxliteError:
        return None


# what a summary keeps of a Job: every field but those no restart keeps (waiters,
# dependents, a scheduler request in flight) and `waited` (true after a restart)
SUMMARY_FIELDS = tuple(f for f in act.Job.__slots__ if f not in
                       ("waiters", "dependents", "sched_req", "nreq", "waited", "req"))
_SHARED_EMPTY = ("alloc", "memo", "deps", "gpus")   # act._NOTHING while empty


def summary(job: act.Job, nevents: int) -> bytes:
    """An inactive job's table entry, made from an eventlog of `nevents` entries."""
    fields = {f: getattr(job, f) for f in SUMMARY_FIELDS}
    fields["req"] = job.req.wire()
    return pack([nevents, fields])


def from_summary(data: bytes) -> tuple[int, act.Job]:
    """(eventlog length, the Job) a summary holds: the Job replay would make."""
    nevents, fields = unpack(data)
    job = act.Job.__new__(act.Job)
    for f in SUMMARY_FIELDS:
        setattr(job, f, fields[f])
    job.req = jschema.Request(**fields["req"]).shared()
    for f in _SHARED_EMPTY:
        if not getattr(job, f):
            setattr(job, f, act._NOTHING)
    if job.deps:
        job.deps = {d: tuple(v) for d, v in job.deps.items()}
    job.exceptions = job.exceptions or ()
    if job.fatal is not None and job.fatal in job.exceptions:
        job.fatal = job.exceptions[job.exceptions.index(job.fatal)]
    job.name, job.queue, job.cwd = (sys.intern(job.name), sys.intern(job.queue),
                                    sys.intern(job.cwd))
    job.waiters, job.dependents, job.sched_req, job.nreq = (), (), 0, 0
    job.waited = True
    return nevents, job


def summarize(jm, job: act.Job) -> None:
    """Keep an inactive job's summary (a durable KVS only), written out with the KVS
    changes of the same loop turn, so it is never newer than the eventlog it names."""
    log = _eventlog_node(jm.kvs, job.id)
    if log is not None:
        jm.kvs.store.keep_summary(job.id, summary(job, log.n))


def _eventlog_node(kvs, jobid: int):
    try:
        node = kvs.root["job"]
        for part in fluid.dothex(jobid).split("."):
            node = node[part]
        return node["eventlog"]
    except (KeyError, TypeError):
        return None


def _job_dirs(kvs):
    """(job id, its directory) of every job the KVS holds, in id order, from the tree
    in memory (nothing is read from disk); a key under `job` that is not a job's
    directory (job.XXXX.XXXX.XXXX.XXXX) is passed over."""
    def below(node, path: str, depth: int):
        if not isinstance(node, dict):
            return
        if depth == 4:
            try:
                yield int(path, 16), node
            except ValueError:
                pass
            return
        for name in sorted(node):
            yield from below(node[name], path + name, depth + 1)
    yield from below(kvs.root.get("job"), "", 0)


def _replayed(kvs, jobid: int, records) -> tuple[act.Job, dict]:
    """A job replayed from its directory's jobspec, eventlog and R (if it has one),
    and its jobspec."""
    spec = kvs.value(records["jobspec"])
    R = records.get("R")
    job = act.replay(jobid, spec, kvs.value(records["eventlog"]),
                     None if R is None else kvs.value(R))
    return job, spec


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
    replayed = 0   # inactive jobs replayed (no summary, or an outdated one)
    store = kvs.store
    kept = dict(statedir.summaries(store.db))
    for jobid, records in _job_dirs(kvs):
        data = kept.pop(jobid, None)
        spec = None
        try:
            log = records["eventlog"]
            nevents, job = from_summary(data) if data is not None else (None, None)
            if nevents is None or nevents != getattr(log, "n", None):
                job, spec = _replayed(kvs, jobid, records)
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
            if spec is not None:   # replayed: summarized now, taken from there next time
                summarize(jm, job)
                replayed += 1
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
    for jobid in kept:   # purged since it was summarized
        store.keep_summary(jobid, None)
    for job in sorted(inactive, key=lambda j: j.t_inactive):
        jm.inactive[job.id] = job
    if jm.n_active:
        jm._idle.clear()
    jm.gen.after(top)
    jm.log.info("restart: jobs rebuilt from the state directory", jobs=len(jm.jobs),
                active=jm.n_active, inactive_replayed=replayed)


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

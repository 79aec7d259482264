"""A job table rebuilt from eventlogs (actions.replay) is the table the live run had.

A mixed set of jobs is driven through the job-manager's state machine as a
live instance would drive them (pending with dependencies, held, begin-time,
running, in CLEANUP, inactive with every result); every eventlog entry it
posts is kept as the KVS would keep it (with R beside the `alloc` entry).
Each job is then rebuilt from its jobspec and eventlog alone, and compared
field by field with the live one.  What no restart keeps is left out of the
comparison, and said so: waiters and dependents (connections and links the
restart makes again) and the number of a scheduler request in flight.
"""

import itertools

import pytest

from fluxlite.job import actions as act
from fluxlite.job import depend, states
from fluxlite.job import jobspec as js
from fluxlite.job import schema as jschema

HOSTS = ("node0", "node1")
SPEC = js.Jobspec.from_command(["true"]).jobspec
TIMED = js.Jobspec.from_command(["sleep", "9"], duration=60).jobspec

FIELDS = [f for f in act.Job.__slots__
          if f not in ("waiters", "dependents", "sched_req", "nreq", "req")]


class Live:
    """The live side: the machine, a clock that moves, and every job's eventlog."""

    def __init__(self):
        self.m = act.Actions(HOSTS)
        self.clock = itertools.count(1000)
        self.logs: dict[int, list] = {}
        self.R: dict[int, dict] = {}
        self.jobs: dict[int, act.Job] = {}
        self.spec: dict[int, dict] = {}

    def feed(self, job, *events):
        for ev in events:
            for e in self.m.handle(job, ev, float(next(self.clock))):
                if isinstance(e, act.Post):
                    entry = {"timestamp": e.timestamp, "name": e.name}
                    if e.context:
                        entry["context"] = e.context
                    self.logs[job.id].append(entry)
                    if e.extra and "R" in e.extra:
                        self.R[job.id] = e.extra["R"]

    def submit(self, jobid, spec=SPEC, urgency=16, deps=(), flags=0):
        job = act.Job(jobid, 500, spec, jschema.request(spec), urgency, 0.0, flags)
        self.jobs[jobid], self.spec[jobid], self.logs[jobid] = job, spec, []
        self.feed(job, act.Submitted(spec, tuple(deps)))
        return job

    def run(self, job):
        self.feed(job, act.AllocAnswered(job.sched_req, {"1": [1, 0]}, "rank1/core[0-1]"),
                  act.ExecStarted())


def dep(scheme, target, verdict=depend.WAIT, why=""):
    return act.Dep(depend.description({"scheme": scheme, "value": str(target)}), scheme,
                   target, verdict, why)


def mixed() -> Live:
    lv = Live()
    ok = lv.submit(1)
    lv.run(ok)
    lv.feed(ok, act.ExecFinished(0), act.ExecReleased())
    bad = lv.submit(2, flags=states.WAITABLE)
    lv.run(bad)
    lv.feed(bad, act.ExecFinished(3 << 8), act.ExecReleased())
    canceled = lv.submit(3, urgency=0)          # held, then canceled while pending
    lv.feed(canceled, act.Raise("cancel", 0, "no longer wanted", userid=500))
    running = lv.submit(4, spec=TIMED)
    lv.run(running)
    lv.feed(running, act.Memo({"uri": "local:///x"}), act.Raise("note", 3, "warned"))
    lv.submit(5, urgency=0)                     # held
    waiting = lv.submit(6, deps=[dep("afterok", 4),
                                 act.Dep("begin-time=4000000000.000", depend.BEGIN_TIME,
                                         at=4e9)])
    assert waiting.state == states.DEPEND
    lv.submit(7, deps=[dep("afterany", 1, depend.MET)])   # met at submit
    exec_ex = lv.submit(8)
    lv.run(exec_ex)
    lv.feed(exec_ex, act.ExecException("exec", 0, "task 0: lost"), act.ExecReleased())
    urgent = lv.submit(9)
    lv.feed(urgent, act.Urgency(31, 500), act.Urgency(20, 500))
    lv.submit(10, deps=[dep("afterok", 2, depend.NEVER, "dependency after-success=x "
                                                        "can never be satisfied")])
    failed_exec = lv.submit(11)
    lv.run(failed_exec)
    lv.feed(failed_exec, act.ExecFailed("job-exec went away"))
    timeout = lv.submit(12, spec=TIMED)
    lv.run(timeout)
    lv.feed(timeout, act.ExecException("timeout", 0, "resource allocation expired"))
    released = lv.submit(13, deps=[dep("after", 4)])   # its target started: met now
    lv.feed(released, act.Verdicts(((released.deps and next(iter(released.deps)),
                                     depend.MET, ""),)))
    lv.m.started = False                         # the queue stopped: asked for nothing
    lv.submit(14)
    return lv


def snapshot(job: act.Job) -> dict:
    out = {f: getattr(job, f) for f in FIELDS}
    out["req"] = job.req.wire()
    out["result"] = job.result
    out["info"] = job.info(0)
    return out


@pytest.mark.timeout(30)
def test_replay_rebuilds_the_live_table():
    lv = mixed()
    expect = {states.INACTIVE, states.RUN, states.CLEANUP, states.SCHED, states.DEPEND}
    assert {j.state for j in lv.jobs.values()} == expect
    assert {j.result for j in lv.jobs.values()} >= {"COMPLETED", "FAILED", "CANCELED"}
    for jobid, live in lv.jobs.items():
        again = act.replay(jobid, lv.spec[jobid], lv.logs[jobid], lv.R.get(jobid))
        assert snapshot(again) == snapshot(live), f"job {jobid}"


@pytest.mark.timeout(30)
def test_a_replayed_pending_job_asks_again_and_a_replayed_dependent_still_waits():
    lv = mixed()
    m = act.Actions(HOSTS)
    sched = act.replay(9, lv.spec[9], lv.logs[9])
    assert sched.state == states.SCHED and sched.priority == 20 and not sched.sched_req
    fx = m.handle(sched, act.QueueChanged(), 5000.0)
    assert fx == [act.AskAlloc(sched.sched_req, 20)]
    held = act.replay(5, lv.spec[5], lv.logs[5])
    assert m.handle(held, act.QueueChanged(), 5000.0) == []
    dependent = act.replay(6, lv.spec[6], lv.logs[6])
    assert dependent.deps == {"after-success=4": ("afterok", 4),
                              "begin-time=4000000000.000": (depend.BEGIN_TIME, None)}
    fx = m.handle(dependent, act.Verdicts((("after-success=4", depend.MET, ""),)), 5000.0)
    assert dependent.state == states.DEPEND and [e.name for e in fx] == ["dependency-remove"]


@pytest.mark.timeout(30)
def test_an_inactive_job_s_summary_is_the_replayed_job():
    """A restart takes an inactive job from its summary (jm_restart.py) instead of
    replaying it: the summary gives the same table entry as a replay."""
    from fluxlite.service import jm_restart
    lv = mixed()
    inactive = [j for j in lv.jobs.values() if j.state == states.INACTIVE]
    assert len(inactive) >= 5
    for live in inactive:
        again = act.replay(live.id, lv.spec[live.id], lv.logs[live.id], lv.R.get(live.id))
        data = jm_restart.summary(again, len(lv.logs[live.id]))
        nevents, kept = jm_restart.from_summary(data)
        assert nevents == len(lv.logs[live.id])
        again.waited = True   # as every inactive job is after a restart
        assert snapshot(kept) == snapshot(again), f"job {live.id}"
        assert kept.req is again.req   # the one shared copy of a request
        for f in ("alloc", "memo", "deps", "gpus"):   # the shared empty map, unused
            assert (getattr(kept, f) is act._NOTHING) == (getattr(again, f) is act._NOTHING)


def test_a_restart_walks_only_job_directories():
    """Keys a user put under `job` that are not a job's directory are passed over."""
    from fluxlite.service import jm_restart

    class KVS:
        root = {"job": {"0000": {"0004": {"b200": {"0000": {"eventlog": []}, "note": 5}},
                                 "stray": 3},
                        "readme": "x"}}
    assert list(jm_restart._job_dirs(KVS)) == [(0x4b2000000, {"eventlog": []})]

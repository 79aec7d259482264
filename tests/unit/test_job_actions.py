"""The job-manager's per-job state machine (job/actions.py), driven without processes.

Each test feeds events in the order clients, sched and job-exec could produce
them, including orderings a real instance cannot be made to produce on demand
(sched's answer arriving after a cancel, an allocation for a job held
meanwhile, a fatal exception during CLEANUP, a second fatal exception), and
checks the effects: eventlog entries, requests to sched and job-exec, waiters,
dependents, the job's end.
"""

import errno

import pytest

from fluxlite.job import actions as act
from fluxlite.job import depend, states
from fluxlite.job import jobspec as js
from fluxlite.job import schema as jschema

SPEC = js.Jobspec.from_command(["true"]).jobspec
NOW = 1000.0
HOSTS = ("node0", "node1", "node2")   # rank -> host name


def new(jobid=1, urgency=16, spec=SPEC):
    return act.Job(jobid, 500, spec, jschema.request(spec), urgency, NOW)


def feed(m, job, *events, now=NOW):
    fx = []
    for ev in events:
        fx += m.handle(job, ev, now)
    return fx


def posts(fx):
    return [e.name for e in fx if isinstance(e, act.Post)]


def others(fx):
    """The effects that are not eventlog entries."""
    return [e for e in fx if not isinstance(e, act.Post)]


def submitted(m=None, job=None, deps=()):
    m = m or act.Actions(HOSTS)
    job = job or new()
    fx = feed(m, job, act.Submitted(SPEC, tuple(deps)))
    return m, job, fx


def running(m=None, job=None):
    """Submitted, allocated rank 0 and started by job-exec."""
    m, job, _ = submitted(m, job)
    feed(m, job, act.AllocAnswered(job.sched_req, {"0": [0]}, "rank0/core0"),
         act.ExecStarted())
    return m, job


# ------------------------------------------------------------------ normal run
def test_submit_logs_and_asks_sched_once():
    m, job, fx = submitted()
    assert posts(fx) == ["submit", "validate", "depend", "priority"]
    assert fx[0].extra == {"jobspec": SPEC}        # with the submit entry, in one commit
    assert fx[0].context == {"userid": 500, "urgency": 16, "flags": 0, "version": 1}
    assert others(fx) == [act.AskAlloc(1, 16)]
    assert job.state == states.SCHED and job.sched_req == 1
    # the action is idempotent: another look at the job asks nothing more
    assert feed(m, job, act.QueueChanged()) == []


def test_normal_run_to_inactive():
    m, job, _ = submitted()
    fx = feed(m, job, act.AllocAnswered(1, {"0": [0, 1]}, "rank0/core[0-1]"), now=1001.0)
    assert posts(fx) == ["alloc"] and job.state == states.RUN and job.t_run == 1001.0
    alloc, start = fx
    assert alloc.context == {"annotations": {"sched": {"resource_summary": "rank0/core[0-1]"}}}
    assert alloc.extra["R"]["execution"]["R_lite"][0]["rank"] == "0"
    assert alloc.extra["R"]["execution"]["nodelist"] == ["node0"]
    assert start == act.StartExec(alloc.extra["R"]) and job.alloc == {0: [0, 1]}
    fx = feed(m, job, act.ExecStarted())
    assert posts(fx) == ["start"] and job.ran and others(fx) == []
    fx = feed(m, job, act.ExecFinished(0), now=1002.0)
    assert posts(fx) == ["finish"] and job.state == states.CLEANUP and job.t_cleanup == 1002.0
    fx = feed(m, job, act.ExecReleased("all", True), now=1003.0)
    assert posts(fx) == ["release", "free", "clean"]
    assert [type(e) for e in others(fx)] == [act.Free, act.AnswerWaiters, act.Inactive]
    assert job.state == states.INACTIVE and job.t_inactive == 1003.0
    assert job.result == "COMPLETED" and job.info()["returncode"] == 0


def test_a_time_limit_sets_the_expiration():
    spec = js.Jobspec.from_command(["true"])
    spec.duration = 60
    job = new(spec=spec.jobspec)
    m, job, _ = submitted(job=job)
    fx = feed(m, job, act.AllocAnswered(1, {"0": [0]}), now=2000.0)
    assert job.expiration == 2060.0
    assert fx[0].extra["R"]["execution"]["expiration"] == 2060.0


def test_nonzero_status_fails():
    m, job = running()
    feed(m, job, act.ExecFinished(3 << 8), act.ExecReleased())
    assert job.result == "FAILED" and job.info()["returncode"] == 3


# ------------------------------------------------------------------ cancel
def test_cancel_pending_withdraws_and_cleans():
    m, job, _ = submitted()
    fx = feed(m, job, act.Raise("cancel", 0, "bye", userid=500))
    assert posts(fx) == ["exception", "clean"]
    assert fx[0].context == {"type": "cancel", "severity": 0, "note": "bye", "userid": 500}
    assert others(fx) == [act.CancelAlloc(), act.AnswerWaiters(), act.Inactive()]
    assert job.result == "CANCELED" and job.sched_req == 0


def test_cancel_in_depend_asks_sched_nothing():
    m, job, fx = submitted(deps=[act.Dep("afterok=f1", "afterok", 9)])
    fx = feed(m, job, act.Raise("cancel", 0))
    assert posts(fx) == ["exception", "clean"] and act.CancelAlloc() not in fx


def test_sched_answer_after_a_cancel_is_given_back():
    m, job, _ = submitted()
    feed(m, job, act.Raise("cancel", 0))
    # the allocation was on its way when sched.cancel arrived: freed, nothing else
    assert feed(m, job, act.AllocAnswered(1, {"0": [0]})) == [act.Free()]
    # or sched withdrew it: its ECANCELED answer changes nothing
    assert feed(m, job, act.AllocAnswered(1, errnum=errno.ECANCELED, errstr="x")) == []
    assert job.state == states.INACTIVE and job.alloc == {}


def test_cancel_running_forwards_to_job_exec_and_waits_for_release():
    m, job = running()
    fx = feed(m, job, act.Raise("cancel", 0, "stop", wait_status=None))
    assert posts(fx) == ["exception"] and job.state == states.CLEANUP
    assert others(fx) == [act.ForwardException({"id": 1, "type": "cancel", "severity": 0,
                                                "note": "stop"})]
    fx = feed(m, job, act.ExecFinished(15))
    assert posts(fx) == ["finish"] and job.status == 15
    fx = feed(m, job, act.ExecReleased())
    assert posts(fx) == ["release", "free", "clean"] and job.result == "CANCELED"


def test_a_wait_status_is_forwarded():
    m, job = running()
    fx = feed(m, job, act.Raise("doom", 0, "task exited", wait_status=9))
    assert others(fx)[0].payload["wait_status"] == 9 and job.fatal["wait_status"] == 9


# ------------------------------------------------------ exceptions and races
def test_fatal_exception_after_finish_during_cleanup():
    m, job = running()
    feed(m, job, act.ExecFinished(0))
    fx = feed(m, job, act.Raise("exec", 0, "late"))
    # job-exec is ending the job already: nothing is forwarded, nothing cleaned yet
    assert posts(fx) == ["exception"] and others(fx) == []
    assert job.state == states.CLEANUP and job.fatal["type"] == "exec"
    feed(m, job, act.ExecReleased())
    assert job.result == "FAILED" and job.info()["returncode"] == 1


def test_fatal_exception_racing_a_finish():
    m, job = running()
    fx = feed(m, job, act.Raise("timeout", 0), act.ExecFinished(14), act.ExecReleased())
    assert posts(fx) == ["exception", "finish", "release", "free", "clean"]
    assert len([e for e in fx if isinstance(e, act.ForwardException)]) == 1
    assert job.result == "TIMEOUT"


def test_second_fatal_exception_is_logged_and_changes_nothing():
    m, job = running()
    feed(m, job, act.Raise("cancel", 0))
    fx = feed(m, job, act.Raise("timeout", 0))
    assert posts(fx) == ["exception"] and others(fx) == []
    assert job.fatal["type"] == "cancel" and len(job.exceptions) == 2
    feed(m, job, act.ExecReleased())
    assert job.result == "CANCELED"


def test_nonfatal_exception_is_only_logged():
    m, job = running()
    fx = feed(m, job, act.ExecException("node-failure", 2, "lost a follower"))
    assert posts(fx) == ["exception"] and job.fatal is None and job.state == states.RUN
    assert job.info()["exception"]["type"] == "node-failure"


def test_fatal_exception_from_job_exec_is_not_sent_back():
    m, job = running()
    fx = feed(m, job, act.ExecException("exec", 0, "shell died"))
    assert posts(fx) == ["exception"] and others(fx) == []
    assert job.state == states.CLEANUP


def test_events_for_an_inactive_job_change_nothing():
    m, job, _ = submitted()
    feed(m, job, act.Raise("cancel", 0))
    for ev in (act.Raise("cancel", 0), act.Urgency(3, 500), act.ExecStarted(),
               act.ExecReleased(), act.Memo({"a": 1}), act.QueueChanged()):
        assert feed(m, job, ev) == []
    assert len(job.exceptions) == 1


# --------------------------------------------------------------- sched answers
def test_alloc_refused_ends_the_job():
    m, job, _ = submitted()
    why = "unsatisfiable request: need 4 exclusive node(s) with 1 core(s) each, only 3 eligible"
    fx = feed(m, job, act.AllocAnswered(1, errnum=errno.EOVERFLOW, errstr=why))
    assert posts(fx) == ["exception", "clean"]
    assert fx[0].context == {"type": "alloc", "severity": 0, "note": why}
    assert act.CancelAlloc() not in fx        # sched holds nothing any more
    assert job.result == "FAILED" and job.info()["nnodes"] is None


def test_alloc_answer_for_a_job_held_meanwhile_is_given_back():
    m, job, _ = submitted()
    fx = feed(m, job, act.Urgency(0, 500))
    assert posts(fx) == ["urgency", "priority"] and others(fx) == [act.CancelAlloc()]
    assert feed(m, job, act.AllocAnswered(1, {"0": [0]})) == [act.Free()]
    assert job.state == states.SCHED and job.alloc == {}
    fx = feed(m, job, act.Urgency(16, 500))     # released: asked again, a new request
    assert others(fx) == [act.AskAlloc(2, 16)]
    assert feed(m, job, act.AllocAnswered(1, errnum=errno.ECANCELED)) == []   # stale
    fx = feed(m, job, act.AllocAnswered(2, {"0": [0]}))
    assert posts(fx) == ["alloc"] and job.state == states.RUN


def test_refusal_of_a_withdrawn_request_is_ignored():
    m, job, _ = submitted()
    feed(m, job, act.Urgency(0, 500))
    assert feed(m, job, act.AllocAnswered(1, errnum=errno.EOVERFLOW, errstr="no")) == []
    assert job.fatal is None and job.state == states.SCHED


# ------------------------------------------------------------------- urgency
def test_held_at_submit_then_released():
    m, job, fx = submitted(job=new(urgency=0))
    assert posts(fx)[-1] == "priority" and fx[-1].context == {"priority": 0}
    assert others(fx) == [] and job.state == states.SCHED
    fx = feed(m, job, act.Urgency(16, 7))
    assert posts(fx) == ["urgency", "priority"]
    assert fx[0].context == {"userid": 7, "urgency": 16}
    assert others(fx) == [act.AskAlloc(1, 16)]


def test_urgency_change_while_asked_reprioritizes():
    m, job, _ = submitted()
    fx = feed(m, job, act.Urgency(31, 500))
    assert posts(fx) == ["urgency", "priority"]
    assert others(fx) == [act.Prioritize(depend.PRIORITY_MAX)]
    fx = feed(m, job, act.Urgency(31, 500))     # no change of priority: only logged
    assert posts(fx) == ["urgency"] and others(fx) == []


def test_urgency_in_depend_is_kept_for_the_priority_event():
    m, job, _ = submitted(deps=[act.Dep("after=f1", "after", 9)])
    fx = feed(m, job, act.Urgency(5, 500))
    assert posts(fx) == ["urgency"] and job.priority == 5
    fx = feed(m, job, act.Verdicts((("after=f1", depend.MET, ""),)))
    assert posts(fx) == ["dependency-remove", "depend", "priority"]
    assert fx[-2].context == {"priority": 5} and others(fx) == [act.AskAlloc(1, 5)]


# ---------------------------------------------------------------- dependencies
def test_dependency_waits_then_is_met():
    m, job, fx = submitted(deps=[act.Dep("afterok=f9", "afterok", 9)])
    assert posts(fx) == ["submit", "validate", "dependency-add"]
    assert others(fx) == [act.Watch(9)] and job.state == states.DEPEND
    assert job.info()["dependencies"] == ["afterok=f9"]
    fx = feed(m, job, act.Verdicts((("afterok=f9", depend.WAIT, ""),)))   # target started
    assert fx == []
    fx = feed(m, job, act.Verdicts((("afterok=f9", depend.MET, ""),)))
    assert posts(fx) == ["dependency-remove", "depend", "priority"]
    assert others(fx) == [act.AskAlloc(1, 16)]


def test_dependency_never_met_ends_the_job():
    m, job, _ = submitted(deps=[act.Dep("afterok=f9", "afterok", 9),
                                act.Dep("after=f8", "after", 8)])
    fx = feed(m, job, act.Verdicts((("afterok=f9", depend.NEVER, "afterok: job f9 failed"),)))
    assert posts(fx) == ["exception", "clean"] and job.fatal["type"] == "dependency"
    assert job.result == "FAILED"


def test_dependency_judged_at_submit():
    # met already: added and removed at once, as Flux's dependency-after posts them
    _, job, fx = submitted(deps=[act.Dep("afterany=f3", "afterany", 3, depend.MET)])
    assert posts(fx) == ["submit", "validate", "dependency-add", "dependency-remove",
                         "depend", "priority"]
    assert [e.context for e in fx if isinstance(e, act.Post)][2:4] == \
        [{"description": "afterany=f3"}] * 2
    _, job, fx = submitted(deps=[act.Dep("after=f3", "after", 3, depend.WAIT),
                                 act.Dep("afterok=f4", "afterok", 4, depend.NEVER, "no"),
                                 act.Dep("after=f5", "after", 5, depend.WAIT)])
    assert posts(fx) == ["submit", "validate", "dependency-add", "exception", "clean"]
    assert [e for e in fx if isinstance(e, act.Watch)] == [act.Watch(3)]
    assert job.fatal["note"] == "no" and job.state == states.INACTIVE


def test_same_dependency_twice_is_added_once():
    m, job, fx = submitted(deps=[act.Dep("after=f3", "after", 3), act.Dep("after=f3", "after", 3)])
    assert posts(fx).count("dependency-add") == 1
    fx = feed(m, job, act.Verdicts((("after=f3", depend.MET, ""),)))
    assert posts(fx)[-1] == "priority"


def test_begin_time():
    at = NOW + 30
    m, job, fx = submitted(deps=[act.Dep("begin-time=1030.000", depend.BEGIN_TIME, at=at)])
    assert posts(fx)[-1] == "dependency-add"
    assert others(fx) == [act.BeginTimer("begin-time=1030.000", 30.0)]
    fx = feed(m, job, act.BeginTimeReached("begin-time=1030.000"))
    assert posts(fx) == ["dependency-remove", "depend", "priority"]
    assert feed(m, job, act.BeginTimeReached("begin-time=1030.000")) == []
    _, job, fx = submitted(deps=[act.Dep("begin-time=1.000", depend.BEGIN_TIME, at=1.0)])
    assert posts(fx)[2:4] == ["dependency-add", "dependency-remove"]  # already past
    assert job.state == states.SCHED


def test_begin_time_of_a_canceled_job_does_nothing():
    m, job, _ = submitted(deps=[act.Dep("begin-time=2000.000", depend.BEGIN_TIME, at=2000.0)])
    feed(m, job, act.Raise("cancel", 0))
    assert feed(m, job, act.BeginTimeReached("begin-time=2000.000")) == []


def test_dependents_are_notified_at_start_and_end():
    m, job = running()
    assert act.NotifyDependents() not in feed(m, job, act.ExecFinished(0))
    m, job, _ = submitted()
    job.dependents = [new(2)]
    fx = feed(m, job, act.AllocAnswered(1, {"0": [0]}), act.ExecStarted())
    assert others(fx)[-1] == act.NotifyDependents()
    fx = feed(m, job, act.ExecFinished(0), act.ExecReleased())
    assert [type(e) for e in others(fx)] == [act.Free, act.AnswerWaiters,
                                             act.NotifyDependents, act.Inactive]


# ----------------------------------------------------------------------- queue
def test_queue_stopped_then_started():
    m = act.Actions(HOSTS)
    m.started = False
    _, job, fx = submitted(m)
    assert others(fx) == [] and job.state == states.SCHED
    m.started = True
    assert feed(m, job, act.QueueChanged()) == [act.AskAlloc(1, 16)]
    m.started = False
    assert feed(m, job, act.QueueChanged()) == [act.CancelAlloc()]
    assert feed(m, job, act.AllocAnswered(1, {"0": [0]})) == [act.Free()]   # too late
    m.started = True
    assert feed(m, job, act.QueueChanged()) == [act.AskAlloc(2, 16)]


def test_queue_start_does_not_ask_for_a_held_job():
    m = act.Actions(HOSTS)
    m.started = False
    _, job, _ = submitted(m, new(urgency=0))
    m.started = True
    assert feed(m, job, act.QueueChanged()) == []


def test_R_names_each_allocated_rank_host():
    m, job, _ = submitted()
    fx = feed(m, job, act.AllocAnswered(1, {"2": [0], "0": [1]}))
    R = fx[0].extra["R"]["execution"]
    assert R["nodelist"] == ["node[0,2]"]     # in rank order, as R_lite


# -------------------------------------------------------------------- job-exec
def test_job_exec_failure_ends_the_job():
    m, job, _ = submitted()
    feed(m, job, act.AllocAnswered(1, {"0": [0]}))
    fx = feed(m, job, act.ExecFailed("job-exec.start: rank 0 unreachable"))
    assert posts(fx) == ["exception", "release", "free", "clean"]
    assert fx[0].context["type"] == "exec" and act.Free() in fx
    assert job.state == states.INACTIVE and job.result == "FAILED"
    assert job.t_cleanup == NOW


def test_release_without_finish_still_ends_the_job():
    m, job = running()
    fx = feed(m, job, act.ExecReleased("all", True))
    assert posts(fx) == ["release", "free", "clean"] and job.state == states.INACTIVE
    assert job.result == "FAILED"


def test_partial_then_final_release():
    m, job, _ = submitted()
    feed(m, job, act.AllocAnswered(1, {"0": [0], "1": [0]}), act.ExecStarted(),
         act.ExecFinished(0))
    fx = feed(m, job, act.ExecReleased("1", False))
    assert posts(fx) == ["release"] and fx[0].context == {"ranks": "1", "final": False}
    assert others(fx) == [] and job.state == states.CLEANUP
    fx = feed(m, job, act.ExecReleased("0", True))
    assert posts(fx) == ["release", "free", "clean"]
    assert feed(m, job, act.ExecReleased("0", True)) == []   # once only


# ----------------------------------------------------------------------- misc
def test_memo_merges():
    m, job, _ = submitted()
    feed(m, job, act.Memo({"a": 1}))
    fx = feed(m, job, act.Memo({"b": 2}))
    assert posts(fx) == ["memo"] and fx[0].context == {"b": 2}
    assert job.memo == {"a": 1, "b": 2}


def test_wait_is_answered_once_inactive():
    m, job = running()
    fx = feed(m, job, act.ExecFinished(0))
    assert act.AnswerWaiters() not in fx
    fx = feed(m, job, act.ExecReleased())
    assert fx.index(act.AnswerWaiters()) > max(i for i, e in enumerate(fx)
                                               if isinstance(e, act.Post))


def test_a_pending_job_holds_no_containers_of_its_own():
    a, b = new(1), new(2)
    m = act.Actions(HOSTS)
    feed(m, a, act.Submitted(SPEC))
    feed(m, b, act.Submitted(SPEC))
    assert not hasattr(a, "__dict__")
    assert a.alloc is b.alloc and a.deps is b.deps and a.memo is b.memo
    assert a.waiters == () and a.exceptions == () and a.dependents == ()


def test_describe_for_the_debug_log():
    _, _, fx = submitted()
    assert act.describe(fx) == ("Post(submit) Post(validate) Post(depend) Post(priority) "
                                "AskAlloc")


@pytest.mark.parametrize("state", [states.DEPEND, states.PRIORITY, states.SCHED])
def test_every_pending_state_ends_on_a_fatal_exception(state):
    m, job, _ = submitted(deps=[act.Dep("after=f9", "after", 9)])
    if state != states.DEPEND:
        job.deps = {}
        m.started = state == states.SCHED
        feed(m, job, act.QueueChanged())
        if state == states.PRIORITY:
            job.state = states.PRIORITY   # as between the depend and priority entries
    fx = m.handle(job, act.Raise("cancel", 0), NOW)
    assert job.state == states.INACTIVE and posts(fx)[-1] == "clean"


def test_singleton_waits_without_a_target_and_goes_when_released():
    m, job, fx = submitted(deps=[act.Dep("singleton", depend.SINGLETON, None, depend.WAIT)])
    assert posts(fx)[-1] == "dependency-add" and job.state == states.DEPEND
    assert not [e for e in fx if isinstance(e, act.Watch)]   # no job to watch
    fx = feed(m, job, act.Verdicts((("singleton", depend.MET, ""),)))
    assert posts(fx) == ["dependency-remove", "depend", "priority"]


# ------------------------------------------------------- a scheduler removed
def test_no_scheduler_leaves_the_job_waiting_until_one_is_ready():
    """sched answers ENOSYS (`module remove sched`): no exception, the job stays in
    SCHED and nothing more is asked until a scheduler is ready (sched-ready); then
    a QueueChanged look asks again."""
    m, job, fx = submitted()
    assert job.state == states.SCHED and job.sched_req == 1
    fx = feed(m, job, act.AllocAnswered(1, errnum=errno.ENOSYS, errstr="no sched"))
    assert fx == [] and job.state == states.SCHED and not job.fatal
    assert m.sched_ready is False and job.sched_req == 0
    other = new(jobid=2)
    feed(m, other, act.Submitted(SPEC, ()))
    assert other.state == states.SCHED and other.sched_req == 0   # not asked meanwhile
    m.sched_ready = True
    fx = feed(m, job, act.QueueChanged())
    assert others(fx) == [act.AskAlloc(job.sched_req, job.priority)] and job.sched_req == 2

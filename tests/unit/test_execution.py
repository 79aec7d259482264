"""job-exec's per-job state machine, driven without processes.

Each test feeds events in the order real shells, brokers and timers could
produce them, including orderings a real instance cannot be made to produce on
demand (a shell lost during a barrier, a fatal exception racing a normal finish,
a kill during start-up), and checks the effects: eventlog entries, reports to
the job-manager, signals, timers, barrier answers, notices to the leader.
"""

import signal

import pytest

from fluxlite.job import execution as ex

HOSTS = {0: "h0", 1: "h1", 2: "h2", 3: "h3"}


def exited(code=0):
    return code << 8


def killed(sig):
    return sig


def job(n=3, **config):
    cfg = ex.Config(**{"barrier_timeout": 300.0, "shell_exit_timeout": 30.0,
                       "kill_timeout": 5.0, **config})
    e = ex.Execution(7, list(range(n)), HOSTS, cfg, service="0-shell-x", taskmap={"map": []})
    e.start()
    return e


def run(e, *events):
    fx = []
    for ev in events:
        fx += e.handle(ev)
    return fx


def of(fx, kind):
    return [f for f in fx if isinstance(f, kind)]


def logs(fx):
    return [f.name for f in of(fx, ex.Log)]


def reports(fx):
    return [(f.kind, f.data.get("type")) for f in of(fx, ex.Report)]


def started(e):
    """Every shell up and through both barriers."""
    n = e.nshells
    return run(e, *[ex.ShellStarted(i, 100 + i) for i in range(n)],
               *[ex.BarrierEntered("init", i) for i in range(n)],
               *[ex.BarrierEntered("start", i) for i in range(n)])


def test_start_logs_init_and_starting_and_arms_the_barrier_timer():
    e = ex.Execution(1, [0, 1], HOSTS, ex.Config(barrier_timeout=60.0))
    fx = e.start()
    assert logs(fx) == ["init", "starting"]
    assert of(fx, ex.Timer) == [ex.Timer("barrier", 60.0)]


def test_normal_run_barriers_then_complete():
    e = job(2)
    fx = run(e, ex.ShellStarted(0, 10), ex.ShellStarted(1, 11), ex.BarrierEntered("init", 0))
    assert of(fx, ex.Answer) == []                     # shell 1 not there yet
    fx = run(e, ex.BarrierEntered("init", 1))
    assert logs(fx) == ["shell.init"] and e.phase == ex.INITIALIZED
    [answer] = of(fx, ex.Answer)
    assert answer.shell_ranks == (0, 1) and answer.payload["critical"] == {"ranks": "0-1",
                                                                           "seq": 0}
    fx = run(e, ex.BarrierEntered("start", 0), ex.BarrierEntered("start", 1))
    assert logs(fx) == ["shell.start"] and reports(fx) == [("start", None)]
    assert ex.Timer("barrier") in fx                   # cancelled
    fx = run(e, ex.ShellExited(1, exited(0)), ex.ShellExited(0, exited(0)))
    assert logs(fx) == ["shell-exit", "complete", "done"]
    assert reports(fx) == [("finish", None), ("release", None)]
    assert of(fx, ex.Report)[0].data == {"status": 0}
    assert of(fx, ex.Finished) and e.phase == ex.COMPLETE
    assert e.handle(ex.ShellExited(0, 0)) == []        # nothing after the end


def test_status_is_the_worst_critical_exit_signals_above_codes():
    e = job(3)
    started(e)
    fx = run(e, ex.ShellExited(2, exited(3)), ex.ShellExited(1, exited(1)),
             ex.ShellExited(0, exited(0)))
    assert of(fx, ex.Report)[-2].data == {"status": exited(3)}


def test_time_limit_arms_expire_at_the_allocation_end_and_raises_timeout():
    e = job(1, expiration=1234.5)
    fx = started(e)
    assert ex.Timer("expire", None, 1234.5) in fx
    fx = run(e, ex.TimerFired("expire"))
    assert reports(fx) == [("exception", "timeout")]
    assert of(fx, ex.Signal) == [ex.Signal(signal.SIGALRM, (0,))]
    assert ex.Timer("kill", 5.0) in fx


def test_fatal_exception_terminates_then_kills_after_the_timeout():
    e = job(2)
    started(e)
    fx = run(e, ex.FatalException("cancel", "by user"))
    assert of(fx, ex.Signal) == [ex.Signal(signal.SIGTERM, (0, 1))]
    assert reports(fx) == []                           # the job-manager raised it itself
    fx = run(e, ex.TimerFired("kill"))
    assert of(fx, ex.Signal) == [ex.Signal(signal.SIGKILL, (0, 1))]


def test_second_fatal_exception_changes_nothing():
    e = job(1)
    started(e)
    run(e, ex.FatalException("cancel"))
    assert run(e, ex.FatalException("exec", "again")) == []
    assert e.fatal["type"] == "cancel"


def test_doom_wait_status_decides_the_finish_status():
    e = job(2)
    started(e)
    run(e, ex.FatalException("exec", "task 1 exited 7", wait_status=exited(7)))
    fx = run(e, ex.ShellExited(1, killed(signal.SIGTERM)), ex.ShellExited(0, exited(0)))
    assert of(fx, ex.Report)[-2].data == {"status": exited(7)}


def test_fatal_racing_a_normal_finish_still_fails_the_job():
    """Every task exited 0, but a cancel landed first: the job must not look
    successful (status forced nonzero)."""
    e = job(1)
    started(e)
    fx = run(e, ex.FatalException("cancel"), ex.ShellExited(0, exited(0)))
    assert of(fx, ex.Report)[-2].data == {"status": exited(1)}


def test_finish_before_the_fatal_arrives_completes_normally():
    e = job(1)
    started(e)
    fx = run(e, ex.ShellExited(0, exited(0)))
    assert of(fx, ex.Report)[0].data == {"status": 0}
    assert run(e, ex.FatalException("cancel")) == []


def test_lost_noncritical_shell_is_severity_2_and_the_leader_is_told():
    e = job(3)
    started(e)
    run(e, ex.SetCritical(frozenset({0, 1})))
    fx = run(e, ex.ShellUnreachable(2))
    [r] = of(fx, ex.Report)
    assert (r.kind, r.data["type"], r.data["severity"]) == ("exception", "node-failure", 2)
    assert r.data["context"] == {"shell_rank": 2, "rank": 2, "host": "h2",
                                 "reason": "node failure"}
    assert of(fx, ex.Signal) == []
    [n] = of(fx, ex.Notify)
    assert n.method == "exception" and n.payload["severity"] == 2 and n.payload["shell_rank"] == 2


def test_lost_critical_shell_is_fatal():
    e = job(3)
    started(e)
    fx = run(e, ex.ShellUnreachable(1))
    assert [(r.data["type"], r.data["severity"]) for r in of(fx, ex.Report)] == \
        [("node-failure", 0)]
    assert of(fx, ex.Signal) == [ex.Signal(signal.SIGTERM, (0, 2))]


def test_lost_noncritical_shell_status_does_not_decide():
    """A persisting instance's lost leaf: the leader's status is the job's."""
    e = job(2)
    started(e)
    run(e, ex.SetCritical(frozenset({0})))
    fx = run(e, ex.ShellExited(1, killed(signal.SIGKILL)), ex.ShellExited(0, exited(0)))
    assert of(fx, ex.Report)[-2].data == {"status": 0}


def test_follower_killed_by_a_signal_after_init_is_lost_not_exited():
    e = job(2)
    started(e)
    run(e, ex.SetCritical(frozenset({0})))
    fx = run(e, ex.ShellExited(1, killed(signal.SIGKILL)))
    assert [r.data["severity"] for r in of(fx, ex.Report)] == [2]
    assert "Killed" in of(fx, ex.Report)[0].data["note"]


def test_shell_lost_during_the_init_barrier_releases_the_others():
    """The lost shell never enters the barrier; the rest must not wait for it, and
    its notice travels with the barrier's answer (the leader was not up yet)."""
    e = job(3)
    run(e, *[ex.ShellStarted(i, i) for i in range(3)])
    run(e, ex.SetCritical(frozenset({0, 1})))
    fx = run(e, ex.BarrierEntered("init", 0), ex.BarrierEntered("init", 1))
    assert of(fx, ex.Answer) == []
    fx = run(e, ex.ShellUnreachable(2))
    assert of(fx, ex.Notify) == []                     # no leader to tell yet
    [answer] = of(fx, ex.Answer)
    assert answer.shell_ranks == (0, 1)
    assert [n["shell_rank"] for n in answer.payload["lost"]] == [2]
    assert e.phase == ex.INITIALIZED


def test_shell_ending_before_the_first_barrier_is_fatal():
    e = job(2)
    run(e, ex.ShellStarted(0, 1), ex.ShellStarted(1, 2))
    fx = run(e, ex.ShellExited(1, exited(1)))
    assert "terminated before first barrier" in of(fx, ex.Report)[0].data["note"]
    assert of(fx, ex.Signal) == [ex.Signal(signal.SIGTERM, (0,))]


def test_kill_during_startup_ends_when_the_shells_do():
    """Cancelled while shells are still starting: they are signalled, waiting
    barriers answer with an error, and the job completes once they exit."""
    e = job(2)
    run(e, ex.ShellStarted(0, 1), ex.BarrierEntered("init", 0))
    fx = run(e, ex.FatalException("cancel"))
    assert of(fx, ex.Signal) == [ex.Signal(signal.SIGTERM, (0, 1))]
    fx = run(e, ex.BarrierEntered("init", 1))
    assert of(fx, ex.Answer) == [ex.Answer("init", (1,), error="job is being terminated")]
    fx = run(e, ex.ShellExited(0, killed(signal.SIGTERM)), ex.ShellExited(1, exited(0)))
    assert of(fx, ex.Finished)
    assert of(fx, ex.Report)[-2].data["status"] != 0


def test_signal_sent_before_a_shell_is_up_goes_again_once_it_is():
    """Cancelled before rexec has a process for a shell: the signal then reaches
    nothing, so it is sent again when that shell is reported started (and only to it);
    after the kill timeout, the signal sent again is SIGKILL."""
    e = job(2)
    fx = run(e, ex.FatalException("cancel"))
    assert of(fx, ex.Signal) == [ex.Signal(signal.SIGTERM, (0, 1))]
    fx = run(e, ex.ShellStarted(1, 101))
    assert of(fx, ex.Signal) == [ex.Signal(signal.SIGTERM, (1,))]
    assert run(e, ex.ShellStarted(1, 101)) == []       # already up: nothing again
    run(e, ex.TimerFired("kill"))
    fx = run(e, ex.ShellStarted(0, 100))
    assert of(fx, ex.Signal) == [ex.Signal(signal.SIGKILL, (0,))]
    # without a fatal exception, a shell starting is sent nothing
    assert of(run(job(2), ex.ShellStarted(0, 100)), ex.Signal) == []


def test_shell_failing_to_start_fails_the_job():
    e = job(2)
    fx = run(e, ex.ShellStartFailed(1, "No such file or directory"))
    assert "failed to start on rank 1" in of(fx, ex.Report)[0].data["note"]
    fx = run(e, ex.ShellExited(0, exited(0)))
    assert of(fx, ex.Finished)


def test_plugin_failure_at_the_barrier_is_fatal_and_that_shell_is_not_signalled():
    e = job(2)
    run(e, ex.ShellStarted(0, 1), ex.ShellStarted(1, 2))
    fx = run(e, ex.BarrierEntered("init", 1, error="plugin 'x': shell.init failed"))
    assert of(fx, ex.Report)[0].data["note"] == "plugin 'x': shell.init failed"
    assert of(fx, ex.Signal) == [ex.Signal(signal.SIGTERM, (0,))]
    assert ex.Answer("init", (1,), error="job is being terminated") in fx
    fx = run(e, ex.TimerFired("kill"))
    assert of(fx, ex.Signal) == [ex.Signal(signal.SIGKILL, (0, 1))]


def test_barrier_timeout_names_the_late_ranks():
    e = job(3)
    run(e, ex.BarrierEntered("init", 0), ex.BarrierEntered("init", 2))
    fx = run(e, ex.TimerFired("barrier"))
    assert "job shells on rank[s] 1 did not start in time" in of(fx, ex.Report)[0].data["note"]


def test_cancelled_timer_firing_late_does_nothing():
    e = job(1)
    started(e)                                          # cancels the barrier timer
    assert run(e, ex.TimerFired("barrier")) == []


def test_leader_exit_starts_the_shell_exit_timeout():
    e = job(3)
    started(e)
    fx = run(e, ex.ShellExited(0, exited(0)))
    [entry] = [f for f in of(fx, ex.Log) if f.name == "shell-exit"]
    assert entry.context == {"rank": 0, "wait_status": 0, "active_ranks": "1-2"}
    assert ex.Timer("shell-exit", 30.0) in fx
    fx = run(e, ex.TimerFired("shell-exit"))
    note = of(fx, ex.Report)[0].data["note"]
    assert "still active on h1,h2 (ranks 1-2) 30s after leader shell exit" in note


def test_shell_exit_timer_cancelled_when_the_others_finish():
    e = job(2)
    started(e)
    run(e, ex.ShellExited(0, exited(0)))
    fx = run(e, ex.ShellExited(1, exited(0)))
    assert ex.Timer("shell-exit") in fx and of(fx, ex.Finished)


def test_critical_ranks_before_the_leader_is_up_travel_with_the_init_answer():
    e = job(3)
    fx = run(e, ex.SetCritical(frozenset({2})))
    assert of(fx, ex.Notify) == [] and logs(fx) == ["critical-ranks"]
    assert e.critical == {0, 2} and e.crit_seq == 1
    fx = run(e, *[ex.BarrierEntered("init", i) for i in range(3)])
    assert of(fx, ex.Answer)[0].payload["critical"] == {"ranks": "0,2", "seq": 1}


def test_critical_ranks_after_the_leader_is_up_are_pushed_in_order():
    e = job(3)
    started(e)
    fx = run(e, ex.SetCritical(frozenset({1})), ex.SetCritical(frozenset({1, 2})))
    assert [n.payload for n in of(fx, ex.Notify)] == [{"ranks": "0-1", "seq": 1},
                                                      {"ranks": "0-2", "seq": 2}]


def test_kill_tasks_signals_below_the_shells():
    e = job(2)
    started(e)
    fx = run(e, ex.KillTasks(signal.SIGKILL))
    assert of(fx, ex.Signal) == [ex.Signal(signal.SIGKILL, (0, 1), tasks=True)]


@pytest.mark.parametrize("order", [
    ("exit1", "exit0", "lost2"), ("lost2", "exit1", "exit0"), ("exit0", "lost2", "exit1"),
])
def test_any_order_of_endings_completes_exactly_once(order):
    e = job(3)
    started(e)
    run(e, ex.SetCritical(frozenset({0, 1})))
    events = {"exit0": ex.ShellExited(0, exited(0)), "exit1": ex.ShellExited(1, exited(0)),
              "lost2": ex.ShellUnreachable(2)}
    fx = run(e, *[events[o] for o in order])
    assert len(of(fx, ex.Finished)) == 1 and logs(fx).count("complete") == 1
    assert of(fx, ex.Report)[-2].data == {"status": 0}

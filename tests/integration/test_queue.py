"""`fluxlite queue stop/start/status/drain/idle` through the real CLI, as flux-queue(1):
a stopped queue accepts jobs but gives none resources; drain and idle wait for
events, end on a timeout with one line, and stop waiting when their client goes."""

import pytest

from fluxlite.jobapi import api
from fluxlite.testing import one_error_line
from fluxlite.util import fluid


def jobid_of(cp) -> str:
    return cp.stdout.strip().splitlines()[0]


def state(inst, jobid: str) -> str:
    return api.info(inst.handle(), fluid.parse(jobid))["state"]


@pytest.fixture
def one_core(instance_factory):
    return instance_factory(1, cores_per_rank=1)


def test_status_of_a_fresh_instance(inst1):
    cp = inst1.cli("queue", "status", check=True)
    assert cp.stdout == "Job submission is enabled\nScheduling is started\n"
    cp = inst1.cli("queue", "status", "-v", check=True)
    assert cp.stdout.splitlines()[2:] == ["0 alloc requests queued",
                                          "0 alloc requests pending to scheduler",
                                          "0 running jobs"]


def test_stopped_queue_accepts_jobs_and_runs_them_on_start(one_core):
    inst = one_core
    cp = inst.cli("queue", "stop", "-m", "system maintenance", check=True)
    assert cp.stdout == "Scheduling is stopped: system maintenance\n"
    cp = inst.cli("queue", "status", check=True)
    assert cp.stdout == ("Job submission is enabled\n"
                         "Scheduling is stopped: system maintenance\n")
    first = jobid_of(inst.cli("submit", "true", check=True))
    second = jobid_of(inst.cli("submit", "--urgency=31", "true", check=True))
    # nothing runs: idle answers at once, with both jobs pending
    assert inst.cli("queue", "idle", timeout=30, check=True).stdout == "2 jobs\n"
    assert state(inst, first) == state(inst, second) == "SCHED"
    cp = inst.cli("queue", "status", "-v", check=True)
    assert "2 alloc requests queued" in cp.stdout.splitlines()
    assert inst.cli("queue", "start", check=True).stdout == "Scheduling is started\n"
    inst.cli("queue", "drain", "--timeout=30s", timeout=40, check=True)
    h = inst.handle()
    t_run = {j["id"]: j["t_run"] for j in api.list_jobs(h, "all")}
    assert t_run[fluid.parse(second)] < t_run[fluid.parse(first)]
    for j in (first, second):
        inst.cli("job", "wait", j, check=True, timeout=30)


def test_stop_withdraws_a_request_the_scheduler_holds(one_core):
    inst = one_core
    blocker = jobid_of(inst.cli("submit", "sleep", "60", check=True))
    inst.cli("job", "wait-event", "-t", "30s", blocker, "start", check=True, timeout=40)
    waiting = jobid_of(inst.cli("submit", "true", check=True))
    cp = inst.cli("queue", "stop", "--quiet", "-m", "no more", check=True)
    assert cp.stdout == ""
    inst.cli("cancel", blocker, check=True)
    # the core is free once the blocker is gone, yet the waiting job stays pending
    assert inst.cli("queue", "idle", timeout=30, check=True).stdout == "1 jobs\n"
    assert state(inst, waiting) == "SCHED"
    assert inst.cli("queue", "idle", "-q", timeout=30, check=True).stdout == "1 jobs\n"
    inst.cli("queue", "start", "--quiet", check=True)
    inst.cli("job", "wait", waiting, check=True, timeout=30)
    cp = inst.cli("queue", "idle", "-q", timeout=30, check=True)
    assert cp.stdout == ""


def test_drain_and_idle_time_out_then_end_on_events(inst1):
    jobid = jobid_of(inst1.cli("submit", "sleep", "60", check=True))
    inst1.cli("job", "wait-event", "-t", "30s", jobid, "start", check=True, timeout=40)
    cp = inst1.cli("queue", "drain", "--timeout=0.2s", timeout=30)
    assert one_error_line(cp) == ("fluxlite queue drain: timeout: jobs still active after "
                                  "0.2s (--timeout)")
    cp = inst1.cli("queue", "idle", "--timeout", "0.2", timeout=30)
    assert one_error_line(cp) == ("fluxlite queue idle: timeout: jobs still running after "
                                  "0.2s (--timeout)")
    with inst1.cli_background("queue", "drain") as drain, \
            inst1.cli_background("queue", "idle") as idle:
        inst1.cli("cancel", jobid, check=True)
        assert drain.wait(timeout=30) == 0
        assert idle.wait(timeout=30) == 0
        assert idle.stdout.read() == "0 jobs\n"
    # the waiters of the clients that timed out were dropped with them
    assert inst1.cli("queue", "drain", timeout=30, check=True).returncode == 0


def test_a_queue_that_is_not_there(inst1):
    # as Flux's: the free argument names a queue (the reason is given with -m)
    for args in (["stop", "-m", "why", "more"], ["status", "more"], ["enable", "-q", "more"]):
        cp = inst1.cli("queue", *args, timeout=30)
        assert cp.returncode == 1
        assert one_error_line(cp).endswith("'more' is not a queue (queues: none)")
    cp = inst1.cli("queue", "disable", "-q", "a", "b", timeout=30)
    assert "Conflicting queues specified as --queue=a and b" in one_error_line(cp)


@pytest.mark.parametrize("args, words", [
    (["drain", "--timeout=soon"], "not a valid Flux Standard Duration"),
    (["idle", "--timeout=-1"], "not a valid Flux Standard Duration"),
    (["stop", "-m", "why", "one", "two"], "unexpected extra argument (two)"),
    (["start", "--bogus"], "No such option"),
    (["nosuch"], "No such command"),
])
def test_bad_input_is_one_line(inst1, args, words):
    cp = inst1.cli("queue", *args, timeout=30)
    assert cp.returncode == 2
    assert words in one_error_line(cp)
    assert inst1.cli("queue", "status", check=True).stdout.endswith("Scheduling is started\n")

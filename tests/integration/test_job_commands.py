"""`fluxlite job` subcommands, `jobs ID` and `setattr` through the real CLI:
following eventlogs that can grow no more, jobs that never started, waiting
for any job, durations, unknown ids and values that look like options."""

import pytest

from fluxlite.jobapi import api
from fluxlite.testing import one_error_line
from fluxlite.util import fluid


def jobid_of(cp) -> str:
    return cp.stdout.strip().splitlines()[0]


@pytest.fixture
def pending_cancelled(instance_factory):
    """A one-core instance, a job that holds the core, and a job cancelled while it
    waited for it: (instance, blocker id, cancelled id)."""
    inst = instance_factory(1, cores_per_rank=1)
    blocker = jobid_of(inst.cli("submit", "sleep", "60", check=True))
    pending = jobid_of(inst.cli("submit", "true", check=True))
    cp = inst.cli("job", "eventlog", "-p", "exec", pending)
    assert one_error_line(cp).endswith(f"job {pending} has no exec eventlog yet")
    inst.cli("cancel", pending, check=True)
    assert inst.cli("job", "wait", pending).returncode == 1
    yield inst, blocker, pending
    inst.cli("cancel", blocker, check=True)
    api.wait(inst.handle(), fluid.parse(blocker), timeout=30)


# -------------------------------------------- following logs that can grow no more
def test_follow_output_of_finished_job_ends(inst1):
    jobid = jobid_of(inst1.cli("submit", "--wait", "echo", "hi", check=True))
    cp = inst1.cli("job", "eventlog", "-p", "output", "-F", jobid, timeout=30, check=True)
    names = [line.split()[1] for line in cp.stdout.splitlines()]
    assert names[0] == "header" and 'data="hi\\n"' in cp.stdout
    assert cp.stdout.count("eof=true") == 2
    cp = inst1.cli("job", "wait-event", "-p", "output", jobid, "nosuch", timeout=30)
    assert one_error_line(cp).endswith(
        "event 'nosuch' never appeared: the output eventlog is complete")
    cp = inst1.cli("job", "wait-event", "-p", "guest.output", jobid, "header", timeout=30,
                   check=True)
    assert "header" in cp.stdout


def test_follow_output_ends_at_eof_while_the_job_runs(inst1):
    """Every stream closed: the output log is complete though the job still runs."""
    jobid = jobid_of(inst1.cli("submit", "sh", "-c", "echo bye; exec >&- 2>&-; exec sleep 60",
                               check=True))
    cp = inst1.cli("job", "eventlog", "-p", "output", "-F", jobid, timeout=30, check=True)
    assert 'data="bye\\n"' in cp.stdout and cp.stdout.count("eof=true") == 2
    assert api.info(inst1.handle(), fluid.parse(jobid))["state"] == "RUN"
    inst1.cli("cancel", jobid, check=True)
    api.wait(inst1.handle(), fluid.parse(jobid), timeout=30)


def test_follow_logs_of_a_job_cancelled_while_pending(pending_cancelled):
    inst, _, pending = pending_cancelled
    for path in ("exec", "output", "guest.exec.eventlog"):
        cp = inst.cli("job", "eventlog", "-p", path, "-F", pending, timeout=30)
        log = "output" if path == "output" else "exec"
        assert one_error_line(cp).endswith(
            f"job {pending} never started, so it has no {log} eventlog")
    cp = inst.cli("job", "wait-event", "-p", "exec", pending, "start", timeout=30)
    assert one_error_line(cp).endswith(
        f"event 'start' never appeared: job {pending} never started, "
        "so it has no exec eventlog")
    # the main log is complete too
    cp = inst.cli("job", "wait-event", pending, "start", timeout=30)
    assert one_error_line(cp).endswith(
        "event 'start' never appeared: the eventlog is complete")


def test_exec_eventlog_of_a_job_that_never_started(pending_cancelled):
    inst, _, pending = pending_cancelled
    cp = inst.cli("job", "eventlog", "-p", "exec", pending)
    line = one_error_line(cp)
    assert line == f"fluxlite job eventlog: job {pending} never started, " \
                   "so it has no exec eventlog"
    assert str(fluid.parse(pending)) not in line and "yet" not in line
    cp = inst.cli("job", "info", pending, "R")
    assert one_error_line(cp).endswith(f"job {pending} has no R")


def test_wait_event_started_before_the_cancel_ends(instance_factory):
    """A follower already waiting when a pending job is cancelled is woken by `clean`."""
    inst = instance_factory(1, cores_per_rank=1)
    blocker = jobid_of(inst.cli("submit", "sleep", "60", check=True))
    pending = jobid_of(inst.cli("submit", "true", check=True))
    with inst.cli_background("job", "wait-event", "-p", "exec", pending, "start") as follower:
        inst.cli("cancel", pending, check=True)
        _, err = follower.communicate(timeout=30)
    assert follower.returncode == 1 and "never started" in err
    inst.cli("cancel", blocker, check=True)
    api.wait(inst.handle(), fluid.parse(blocker), timeout=30)


# ---------------------------------------------------------------- job wait
def test_job_wait_without_id_waits_for_any_job(inst1):
    cp = inst1.cli("job", "wait")
    assert cp.returncode == 2
    assert one_error_line(cp) == "fluxlite job wait: there are no waitable jobs"

    failed = jobid_of(inst1.cli("submit", "sh", "-c", "exit 3", check=True))
    sleeper = jobid_of(inst1.cli("submit", "sleep", "60", check=True))
    cp = inst1.cli("job", "wait", timeout=30)  # the first to finish, not the sleeper
    assert (cp.returncode, cp.stdout) == (1, failed + "\n")
    assert one_error_line(cp) == "fluxlite job wait: task(s) exited with exit code 3"

    with inst1.cli_background("job", "wait") as waiter:
        inst1.cli("cancel", sleeper, check=True)
        out, err = waiter.communicate(timeout=30)
    assert (waiter.returncode, out) == (1, sleeper + "\n")
    # Flux's words, its trailing space included (the cancel had no note); the id is on stdout
    assert err == "fluxlite job wait: Fatal exception type=cancel \n"

    ok = jobid_of(inst1.cli("submit", "true", check=True))
    cp = inst1.cli("job", "wait", "-v", timeout=30)   # -v says more only with --all
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, f"{ok}\n", "")
    assert inst1.cli("job", "wait").returncode == 2
    assert inst1.cli("job", "wait", "--all", check=True).stdout == ""


def test_job_wait_all_waits_for_more_jobs_than_it_keeps_waits_in_flight(inst4):
    """`job wait --all` asks for WAIT_WINDOW waits at a time, as `submit --wait` does:
    every job is still waited for, and one failure makes the exit code 1."""
    from fluxlite.jobapi.api import WAIT_WINDOW
    n = WAIT_WINDOW + 20
    inst4.cli("submit", f"--cc=1-{n}", "--quiet", "sh", "-c", f"test {{cc}} -ne {n}",
              check=True, timeout=120)
    cp = inst4.cli("job", "wait", "--all", timeout=300)
    assert cp.returncode == 1 and len(cp.stderr.splitlines()) == 1
    assert "exit code 1" in cp.stderr
    jobs = api.list_jobs(inst4.handle(), "all")
    assert len(jobs) == n and all(j["waited"] for j in jobs)
    assert inst4.cli("job", "wait").returncode == 2   # none left to wait for


def test_job_wait_help_and_usage(inst1):
    helptext = inst1.cli("job", "wait", "--help", check=True).stdout
    assert "not waited for yet" in helptext and "With no JOBID" in helptext
    jobid = jobid_of(inst1.cli("submit", "--wait", "true", check=True))
    cp = inst1.cli("job", "wait", "--all", jobid)
    assert cp.returncode == 2 and "not both" in one_error_line(cp)


# ---------------------------------------------------------- wait-event -t FSD
def test_wait_event_timeout_is_a_duration(inst1):
    done = jobid_of(inst1.cli("submit", "--wait", "true", check=True))
    cp = inst1.cli("job", "wait-event", "-t", "0.5s", done, "clean", timeout=30, check=True)
    assert cp.stdout.split()[1] == "clean"
    inst1.cli("job", "wait-event", "--timeout=1m", done, "clean", timeout=30, check=True)
    inst1.cli("job", "wait-event", "-t", "none", done, "clean", timeout=30, check=True)
    running = jobid_of(inst1.cli("submit", "sleep", "60", check=True))
    cp = inst1.cli("job", "wait-event", "-t", "200ms", running, "clean", timeout=30)
    assert one_error_line(cp).endswith("wait-event timeout on event 'clean'")
    cp = inst1.cli("job", "wait-event", "-t", "0.5x", done, "clean")
    assert cp.returncode == 2
    assert "'0.5x' is not a valid Flux Standard Duration" in one_error_line(cp)
    inst1.cli("cancel", running, check=True)
    api.wait(inst1.handle(), fluid.parse(running), timeout=30)


# --------------------------------------------------------- unknown ids, values
def test_jobs_unknown_id_is_an_error(inst1):
    cp = inst1.cli("jobs", "ƒzzzzz")
    assert cp.returncode == 1 and cp.stdout == ""
    unknown = fluid.f58(fluid.parse("ƒzzzzz"))
    assert one_error_line(cp) == f"fluxlite jobs: unknown job id {unknown}"
    known = jobid_of(inst1.cli("submit", "--wait", "true", check=True))
    cp = inst1.cli("jobs", "-n", "-o", "{id}", known, "fzzzzz")
    assert cp.returncode == 1 and cp.stdout == known + "\n"
    assert "unknown job id" in one_error_line(cp)
    assert inst1.cli("jobs", "-n", "-o", "{id}", known, check=True).stdout == known + "\n"


def test_setattr_negative_value_reaches_the_check(inst1):
    cp = inst1.cli("setattr", "tbon.lost-timeout", "-1")
    line = one_error_line(cp)
    assert "No such option" not in line
    assert "invalid value for tbon.lost-timeout" in line and "-1" in line
    inst1.cli("setattr", "tbon.lost-timeout", "5s", check=True)


def test_job_info_without_key_lists_keys_on_one_line(inst1):
    jobid = jobid_of(inst1.cli("submit", "--wait", "true", check=True))
    cp = inst1.cli("job", "info", jobid)
    line = one_error_line(cp)
    assert cp.returncode == 2 and "\t" not in line
    assert ("jobspec, R, J, eventlog, guest.exec.eventlog, guest.input, guest.output, "
            "or another key of the job") in line


def test_concurrent_job_waits_get_different_jobs(inst1):
    """The job-manager hands each waiting `job wait` its own job, never the same one."""
    jobs = {inst1.cli("submit", "sleep", "0.5", check=True).stdout.strip() for _ in range(2)}
    with inst1.cli_background("job", "wait") as w1, inst1.cli_background("job", "wait") as w2:
        waiters = [w1, w2]
        got = {w.communicate(timeout=30)[0].strip() for w in waiters}
    assert got == jobs
    assert [w.returncode for w in waiters] == [0, 0]
    cp = inst1.cli("job", "wait")
    assert cp.returncode == 2 and "there are no waitable jobs" in cp.stderr


def test_following_an_unknown_job_is_an_error_at_once(inst1):
    import errno

    from fluxlite.errors import FluxliteError
    h = inst1.handle()
    with pytest.raises(FluxliteError) as info:
        next(api.event_watch(h, 12345, timeout=30))
    assert info.value.errnum == errno.ENOENT

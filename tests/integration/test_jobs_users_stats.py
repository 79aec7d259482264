"""`fluxlite jobs -A`, `-u USER|all`, `--stats`, `--stats-only` and `--sort` through the
real CLI, as flux-jobs(1).  Only the instance owner can connect, so every job is the
owner's: another user's list is empty."""

import os
import pwd

import pytest

from fluxlite.testing import one_error_line


def ids_of(cp) -> list[str]:
    return cp.stdout.split()


def test_user_filters(inst1):
    jobid = ids_of(inst1.cli("submit", "--wait", "true", check=True))[0]
    me = pwd.getpwuid(os.getuid()).pw_name
    other = str(os.getuid() + 1)
    fmt = ["-a", "-n", "-o", "{id.f58}"]
    for args in ([], ["-A"], ["-u", "all"], ["-u", me], ["-u", str(os.getuid())]):
        assert ids_of(inst1.cli("jobs", *fmt, *args, check=True)) == [jobid], args
    assert ids_of(inst1.cli("jobs", *fmt, "-u", other, check=True)) == []
    assert ids_of(inst1.cli("jobs", *fmt, "-u", other, "-A", check=True)) == [jobid]
    # listed ids are shown whoever they belong to
    assert ids_of(inst1.cli("jobs", "-n", "-o", "{id.f58}", "-u", other, jobid,
                            check=True)) == [jobid]


def test_stats(one_core_instance):
    inst = one_core_instance
    cp = inst.cli("jobs", "--stats-only")
    assert (cp.returncode, cp.stdout) == (
        1, "0 running, 0 completed, 0 failed, 0 pending, 0 inactive purged\n")
    inst.cli("submit", "--wait", "true", check=True)
    inst.cli("submit", "--wait", "false")
    running = ids_of(inst.cli("submit", "sleep", "60", check=True))[0]
    inst.cli("job", "wait-event", "-t", "30s", running, "start", check=True)
    pending = ids_of(inst.cli("submit", "true", check=True))[0]
    cp = inst.cli("jobs", "--stats-only", check=True)
    assert cp.stdout == "1 running, 1 completed, 1 failed, 1 pending, 0 inactive purged\n"
    cp = inst.cli("jobs", "--stats", "-o", "{id.f58}", check=True)
    assert cp.stdout.splitlines() == [
        "1 running, 1 completed, 1 failed, 1 pending, 0 inactive purged", "JOBID",
        pending, running]
    inst.cli("cancel", pending, running, check=True)
    inst.cli("queue", "drain", "--timeout=30s", timeout=40, check=True)
    cp = inst.cli("jobs", "--stats-only")
    assert (cp.returncode, cp.stdout) == (
        1, "0 running, 1 completed, 3 failed, 0 pending, 0 inactive purged\n")


@pytest.fixture
def one_core_instance(instance_factory):
    return instance_factory(1, cores_per_rank=1)


def test_sort(inst1):
    a = ids_of(inst1.cli("submit", "--job-name=bbb", "--urgency=10", "true", check=True))[0]
    b = ids_of(inst1.cli("submit", "--job-name=aaa", "--urgency=20", "true", check=True))[0]
    c = ids_of(inst1.cli("submit", "--job-name=ccc", "--urgency=10", "true", check=True))[0]
    inst1.cli("queue", "drain", "--timeout=30s", timeout=40, check=True)
    fmt = ["-a", "-n", "-o", "{id.f58}"]
    assert ids_of(inst1.cli("jobs", *fmt, "--sort=name", check=True)) == [b, a, c]
    assert ids_of(inst1.cli("jobs", *fmt, "--sort=-name", check=True)) == [c, a, b]
    assert ids_of(inst1.cli("jobs", *fmt, "--sort=urgency,-t_submit", check=True)) == [c, a, b]
    assert ids_of(inst1.cli("jobs", *fmt, "--sort=id", "-c", "2", check=True)) == [a, b]


@pytest.mark.parametrize("args, words", [
    (["-u", "no-such-user-xyz"], "unknown user 'no-such-user-xyz'"),
    (["--sort=bogus"], "invalid sort key 'bogus'"),
    (["--sort=name,-"], "invalid sort key ''"),
])
def test_bad_input_is_one_line(inst1, args, words):
    cp = inst1.cli("jobs", *args, timeout=30)
    assert cp.returncode == 2
    line = one_error_line(cp)
    assert line.startswith("fluxlite jobs: ") and words in line

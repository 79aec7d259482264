"""`fluxlite cancel --all/--user/--states/--dry-run` through the real CLI, with
flux-cancel(1)'s summary lines ("Canceled 2 jobs (0 errors)", "Matched 0 jobs")."""

import os
import pwd

import pytest

from fluxlite.jobapi import api
from fluxlite.testing import one_error_line
from fluxlite.util import fluid


def ids_of(cp) -> list[str]:
    return cp.stdout.split()


def state(inst, jobid: str) -> str:
    return api.info(inst.handle(), fluid.parse(jobid))["state"]


@pytest.fixture
def one_core(instance_factory):
    """A one-core instance with one running job and two pending: (inst, run, pending)."""
    inst = instance_factory(1, cores_per_rank=1)
    running = ids_of(inst.cli("submit", "sleep", "60", check=True))[0]
    inst.cli("job", "wait-event", "-t", "30s", running, "start", check=True)
    pending = ids_of(inst.cli("submit", "--cc=0-1", "true", check=True))
    return inst, running, pending


def test_dry_run_then_states_then_all(one_core):
    inst, running, pending = one_core
    cp = inst.cli("cancel", "--all", "--dry-run", check=True)
    assert cp.stderr == "fluxlite cancel: Would cancel 3 jobs\n"
    cp = inst.cli("cancel", "-n", running, check=True)
    assert cp.stderr == "fluxlite cancel: Would cancel 1 job\n"
    assert state(inst, running) == "RUN"
    cp = inst.cli("cancel", "--states=pending", "-m", "not now", check=True)
    assert cp.stderr == "fluxlite cancel: Canceled 2 jobs (0 errors)\n"
    for j in pending:
        assert inst.cli("job", "wait", j, timeout=30).returncode == 1
    assert state(inst, running) == "RUN"
    cp = inst.cli("cancel", "-S", "depend,sched", check=True)
    assert cp.stderr == "fluxlite cancel: Matched 0 jobs\n"
    assert inst.cli("cancel", "-S", "sched", "-q", check=True).stderr == ""
    me = pwd.getpwuid(os.getuid()).pw_name
    cp = inst.cli("cancel", f"--user={me}", check=True)
    assert cp.stderr == "fluxlite cancel: Canceled 1 job (0 errors)\n"
    inst.cli("queue", "drain", "--timeout=30s", timeout=40, check=True)
    assert inst.cli("cancel", "--all", check=True).stderr == "fluxlite cancel: Matched 0 jobs\n"


def test_user_all_and_another_user(one_core):
    inst, running, pending = one_core
    cp = inst.cli("cancel", f"--user={os.getuid() + 1}", check=True)
    assert cp.stderr == "fluxlite cancel: Matched 0 jobs\n"
    cp = inst.cli("cancel", "-u", "all", check=True)
    assert cp.stderr == "fluxlite cancel: Canceled 3 jobs (0 errors)\n"
    inst.cli("queue", "drain", "--timeout=30s", timeout=40, check=True)


@pytest.mark.parametrize("args, words", [
    (["--states=bogus"], "invalid state 'bogus'"),
    (["--user=no-such-user-xyz"], "invalid user 'no-such-user-xyz'"),
    (["--all", "f1"], "do not give JOBIDs with --all, --user or --states"),
    (["-S", "run", "f1"], "do not give JOBIDs with --all, --user or --states"),
    ([], "give one or more JOBIDs, or --all"),
    (["X"], "error parsing jobid: 'X'"),
])
def test_bad_input_is_one_line(inst1, args, words):
    cp = inst1.cli("cancel", *args, timeout=30)
    line = one_error_line(cp)
    assert line.startswith("fluxlite cancel: ") and words in line


@pytest.mark.timeout(300)
def test_two_thousand_jobs_canceled_in_one_go_all_end(instance_factory):
    """One core, two thousand jobs (one running, the rest pending), all canceled at
    once: every cancel, withdrawn request and free is carried out, and no job is
    left in SCHED or CLEANUP."""
    inst = instance_factory(1, cores_per_rank=1)
    ids = ids_of(inst.cli("submit", "--cc=1-2000", "sleep", "60", check=True, timeout=200))
    assert len(ids) == 2000
    inst.cli("job", "wait-event", "-t", "60s", ids[0], "start", check=True, timeout=70)
    cp = inst.cli("cancel", "--all", check=True, timeout=120)
    assert cp.stderr == "fluxlite cancel: Canceled 2000 jobs (0 errors)\n"
    inst.cli("queue", "drain", "--timeout=120s", timeout=130, check=True)
    stats = inst.handle().call("job-manager.stats")
    assert (stats["pending"], stats["running"], stats["failed"]) == (0, 0, 2000)
    sched = inst.handle().call("sched.resource-status")
    assert sched["pending"] == 0 and sched["allocated"] == {}

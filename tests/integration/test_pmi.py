"""Real MPI programs (MPICH, built with mpicc in the test) served by the job
shell's pmi plugin: ranks and sizes across brokers, MPI_Abort, -o pmi=off and
a bad -o pmi value."""

import os
import shutil
import subprocess

import pytest

from fluxlite.job import api
from fluxlite.testing import jobid_of

pytestmark = pytest.mark.timeout(180)

PROGRAMS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "programs")


@pytest.fixture(scope="module")
def mpi(tmp_path_factory):
    """The test programs, compiled: {name: path}."""
    mpicc = shutil.which("mpicc")
    if mpicc is None:
        if os.environ.get("CI") == "true":
            pytest.fail("mpicc not found: CI must install mpich libmpich-dev")
        pytest.skip("mpicc not found: install mpich libmpich-dev to run the MPI tests")
    out = tmp_path_factory.mktemp("mpi")
    built = {}
    for name in ("mpi_hello", "mpi_abort"):
        path = str(out / name)
        subprocess.run([mpicc, "-o", path, os.path.join(PROGRAMS, f"{name}.c")],
                       check=True, timeout=120)
        built[name] = path
    return built


def ranks_of(stdout: str) -> list[str]:
    return sorted(line for line in stdout.splitlines() if line.startswith("rank "))


def test_run_n4_gives_ranks_0_to_3_of_4(instance_factory, mpi):
    inst = instance_factory(2)
    cp = inst.cli("run", "-n4", mpi["mpi_hello"], timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert ranks_of(cp.stdout) == [f"rank {r} of 4" for r in range(4)]


def test_run_N2_spans_both_brokers(instance_factory, mpi):
    inst = instance_factory(2)
    cp = inst.cli("run", "-N2", "-n4", mpi["mpi_hello"], timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert ranks_of(cp.stdout) == [f"rank {r} of 4" for r in range(4)]


def test_mpi_abort_fails_the_job_with_the_abort_code(instance_factory, mpi):
    inst = instance_factory(2)
    h = inst.handle()
    jobid = jobid_of(inst.cli("submit", "-N2", "-n4", mpi["mpi_abort"], "3", check=True))
    r = api.wait(h, jobid, timeout=120)
    assert not r["success"] and r["returncode"] == 3, r
    exc = [e for e in api.event_watch(h, jobid, "eventlog", follow=False)
           if e["name"] == "exception"]
    assert exc and exc[0]["context"]["type"] == "exec" and exc[0]["context"]["severity"] == 0
    assert "task rank 3" in exc[0]["context"]["note"]
    assert "PMI abort" in exc[0]["context"]["note"]


def test_pmi_off_makes_each_task_a_singleton(instance_factory, mpi):
    inst = instance_factory(2)
    cp = inst.cli("run", "-n2", "-o", "pmi=off", mpi["mpi_hello"], timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert ranks_of(cp.stdout) == ["rank 0 of 1", "rank 0 of 1"]


def test_bad_pmi_value_is_refused_at_submit(instance_factory):
    inst = instance_factory(1)
    cp = inst.cli("submit", "-o", "pmi=bogus", "true")
    assert cp.returncode != 0
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "pmi" in lines[0] and "simple or off" in lines[0], cp.stderr

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


def test_a_task_exiting_before_mpi_init_ends_the_job_with_its_code(instance_factory, mpi):
    """The others are in a barrier that can never complete: the job is ended at once
    (not after exit-timeout) with the early task's status and a note naming it."""
    inst = instance_factory(2)
    cp = inst.cli("run", "-N2", "-n4", "-o", "exit-timeout=none", "sh", "-c",
                  f'test "$PMI_RANK" = 1 && exit 5; exec {mpi["mpi_hello"]}', timeout=120)
    assert cp.returncode == 5, cp.stderr
    assert "task rank 1" in cp.stderr and "before the PMI barrier" in cp.stderr, cp.stderr


GARBAGE = """
import os, socket, sys
s = socket.socket(fileno=int(os.environ["PMI_FD"]))
if os.environ["PMI_RANK"] == "0":
    s.sendall(b"garbage\\n")
    print(s.recv(300).decode().split()[:2])
    s.sendall(b"cmd=init pmi_version=1 pmi_subversion=1\\ncmd=get_universe_size\\n")
    got = b""
    while got.count(b"\\n") < 2:
        got += s.recv(300)
    print(got.decode().splitlines()[1])
    s.sendall(b"cmd=finalize\\n")
    print(s.recv(300).decode().strip())
else:
    s.close()
"""


def test_garbage_gets_an_error_answer_and_one_log_line(instance_factory):
    inst = instance_factory(1)
    cp = inst.cli("run", "-n2", "-l", "python3", "-c", GARBAGE, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert "0: ['cmd=error', 'rc=-1']" in cp.stdout
    assert "0: cmd=universe_size rc=0 size=2" in cp.stdout
    assert "0: cmd=finalize_ack rc=0" in cp.stdout
    logged = [line for line in cp.stderr.splitlines() if "pmi:" in line]
    assert len(logged) == 1 and "garbage" in logged[0], cp.stderr

"""Real MPI programs (MPICH, built with mpicc.mpich in the test) served by the job
shell's pmi plugin: ranks and sizes across brokers, MPI_Abort, -o pmi=off and
a bad -o pmi value."""

import os
import shutil
import subprocess

import pytest

from fluxlite.jobapi import api
from fluxlite.testing import Instance, jobid_of

pytestmark = pytest.mark.timeout(180)

PROGRAMS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "programs")


@pytest.fixture(scope="module")
def mpi(tmp_path_factory):
    """The test programs, compiled: {name: path}."""
    mpicc = shutil.which("mpicc.mpich")
    if mpicc is None:
        if os.environ.get("CI") == "true":
            pytest.fail("mpicc.mpich not found: CI must install mpich libmpich-dev")
        pytest.skip("mpicc.mpich not found: install mpich libmpich-dev to run the MPI tests")
    out = tmp_path_factory.mktemp("mpi")
    built = {}
    for name in ("mpi_hello", "mpi_abort", "mpi_allreduce", "mpi_early_exit"):
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
    assert len(lines) == 1 and "pmi must be a comma-separated list of simple (or pmi1, " \
        "pmi2) and pmix, or off" in lines[0], cp.stderr


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


# ------------------------------------------------------- a size-4 instance
@pytest.fixture(scope="module")
def inst4mpi():
    """One size-4 instance (4 cores per rank) for the shapes below; leak-checked."""
    inst = Instance(4, cores_per_rank=4)
    inst.start()
    yield inst
    inst.__exit__(None, None, None)


SHAPES = [("-n4",), ("-N2", "-n4"), ("-N4", "-n8")]


def size_of(shape) -> int:
    return int(shape[-1][2:])


@pytest.mark.parametrize("shape", SHAPES, ids=" ".join)
def test_hello_shapes_in_a_size_4_instance(inst4mpi, mpi, shape):
    cp = inst4mpi.cli("run", *shape, mpi["mpi_hello"], timeout=120)
    assert cp.returncode == 0, cp.stderr
    n = size_of(shape)
    assert ranks_of(cp.stdout) == sorted(f"rank {r} of {n}" for r in range(n))


@pytest.mark.parametrize("shape", SHAPES, ids=" ".join)
def test_allreduce_shapes_in_a_size_4_instance(inst4mpi, mpi, shape):
    cp = inst4mpi.cli("run", *shape, mpi["mpi_allreduce"], timeout=120)
    assert cp.returncode == 0, cp.stderr
    n = size_of(shape)
    want = n * (n + 1) // 2
    assert sorted(cp.stdout.splitlines()) == \
        sorted(f"allreduce rank {r} of {n} sum {want} ok" for r in range(n))


def test_20_concurrent_mpi_jobs_never_mix_their_exchanges(inst4mpi, mpi, tmp_path):
    """`submit --cc 1-20` of two-task MPI jobs at once: all complete, and each job's
    output shows ranks 0 and 1 of 2 with the right sum (a job that got another's
    keys would see the wrong size, hang, or fail its sum)."""
    cp = inst4mpi.cli("submit", "--cc", "1-20", "-n2", "--wait",
                      "--output", str(tmp_path / "out.{cc}"), mpi["mpi_allreduce"],
                      timeout=170)
    assert cp.returncode == 0, cp.stderr
    ids = cp.stdout.split()
    assert len(set(ids)) == 20, cp.stdout
    for cc in range(1, 21):
        lines = sorted((tmp_path / f"out.{cc}").read_text().splitlines())
        assert lines == ["allreduce rank 0 of 2 sum 3 ok",
                         "allreduce rank 1 of 2 sum 3 ok"], (cc, lines)


def test_a_c_program_exiting_before_mpi_init_does_not_hang_the_others(inst4mpi, mpi):
    """Rank 1 exits(3) before MPI_Init; ranks 0, 2, 3 are in MPI_Init's barrier.
    The job ends with rank 1's code and a note naming it, long before the time
    limit (-t 1m) and without waiting for exit-timeout."""
    cp = inst4mpi.cli("run", "-N2", "-n4", "-t", "1m", "-o", "exit-timeout=none",
                      mpi["mpi_early_exit"], "1", timeout=60)
    assert cp.returncode == 3, cp.stderr
    assert "task rank 1" in cp.stderr and "before the PMI barrier" in cp.stderr, cp.stderr
    assert "rank 0 of" not in cp.stdout


MPI4PY_ALLREDUCE = """
from mpi4py import MPI
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank() + 1, op=MPI.SUM)
want = comm.Get_size() * (comm.Get_size() + 1) // 2
assert total == want, (total, want)
print(f"mpi4py rank {comm.Get_rank()} of {comm.Get_size()} sum {total} ok")
"""


def test_mpi4py_allreduce_across_two_brokers(inst4mpi, mpi):
    """mpi4py built against MPICH (.ci/run installs it): its allreduce across 4 tasks."""
    import importlib.util
    import sys
    if importlib.util.find_spec("mpi4py") is None:
        why = ("mpi4py is not installed: MPICC=mpicc.mpich .venv/bin/pip install "
               "--no-binary mpi4py mpi4py")
        if os.environ.get("CI") == "true":
            pytest.fail(why + " (.ci/run installs it)")
        pytest.skip(why)
    cp = inst4mpi.cli("run", "-N2", "-n4", sys.executable, "-c", MPI4PY_ALLREDUCE, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert sorted(cp.stdout.splitlines()) == \
        [f"mpi4py rank {r} of 4 sum 10 ok" for r in range(4)]


def test_mpi_inside_a_batch_child_instance(inst4mpi, mpi, tmp_path):
    """`batch -N2` of a script that runs an MPI job across the child instance's two
    brokers: the child's brokers found each other through PMI, and its job shells
    serve PMI to the MPI tasks in turn."""
    out = tmp_path / "batch.out"
    cp = inst4mpi.cli("batch", "-N2", "-n2", "--output", str(out), "--wrap",
                      "fluxlite", "run", "-N2", "-n4", mpi["mpi_allreduce"], check=True)
    jobid = jobid_of(cp)
    r = api.wait(inst4mpi.handle(), jobid, timeout=150)
    text = out.read_text()
    assert r["success"], (r, text)
    assert sorted(line for line in text.splitlines() if line.startswith("allreduce")) == \
        [f"allreduce rank {n} of 4 sum 10 ok" for n in range(4)], text

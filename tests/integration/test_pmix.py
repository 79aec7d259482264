"""Real Open MPI programs (built with mpicc.openmpi in the test) served by the job
shell's pmix plugin (OpenPMIx's server library): ranks, sizes and allreduce across
brokers, MPI_Abort's code, concurrent jobs, a batch child instance, a task that
dies before PMIx_Init, and garbage and abrupt disconnects at the PMIx server.
Every job here uses the default -o pmi (simple and pmix offered at once), except
where it names pmi=pmix."""

import os
import subprocess

import pytest

from fluxlite.jobapi import api
from fluxlite.pmi import pmix_build
from fluxlite.testing import Instance, find_tool, fluxlite_command, jobid_of, missing_prerequisite

pytestmark = pytest.mark.timeout(180)

PROGRAMS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "programs")


@pytest.fixture(scope="module")
def ompi(tmp_path_factory):
    """The test programs, compiled with Open MPI's mpicc: {name: path}."""
    mpicc = find_tool("mpicc.openmpi")
    if mpicc is None:
        missing_prerequisite("mpicc.openmpi not found: install openmpi-bin libopenmpi-dev "
                             "to run the Open MPI tests")
    if not pmix_build.available():
        missing_prerequisite("OpenPMIx's server library not found: install libpmix-dev "
                             "to run the Open MPI tests")
    out = tmp_path_factory.mktemp("ompi")
    built = {}
    for name in ("mpi_hello", "mpi_abort", "mpi_allreduce", "mpi_early_exit"):
        path = str(out / name)
        subprocess.run([mpicc, "-o", path, os.path.join(PROGRAMS, f"{name}.c")],
                       check=True, timeout=120)
        built[name] = path
    return built


@pytest.fixture(scope="module")
def inst4():
    """One size-4 instance (4 cores per rank) for the tests below; leak-checked."""
    inst = Instance(4, cores_per_rank=4)
    inst.start()
    yield inst
    inst.__exit__(None, None, None)


SHAPES = [("-n4",), ("-N2", "-n4"), ("-N4", "-n8")]


def size_of(shape) -> int:
    return int(shape[-1][2:])


def ranks_of(stdout: str) -> list[str]:
    return sorted(line for line in stdout.splitlines() if line.startswith("rank "))


@pytest.mark.parametrize("shape", SHAPES, ids=" ".join)
def test_open_mpi_hello_shapes(inst4, ompi, shape):
    cp = inst4.cli("run", *shape, ompi["mpi_hello"], timeout=120)
    assert cp.returncode == 0, cp.stderr
    n = size_of(shape)
    assert ranks_of(cp.stdout) == sorted(f"rank {r} of {n}" for r in range(n))


@pytest.mark.parametrize("shape", SHAPES, ids=" ".join)
def test_open_mpi_allreduce_shapes(inst4, ompi, shape):
    cp = inst4.cli("run", *shape, ompi["mpi_allreduce"], timeout=120)
    assert cp.returncode == 0, cp.stderr
    n = size_of(shape)
    want = n * (n + 1) // 2
    assert sorted(cp.stdout.splitlines()) == \
        sorted(f"allreduce rank {r} of {n} sum {want} ok" for r in range(n))


@pytest.mark.parametrize("taskmap", ["cyclic", "manual:[[1,1,2,1],[0,1,2,1]]"])
def test_open_mpi_allreduce_with_tasks_placed_by_taskmap(inst4, ompi, taskmap):
    """PMIx's rank map follows --taskmap: ranks placed cyclically or by hand across two
    nodes still find each other and reduce."""
    cp = inst4.cli("run", "-N2", "-n4", f"--taskmap={taskmap}", ompi["mpi_allreduce"],
                   timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert sorted(cp.stdout.splitlines()) == \
        sorted(f"allreduce rank {r} of 4 sum 10 ok" for r in range(4))


@pytest.mark.parametrize("shape", SHAPES, ids=" ".join)
def test_open_mpi_abort_ends_the_job_with_its_code(inst4, ompi, shape):
    """MPI_Abort(MPI_COMM_WORLD, 7) on the last rank: the job finishes with 7 and a
    fatal exec exception naming that task."""
    h = inst4.handle()
    jobid = jobid_of(inst4.cli("submit", *shape, ompi["mpi_abort"], "7", check=True))
    r = api.wait(h, jobid, timeout=120)
    assert not r["success"] and r["returncode"] == 7, r
    exc = [e for e in api.event_watch(h, jobid, "eventlog", follow=False)
           if e["name"] == "exception"]
    assert exc and exc[0]["context"]["type"] == "exec" and exc[0]["context"]["severity"] == 0
    last = size_of(shape) - 1
    assert f"task rank {last} " in exc[0]["context"]["note"], exc
    assert "PMIx abort (exit code 7)" in exc[0]["context"]["note"], exc


def test_sixteen_tasks_on_one_node(instance_factory, ompi):
    """More local tasks than the first size of the namespace's info list (each task
    adds its own entry): allreduce over 16 tasks of one shell."""
    inst = instance_factory(1, cores_per_rank=16)
    cp = inst.cli("run", "-n16", ompi["mpi_allreduce"], timeout=170)
    assert cp.returncode == 0, cp.stderr
    assert sorted(cp.stdout.splitlines()) == \
        sorted(f"allreduce rank {r} of 16 sum 136 ok" for r in range(16))


def test_pmi_pmix_alone_runs_open_mpi_and_offers_no_pmi_fd(inst4, ompi):
    cp = inst4.cli("run", "-N2", "-n4", "-o", "pmi=pmix", "sh", "-c",
                   f'test -z "$PMI_FD" || exit 9; exec {ompi["mpi_hello"]}', timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert ranks_of(cp.stdout) == [f"rank {r} of 4" for r in range(4)]


# a singleton Open MPI task keeps its session directory under /tmp unless told
SINGLETON = 'export OMPI_MCA_orte_tmpdir_base="$FLUXLITE_JOB_TMPDIR"; '


def test_pmi_simple_alone_leaves_open_mpi_tasks_singletons(inst4, ompi):
    """Without pmix, Open MPI finds no PMIx server: each task is its own world."""
    cp = inst4.cli("run", "-n2", "-o", "pmi=simple", "sh", "-c", SINGLETON +
                   f'test -z "$PMIX_NAMESPACE" || exit 9; exec {ompi["mpi_hello"]}',
                   timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert ranks_of(cp.stdout) == ["rank 0 of 1", "rank 0 of 1"]


def test_a_one_task_job_is_a_world_of_one_with_or_without_pmix(inst4, ompi):
    """The default leaves pmix out of one-task jobs (the program is a world of one
    either way); -o pmi=pmix serves it through PMIx all the same."""
    default = inst4.cli("run", "-n1", "sh", "-c", SINGLETON +
                        f'test -z "$PMIX_NAMESPACE" || exit 9; exec {ompi["mpi_hello"]}',
                        timeout=120)
    asked = inst4.cli("run", "-n1", "-o", "pmi=pmix", "sh", "-c",
                      f'test -n "$PMIX_NAMESPACE" || exit 9; exec {ompi["mpi_hello"]}',
                      timeout=120)
    for cp in (default, asked):
        assert cp.returncode == 0, cp.stderr
        assert ranks_of(cp.stdout) == ["rank 0 of 1"]


def test_10_concurrent_open_mpi_jobs_never_mix_their_exchanges(inst4, ompi, tmp_path):
    cp = inst4.cli("submit", "--cc", "1-10", "-N2", "-n2", "--wait",
                   "--output", str(tmp_path / "out.{cc}"), ompi["mpi_allreduce"],
                   timeout=170)
    assert cp.returncode == 0, cp.stderr
    assert len(set(cp.stdout.split())) == 10, cp.stdout
    for cc in range(1, 11):
        lines = sorted((tmp_path / f"out.{cc}").read_text().splitlines())
        assert lines == ["allreduce rank 0 of 2 sum 3 ok",
                         "allreduce rank 1 of 2 sum 3 ok"], (cc, lines)


def test_open_mpi_inside_a_batch_child_instance(inst4, ompi, tmp_path):
    """`batch -N2`: the child instance's job shells serve PMIx to Open MPI in turn."""
    out = tmp_path / "batch.out"
    cp = inst4.cli("batch", "-N2", "-n2", "--output", str(out), "--wrap",
                   "fluxlite", "run", "-N2", "-n4", ompi["mpi_allreduce"], check=True)
    jobid = jobid_of(cp)
    r = api.wait(inst4.handle(), jobid, timeout=150)
    text = out.read_text()
    assert r["success"], (r, text)
    assert sorted(line for line in text.splitlines() if line.startswith("allreduce")) == \
        [f"allreduce rank {n} of 4 sum 10 ok" for n in range(4)], text


def test_a_task_dying_before_pmix_init_ends_the_job_with_its_code(inst4, ompi):
    """Rank 1 exits 3 before MPI_Init; the others are in MPI_Init's fence, which can
    never complete: the job ends with 3 and a note naming rank 1, without waiting
    for exit-timeout or the time limit."""
    cp = inst4.cli("run", "-N2", "-n4", "-t", "1m", "-o", "exit-timeout=none",
                   ompi["mpi_early_exit"], "1", timeout=60)
    assert cp.returncode == 3, cp.stderr
    assert "task rank 1" in cp.stderr and "PMIx" in cp.stderr, cp.stderr
    assert "rank 0 of" not in cp.stdout


def test_an_instance_started_under_pmix_hands_none_of_it_to_its_jobs(inst4, ompi):
    """`run -N2 -n2 -o pmi=simple,pmix fluxlite start`: the brokers were given PMIx's
    and Open MPI's variables as tasks; the instance's own one-task job must not see
    them (it would join the outer job's PMIx world), so it is a world of one."""
    script = ("fluxlite run -n1 sh -c 'env | grep -c -e ^PMIX_ -e ^OMPI_MCA_; "
              + SINGLETON.replace('"', '') + f"exec {ompi['mpi_hello']}'")
    cp = inst4.cli("run", "-N2", "-n2", "-o", "pmi=simple,pmix", *fluxlite_command(),
                   "start", "sh", "-c", script, timeout=150)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["0", "rank", "0", "of", "1"], cp.stdout


GARBAGE = """
import os, socket, sys
uri = os.environ["PMIX_SERVER_URI41"].split(";", 1)[1]   # tcp4://127.0.0.1:PORT
host, port = uri[len("tcp4://"):].rsplit(":", 1)
for payload in (b"\\x00" * 3, os.urandom(4096), b"", b"\\xff" * 64):
    s = socket.create_connection((host, int(port)), timeout=10)
    if payload:
        try:
            s.sendall(payload)
        except OSError:
            pass
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00")
    s.close()   # with linger 0: a reset, not an orderly close
os.execv(sys.argv[1], sys.argv[1:])
"""


def test_garbage_and_abrupt_disconnects_leave_the_pmix_server_serving(inst4, ompi):
    """Each task first opens four connections to its shell's PMIx server, sends
    garbage (or nothing) and resets them, then becomes the Open MPI program, whose
    PMIx client must still be served by the same shell."""
    cp = inst4.cli("run", "-N2", "-n4", "-o", "pmi=pmix", "python3", "-c", GARBAGE,
                   ompi["mpi_hello"], timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert ranks_of(cp.stdout) == [f"rank {r} of 4" for r in range(4)]
    assert "Traceback" not in cp.stderr, cp.stderr

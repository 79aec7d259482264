"""A private Slurm cluster on this machine (fluxlite.testing.slurm): srun across its
nodes, what `--mpi=pmi2` gives a task, the PMI-2 client against Slurm's real
server, and a cluster that stops exactly the daemons it started."""

import json
import os
import subprocess
import sys

import pytest

from fluxlite.testing.slurm import SlurmCluster, require_slurm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAMS = os.path.join(ROOT, "tests", "programs")
EXCHANGE = os.path.join(PROGRAMS, "pmi2-exchange")

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def slurm():
    require_slurm()
    with SlurmCluster(nodes=2) as cluster:
        yield cluster


def test_srun_runs_on_two_nodes(slurm):
    cp = slurm.srun("-N2", "hostname")
    assert cp.returncode == 0, cp.stderr
    assert len(cp.stdout.splitlines()) == 2
    cp = slurm.srun("-N2", "printenv", "SLURMD_NODENAME")
    assert cp.returncode == 0, cp.stderr
    assert sorted(cp.stdout.split()) == ["node1", "node2"]
    slurm.wait_idle()  # "completing" for a moment after each step
    assert slurm.node_states() == {"node1": "idle", "node2": "idle"}


def pmi_vars(text):
    """{task: {PMI_* name: value}} from `srun -l env` output."""
    tasks: dict[int, dict[str, str]] = {}
    for line in text.splitlines():
        task, _, var = line.partition(": ")
        name, eq, value = var.partition("=")
        tasks.setdefault(int(task), {})
        if eq and name.startswith("PMI_"):
            tasks[int(task)][name] = value
    return tasks


def test_mpi_pmi2_gives_each_task_the_pmi2_variables(slurm):
    cp = slurm.srun("-N2", "-n2", "--mpi=pmi2", "-l", "env")
    assert cp.returncode == 0, cp.stderr
    tasks = pmi_vars(cp.stdout)
    assert sorted(tasks) == [0, 1]
    for rank, env in tasks.items():
        assert sorted(env) == ["PMI_FD", "PMI_JOBID", "PMI_RANK", "PMI_SIZE"], env
        assert env["PMI_RANK"] == str(rank) and env["PMI_SIZE"] == "2"
        assert env["PMI_FD"].isdigit()
        job, _, step = env["PMI_JOBID"].partition(".")
        assert job.isdigit() and step.isdigit()
    # without --mpi (MpiDefault=none) a task gets no PMI at all
    cp = slurm.srun("-N2", "-l", "env")
    assert cp.returncode == 0, cp.stderr
    assert all(env == {} for env in pmi_vars(cp.stdout).values())


def test_pmi2_tasks_exchange_keys_through_slurm(slurm):
    cp = slurm.srun("-N2", "-n2", "--mpi=pmi2", sys.executable, EXCHANGE)
    assert cp.returncode == 0, cp.stderr
    results = sorted((json.loads(line) for line in cp.stdout.splitlines()),
                     key=lambda r: r["rank"])
    assert [r["rank"] for r in results] == [0, 1]
    nodes = [r["node"] for r in results]
    assert sorted(nodes) == ["node1", "node2"]
    for r in results:
        assert r["size"] == 2
        assert r["missing"] == "none"
        assert r["mapping"] == "(vector,(0,2,1))"     # MPICH's node map: 2 nodes, 1 each
        assert r["kvsname"] == results[0]["kvsname"]
        # each task read both cards, and they are the cards the tasks wrote
        assert {int(k): v["node"] for k, v in r["cards"].items()} == {0: nodes[0], 1: nodes[1]}


def test_pmi2_with_several_tasks_per_node(slurm):
    cp = slurm.srun("-N2", "-n4", "--mpi=pmi2", sys.executable, EXCHANGE)
    assert cp.returncode == 0, cp.stderr
    results = [json.loads(line) for line in cp.stdout.splitlines()]
    assert sorted(r["rank"] for r in results) == [0, 1, 2, 3]
    assert all(len(r["cards"]) == 4 and r["mapping"] == "(vector,(0,2,2))" for r in results)


def test_pmi2_abort_ends_the_job_step(slurm):
    cp = slurm.srun("-N2", "-n2", "--mpi=pmi2", sys.executable, EXCHANGE, "--abort-rank", "1",
                    timeout=120)
    assert cp.returncode != 0
    assert cp.stdout == ""                  # the waiting rank never got past its barrier


def test_a_task_outside_pmi2_is_told_so(slurm):
    cp = slurm.srun("-N1", sys.executable, EXCHANGE)
    assert cp.returncode == 1
    assert "pmi2-exchange: not a PMI-2 environment" in cp.stderr


def test_stop_ends_only_its_own_daemons_and_removes_its_directory(slurm):
    other = SlurmCluster(nodes=1).start()
    pids = [d["pid"] for d in other.daemons]
    directory = other.dir
    assert sorted(d["name"] for d in other.daemons) == ["munged", "slurmctld", "slurmd-node1"]
    other.stop()
    for pid in pids:
        assert not _alive(pid), pid
    assert not os.path.exists(directory)
    # the module's cluster, started before, still works
    cp = slurm.srun("-N2", "true")
    assert cp.returncode == 0, cp.stderr


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return False
    return data[data.rfind(b")") + 2:][:1] not in (b"Z", b"X")


def test_slurm_cluster_program_start_status_stop():
    require_slurm()
    script = os.path.join(PROGRAMS, "slurm-cluster")
    cp = subprocess.run([script, "start", "-N", "2"], capture_output=True, text=True,
                        timeout=120)
    assert cp.returncode == 0, cp.stderr
    env = dict(line.removeprefix("export ").split("=", 1) for line in cp.stdout.splitlines())
    directory = env["SLURM_CLUSTER_DIR"]
    try:
        with open(os.path.join(directory, "daemons.json")) as f:
            pids = [d["pid"] for d in json.load(f)["daemons"]]
        status = subprocess.run([script, "status", directory], capture_output=True, text=True,
                                timeout=60)
        assert status.returncode == 0, status.stderr
        assert "node1" in status.stdout and "node2" in status.stdout
        run = subprocess.run(["srun", "-N2", "printenv", "SLURMD_NODENAME"],
                             env=dict(os.environ, SLURM_CONF=env["SLURM_CONF"]),
                             capture_output=True, text=True, timeout=60)
        assert sorted(run.stdout.split()) == ["node1", "node2"], run.stderr
    finally:
        stop = subprocess.run([script, "stop", directory], capture_output=True, text=True,
                              timeout=120)
    assert stop.returncode == 0, stop.stderr
    assert not os.path.exists(directory)
    assert not any(_alive(pid) for pid in pids)
    again = subprocess.run([script, "stop", directory], capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 1
    assert again.stderr.startswith(f"slurm-cluster stop: {directory} holds no cluster")

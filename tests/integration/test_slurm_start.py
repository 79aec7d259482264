"""`fluxlite start` under Slurm's `srun --mpi=pmi2`: each task is one broker of one
instance, its rank and size from Slurm's PMI-2 server, rank 0 runs the initial
program and srun gets its exit status.  The cluster's slurmd share this machine,
so the brokers share a host name and link over ipc://."""

import pytest

from fluxlite.testing import fluxlite_command
from fluxlite.testing.slurm import SlurmCluster, require_slurm

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def slurm():
    require_slurm()
    with SlurmCluster(nodes=2) as cluster:
        yield cluster       # its stop() fails on any process left with its tag


def test_srun_pmi2_start_forms_one_instance_across_two_nodes(slurm):
    cp = slurm.srun("-N2", "--mpi=pmi2", *fluxlite_command(), "start", "sh", "-c",
                    "fluxlite getattr size; fluxlite run -N2 printenv FLUXLITE_SHELL_RANK "
                    "| sort | tr '\\n' ' '", timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines() == ["2", "0 1 "], cp.stdout


def test_srun_pmi2_start_with_two_brokers_per_node(slurm):
    cp = slurm.srun("-N2", "-n4", "--mpi=pmi2", *fluxlite_command(), "start", "sh", "-c",
                    "fluxlite getattr size; fluxlite run -N4 true && echo ran", timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines() == ["4", "ran"], cp.stdout


@pytest.mark.parametrize("program, status", [("true", 0), ("false", 1), ("exit 5", 5)])
def test_srun_pmi2_start_passes_on_the_exit_status(slurm, program, status):
    cp = slurm.srun("-N2", "--mpi=pmi2", *fluxlite_command(), "start", "sh", "-c", program,
                    timeout=120)
    assert cp.returncode == status, cp.stderr


def test_a_broker_that_fails_its_bootstrap_ends_the_step(slurm):
    # rank 2 (kary:1) takes rank 1 for its parent, but rank 1 (kary:2) has no children
    # and puts no endpoint: rank 2 fails after the barriers, and its PMI abort ends the
    # step (Slurm would otherwise keep ranks 0 and 1 waiting for it)
    cp = slurm.srun("-N2", "-n3", "--mpi=pmi2", "sh", "-c",
                    f'if [ "$PMI_RANK" = 2 ]; then k=1; else k=2; fi; '
                    f'exec {" ".join(fluxlite_command())} start --topo kary:$k sleep 300',
                    timeout=120)
    assert cp.returncode != 0
    errors = [line for line in cp.stderr.splitlines() if "rank 1 put no ep" in line]
    assert errors and errors[0].startswith("fluxlite start: "), cp.stderr

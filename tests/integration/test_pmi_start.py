"""`fluxlite start` under a PMI launcher: each launched process is one broker of
one instance (rank and size from PMI), rank 0 runs the initial program, and the
launcher gets its exit status.  Launched by fluxlite itself (`run -N2 -n2 fluxlite
start`) and by MPICH's Hydra (`mpiexec -n 4 fluxlite start`)."""

import os
import subprocess
import uuid

import pytest

from fluxlite.testing import (
    TAG_VAR,
    assert_no_leaks,
    find_tool,
    fluxlite_command,
    missing_prerequisite,
)

pytestmark = pytest.mark.timeout(180)

# what rank 0's initial program prints: the size, then the shell rank of every task
# of a job spread over all the child's ranks, then it exits 3
PROGRAM = ('fluxlite getattr size; fluxlite run -N{n} printenv FLUXLITE_SHELL_RANK '
           '| sort | tr "\\n" " "; echo; exit 3')


def check_output(stdout: str, n: int) -> None:
    lines = stdout.splitlines()
    assert lines[0] == str(n), stdout
    assert lines[1].split() == [str(r) for r in range(n)], stdout


def test_fluxlite_run_start_forms_one_instance_across_both_brokers(instance_factory):
    inst = instance_factory(2)
    cp = inst.cli("run", "-N2", "-n2", *fluxlite_command(), "start", "sh", "-c",
                  PROGRAM.format(n=2), timeout=120)
    assert cp.returncode == 3, cp.stderr
    check_output(cp.stdout, 2)


def test_size_that_disagrees_with_the_launcher_is_one_clear_error(instance_factory):
    inst = instance_factory(1)
    cp = inst.cli("run", "-n2", *fluxlite_command(), "start", "-s", "3", "true", timeout=60)
    assert cp.returncode != 0
    errors = [line for line in cp.stderr.splitlines() if "--size=3" in line]
    assert len(errors) == 2 and "started 2 brokers" in errors[0], cp.stderr


def test_mpiexec_hydra_starts_a_size_4_instance():
    mpiexec = find_tool("mpiexec.hydra")
    if mpiexec is None:
        missing_prerequisite("mpiexec.hydra not found: install mpich to run the Hydra test")
    tag = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PMI_") and k != "FLUXLITE_URI"}
    env[TAG_VAR] = tag
    try:
        cp = subprocess.run([mpiexec, "-n", "4", *fluxlite_command(), "start", "sh", "-c",
                             PROGRAM.format(n=4)], env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=120)
    finally:
        assert_no_leaks(tag)
    assert cp.returncode == 3, cp.stderr
    check_output(cp.stdout, 4)

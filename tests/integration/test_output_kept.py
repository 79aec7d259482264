"""A job's output is never lost without the job saying so: the shell waits for every
commit of its output however slow rank 0 is, and a failure to write the shell's own
log (a full disk) never changes the job's result."""

import os
import signal
import time

import pytest
from smalldisk import fill, small_disk

from fluxlite.testing import Instance, jobid_of, wait_fifo

pytestmark = pytest.mark.timeout(180)

LINES = 200_000


def test_output_is_whole_when_rank0_stalls_as_the_job_ends(instance_factory, tmp_path):
    """Rank 0 stopped for 12 s while a job writes 200,000 lines and exits: the shell
    once gave up after 10 s and the job was COMPLETED with part of its output."""
    inst = instance_factory(1)
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    script = (f"import sys\nopen({str(fifo)!r}, 'w').write('go')\n"
              f"for i in range({LINES}): print(f'line {{i:07d}} ' + 'y' * 40)\n")
    jobid = jobid_of(inst.cli("submit", "python3", "-c", script))
    pid = inst.broker_pid(0)
    assert wait_fifo(str(fifo), 60) == "go"
    os.kill(pid, signal.SIGSTOP)
    try:
        until = time.monotonic() + 12
        while time.monotonic() < until:
            time.sleep(until - time.monotonic())    # the stall is the test
    finally:
        os.kill(pid, signal.SIGCONT)
    assert inst.cli("job", "wait", jobid, timeout=120).returncode == 0
    out = inst.cli("job", "attach", jobid, timeout=120).stdout.splitlines()
    assert len(out) == LINES and out[-1] == f"line {LINES - 1:07d} " + "y" * 40
    cp = inst.cli("jobs", "-a", "-n", "-o", "{status} {returncode}")
    assert cp.stdout.split() == ["COMPLETED", "0"]


def test_a_full_disk_under_the_shell_log_leaves_the_result_alone(tmp_path):
    with small_disk(tmp_path / "disk") as disk:
        inst = Instance(1, start_args=["--rundir", os.path.join(disk, "rd")])
        with inst:
            filler = fill(disk)
            try:
                # verbose: the shell writes lines to its own log, on the full disk
                cp = inst.cli("run", "-o", "verbose=2", "echo", "done", timeout=60)
            finally:
                os.unlink(filler)
            assert cp.returncode == 0, cp.stderr
            assert "done" in cp.stdout
            st = inst.cli("jobs", "-a", "-n", "-o", "{status} {returncode}")
            assert st.stdout.split() == ["COMPLETED", "0"]

"""PMI-1 hardening: a task cannot grow its shells' memory without limit with puts,
nor change the keys the shell sets for every task (PMI_process_mapping); a task
that leaves PMI unfinished fails every task's barrier at once, on every node, and
the job gets the exec exception that says so."""

import os
import sys

import pytest

pytestmark = pytest.mark.timeout(120)

TASK = os.path.join(os.path.dirname(__file__), "pmi_task.py")


def test_puts_are_bounded_per_task_and_reserved_keys_are_read_only(inst1):
    cp = inst1.cli("run", "-n", "2", "--label-io", sys.executable, TASK, "bounds", timeout=90)
    assert cp.returncode == 0, cp.stderr
    for rank in (0, 1):
        out = {ln.split(": ", 1)[1].split(" ", 1)[0]: ln.split(": ", 1)[1]
               for ln in cp.stdout.splitlines() if ln.startswith(f"{rank}: ")}
        assert "rc=-1" in out["reserved"] and "reserved" in out["reserved"], out
        # 1 MiB of keys and values per task: about a thousand puts of 1000 bytes
        n = int(out["limit"].split()[1])
        assert 1000 <= n < 1100 and "rc=-1" in out["limit"], out["limit"]
        assert "rc=0" in out["again"]          # overwriting its own key shrinks its share
        assert "rc=0" in out["barrier"]
        assert "value=(vector," in out["mapping"], out["mapping"]


@pytest.mark.parametrize("nodes", [1, 2])
def test_a_task_leaving_before_the_barrier_fails_it_everywhere_at_once(instance_factory,
                                                                        nodes):
    """On another node (-N2) the waiting task once hung until the time limit; in a
    one-shell job (-N1) the job ended with no exception."""
    inst = instance_factory(2)
    cp = inst.cli("run", f"-N{nodes}", "-n2", "-t", "60s", "-o", "exit-timeout=none",
                  sys.executable, TASK, "leave", timeout=90)
    assert cp.returncode == 1, cp.stderr
    # rank 0 is told at once, or killed first as the exception ends the job
    assert cp.stdout == "" or "barrier cmd=barrier_out rc=-1" in cp.stdout, cp.stdout
    st = inst.cli("jobs", "-a", "-n", "-o", "{status}|{exception.type}|{exception.note}")
    status, etype, note = st.stdout.strip().split("|")
    assert (status, etype) == ("FAILED", "exec"), st.stdout
    assert "task rank 1" in note and "left (Exit 0) before the PMI barrier" in note

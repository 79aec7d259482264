"""A task cannot grow its shells' memory without limit with PMI puts, nor change
the keys the shell sets for every task (PMI_process_mapping)."""

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

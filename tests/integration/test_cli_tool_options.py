"""Options of flux(1)'s smaller commands, through the real CLI: dmesg -C (clear,
printing nothing) and -c (print, then clear) and -L, setattr -f, pgrep/pkill -q
QUEUE, pkill -w, pstree --detail."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(120)


def test_dmesg_clear_and_read_clear(inst1):
    inst1.cli("logger", "first message", check=True)
    cp = inst1.cli("dmesg", "-C", check=True)
    assert cp.stdout == ""                        # -C prints nothing
    assert "first message" not in inst1.cli("dmesg", check=True).stdout
    inst1.cli("logger", "second message", check=True)
    assert "second message" in inst1.cli("dmesg", "-c", "-L", check=True).stdout
    assert "second message" not in inst1.cli("dmesg", "--color=never", check=True).stdout


def test_setattr_force_is_accepted(inst1):
    inst1.cli("setattr", "-f", "log-stderr-level", "7", check=True)
    assert inst1.cli("getattr", "log-stderr-level", check=True).stdout == "7\n"


def test_pgrep_pkill_queue_and_wait(inst1):
    ids = [inst1.cli("submit", "--job-name=sleeper", "sleep", "300", check=True).stdout.strip()
           for _ in range(2)]
    assert inst1.cli("pgrep", "sleeper", check=True).stdout.split() == ids[::-1]
    cp = inst1.cli("pgrep", "-q", "nosuchqueue", "sleeper")
    assert (cp.returncode, cp.stdout) == (1, "")     # none in that queue
    cp = inst1.cli("pkill", "-w", "sleeper", check=True)
    assert cp.stderr == "fluxlite pkill: Canceled 2 jobs\n"
    for jobid in ids:  # -w: they had ended when pkill returned
        assert inst1.cli("jobs", "-n", "-o", "{state}", jobid, check=True).stdout == \
            "INACTIVE\n"


def test_pstree_detail_alias(inst1):
    inst1.cli("submit", "--job-name=treejob", "sleep", "300", check=True)
    try:
        a = inst1.cli("pstree", "--detail=resources", check=True).stdout
        b = inst1.cli("pstree", "--details=resources", check=True).stdout
        assert a == b and "treejob" in a
    finally:
        inst1.cli("cancel", "--all", check=True)

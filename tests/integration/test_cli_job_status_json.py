"""`job status -j` prints Flux's result object through the real CLI: one compact
line, keys in the order Flux's reading of the eventlog adds them, `result` Flux's
number (1 completed, 2 failed, 4 canceled, 8 timeout)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(120)


def test_a_canceled_job_as_flux_prints_it(inst1):
    jobid = inst1.cli("submit", "sleep", "30", check=True).stdout.strip()
    inst1.cli("job", "wait-event", "-t", "30", jobid, "start", check=True)
    inst1.cli("cancel", "-m", "enough", jobid, check=True)
    cp = inst1.cli("job", "status", "-j", jobid)
    assert cp.returncode != 0 and ", " not in cp.stdout and ": " not in cp.stdout
    result = json.loads(cp.stdout)
    assert list(result) == ["id", "exception_occurred", "t_submit", "t_run",
                            "exception_type", "exception_note", "exception_severity",
                            "t_cleanup", "waitstatus", "result"]
    assert (result["exception_type"], result["exception_note"], result["result"]) == \
        ("cancel", "enough", 4)
    held = inst1.cli("submit", "--urgency=hold", "true", check=True).stdout.strip()
    inst1.cli("cancel", held, check=True)
    result = json.loads(inst1.cli("job", "status", "-j", held).stdout)
    assert "t_run" not in result and "waitstatus" not in result and result["result"] == 4

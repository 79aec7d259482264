"""`job info ID KEY` prints what Flux stores through the real CLI: jobspec and R as
one compact JSON line, an eventlog one compact object a line."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(60)


def test_jobspec_and_r_are_one_compact_line(inst1):
    jobid = inst1.cli("submit", "true", check=True).stdout.strip()
    inst1.cli("job", "wait", jobid, check=True)
    for key in ("jobspec", "R", "eventlog"):
        out = inst1.cli("job", "info", "-o", "-b", jobid, key, check=True).stdout
        for line in out.splitlines():
            compact = json.dumps(json.loads(line), separators=(",", ":"), ensure_ascii=False)
            assert line == compact, key
    assert len(inst1.cli("job", "info", jobid, "R", check=True).stdout.splitlines()) == 1

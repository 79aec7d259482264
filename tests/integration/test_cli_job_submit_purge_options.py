"""Flux's options of `job submit` (-c/--security-config, -s/--sign-type) and `job
purge` (--batch) through the real CLI: accepted, as a Flux user's scripts pass them
(nothing is signed here, and ids are purged in one request)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(120)


def test_job_submit_takes_fluxs_signing_options(inst1, tmp_path):
    spec = inst1.cli("submit", "--dry-run", "echo", "signed", check=True).stdout
    path = tmp_path / "job.json"
    path.write_text(spec)
    jobid = inst1.cli("job", "submit", "-s", "none", "--security-config=/etc/x/*.toml",
                      path, check=True).stdout.strip()
    cp = inst1.cli("job", "attach", jobid)
    assert (cp.returncode, cp.stdout) == (0, "signed\n"), cp.stderr
    assert json.loads(spec)["tasks"][0]["command"] == ["echo", "signed"]


def test_job_purge_takes_batch(inst1):
    jobid = inst1.cli("submit", "true", check=True).stdout.strip()
    inst1.cli("job", "wait", jobid, check=True)
    cp = inst1.cli("job", "purge", "--batch=10", "--num-limit=0", "--force")
    assert cp.returncode == 0, cp.stderr
    assert "purged 1 inactive job" in cp.stdout + cp.stderr

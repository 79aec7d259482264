"""`job memo` through the real CLI, as Flux's: memos land on an active job's eventlog;
on an inactive job the job-manager answers ENOENT "job is inactive" and the command
exits 1 saying so (it used to succeed and change nothing)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(120)


def test_memo_on_a_running_job_is_posted(inst1):
    running = inst1.cli("submit", "sleep", "60", check=True).stdout.strip()
    inst1.cli("job", "memo", running, "note=hello", "n.k=3", check=True)
    cp = inst1.cli("job", "wait-event", "-f", "json", running, "memo", check=True)
    assert json.loads(cp.stdout)["context"] == {"note": "hello", "n": {"k": 3}}
    inst1.cli("cancel", running, check=True)


def test_memo_on_an_inactive_job_is_refused_as_flux_refuses_it(inst1):
    done = inst1.cli("submit", "true", check=True).stdout.strip()
    inst1.cli("job", "wait", done, check=True)
    cp = inst1.cli("job", "memo", done, "foo=42")
    assert (cp.returncode, cp.stdout, cp.stderr) == \
        (1, "", "fluxlite job memo: job is inactive\n")
    events = inst1.cli("job", "eventlog", done, check=True).stdout
    assert " memo " not in events

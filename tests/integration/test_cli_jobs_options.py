"""flux-jobs' -R/--recursive, --recurse-all, -L/--level, -w/--width, --color and
--threads, through the real CLI, against a real nested instance."""

from __future__ import annotations

import json

import pytest

from fluxlite.testing import jobid_of
from fluxlite.util import fluid

pytestmark = pytest.mark.timeout(180)

# the batch script submits a job named inner in its own instance, then tells the
# parent (a memo on its own job) that it has
SCRIPT = ("fluxlite submit --job-name=inner sleep 300 >/dev/null && "
          "FLUXLITE_URI=$(fluxlite getattr parent-uri) "
          "fluxlite job memo $(fluxlite getattr jobid) ready=1 && sleep 300")


@pytest.fixture
def nested(inst1):
    cp = inst1.cli("batch", "-N1", "--job-name=outer", "--wrap", SCRIPT)
    outer = fluid.f58(jobid_of(cp))
    inst1.cli("job", "wait-event", "-q", "-t", "120s", "-m", "ready=1", outer, "memo",
              check=True, timeout=130)
    yield inst1, outer
    inst1.cli("cancel", outer)
    inst1.cli("job", "wait", outer, timeout=60)


def test_recursive_lists_the_jobs_of_nested_instances(nested):
    inst, outer = nested
    cp = inst.cli("jobs", "-R", "-n", "-o", "{name}", check=True)
    assert cp.stdout.splitlines() == ["outer", "", f"{outer}:", "inner"]
    for args in (["--recurse-all"], ["-R", "--threads=2", "--color=never"]):
        cp = inst.cli("jobs", *args, "-n", "-o", "{name}", check=True)
        assert cp.stdout.splitlines()[-1] == "inner", args
    # --stats: each nested instance's own summary under its path
    cp = inst.cli("jobs", "-R", "--stats", "-n", "-o", "{name}", check=True)
    assert cp.stdout.splitlines()[3:] == [
        f"{outer}:", "1 running, 0 completed, 0 failed, 0 pending", "inner"]


def test_level_stops_the_descent(nested):
    inst, outer = nested
    cp = inst.cli("jobs", "-R", "-L0", "-n", "-o", "{name}", check=True)
    assert cp.stdout.splitlines() == ["outer"]
    cp = inst.cli("jobs", "-R", "--level=1", "-n", "-o", "{name}", check=True)
    assert cp.stdout.splitlines() == ["outer", "", f"{outer}:", "inner"]


def test_recursive_json_nests_the_jobs(nested):
    inst, outer = nested
    listed = json.loads(inst.cli("jobs", "-R", "--json", check=True).stdout)["jobs"]
    assert [j["name"] for j in listed] == ["outer"]
    assert [j["name"] for j in listed[0]["jobs"]] == ["inner"]
    plain = json.loads(inst.cli("jobs", "--json", check=True).stdout)["jobs"]
    assert "jobs" not in plain[0]


def test_width_cuts_lines(inst1):
    inst1.cli("submit", "--job-name=averyveryverylongname", "sleep", "300", check=True)
    try:
        fmt = ["-o", "{id.f58:>12} {username:<8.8} {name:<25} {status}"]  # no clock
        full = inst1.cli("jobs", *fmt, check=True).stdout.splitlines()
        assert max(len(x) for x in full) > 20
        cut = inst1.cli("jobs", *fmt, "-w", "20", check=True).stdout.splitlines()
        assert cut == [x[:20] for x in full]
        # no terminal: -w alone (0) and a negative width leave lines whole
        for args in (["-w"], ["--width=-1"], ["-w", "-5"], ["--color"], ["--color=always"]):
            assert inst1.cli("jobs", *fmt, *args, check=True).stdout.splitlines() == full, \
                args
    finally:
        inst1.cli("cancel", "--all", check=True)


def test_color_takes_flux_words_only(inst1):
    cp = inst1.cli("jobs", "--color=sometimes")
    assert cp.returncode == 2
    assert "always, never or auto" in cp.stderr

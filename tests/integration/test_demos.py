"""The README's main job without a terminal (`make start` runs bin/fluxlite-demo)
and the resilience walk-through of docs/resilience.md: both must run to the end,
show what they claim, and leave nothing running."""

import os
import subprocess
import uuid

import pytest

from fluxlite.testing import TAG_VAR, assert_no_leaks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_demo(name: str, timeout: float) -> subprocess.CompletedProcess:
    tag = uuid.uuid4().hex
    env = dict(os.environ, **{TAG_VAR: tag})
    env.pop("FLUXLITE_URI", None)
    try:
        return subprocess.run([os.path.join(ROOT, "bin", name)], env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)
    finally:
        assert_no_leaks(tag)


@pytest.mark.timeout(120)
def test_demo_tours_jobs_nesting_and_a_lost_broker():
    cp = run_demo("fluxlite-demo", 90)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    out = cp.stdout
    for rank in range(4):
        assert f"task {rank} on broker {rank}" in out
    assert "inside: size=2 level=1" in out
    assert "3 vm: lost" in out
    assert "a 3-node job ran" in out
    assert "unsatisfiable request" in out + cp.stderr


@pytest.mark.timeout(180)
def test_resilience_demo_runs_to_its_end():
    cp = run_demo("fluxlite-demo-resilience", 150)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    out = cp.stdout
    assert "no process of this demo is left" in out
    # the persisting batch job survived with a non-fatal loss, the other did not
    assert "loop.sh COMPLETED 2 node-failure 2" in out
    assert "loop.sh FAILED 2 node-failure 0" in out
    # the full-size job in the shrunk parent is denied at once: an alloc exception
    step3 = out.split("=== 3.", 1)[1]
    assert "(exit code 1)" in step3 and "true FAILED 4 alloc 0" in step3
    assert "type=alloc severity=0 unsatisfiable request: need 4 exclusive node(s)" in \
        out + cp.stderr

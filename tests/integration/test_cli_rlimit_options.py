"""--rlimit as Flux's submission commands read it, through the real CLI: a job's tasks
start with the submitter's own soft limits (all but memlock, msgqueue, nice, rtprio,
rttime and sigpending), then each rule in order, several to an option (`-*,core`),
with glob patterns; a limit above the hard one is the hard one, with a warning."""

from __future__ import annotations

import resource
import shlex
import subprocess

import pytest

from fluxlite.testing import fluxlite_command

pytestmark = pytest.mark.timeout(120)

SHOW = ["sh", "-c", "ulimit -S -n; ulimit -S -c; ulimit -S -s"]


def submitted_with_limits(inst, shell_limits: str, *args) -> subprocess.CompletedProcess:
    """`fluxlite ARGS` run from a shell whose soft limits `shell_limits` lowered."""
    cmd = " ".join(shlex.quote(a) for a in fluxlite_command() + list(args))
    return subprocess.run(["sh", "-c", f"{shell_limits}; exec {cmd}"], env=inst.env,
                          capture_output=True, text=True, timeout=60)


def test_the_submitters_limits_reach_the_tasks(inst1):
    lowered = "ulimit -S -n 256; ulimit -S -c 0; ulimit -S -s 4096"
    cp = submitted_with_limits(inst1, lowered, "run", *SHOW)
    assert (cp.returncode, cp.stdout.split()) == (0, ["256", "0", "4096"]), cp.stderr
    # -* first: none taken from the submitter, then core set
    cp = submitted_with_limits(inst1, lowered, "run", "--rlimit=-*,core=unlimited", *SHOW)
    assert cp.returncode == 0, cp.stderr
    nofile, core, _ = cp.stdout.split()
    assert nofile != "256" and core == "unlimited"
    # a pattern drops what it matches
    cp = submitted_with_limits(inst1, lowered, "run", "--rlimit=-no*", *SHOW)
    assert cp.stdout.split()[:2] == [nofile, "0"], cp.stderr
    # memlock only when asked for
    cp = inst1.cli("submit", "--dry-run", "true", check=True)
    assert "memlock" not in cp.stdout and '"nofile"' in cp.stdout
    assert "memlock" in inst1.cli("submit", "--dry-run", "--rlimit=memlock", "true",
                                  check=True).stdout


def test_a_limit_above_the_hard_one_is_the_hard_one(inst1):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip("the open files limit has no hard limit here")
    cp = inst1.cli("run", f"--rlimit=nofile={hard + 1}", "sh", "-c", "ulimit -S -n")
    assert (cp.returncode, cp.stdout) == (0, f"{hard}\n"), cp.stderr
    assert "nofile exceeds current max, raising value to hard limit" in cp.stderr


def test_malformed_rules_are_one_line(inst1):
    for rule, why in (("cores", "unknown limit 'cores'"), ("c*=5", "one limit's name"),
                      ("nofile=many", "not a number")):
        cp = inst1.cli("run", f"--rlimit={rule}", "true")
        assert cp.returncode == 1 and why in cp.stderr, (rule, cp.stderr)

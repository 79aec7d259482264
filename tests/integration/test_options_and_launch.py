"""Submission options and launching, through the real CLI: -t MINUTES|FSD,
unsatisfiable messages that name the limit, --output truncate/append, .ci/run's
no-tests check, `start` on Ctrl-C, with a named --rundir and with --cores-per-rank 0,
`proxy` exit codes."""

import json
import os
import shutil
import stat
import subprocess

import pytest

from fluxlite.jobapi import api
from fluxlite.testing import fluxlite_command, jobid_of
from fluxlite.util import fluid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))



def duration_of(inst, jobid: int) -> float:
    spec = json.loads(inst.cli("job", "info", fluid.f58(jobid), "jobspec", check=True).stdout)
    return spec["attributes"]["system"]["duration"]


# ------------------------------------------------------------------ -t
@pytest.mark.parametrize("value,seconds", [("5", 300), ("0.5", 30), ("90s", 90), ("2m", 120),
                                           ("1.5h", 5400), ("none", 0)])
def test_time_limit_bare_number_is_minutes(inst1, value, seconds):
    jobid = jobid_of(inst1.cli("submit", "-t", value, "true"))
    assert duration_of(inst1, jobid) == pytest.approx(seconds)
    api.wait(inst1.handle(), jobid, timeout=30)


def test_time_limit_help_and_error_say_minutes(inst1):
    out = inst1.cli("run", "--help", check=True).stdout
    assert "MINUTES|FSD" in out and "-t 5 is five minutes" in " ".join(out.split())
    cp = inst1.cli("run", "-t", "5x", "true")
    assert cp.returncode == 2
    assert len(cp.stderr.strip().splitlines()) == 1
    assert "'5x' is not MINUTES or a Flux Standard Duration" in cp.stderr


# ------------------------------------------------------- unsatisfiable
@pytest.fixture
def inst4x2(instance_factory):
    return instance_factory(4, cores_per_rank=2)


@pytest.mark.parametrize("args,words", [
    (["-N4", "-n9"], "need 4 exclusive node(s) with 3 core(s) each, but the 4 eligible "
                     "node(s) have at most 2 core(s) each"),
    (["-N1", "-c3"], "need 1 exclusive node(s) with 3 core(s) each, but the 4 eligible "
                     "node(s) have at most 2 core(s) each"),
    (["-n1", "-c3"], "need 1 slot(s) of 3 core(s), but the 4 eligible node(s) have at most "
                     "2 core(s) each (a slot must fit on one node)"),
    (["-N5"], "need 5 exclusive node(s) with 1 core(s) each, only 4 eligible"),
    (["-n9"], "need 9 slot(s) of 1 core(s), only 8 such slot(s) available (total cores: 8)"),
])
def test_unsatisfiable_says_what_was_asked_and_what_exists(inst4x2, args, words):
    # as Flux's: the job is taken, and the scheduler's denial is its alloc exception
    cp = inst4x2.cli("run", *args, "true")
    assert cp.returncode == 1, cp.stderr
    assert f"type=alloc severity=0 unsatisfiable request: {words}" in cp.stderr


def test_what_fits_still_runs(inst4x2):
    inst4x2.cli("run", "-N4", "-n8", "true", check=True)
    inst4x2.cli("run", "-N1", "-c2", "true", check=True)


# ------------------------------------------------------------- --output
def test_run_output_truncates_by_default_and_appends_on_request(inst4, tmp_path):
    out = tmp_path / "out"
    out.write_text("a much longer line that was in the file before the job\n")
    inst4.cli("run", "--output", str(out), "echo", "hi", check=True)
    assert out.read_text() == "hi\n"
    inst4.cli("run", "--output", str(out), "-o", "output.mode=append", "echo", "again",
              check=True)
    assert out.read_text() == "hi\nagain\n"
    # one file, four shells: only the leader truncates, before any task writes
    inst4.cli("run", "-N4", "--output", str(out), "-o", "output.mode=truncate",
              "echo", "x", check=True)
    assert out.read_text() == "x\n" * 4
    err = tmp_path / "err"
    err.write_text("stale\n")
    inst4.cli("run", "--output", str(out), "--error", str(err), "sh", "-c",
              "echo o; echo e >&2", check=True)
    assert (out.read_text(), err.read_text()) == ("o\n", "e\n")


def test_bad_output_mode_is_refused_at_submit(inst1):
    cp = inst1.cli("run", "-o", "output.mode=overwrite", "true")
    assert cp.returncode != 0
    assert len(cp.stderr.strip().splitlines()) == 1
    assert "invalid shell option output.mode='overwrite': output.mode must be truncate or " \
           "append" in cp.stderr


def test_batch_output_truncates(inst4, tmp_path):
    out = tmp_path / "batch.out"
    out.write_text("left over from an earlier run, longer than the new output\n")
    for _ in range(2):
        jobid = jobid_of(inst4.cli("batch", "-N1", "--output", str(out), "--wrap", "echo", "b"))
        assert api.wait(inst4.handle(), jobid, timeout=60)["success"]
    assert out.read_text() == "b\n"
    jobid = jobid_of(inst4.cli("batch", "-N1", "--output", str(out), "-o", "output.mode=append",
                               "--wrap", "echo", "c"))
    assert api.wait(inst4.handle(), jobid, timeout=60)["success"]
    assert out.read_text() == "b\nc\n"


# ---------------------------------------------------------------- .ci/run
def ci_checkout(tmp_path, tests: dict[str, str]) -> str:
    """A copy of the checkout's CI entry points using the real virtualenv, with `tests`
    as its whole test suite."""
    root = tmp_path / "checkout"
    (root / ".ci").mkdir(parents=True)
    shutil.copy2(os.path.join(ROOT, ".ci", "run"), root / ".ci" / "run")
    shutil.copy2(os.path.join(ROOT, ".ci", "vulture-allow.py"), root / ".ci" / "vulture-allow.py")
    shutil.copy2(os.path.join(ROOT, "Makefile"), root / "Makefile")
    shutil.copy2(os.path.join(ROOT, "pyproject.toml"), root / "pyproject.toml")
    os.utime(root / "pyproject.toml", (0, 0))  # older than the venv's stamp: no reinstall
    os.symlink(os.path.join(ROOT, ".venv"), root / ".venv")
    (root / "fluxlite").mkdir()  # `make setup` byte-compiles it
    (root / "tests").mkdir()
    for name, body in tests.items():
        (root / "tests" / name).write_text(body)
    return str(root)


def run_ci(root: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTEST_STATUS_FILE",
                        "PYTEST_ADDOPTS")}
    return subprocess.run([os.path.join(root, ".ci", "run")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, ".venv", ".installed")),
                    reason="needs the checkout's virtualenv (make setup)")
@pytest.mark.parametrize("tests,rc,no_tests", [
    ({}, 1, True),
    ({"test_ok.py": "def test_ok():\n    pass\n"}, 0, False),
    ({"test_bad.py": "def test_bad():\n    assert False\n"}, 2, False),
])
def test_ci_run_fails_when_no_tests_ran(tmp_path, tests, rc, no_tests):
    cp = run_ci(ci_checkout(tmp_path, tests))
    assert cp.returncode == rc, cp.stdout + cp.stderr
    assert ("CI: no tests ran" in cp.stderr) == no_tests


# ------------------------------------------------------------ fluxlite start
def test_named_rundir_is_private(instance_factory, tmp_path):
    os.chmod(tmp_path, 0o755)
    rundir = tmp_path / "a" / "b"
    inst = instance_factory(1, start_args=["--rundir", str(rundir)])
    assert inst.getattr("rundir") == str(rundir)
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(rundir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path).st_mode) == 0o755  # it existed: left alone


def test_named_rundir_that_cannot_be_made_is_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    cp = subprocess.run(fluxlite_command() + ["start", "--rundir", str(tmp_path / "file" / "rd"),
                                              "true"],
                        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert cp.returncode == 1
    assert len(cp.stderr.strip().splitlines()) == 1 and "--rundir" in cp.stderr


# ------------------------------------------------------------------- proxy
def test_proxy_command_not_found_127_not_executable_126(inst4, tmp_path):
    jobid = jobid_of(inst4.cli("alloc", "-N1", "--bg", timeout=60))
    f58 = fluid.f58(jobid)
    cp = inst4.cli("proxy", f58, "nosuchcmd")
    assert cp.returncode == 127
    assert cp.stderr.strip() == "fluxlite proxy: nosuchcmd: command not found"
    plain = tmp_path / "plain"
    plain.write_text("echo hi\n")
    plain.chmod(0o644)
    cp = inst4.cli("proxy", f58, str(plain))
    assert cp.returncode == 126 and "Permission denied" in cp.stderr
    assert inst4.cli("proxy", f58, "sh", "-c", "exit 3").returncode == 3
    inst4.cli("proxy", f58, "fluxlite", "shutdown", check=True)
    assert api.wait(inst4.handle(), jobid, timeout=60)["success"]


# ----------------------------------------------------------- start --cores-per-rank


def test_start_cores_per_rank_0_is_all_cores():
    cp = subprocess.run([*fluxlite_command(), "start", "--cores-per-rank", "0",
                         "fluxlite", "getattr", "resource.cores-per-rank"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.strip() == "0"

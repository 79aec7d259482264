"""The submitting commands' options through the real CLI against real instances,
as Flux reads them: --wait saying why a job never ran, per-task input refused
by submit, --begin-time bounds and `now`, --progress off a terminal, empty
path options, and --env rules (patterns, files, bad rules)."""

import pytest

from fluxlite.testing import _readline, jobid_of, one_error_line
from fluxlite.util import fluid

pytestmark = pytest.mark.timeout(180)


def f58_of(cp) -> str:
    return fluid.f58(jobid_of(cp))


def all_ids(inst) -> list[str]:
    return inst.cli("jobs", "-a", "-n", "-o", "{id.f58}", check=True).stdout.split()


# -------------------------------------------------- --wait says why a job never ran


@pytest.mark.parametrize("args,said", [
    (["--input=nosuch", "cat"], ["type=exec", "nosuch"]),
    (["--output=/nonexistent/dir/f", "echo"], ["type=exec", "/nonexistent/dir/f"]),
])
def test_wait_prints_the_exception_of_a_job_that_never_started(inst1, args, said):
    cp = inst1.cli("submit", "--wait", *args)
    line = one_error_line(cp)
    assert cp.returncode == 1
    f58 = cp.stdout.split()[0]
    assert line.startswith(f"job.exception {f58} type=exec severity=0 "), line
    assert all(s in line for s in said), line


def test_wait_on_a_dependency_that_fails_while_waiting(inst1):
    held = f58_of(inst1.cli("submit", "--urgency=hold", "false", check=True))
    with inst1.cli_background("submit", "--wait", f"--dependency=afterok:{held}",
                              "echo", "never") as p:
        waiter = _readline(p.stdout, 60).strip()  # submitted: its id
        inst1.cli("job", "urgency", held, "default", check=True)
        assert p.wait(60) == 1
        err = p.stderr.read()
    assert err.splitlines() == [
        f"job.exception {waiter} type=dependency severity=0 dependency "
        f"after-success={held} can never be satisfied (the job's result: FAILED)"], err


# ------------------------------------------------------------------- per-task input


def test_submit_refuses_per_task_input(inst1, tmp_path):
    (tmp_path / "0").write_text("from file 0\n")
    for cmd in (["submit", "-n2"], ["bulksubmit", "-n2"]):
        cp = inst1.cli(*cmd, "--input=0", "cat", *([":::", "x"] if cmd[0] == "bulksubmit"
                                                    else []), cwd=tmp_path)
        line = one_error_line(cp)
        assert cp.returncode == 1
        assert "--input=0: per-task input not supported for submit" in line
    assert all_ids(inst1) == []
    # a file named like an idset is ./NAME
    cp = inst1.cli("submit", "--wait", "--input=./0", f"--output={tmp_path}/out", "cat",
                   cwd=tmp_path, check=True)
    assert (tmp_path / "out").read_text() == "from file 0\n"


# ----------------------------------------------------------------------- begin-time


def test_begin_time_too_far_is_one_clear_line(inst1):
    line = one_error_line(inst1.cli("submit", "--begin-time=+100000000d", "true"))
    assert "'+100000000d' is too far in the future: the latest begin time is " in line
    assert "jobspec" not in line and "float" not in line
    assert all_ids(inst1) == []


def test_begin_time_now(inst1):
    cp = inst1.cli("submit", "--wait", "--begin-time=now", "true", check=True)
    assert cp.stderr == ""


# -------------------------------------------------------------------------- smaller


def test_progress_off_a_terminal_is_ignored_with_a_warning(inst1):
    cp = inst1.cli("submit", "--wait", "--progress", "true", check=True)
    assert cp.stderr == "fluxlite submit: stdout is not a tty. Ignoring --progress option\n"
    assert len(cp.stdout.split()) == 1


@pytest.mark.parametrize("option,said", [
    ("--output=", "Invalid value for '--output': empty: expected a file name"),
    ("--error=", "Invalid value for '--error': empty: expected a file name"),
    ("--input=", "Invalid value for '--input': empty: expected a file name"),
    ("--cwd=", "Invalid value for '--cwd': empty: expected a directory"),
])
def test_empty_path_options_are_refused(inst1, option, said):
    for cmd in ("submit", "run", "bulksubmit"):
        line = one_error_line(inst1.cli(cmd, option, "true", *([":::", "x"] if cmd ==
                                                                 "bulksubmit" else [])))
        assert line.startswith(f"fluxlite {cmd}: {said}"), line
    assert all_ids(inst1) == []


# ---------------------------------------------------------------------------- --env


def job_env(inst, *opts, env=None):
    cp = inst.cli("run", *opts, "env", env=env)
    assert cp.returncode == 0, cp.stderr
    return dict(line.split("=", 1) for line in cp.stdout.splitlines() if "=" in line)


def test_env_rules_as_flux(inst1):
    base = {"OMP_A": "1", "OMP_B": "2", "KEEP": "k"}
    got = job_env(inst1, "--env=-*", "--env=/^OMP_/", "--env=PATH", "--env=X=${KEEP}/$$",
                  env=base)
    assert {k: got[k] for k in ("OMP_A", "OMP_B", "X")} == {"OMP_A": "1", "OMP_B": "2",
                                                           "X": "k/$"}
    assert "KEEP" not in got and "PATH" in got
    got = job_env(inst1, "--env=-/^OMP_(A|Z)$/", env=base)
    assert "OMP_A" not in got and got["OMP_B"] == "2"
    # a pattern that matches nothing is a no-op, as in Flux
    assert "NOSUCH" not in job_env(inst1, "--env=NOSUCH*")


def test_env_rules_from_a_file(inst1, tmp_path):
    rules = tmp_path / "envfile"
    rules.write_text("-*\nPATH\nOMP*\nFOO=bar\nBAR=${FOO}/baz\n")
    for opt in (f"--env=^{rules}", f"--env-file={rules}"):
        got = job_env(inst1, opt, env={"OMP_X": "x", "OTHER": "o"})
        assert {k: got.get(k) for k in ("OMP_X", "FOO", "BAR", "OTHER")} == \
            {"OMP_X": "x", "FOO": "bar", "BAR": "bar/baz", "OTHER": None}


@pytest.mark.parametrize("rule,said", [
    ("^/nonexistent/envfile", "--env ^/nonexistent/envfile: cannot read"),
    ("X=$NOT_SET_ANYWHERE", "$NOT_SET_ANYWHERE is not set"),
    ("-/[/", "invalid regex"),
])
def test_bad_env_rules_are_one_line(inst1, rule, said):
    cp = inst1.cli("submit", f"--env={rule}", "true")
    assert cp.returncode != 0 and cp.stdout == ""
    assert len(cp.stderr.splitlines()) == 1 and said in cp.stderr, cp.stderr

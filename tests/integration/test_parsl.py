"""A real workflow tool from PyPI, unchanged, on fluxlite through Flux compatibility:
Parsl's FluxExecutor starts its own instance with `flux start` (fluxlite's `flux`
command), whose initial program (Parsl's flux_instance_manager) imports `flux`,
reads `local-uri` with attr_get, and at the end drains it with
rpc("job-manager.drain"); Parsl then submits each app as a job through
flux.job.FluxExecutor and JobspecV1.from_command."""

import os
import subprocess
import uuid

import pytest

from fluxlite.testing import TAG_VAR, assert_no_leaks, fluxlite_command, missing_prerequisite

pytestmark = pytest.mark.timeout(180)

PARSL_PROGRAM = r'''
import os, sys
import parsl
from parsl.app.app import bash_app, python_app
from parsl.config import Config
from parsl.executors.flux.executor import FluxExecutor

wd = sys.argv[1]
config = Config(executors=[FluxExecutor(working_dir=os.path.join(wd, "flux"))],
                run_dir=os.path.join(wd, "runinfo"))


@python_app
def add(a, b):
    return a + b


@python_app
def fail():
    raise ValueError("from the app")


@bash_app
def echo(i, dep=None, stdout=None):
    return f'echo app {i} dep {dep} job $FLUX_JOB_ID'


with parsl.load(config):
    first = echo(0, stdout=os.path.join(wd, "out0.txt"))
    rest = [echo(i, dep=first, stdout=os.path.join(wd, f"out{i}.txt")) for i in range(1, 10)]
    print("bash", [a.result() for a in [first] + rest])
    print("python", add(add(1, 2), 3).result())
    try:
        fail().result()
    except ValueError as exc:
        print("raised", exc)
for i in range(10):
    print(open(os.path.join(wd, f"out{i}.txt")).read().strip())
'''


def test_parsl_flux_executor_runs_an_app_graph_unchanged(tmp_path):
    try:
        import parsl  # noqa: F401
    except ImportError:
        missing_prerequisite("Parsl is not installed: pip install parsl (in the test extra)")
    prog = tmp_path / "prog.py"
    prog.write_text(PARSL_PROGRAM)
    venv_bin = os.path.dirname(fluxlite_command()[0])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLUXLITE_", "FLUX_"))}
    env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
    env[TAG_VAR] = tag = uuid.uuid4().hex
    cp = subprocess.run(["sh", "-c", 'eval "$(fluxlite compat env)" && exec python "$@"', "sh",
                         str(prog), str(tmp_path)], env=env, cwd=str(tmp_path),
                        capture_output=True, text=True, timeout=150)
    assert cp.returncode == 0, cp.stderr[-3000:]
    lines = cp.stdout.splitlines()
    assert lines[:3] == ["bash [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]", "python 6",
                         "raised from the app"]
    outs = [line.split() for line in lines[3:]]
    assert [o[:4] for o in outs] == [["app", str(i), "dep", "None" if i == 0 else "0"]
                                     for i in range(10)]
    assert all(o[4] == "job" and o[5].startswith("ƒ") for o in outs)   # FLUX_JOB_ID in tasks
    assert len({o[5] for o in outs}) == 10                              # one job per app
    assert_no_leaks(tag)


def test_parsls_own_flux_tests_pass_on_fluxlite(tmp_path):
    """Parsl's tests/test_flux.py, as installed, run against fluxlite's `flux`."""
    try:
        import parsl
    except ImportError:
        missing_prerequisite("Parsl is not installed: pip install parsl (in the test extra)")
    tests = os.path.join(os.path.dirname(parsl.__file__), "tests", "test_flux.py")
    venv_bin = os.path.dirname(fluxlite_command()[0])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLUXLITE_", "FLUX_"))}
    env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
    env[TAG_VAR] = tag = uuid.uuid4().hex
    # --noconftest: Parsl's conftest.py needs its own pytest version and options
    cp = subprocess.run(["sh", "-c", 'eval "$(fluxlite compat env)" && exec python -m pytest '
                         '-q -p no:cacheprovider --noconftest -W ignore "$1"', "sh", tests],
                        env=env, cwd=str(tmp_path), capture_output=True, text=True,
                        timeout=150)
    summary = cp.stdout.strip().splitlines()[-1] if cp.stdout.strip() else cp.stderr
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-2000:]
    assert " passed" in summary and "failed" not in summary and "skipped" not in summary, \
        summary
    assert_no_leaks(tag)

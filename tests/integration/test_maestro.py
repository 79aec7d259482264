"""A third real workflow tool from PyPI, unchanged: Maestro (maestrowf), whose
Flux script adapter (maestrowf/interfaces/script/fluxscriptadapter.py and
_flux/flux0_49_0.py) asks `config.get` and the broker's version, writes a batch
script with `#flux:` directives, submits it with JobspecV1.from_command or, for
a nested step, from_nest_command(conf=...), polls JobList(ids=...) for each
job's status_abbrev and cancels with flux.job.cancel.  Maestro orders steps by
their dependencies itself (its conductor), not through Flux, so the adapter has
none to pass on.  The program runs inside `fluxlite start --flux-compat`."""

import os
import subprocess
import uuid

import pytest

from fluxlite.testing import TAG_VAR, assert_no_leaks, fluxlite_command, missing_prerequisite

pytestmark = pytest.mark.timeout(180)

MAESTRO_PROGRAM = r'''
import glob, os, time
import flux, flux.job
from maestrowf.abstracts.enums import State
from maestrowf.datastructures.core.study import StudyStep
from maestrowf.interfaces.script.fluxscriptadapter import FluxScriptAdapter

adapter = FluxScriptAdapter(host="localhost", nodes=1, bank="", queue="")
ENDED = (State.FINISHED, State.FAILED, State.CANCELLED, State.TIMEDOUT)


def step(name, cmd, nested=False):
    s = StudyStep()
    s.name = s.description = name
    s.run = {"cmd": cmd, "restart": "", "nodes": 1, "procs": 1, "nested": nested,
             "walltime": "00:05:00", "cores per task": 1, "gpus": 0, "priority": "medium"}
    return s


def submit(s):
    ws = os.path.join(os.getcwd(), s.name)
    os.makedirs(ws)
    _, script, _ = adapter.write_script(ws, s)
    return adapter.submit(s, script, ws).job_identifier


def poll(jobid, until=ENDED):
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        _, states = adapter.check_jobs([jobid])
        if states.get(jobid) in until:
            return states[jobid].name
        time.sleep(0.1)      # Maestro's conductor polls too; this bounds the wait
    return "timed out"


def out(name):
    return open(glob.glob(f"{name}/{name}.*.out")[0]).read().strip()


ok = submit(step("ok", "echo hello from maestro"))
print("ok", poll(ok), out("ok"))
bad = submit(step("bad", "exit 3"))
print("bad", poll(bad), flux.job.result(flux.Flux(), flux.job.JobID(bad)).returncode)
nested = submit(step("nested", "flux getattr size", nested=True))
print("nested", poll(nested), out("nested"))
long = submit(step("long", "sleep 60"))
print("running", poll(long, until=(State.RUNNING,)))
print("cancel", adapter.cancel_jobs([long]).cancel_status.name, poll(long))
'''


def test_maestro_flux_adapter_runs_steps_unchanged(tmp_path):
    try:
        import maestrowf  # noqa: F401
    except ImportError:
        missing_prerequisite("Maestro is not installed: pip install maestrowf (in the test "
                             "extra)")
    prog = tmp_path / "prog.py"
    prog.write_text(MAESTRO_PROGRAM)
    venv_bin = os.path.dirname(fluxlite_command()[0])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLUXLITE_", "FLUX_"))}
    env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
    env[TAG_VAR] = tag = uuid.uuid4().hex
    cp = subprocess.run(fluxlite_command() + ["start", "--flux-compat", "-s", "1",
                                              os.path.join(venv_bin, "python"), str(prog)],
                        env=env, cwd=str(tmp_path), capture_output=True, text=True,
                        timeout=150)
    assert cp.returncode == 0, cp.stderr[-3000:]
    said = [line for line in cp.stdout.splitlines()
            if not line.startswith("INFO: ")]     # Maestro's own chatter on stdout
    assert said == [
        "ok FINISHED hello from maestro", "bad FAILED 3", "nested FINISHED 1",
        "running RUNNING", "cancel OK CANCELLED"]
    assert_no_leaks(tag)

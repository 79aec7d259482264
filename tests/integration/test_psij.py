"""A second real workflow tool from PyPI, unchanged: PSI/J (psij-python), whose
Flux executor (psij/executors/flux.py) drives jobs through flux.job.FluxExecutor,
FluxExecutorFuture callbacks, job_list(states=FLUX_JOB_STATE_ACTIVE) and
cancel_async, and reads a cancel from the `type=cancel` in Flux's JobException
text.  The program runs inside `fluxlite start --flux-compat`."""

import os
import subprocess
import uuid

import pytest

from fluxlite.testing import TAG_VAR, assert_no_leaks, fluxlite_command, missing_prerequisite

pytestmark = pytest.mark.timeout(180)

PSIJ_PROGRAM = r'''
import psij
from flux.job import JobID
from psij import Job, JobSpec, JobState, ResourceSpecV1

one = dict(resources=ResourceSpecV1(process_count=1, cpu_cores_per_process=1))
ex = psij.JobExecutor.get_instance("flux")
ok = Job(JobSpec(executable="/bin/true", **one))
ex.submit(ok)
print("ok", ok.wait().state)
bad = Job(JobSpec(executable="/bin/sh", arguments=["-c", "exit 3"], **one))
ex.submit(bad)
status = bad.wait()
print("bad", status.state, status.exit_code)
long = Job(JobSpec(executable="/bin/sleep", arguments=["60"], **one))
ex.submit(long)
long.wait(target_states=[JobState.ACTIVE])
print("listed", JobID(long.native_id) in ex.list())   # native_id: the id's f58 text
ex.cancel(long)
print("canceled", long.wait().state)
'''


def test_psij_flux_executor_runs_jobs_unchanged(tmp_path):
    try:
        import psij  # noqa: F401
    except ImportError:
        missing_prerequisite("PSI/J is not installed: pip install psij-python (in the test "
                             "extra)")
    prog = tmp_path / "prog.py"
    prog.write_text(PSIJ_PROGRAM)
    venv_bin = os.path.dirname(fluxlite_command()[0])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLUXLITE_", "FLUX_"))}
    env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
    env[TAG_VAR] = tag = uuid.uuid4().hex
    cp = subprocess.run(fluxlite_command() + ["start", "--flux-compat", "-s", "1",
                                              os.path.join(venv_bin, "python"), str(prog)],
                        env=env, cwd=str(tmp_path), capture_output=True, text=True,
                        timeout=150)
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert cp.stdout.splitlines() == ["ok COMPLETED", "bad FAILED 3", "listed True",
                                      "canceled CANCELED"]
    assert_no_leaks(tag)

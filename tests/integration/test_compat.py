"""Flux compatibility, opt-in: `eval "$(fluxlite compat env)"` puts a `flux` command
on PATH that runs the fluxlite command of the same name, and instances and jobs
see FLUX_* variables beside the FLUXLITE_* ones; without it, none of that."""

import os
import shutil
import subprocess
import uuid

import pytest

from fluxlite.testing import TAG_VAR, assert_no_leaks, fluxlite_command

pytestmark = pytest.mark.timeout(120)

COMPAT = 'eval "$(fluxlite compat env)" && '


def sh(inst, script, timeout=60, env=None):
    """`sh -c script` in the instance's environment (with `fluxlite` on PATH)."""
    return subprocess.run(["sh", "-c", script], env=dict(inst.env, **(env or {})),
                          capture_output=True, text=True, timeout=timeout)


def plain_env(inst):
    env = dict(inst.env)
    env.pop("FLUXLITE_FLUX_COMPAT", None)
    return env


@pytest.fixture
def inst2(instance_factory):
    return instance_factory(2)


def test_flux_run_gives_tasks_flux_variables(inst2):
    cp = sh(inst2, COMPAT + "flux run -N2 -n2 sh -c 'echo $FLUX_TASK_RANK $FLUX_TASK_LOCAL_ID "
                "$FLUX_JOB_SIZE $FLUX_JOB_NNODES $FLUX_JOB_ID $FLUXLITE_JOB_ID "
                "$FLUX_URI $FLUXLITE_URI'")
    assert cp.returncode == 0, cp.stderr
    rows = sorted(line.split() for line in cp.stdout.splitlines())
    assert [r[:4] for r in rows] == [["0", "0", "2", "2"], ["1", "0", "2", "2"]]
    for r in rows:
        assert r[4] == r[5] and r[4].startswith("ƒ")      # FLUX_JOB_ID is the f58 id
        assert r[6] == r[7] and r[6].startswith("local://")
    cp = sh(inst2, COMPAT + "flux run -n2 printenv FLUX_TASK_RANK")
    assert cp.returncode == 0, cp.stderr
    assert sorted(cp.stdout.split()) == ["0", "1"]


def test_flux_job_tmpdir_is_the_jobs_tmpdir(inst2):
    cp = sh(inst2, COMPAT + "flux run sh -c 'test -d \"$FLUX_JOB_TMPDIR\" && "
                "test \"$FLUX_JOB_TMPDIR\" = \"$FLUXLITE_JOB_TMPDIR\" && echo ok'")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.strip() == "ok"


def test_flux_jobs_lists_what_flux_submit_ran(inst2):
    cp = sh(inst2, COMPAT + "flux submit --wait true && flux jobs -a")
    assert cp.returncode == 0, cp.stderr
    jobid = cp.stdout.splitlines()[0].strip()
    assert jobid.startswith("ƒ")
    assert any(line.split()[0] == jobid for line in cp.stdout.splitlines()[2:])


def test_flux_command_fluxlite_lacks_is_one_error_line(inst2):
    cp = sh(inst2, COMPAT + "flux mini-nosuch run true")
    assert cp.returncode == 1
    assert cp.stderr.splitlines() == [
        "flux: 'mini-nosuch' is a Flux command fluxlite does not provide "
        "(see 'flux --help' for those it does)"]
    # a fluxlite command's own errors keep their form
    cp = sh(inst2, COMPAT + "flux run --nosuch-option true")
    assert cp.returncode == 2 and len(cp.stderr.splitlines()) == 1
    assert "--nosuch-option" in cp.stderr


def test_flux_uri_beside_fluxlite_uri_in_start(inst2):
    cp = sh(inst2, COMPAT + "exec fluxlite start -s 2 sh -c 'echo \"$FLUX_URI $FLUXLITE_URI\"'",
            env={"FLUXLITE_URI": "", TAG_VAR: (tag := uuid.uuid4().hex)})
    assert cp.returncode == 0, cp.stderr
    flux_uri, fluxlite_uri = cp.stdout.split()
    assert flux_uri == fluxlite_uri and flux_uri.startswith("local://")
    assert_no_leaks(tag)


def test_without_compat_no_flux_command_and_no_flux_variables(inst2):
    env = plain_env(inst2)
    which = shutil.which("flux", path=env.get("PATH", ""))
    assert which is None or "fluxlite" not in which   # never put on PATH by fluxlite
    cp = subprocess.run(fluxlite_command() + ["run", "-n2", "printenv"], env=env,
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert "FLUXLITE_TASK_RANK=" in cp.stdout
    assert not [v for v in cp.stdout.splitlines() if v.startswith("FLUX_")]
    env.pop("FLUXLITE_URI", None)
    env[TAG_VAR] = tag = uuid.uuid4().hex
    cp = subprocess.run(fluxlite_command() + ["start", "printenv"], env=env,
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert "FLUXLITE_URI=" in cp.stdout
    assert not [v for v in cp.stdout.splitlines() if v.startswith("FLUX_")]
    assert_no_leaks(tag)


def test_compat_env_prints_shell_lines(inst2):
    cp = subprocess.run(fluxlite_command() + ["compat", "env"], env=inst2.env,
                        capture_output=True, text=True, timeout=30, check=True)
    lines = cp.stdout.splitlines()
    assert "export FLUXLITE_FLUX_COMPAT=1" in lines
    bindir = os.path.join(os.path.dirname(os.path.abspath(__import__("fluxlite").__file__)),
                          "compat", "bin")
    assert any(line.startswith("export PATH=") and bindir in line for line in lines)


FLUX_PROGRAM = r'''
import flux
import flux.job
from flux.job import FluxExecutor, JobspecV1

h = flux.Flux()
spec = JobspecV1.from_command(["sh", "-c", "exit 3"])
jobid = flux.job.submit(h, spec)
res = flux.job.wait(h, jobid)
print(res.jobid == jobid, res.success)
with FluxExecutor() as ex:
    futs = [ex.submit(JobspecV1.from_command(["sh", "-c", f"exit {i}"])) for i in range(3)]
    print([f.result() for f in futs])
print(flux.__file__.count("fluxlite"))
'''


def test_flux_python_package_runs_a_flux_program(inst2, tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(FLUX_PROGRAM)
    python = fluxlite_command()[0].rsplit("/", 1)[0] + "/python"
    cp = sh(inst2, COMPAT + f"{python} {prog}")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines() == ["True False", "[0, 1, 2]", "1"]
    # without compat env, `import flux` is not fluxlite's
    cp = subprocess.run([python, "-c", "import flux; print(flux.__file__)"], env=plain_env(inst2),
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode != 0 or "fluxlite" not in cp.stdout


FLUX_BATCH_SCRIPT = """#!/bin/sh
# flux: -N2
# flux: --job-name=fluxjob
flux getattr size
flux run -N2 -n2 sh -c 'test -n "$FLUX_JOB_ID" && echo task $FLUX_TASK_RANK'
"""


def test_flux_batch_script_with_directives_runs_unchanged(inst2, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(FLUX_BATCH_SCRIPT)
    out = tmp_path / "out.txt"
    cp = sh(inst2, COMPAT + f"jobid=$(flux batch --output={out} {script}) && "
                "flux job wait $jobid && flux jobs -a -o '{name} {nnodes}'", timeout=90)
    assert cp.returncode == 0, cp.stderr
    assert "fluxjob 2" in cp.stdout.splitlines()
    lines = out.read_text().splitlines()
    assert lines[0] == "2"
    assert sorted(lines[1:]) == ["task 0", "task 1"]


def test_flux_directives_are_read_without_compat_too(inst2, tmp_path):
    """'# flux:' directives are Flux's batch options whatever the compatibility switch
    says: the job asks for 2 nodes and is named by them, with no warning."""
    script = tmp_path / "job.sh"
    script.write_text(FLUX_BATCH_SCRIPT)
    cp = subprocess.run(fluxlite_command() + ["batch", "--output", str(tmp_path / "o"),
                                              str(script)], env=plain_env(inst2),
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0 and cp.stderr == "", cp.stderr
    jobid = cp.stdout.strip()
    listed = subprocess.run(fluxlite_command() + ["jobs", "-n", "-o", "{nnodes} {name}", jobid],
                            env=plain_env(inst2), capture_output=True, text=True, timeout=60)
    assert listed.stdout.split() == ["2", "fluxjob"], listed.stderr
    subprocess.run(fluxlite_command() + ["job", "wait", jobid], env=plain_env(inst2),
                   capture_output=True, text=True, timeout=60)


def test_start_flux_compat_runs_a_flux_script_unchanged(inst2, tmp_path):
    """`fluxlite start --flux-compat` in a shell without compat: the initial program
    finds `flux` and `import flux`, sees FLUX_URI, and its batch job reads `# flux:`."""
    script = tmp_path / "job.sh"
    script.write_text(FLUX_BATCH_SCRIPT)
    out = tmp_path / "out.txt"
    program = (f"echo uri=$FLUX_URI; flux getattr size; "
               f"python -c 'import flux; print(flux.__file__.count(\"fluxlite\"))'; "
               f"id=$(flux batch --output={out} {script}) && flux job wait $id")
    env = plain_env(inst2)
    env.pop("FLUXLITE_URI", None)
    env[TAG_VAR] = tag = uuid.uuid4().hex
    env["PATH"] = os.path.dirname(fluxlite_command()[0]) + os.pathsep + env["PATH"]
    cp = subprocess.run(fluxlite_command() + ["start", "--flux-compat", "-s", "2",
                                              "sh", "-c", program],
                        env=env, capture_output=True, text=True, timeout=90)
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert lines[0].startswith("uri=local://")
    assert lines[1:3] == ["2", "1"]
    assert out.read_text().splitlines()[0] == "2"
    assert_no_leaks(tag)


FLUX_API_PROGRAM = r'''
import errno, os, signal
import flux, flux.job, flux.kvs
from flux.job import JobID, JobspecV1

h = flux.Flux()
print("size", h.attr_get("size"), h.attr_get("local-uri") == os.environ["FLUXLITE_URI"])
ok = flux.job.submit(h, JobspecV1.from_command(["true"]))
fut = flux.job.submit_async(h, JobspecV1.from_command(["sh", "-c", "exit 3"]))
bad = fut.get_id()
print("ids", type(ok).__name__, JobID(ok.f58) == ok, JobID(ok.dec) == ok, JobID(ok.hex) == ok,
      str(ok) == ok.f58)
print("events", [e.name for e in flux.job.event_watch(h, ok)][-1])
print("start", flux.job.event_wait(h, bad, "start").name)
info = flux.job.result(h, bad)
print("result", info.result, info.returncode, info.status_abbrev, info.id == bad)
print("wait", flux.job.wait(h, ok).success, flux.job.wait(h, bad).success)
long = flux.job.submit(h, JobspecV1.from_command(["sleep", "60"]))
flux.job.event_wait(h, long, "start")
flux.job.cancel(h, long, "enough")
try:
    flux.job.event_wait(h, long, "finish")
except flux.job.JobException as exc:
    print("exception", exc.type, exc.note)
killed = flux.job.submit(h, JobspecV1.from_command(["sleep", "60"]))
flux.job.event_wait(h, killed, "start")
flux.job.kill(h, killed, signal.SIGKILL)
print("killed", flux.job.result(h, killed).returncode)
rows = flux.job.JobList(h, filters=["inactive"]).jobs()
print("joblist", sorted(j.status_abbrev for j in rows), all(isinstance(j.id, JobID) for j in rows))
listed = flux.job.job_list(h).get()["jobs"]
print("job_list", len(listed), sorted(j["result"] for j in listed))
print("list-id", h.rpc("job-list.list-id", {"id": ok}).get()["job"]["id"] == ok)
print("kvs", flux.kvs.get(h, "job." + ok.dothex + ".eventlog")[0]["name"])
pending = flux.job.submit(h, JobspecV1.from_command(["sleep", "0.2"]))
h.rpc("job-manager.drain").get()
print("drained", flux.job.result(h, pending).result)
for call in (lambda: flux.job.no_such_call, lambda: h.no_such_method):
    try:
        call()
    except NotImplementedError as exc:
        print("missing", str(exc).split(":")[0])
try:   # any topic reaches the services; one nobody serves fails as in Flux
    h.rpc("sched.hello", {}).get()
except OSError as exc:
    print("no service", exc.errno == errno.ENOSYS)
print("hasattr", hasattr(flux.job, "no_such_call"))
'''


def test_flux_package_covers_what_workflow_tools_call(inst2, tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(FLUX_API_PROGRAM)
    python = fluxlite_command()[0].rsplit("/", 1)[0] + "/python"
    cp = sh(inst2, COMPAT + f"{python} {prog}", timeout=90)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines() == [
        "size 2 True",
        "ids JobID True True True True",
        "events clean",
        "start start",
        "result FAILED 3 F True",
        "wait True False",
        "exception cancel enough",
        "killed 137",   # as Flux: the shell exits 128+9 when its task is killed
        "joblist ['CA', 'CD', 'F', 'F'] True",
        "job_list 4 [1, 2, 2, 4]",
        "list-id True",
        "kvs submit",
        "drained COMPLETED",
        "missing flux.job.no_such_call",
        "missing flux.Flux.no_such_method",
        "no service True",
        "hasattr False",
    ]

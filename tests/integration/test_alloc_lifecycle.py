"""How instances run as jobs end when they are not ended politely: an interactive
alloc whose terminal goes away or that is cancelled from elsewhere, and a batch
script that ignores SIGTERM (nothing of the job is left on disk)."""

import os
import pwd
import signal

import pexpect
import pytest

from fluxlite.jobapi import api
from fluxlite.testing import fluxlite_command, jobid_of, wait_fifo
from fluxlite.util import fluid


@pytest.fixture
def parent(instance_factory):
    return instance_factory(2, cores_per_rank=2)


def spawn_alloc(parent) -> pexpect.spawn:
    env = dict(parent.env, SHELL="/bin/sh", PS1="alloc$ ")
    child = pexpect.spawn(fluxlite_command()[0], ["alloc", "-N2"], env=env, timeout=60,
                          encoding="utf-8")
    child.expect_exact("alloc$ ")
    return child


def the_running_job(parent) -> int:
    [job] = api.list_jobs(parent.handle(), "running")
    return job["id"]


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGKILL], ids=["SIGHUP", "SIGKILL"])
def test_alloc_whose_terminal_goes_away_ends(parent, sig):
    """A closed terminal or a dropped ssh (SIGHUP), or alloc killed outright: the job's
    terminal is hung up, its shell exits and the instance ends on its own."""
    child = spawn_alloc(parent)
    try:
        jobid = the_running_job(parent)
        child.kill(sig)
        child.expect(pexpect.EOF)
    finally:
        child.close()
    if sig == signal.SIGHUP:
        assert child.exitstatus == 128 + signal.SIGHUP  # detached, terminal restored
    r = api.wait(parent.handle(), jobid, timeout=60)
    assert r["returncode"] == 128 + signal.SIGHUP, r  # the interactive shell was hung up
    log = parent.cli("job", "attach", fluid.f58(jobid)).stderr
    assert "pty: hanging up the terminal (its client went away)" in log


def test_cancelled_alloc_hangs_up_its_shell(parent):
    """The interactive shell ignores SIGTERM: cancelling hangs up its terminal instead of
    waiting for the kill timeout, and alloc names who cancelled."""
    child = spawn_alloc(parent)
    try:
        jobid = the_running_job(parent)
        parent.cli("cancel", fluid.f58(jobid), check=True)
        child.expect(r"fluxlite alloc: cancel[^\r\n]*\r\n")
        line = child.after.strip()
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert line == f"fluxlite alloc: cancel by {pwd.getpwuid(os.getuid()).pw_name}"
    # SIGHUP from the hang-up, not SIGKILL after exec.kill-timeout
    assert child.exitstatus == 128 + signal.SIGHUP
    r = api.wait(parent.handle(), jobid, timeout=60)
    assert r["result"] == "CANCELED" and r["returncode"] == 128 + signal.SIGHUP, r


def write_script(path, body: str) -> str:
    path.write_text(body)
    path.chmod(0o755)
    return str(path)


def test_batch_ignoring_sigterm_leaves_no_files(instance_factory, tmp_path):
    """Cancelled, the job is SIGKILLed after the kill timeout and no shell.exit runs: the
    scripts and run directories of both nesting levels still go with the job."""
    parent = instance_factory(2, cores_per_rank=2, setattrs=["exec.kill-timeout=1s"])
    paths, fifo = tmp_path / "paths", tmp_path / "ready"
    os.mkfifo(fifo)
    inner = write_script(tmp_path / "inner.sh", f"""#!/bin/sh
trap '' TERM
echo "$(dirname "$0") $(fluxlite getattr rundir)" >> {paths}
echo ready > {fifo}
exec sleep 300
""")
    outer = write_script(tmp_path / "outer.sh", f"""#!/bin/sh
trap '' TERM
echo "$(dirname "$0") $(fluxlite getattr rundir)" >> {paths}
fluxlite batch --output /dev/null {inner} >/dev/null
exec sleep 300
""")
    jobid = jobid_of(parent.cli("batch", "-N2", "--output", str(tmp_path / "out"), outer))
    wait_fifo(fifo)  # the inner batch started
    dirs = paths.read_text().split()  # each level's script directory and run directory
    assert len(dirs) == 4 and all(os.path.isdir(d) for d in dirs)
    parent.cli("cancel", fluid.f58(jobid), check=True)
    assert api.wait(parent.handle(), jobid, timeout=60)["result"] == "CANCELED"
    assert [d for d in dirs if os.path.exists(d)] == []
    # all of it was in the job's directory, inside the parent's run directory
    rundir = parent.getattr("rundir")
    assert all(d.startswith(rundir + "/") for d in dirs), dirs


def test_finished_batch_leaves_no_files(parent, tmp_path):
    out = tmp_path / "out"
    jobid = jobid_of(parent.cli("batch", "--output", str(out), "--wrap",
                                'echo "$(dirname "$0") $(fluxlite getattr rundir)"'))
    assert api.wait(parent.handle(), jobid, timeout=60)["success"]
    dirs = out.read_text().split()
    assert len(dirs) == 2 and not any(os.path.exists(d) for d in dirs), dirs

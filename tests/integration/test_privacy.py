"""Private by construction: what an instance creates is its owner's alone.

The attack these tests replay: with umask 000 another local user connected to
rank 0's tree socket, said hello as a lost rank and had rexec run a command as the
instance owner.  Now every socket and log is owner-only whatever the umask, a run
directory others may write is refused, and another user can neither connect to
the sockets nor read the logs even when the run directory itself is open to them.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile

import pytest

from fluxlite.testing import Instance, assert_no_leaks, fluxlite_command

OTHER_USER = "fluxlite-other"


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def walk_modes(top: str) -> dict[str, int]:
    """Every path under `top` (not following links) with its permission bits."""
    out = {}
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            p = os.path.join(root, name)
            out[p] = stat.S_IMODE(os.lstat(p).st_mode)
    return out


def test_everything_in_the_run_directory_is_owner_only_under_umask_000(instance_factory):
    with umask(0):
        inst = instance_factory(2, topo="kary:1")
    inst.cli("run", "-N2", "echo", "hello", check=True)
    rundir = inst.cli("getattr", "rundir", check=True).stdout.strip()
    modes = walk_modes(rundir)
    assert any(os.path.basename(p).startswith("tbon-") for p in modes), modes
    assert any(p.endswith(".log") for p in modes), modes
    loose = {p: oct(mode) for p, mode in modes.items() if mode & 0o077}
    assert not loose, f"group/other bits under umask 000: {loose}"
    assert stat.S_IMODE(os.stat(rundir).st_mode) & 0o077 == 0


def test_a_run_directory_others_may_write_is_refused(tmp_path):
    rundir = tmp_path / "shared"
    rundir.mkdir()
    rundir.chmod(0o777)
    cp = subprocess.run(fluxlite_command() + ["start", "--rundir", str(rundir), "true"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode != 0
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and str(rundir) in lines[0], cp.stderr
    assert "Traceback" not in cp.stderr
    assert os.listdir(rundir) == []


def other_user() -> str:
    """A second local account (made with useradd when missing): root only."""
    if os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("runuser"):
        msg = "the two-user test needs root with useradd and runuser (util-linux, passwd)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg + ": CI must run it")
        pytest.skip(msg)
    try:
        pwd.getpwnam(OTHER_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/sh",
                        OTHER_USER], check=True, capture_output=True, timeout=60)
    return OTHER_USER


PROBE = r"""
import os, socket, sys
rundir = sys.argv[1]
for name in sorted(os.listdir(rundir)):
    path = os.path.join(rundir, name)
    if name.startswith(("local-", "tbon-")):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            print("CONNECTED", name)
        except OSError as exc:
            print("refused", name, exc.errno)
        finally:
            s.close()
    elif name.endswith(".log"):
        try:
            open(path).read(1)
            print("READ", name)
        except OSError as exc:
            print("refused", name, exc.errno)
"""


def test_another_user_can_neither_connect_nor_read_the_logs():
    user = other_user()
    # a run directory others may enter and list (not write): the sockets and logs
    # in it are what must keep them out, under the most permissive umask
    rundir = tempfile.mkdtemp(prefix="fl-priv-", dir="/tmp")
    os.chmod(rundir, 0o755)
    inst = Instance(2, topo="kary:1", start_args=["--rundir", rundir])
    try:
        with umask(0):
            inst.start()
        inst.cli("run", "true", check=True)
        # stdlib only, so the system interpreter (the other user may not reach ours)
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        probe = subprocess.run(["runuser", "-u", user, "--", python, "-c", PROBE,
                                rundir], capture_output=True, text=True, timeout=60)
        assert probe.returncode == 0, probe.stderr
        lines = probe.stdout.splitlines()
        assert any("tbon-" in ln for ln in lines) and any("local-" in ln for ln in lines) \
            and any(".log" in ln for ln in lines), probe.stdout
        # refused at connect(): no hello, no rexec, no request of any kind gets in
        assert all(ln.startswith("refused ") for ln in lines), probe.stdout
        # and the owner's instance is unharmed
        assert inst.cli("run", "echo", "still", check=True).stdout == "still\n"
    finally:
        try:
            inst.stop()
        finally:
            assert_no_leaks(inst.tag)
            shutil.rmtree(rundir, ignore_errors=True)

"""flux-exec's --bg, --label, --waitable, --attach and --with-imp, through the real
CLI: background processes run on after `exec` exits; what fluxlite cannot honour
(no IMP, no kept output to attach to) is one line and exit 1, as Flux's exec
without an IMP configured."""

from __future__ import annotations

import os
import re
import signal

import pytest

from fluxlite.testing import one_error_line

pytestmark = pytest.mark.timeout(120)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_bg_prints_rank_and_pid_and_leaves_the_process_running(inst4):
    cp = inst4.cli("exec", "--bg", "--waitable", "--label", "bgtest", "-r", "1-2",
                   "sleep", "60")
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert sorted(ln.split(":")[0] for ln in lines) == ["1", "2"]
    assert all(re.fullmatch(r"\d: \d+", ln) for ln in lines), lines
    pids = [int(ln.split(": ")[1]) for ln in lines]
    try:
        assert all(_alive(p) for p in pids)
        # the label is taken on those ranks while they run
        again = inst4.cli("exec", "--bg", "--label", "bgtest", "-r", "2", "true")
        assert again.returncode == 1
        assert again.stderr.splitlines() == [
            "fluxlite exec: Error: rank 2: true: a process labelled 'bgtest' already runs",
            "fluxlite exec: failed to start all processes in background"]
    finally:
        for p in pids:
            os.kill(p, signal.SIGKILL)


def test_bg_of_a_missing_command(inst1):
    cp = inst1.cli("exec", "--bg", "no-such-command-here")
    assert cp.returncode == 1
    assert cp.stderr.splitlines() == [
        "fluxlite exec: Error: rank 0: no-such-command-here: No such file or directory",
        "fluxlite exec: failed to start all processes in background"]


def test_label_names_a_foreground_command(inst1):
    cp = inst1.cli("exec", "--label", "fg1", "echo", "hi")
    assert (cp.returncode, cp.stdout) == (0, "hi\n"), cp.stderr


@pytest.mark.parametrize("args, words", [
    (["--with-imp", "true"], "--with-imp: exec.imp path not found in config"),
    (["--waitable", "true"], "--waitable can only be used with --bg"),
    (["--attach", "--bg", "x"], "--attach cannot be used with --bg or --waitable"),
    (["--attach", "somelabel"], "--attach: fluxlite keeps no output"),
])
def test_what_cannot_be_honoured_is_one_line_exit_1(inst1, args, words):
    cp = inst1.cli("exec", *args)
    assert cp.returncode == 1
    assert words in one_error_line(cp)

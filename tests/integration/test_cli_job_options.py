"""flux-job's raise (several ids, a note after them or -m), kill (several ids),
raiseall and killall (-f to confirm, Flux's counting lines), and attach's --tail,
-E, -X, --read-only, -w, -u, -v, -i, --show-status and --debug, through the real
CLI."""

from __future__ import annotations

import pytest

from fluxlite.testing import one_error_line

pytestmark = pytest.mark.timeout(120)


def started(inst, *command) -> str:
    jobid = inst.cli("submit", *command, check=True).stdout.strip()
    inst.cli("job", "wait-event", "-q", jobid, "start", check=True)
    return jobid


def exceptions(inst, jobid: str) -> list[str]:
    out = inst.cli("job", "eventlog", jobid, check=True).stdout
    return [ln.split(" ", 1)[1] for ln in out.splitlines() if " exception " in f" {ln} "]


def test_raise_takes_several_ids_and_a_note(inst1):
    a, b = started(inst1, "sleep", "300"), started(inst1, "sleep", "300")
    try:
        cp = inst1.cli("job", "raise", "-s", "5", "-t", "mytype", a, b, "--", "a", "note")
        assert cp.returncode == 0, cp.stderr
        for j in (a, b):
            [line] = exceptions(inst1, j)
            assert line.startswith('exception type="mytype" severity=5 note="a note" '), line
        inst1.cli("job", "raise", "-s", "6", "-m", "by option", a, check=True)
        assert 'note="by option"' in exceptions(inst1, a)[-1]
        cp = inst1.cli("job", "raise", "-m", "x", a, "and", "words")
        assert (cp.returncode, one_error_line(cp)) == (
            1, "fluxlite job raise: Do not set note on command line and with --message")
    finally:
        inst1.cli("cancel", "--all")


def test_kill_takes_several_ids(inst1):
    a, b = started(inst1, "sleep", "300"), started(inst1, "sleep", "300")
    cp = inst1.cli("job", "kill", "-s", "KILL", a, b)
    assert cp.returncode == 0, cp.stderr
    st = inst1.cli("job", "status", a, b)
    assert st.returncode == 137, st.stderr
    cp = inst1.cli("job", "kill", a)   # it has ended: one line naming it, exit 1
    assert cp.returncode == 1
    assert one_error_line(cp).startswith(f"fluxlite job: kill {a}: ")


def test_killall_and_raiseall_count_unless_forced(inst1):
    a, b = started(inst1, "sleep", "300"), started(inst1, "sleep", "300")
    cp = inst1.cli("job", "killall", check=True)
    assert cp.stderr == "fluxlite job: Command matched 2 jobs (-f to confirm)\n"
    cp = inst1.cli("job", "raiseall", "test", check=True)
    assert cp.stderr == "fluxlite job: Command matched 2 jobs (-f to confirm)\n"
    assert exceptions(inst1, a) == []
    cp = inst1.cli("job", "raiseall", "-f", "-s", "6", "test", "some", "words", check=True)
    assert cp.stderr == "fluxlite job: Raised exception on 2 jobs (0 errors)\n"
    assert 'type="test" severity=6 note="some words"' in exceptions(inst1, b)[0]
    cp = inst1.cli("job", "killall", "-f", "-s", "SIGKILL", check=True)
    assert cp.stderr == "fluxlite job: Killed 2 jobs (0 errors)\n"
    assert inst1.cli("job", "status", a, b).returncode == 137
    cp = inst1.cli("job", "killall", check=True)
    assert cp.stderr == "fluxlite job: Command matched 0 jobs\n"
    cp = inst1.cli("job", "raiseall", "-S", "inactive", "test")
    assert cp.returncode == 2
    assert "Exceptions cannot be raised on inactive jobs" in one_error_line(cp)


def test_attach_tail(inst1):
    jobid = inst1.cli("submit", "seq", "15", check=True).stdout.strip()
    inst1.cli("job", "wait", jobid, check=True)
    cp = inst1.cli("job", "attach", "--tail=3", jobid, check=True)
    assert cp.stdout == "13\n14\n15\n"
    cp = inst1.cli("job", "attach", "--tail", jobid, check=True)  # 10 by default
    assert cp.stdout.split() == [str(i) for i in range(6, 16)]


def test_attach_events_and_wait_event(inst1):
    jobid = inst1.cli("submit", "true", check=True).stdout.strip()
    inst1.cli("job", "wait", jobid, check=True)
    cp = inst1.cli("job", "attach", "-E", jobid, check=True)
    assert "job.submit" in cp.stderr and "exec." not in cp.stderr
    cp = inst1.cli("job", "attach", "-X", jobid, check=True)
    assert "exec.shell.start" in cp.stderr and "job.submit" not in cp.stderr
    running = started(inst1, "sh", "-c", "echo up; sleep 300")
    try:
        # read-only, accepted options, and -w: back once the job has started
        cp = inst1.cli("job", "attach", "--read-only", "-u", "-v", "-i", "all",
                       "--show-status", "--debug", "-w", "start", running, input="ignored\n")
        assert cp.returncode == 0, cp.stderr
        cp = inst1.cli("job", "attach", "-i", "0", running)
        assert cp.returncode == 1
        assert "--stdin-ranks=0" in one_error_line(cp)
    finally:
        inst1.cli("cancel", running)

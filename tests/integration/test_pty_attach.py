"""Attaching to a job's terminal (`run -o pty.interactive`, interactive `alloc`,
`job attach` of a running `submit -o pty.interactive` job) at every point of the
job shell's life: an attach that comes after the terminal closed, while the leader
shell is still on its way out, ends cleanly and the terminal's output is read from
the job's output log instead.  `job attach` drives the job's terminal from ours,
writes a stdin that is no terminal into it, or only watches it (--read-only)."""

import io
import os
import signal
import textwrap

import pexpect
import pytest

from fluxlite.errors import UsageError
from fluxlite.jobapi import api
from fluxlite.testing import fluxlite_command, jobid_of, wait_event, wait_fifo
from fluxlite.util import fluid


def held_at_exit(tmp_path) -> tuple[str, str, str]:
    """A shell plugin whose shell.exit callback (after the pty plugin's: built-ins
    come first) says it got there on one FIFO, then waits until the test writes to
    another: the leader shell is held alive with its terminal already gone."""
    entered, gate = str(tmp_path / "entered"), str(tmp_path / "gate")
    os.mkfifo(entered)
    os.mkfifo(gate)
    path = tmp_path / "hold.py"
    path.write_text(textwrap.dedent(f"""
        import asyncio
        from fluxlite.shell.plugin import ShellPlugin

        def _hold():
            with open({entered!r}, "w") as f:
                f.write("in shell.exit\\n")
            with open({gate!r}) as f:
                f.read()

        class Hold(ShellPlugin):
            name = "hold"
            async def shell_exit(self):
                await asyncio.get_running_loop().run_in_executor(None, _hold)
    """))
    return str(path), entered, gate


def release(gate: str) -> None:
    fd = os.open(gate, os.O_WRONLY)
    os.write(fd, b"go\n")
    os.close(fd)


def attach_responses(h, jobid: int) -> tuple[list[dict], BaseException | None]:
    """What a terminal client (alloc, run -o pty.interactive) gets for its attach:
    the stream's payloads, and the error that ended it other than its clean end."""
    init = wait_event(h, jobid, "shell.init", "exec")["context"]
    got = []
    try:
        for payload in h.stream(f"{init['service']}.pty-attach", {},
                                nodeid=init["leader-rank"], timeout=30):
            got.append(payload)
    except Exception as exc:   # noqa: BLE001 - what the client would report
        return got, exc
    return got, None


def test_an_attach_after_the_terminal_closed_ends_cleanly(inst1, tmp_path):
    """The task has exited and the pty plugin's shell.exit has put what the terminal
    showed in the output log; the leader shell still answers: the attach ends at
    once, with no error (it said 'this job has no terminal yet'), and the output is
    the job's as attach shows it."""
    plugin, entered, gate = held_at_exit(tmp_path)
    jobid = jobid_of(inst1.cli("submit", "-o", "pty.interactive", "-o", f"plugins={plugin}",
                               "echo", "hi"))
    h = inst1.handle()
    assert wait_fifo(entered, timeout=60) == "in shell.exit\n"
    try:
        got, error = attach_responses(h, jobid)
    finally:
        release(gate)
    assert error is None, error
    assert not [p for p in got if p.get("data")], got   # the output is in the log now
    assert api.wait(h, jobid, timeout=60)["success"]
    cp = inst1.cli("job", "attach", fluid.f58(jobid))
    assert (cp.returncode, cp.stdout.replace("\r", ""), cp.stderr) == (0, "hi\n", "")


def test_run_with_an_interactive_pty_never_reports_a_missing_terminal(inst1):
    """`run -o pty.interactive` of a quick command, again and again: its attach
    comes at any point of the shell's life (before the task ran, after the terminal
    closed, after the shell exited) and the command's output and status are the same
    each time, with nothing on stderr."""
    for _ in range(30):
        cp = inst1.cli("run", "-o", "pty.interactive", "echo", "hi")
        assert (cp.returncode, cp.stdout.replace("\r", ""), cp.stderr) == (0, "hi\n", "")


def submit_interactive_shell(inst) -> int:
    """An interactive `sh` on a job's terminal, nobody attached yet (its prompt waits
    in the terminal)."""
    return jobid_of(inst.cli("submit", "-o", "pty.interactive", "--env=PS1=job> ", "sh",
                             check=True))


def spawn_attach(inst, jobid: int, *args: str, rows: int = 24, cols: int = 80):
    return pexpect.spawn(fluxlite_command()[0], ["job", "attach", *args, fluid.f58(jobid)],
                         env=inst.env, timeout=60, encoding="utf-8", dimensions=(rows, cols))


def test_job_attach_drives_a_submitted_interactive_pty(inst1):
    """`job attach` of a running `submit -o pty.interactive sh`, from a terminal: what
    is typed reaches the job's shell, its screen comes back, the job's terminal has
    ours' size (and follows it when it changes), and attach exits with the job's
    exit code when the shell exits."""
    jobid = submit_interactive_shell(inst1)
    child = spawn_attach(inst1, jobid, rows=31, cols=101)
    try:
        child.expect_exact("job> ")
        child.sendline("echo sum=$((6*7))")
        child.expect_exact("sum=42")
        child.sendline("stty size")
        child.expect_exact("31 101")
        child.setwinsize(40, 120)   # SIGWINCH: the new size goes to the job's terminal
        child.sendline("stty size")
        child.expect_exact("40 120")
        child.sendline("exit 3")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 3
    r = api.wait(inst1.handle(), jobid, timeout=60)
    assert r["returncode"] == 3, r


def test_job_attach_with_stdin_not_a_terminal_writes_it_to_the_pty(inst1):
    """As Flux's: stdin that is a pipe is written to the job's terminal as it comes
    (the terminal echoes it), and its end leaves the job running: attach follows the
    terminal until the shell exits."""
    jobid = submit_interactive_shell(inst1)
    cp = inst1.cli("job", "attach", fluid.f58(jobid), input="echo piped=$((2+3))\nexit 4\n")
    out = cp.stdout.replace("\r", "")
    assert cp.returncode == 4, (cp.returncode, out, cp.stderr)
    assert "piped=5\n" in out and "echo piped=$((2+3))" in out, out
    assert api.wait(inst1.handle(), jobid, timeout=60)["returncode"] == 4


def test_job_attach_read_only_shows_the_pty_and_hangs_up_nothing(inst1):
    """--read-only on a job with an interactive pty: the job's screen as it comes and
    its exit code.  It takes nothing from the terminal (its prompt waits for the first
    terminal that types), nothing typed there reaches the job, and its going away,
    alone on the job's terminal, hangs nothing up."""
    jobid = submit_interactive_shell(inst1)
    leaver = spawn_attach(inst1, jobid, "--read-only")
    try:
        leaver.expect_exact("job> ")
        leaver.kill(signal.SIGTERM)
        leaver.expect(pexpect.EOF)
    finally:
        leaver.close()
    driver = spawn_attach(inst1, jobid)
    driver.logfile_read = io.StringIO()
    watcher = spawn_attach(inst1, jobid, "--read-only")
    try:
        driver.expect_exact("job> ")
        driver.sendline("echo first=$((1+1))")
        driver.expect_exact("first=2")
        watcher.expect_exact("first=2")
        watcher.sendline("echo from-the-watcher")   # its own terminal echoes it, no more
        driver.sendline("echo second=$((2+2))")
        driver.expect_exact("second=4")
        watcher.expect_exact("second=4")
        driver.sendline("exit 5")
        driver.expect(pexpect.EOF)
        watcher.expect(pexpect.EOF)
    finally:
        driver.close()
        watcher.close()
    assert (driver.exitstatus, watcher.exitstatus) == (5, 5)
    assert "from-the-watcher" not in driver.logfile_read.getvalue()
    assert api.wait(inst1.handle(), jobid, timeout=60)["returncode"] == 5


def test_job_attach_of_a_pty_job_that_never_ran(inst1):
    """A held `-o pty.interactive` job cancelled while attach waits for its terminal:
    attach ends as it does for any job that never ran, with the same words."""
    jobid = jobid_of(inst1.cli("submit", "--urgency=0", "-o", "pty.interactive", "sh",
                               check=True))
    child = spawn_attach(inst1, jobid)
    try:
        inst1.cli("cancel", fluid.f58(jobid), check=True)
        child.expect(pexpect.EOF)
        seen = child.before.replace("\r", "")
    finally:
        child.close()
    after = inst1.cli("job", "attach", fluid.f58(jobid))
    assert (child.exitstatus, seen) == (after.returncode, after.stdout + after.stderr)
    assert "type=cancel" in seen


def test_job_attach_joins_an_interactive_alloc(inst1):
    """An interactive alloc's shell is on an interactive pty (as Flux's alloc sets
    pty.interactive): `job attach` from a second terminal types into the same shell,
    and alloc going away hangs nothing up while that terminal is attached."""
    env = dict(inst1.env, SHELL="/bin/sh", PS1="alloc$ ")
    alloc = pexpect.spawn(fluxlite_command()[0], ["alloc", "-N1"], env=env, timeout=60,
                          encoding="utf-8")
    second = None
    try:
        alloc.expect_exact("alloc$ ")
        [job] = api.list_jobs(inst1.handle(), "running")
        second = spawn_attach(inst1, job["id"])
        second.sendline("echo joined=$((3*3))")
        alloc.expect_exact("joined=9")
        second.expect_exact("joined=9")
        alloc.kill(signal.SIGKILL)
        alloc.expect(pexpect.EOF)
        second.sendline("fluxlite getattr instance-level")
        second.expect(r"\r\n1\r\n")
        second.sendline("exit 6")
        second.expect(pexpect.EOF)
    finally:
        alloc.close()
        if second is not None:
            second.close()
    assert second.exitstatus == 6
    assert api.wait(inst1.handle(), job["id"], timeout=60)["returncode"] == 6


def test_job_attach_sizes_the_pty_from_the_terminal_typed_in(inst1, tmp_path):
    """Output sent to a file, input from a terminal: the job's terminal takes the size
    of the terminal we type in (stdin's, as Flux's client reads it)."""
    jobid = submit_interactive_shell(inst1)
    out = tmp_path / "screen"
    child = pexpect.spawn("/bin/sh", ["-c", f'exec "$0" job attach {fluid.f58(jobid)} > {out}',
                                      fluxlite_command()[0]],
                          env=inst1.env, timeout=60, encoding="utf-8", dimensions=(33, 99))
    try:
        child.sendline("stty size; exit 0")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    assert "33 99" in out.read_text(), out.read_text()


def test_a_pty_attach_of_an_unknown_mode_is_refused(inst1):
    """pty-attach takes mode rw (the default) or ro; another is refused, saying so,
    and the job's terminal is untouched."""
    jobid = submit_interactive_shell(inst1)
    h = inst1.handle()
    init = wait_event(h, jobid, "shell.init", "exec")["context"]
    with pytest.raises(UsageError) as err:
        list(h.stream(f"{init['service']}.pty-attach", {"mode": "wo"},
                      nodeid=init["leader-rank"], timeout=30))
    assert str(err.value).endswith("pty-attach: mode 'wo': rw (type into the terminal) "
                                   "or ro (watch it)"), err.value
    cp = inst1.cli("job", "attach", fluid.f58(jobid), input="echo still=$((4+4))\nexit\n")
    assert cp.returncode == 0 and "still=8" in cp.stdout, (cp.stdout, cp.stderr)


def test_ctrl_backslash_detaches_and_the_job_runs_on(inst1):
    """Ctrl-\\ detaches, as Flux's pty client: attach exits 0 saying so, the job's
    terminal is not hung up, and a later `job attach` types into the same shell."""
    jobid = submit_interactive_shell(inst1)
    first = spawn_attach(inst1, jobid)
    try:
        first.expect_exact("job> ")
        first.sendline("x=41")
        first.expect_exact("job> ")
        first.send("\x1c")
        first.expect(pexpect.EOF)
        said = first.before
    finally:
        first.close()
    assert first.exitstatus == 0
    assert f"fluxlite job attach: detached; the job runs on (fluxlite job attach " \
           f"{fluid.f58(jobid)} comes back to it)" in said, said
    second = spawn_attach(inst1, jobid)
    try:
        second.sendline("echo x=$((x+1))")
        second.expect_exact("x=42")
        second.sendline("exit 7")
        second.expect(pexpect.EOF)
    finally:
        second.close()
    assert second.exitstatus == 7
    assert api.wait(inst1.handle(), jobid, timeout=60)["returncode"] == 7


def test_ctrl_c_on_the_job_terminal_interrupts_its_foreground_command(inst1):
    """The job's terminal is its task's controlling terminal, as Flux's pty: the job's
    shell has job control, and Ctrl-C typed through job attach interrupts what runs
    in its foreground (a command that says it is armed, then sleeps)."""
    jobid = submit_interactive_shell(inst1)
    child = spawn_attach(inst1, jobid)
    child.logfile_read = io.StringIO()
    try:
        child.expect_exact("job> ")
        child.sendline("sh -c 'trap \"echo int$((2+1)); exit 130\" INT; echo arm$((1+1)); "
                       "sleep 600; echo slept'")
        child.expect_exact("arm2")
        child.send("\x03")
        child.expect_exact("int3")
        child.sendline("echo status=$?")
        child.expect_exact("status=130")
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    seen = child.logfile_read.getvalue()
    assert "job control turned off" not in seen, seen

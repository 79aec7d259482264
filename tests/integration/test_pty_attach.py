"""Attaching to a job's terminal (`run -o pty.interactive`, interactive `alloc`) at
every point of the job shell's life: an attach that comes after the terminal
closed, while the leader shell is still on its way out, ends cleanly and the
terminal's output is read from the job's output log instead."""

import os
import textwrap

from fluxlite.jobapi import api
from fluxlite.testing import jobid_of, wait_event, wait_fifo
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

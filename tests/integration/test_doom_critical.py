"""doom and critical ranks beyond the basics: the status a doomed job finishes
with, doom deciding again when the critical set changes, shells lost before the
leader is up, signals that arrive while a job is still starting, and --no-persist
winning over a critical-ranks broker option."""

import os
import textwrap

import pytest

from fluxlite.errors import NotFound
from fluxlite.jobapi import api
from fluxlite.testing import jobid_of, wait_event
from fluxlite.util import fluid


def events(h, jobid, path="eventlog"):
    return list(api.event_watch(h, jobid, path, follow=False))



def gate_plugin(tmp_path, topic: str, shell_rank: int = 0) -> tuple[str, str]:
    """A plugin whose `topic` callback on `shell_rank` waits until the test writes
    to a FIFO: the test decides when the shell goes on, without sleeping."""
    fifo = str(tmp_path / "gate")
    os.mkfifo(fifo)
    path = tmp_path / "gate.py"
    path.write_text(textwrap.dedent(f"""
        import asyncio
        from fluxlite.shell.plugin import ShellPlugin

        def _wait():
            with open({fifo!r}) as f:
                f.read()

        class Gate(ShellPlugin):
            name = "gate"
            async def {topic.replace('.', '_')}(self, *args):
                if self.shell.rank == {shell_rank}:
                    await asyncio.get_running_loop().run_in_executor(None, _wait)
    """))
    return str(path), fifo


def open_gate(fifo: str) -> None:
    fd = os.open(fifo, os.O_WRONLY)
    os.write(fd, b"go\n")
    os.close(fd)


def test_exit_on_error_finishes_with_the_failing_tasks_status(instance_factory):
    inst = instance_factory(2)
    cp = inst.cli("run", "-N2", "-o", "exit-on-error", "sh", "-c",
                  'test "$FLUXLITE_TASK_RANK" = 1 && exit 7; exec sleep 30', timeout=60)
    assert cp.returncode == 7, cp.stderr
    assert "exit-on-error is set" in cp.stderr


def test_segv_among_two_tasks_finishes_with_35584(instance_factory):
    inst = instance_factory(2)
    h = inst.handle()
    jobid = jobid_of(inst.cli("submit", "-N2", "-o", "exit-timeout=0.5s", "sh", "-c",
                              'test "$FLUXLITE_TASK_RANK" = 0 && kill -SEGV $$; exec sleep 30'))
    r = api.wait(h, jobid, timeout=60)
    assert r["result"] == "FAILED"
    finish = [e for e in events(h, jobid) if e["name"] == "finish"][0]
    assert finish["context"]["status"] == 35584
    ex = [e["context"] for e in events(h, jobid) if e["name"] == "exception"][0]
    assert "Segmentation fault" in ex["note"]
    assert ex["wait_status"] == 11  # the task's own wait status: killed by SIGSEGV


def test_narrowing_the_critical_set_stops_an_armed_timer(instance_factory):
    """Shell rank 2's task exits at once and arms exit-timeout; the set is then
    narrowed to 0-1: doom decides again, stops the timer and records the ignore."""
    inst = instance_factory(3)
    h = inst.handle()
    jobid = jobid_of(inst.cli("submit", "-N3", "-o", "exit-timeout=3s", "sh", "-c",
                              'test "$FLUXLITE_TASK_RANK" = 2 && exit 0; exec sleep 6'))
    wait_event(h, jobid, "shell.task-exit", "exec")   # the timer is armed now
    h.call("job-exec.critical-ranks", {"id": jobid, "ranks": "0-1"})
    r = api.wait(h, jobid, timeout=60)
    assert r["success"], r
    names = [e["name"] for e in events(h, jobid, "exec")]
    assert names.index("critical-ranks") < names.index("doom.ignore")
    assert not [e for e in events(h, jobid) if e["name"] == "exception"]


def test_a_shell_lost_before_the_leader_is_up_is_announced(instance_factory, tmp_path):
    """The leader is held in shell.init; shell rank 2's broker dies meanwhile (not
    critical): the leader still calls shell.lost and doom records the ignore."""
    inst = instance_factory(3)
    h = inst.handle()
    gate, fifo = gate_plugin(tmp_path, "shell.init")
    log = tmp_path / "lost.log"
    watcher = tmp_path / "watch.py"
    watcher.write_text(textwrap.dedent(f"""
        from fluxlite.shell.plugin import ShellPlugin
        class Watcher(ShellPlugin):
            name = "watcher"
            def shell_lost(self, shell_rank, severity, message):
                with open({str(log)!r}, "a") as f:
                    f.write(f"lost {{shell_rank}} severity={{severity}}\\n")
    """))
    jobid = jobid_of(inst.cli("submit", "-N3", "-o", f"plugins={gate},{watcher}",
                              "sh", "-c", 'exec sleep 2'))
    wait_event(h, jobid, "starting", "exec")
    h.call("job-exec.critical-ranks", {"id": jobid, "ranks": "0-1"})
    inst.kill_broker(2)
    ex = wait_event(h, jobid, "exception")
    assert ex["context"]["type"] == "node-failure" and ex["context"]["severity"] == 2
    open_gate(fifo)
    r = api.wait(h, jobid, timeout=60)
    assert r["success"], r
    assert log.read_text().splitlines() == ["lost 2 severity=2"]
    ignored = [e["context"] for e in events(h, jobid, "exec") if e["name"] == "doom.ignore"]
    assert ignored == [{"shell_rank": 2, "what": "lost shell"}]


def test_cancel_while_tasks_are_starting_reaches_them(instance_factory, tmp_path):
    """A cancel's SIGTERM reaches a shell before its task exists: the task gets it
    as it starts, so the job ends without waiting for the kill timeout (60 s here,
    longer than the wait below)."""
    inst = instance_factory(1, setattrs=["exec.kill-timeout=60s"])
    h = inst.handle()
    gate, fifo = gate_plugin(tmp_path, "task.init")
    jobid = jobid_of(inst.cli("submit", "-o", f"plugins={gate}", "sleep", "300"))
    wait_event(h, jobid, "shell.init", "exec")
    inst.cli("cancel", fluid.f58(jobid), check=True)
    wait_event(h, jobid, "exception")
    open_gate(fifo)
    r = api.wait(h, jobid, timeout=30)
    assert r["result"] == "CANCELED"


def test_no_persist_wins_over_a_critical_ranks_broker_option(instance_factory):
    inst = instance_factory(2)
    h = inst.handle()
    jobid = jobid_of(inst.cli("alloc", "-N2", "--bg", "--no-persist",
                              "--broker-opts=-Sbroker.critical-ranks=0", timeout=60))
    try:
        assert h.call("job-exec.critical-ranks-get", {"id": jobid})["ranks"] == "0-1"
    finally:
        inst.cli("cancel", fluid.f58(jobid), check=True)
        api.wait(h, jobid, timeout=60)


def test_critical_ranks_of_a_job_not_running_says_whether_it_exists(inst1):
    """job-exec asks the job-manager (by a message) whether a job that is not
    running exists: an ended job is "not running", an id never given "unknown"."""
    jobid = jobid_of(inst1.cli("submit", "true", check=True))
    inst1.cli("job", "wait", jobid, check=True, timeout=60)
    h, known = inst1.handle(), fluid.parse(jobid)
    with pytest.raises(NotFound, match=f"job {fluid.f58(known)} is not running"):
        h.call("job-exec.critical-ranks", {"id": known, "ranks": "0"})
    unknown = known + 1000
    with pytest.raises(NotFound, match=f"unknown job id {fluid.f58(unknown)}"):
        h.call("job-exec.critical-ranks", {"id": unknown, "ranks": "0"})

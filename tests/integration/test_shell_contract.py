"""The job shell's contract through real instances: rexec checks the ShellInfo it is
given before any shell starts, a user plugin works through its ShellContext
(subscribing to topics and hearing signals included), and one whose hook names
no topic fails the job at load with one line listing the hooks."""

from __future__ import annotations

import errno
import signal
import textwrap

import pytest

from fluxlite.errors import FluxliteError
from fluxlite.job import taskmap
from fluxlite.job.shell_info import CriticalRanks, ShellInfo
from fluxlite.jobapi import api
from fluxlite.testing import jobid_of, wait_event
from fluxlite.util import fluid

pytestmark = pytest.mark.timeout(120)


def shell_info(**over) -> dict:
    fields = dict(jobid=77, userid=1, shell_rank=0, ranks=[0], counts=[1],
                  taskmap=taskmap.block([1]), service="1-shell-x", jobspec={}, R={},
                  cores=[0], hostname="h", critical=CriticalRanks(ranks="0"))
    fields.update(over)
    return ShellInfo(**fields).as_payload()


def refused(inst, info: dict) -> FluxliteError:
    h = inst.handle()
    with pytest.raises(FluxliteError) as err:
        list(h.stream("rexec.exec", {"kind": "shell", "label": "x.0", "info": info},
                      nodeid=0, timeout=30))
    labels = [p["label"] for p in h.call("rexec.list", nodeid=0)["procs"]]
    assert "x.0" not in labels
    return err.value


def test_rexec_refuses_an_info_for_another_broker(inst1):
    err = refused(inst1, shell_info(ranks=[3]))
    assert err.errnum == errno.EINVAL
    assert "rexec.exec: info.ranks[0] is 3, not this broker's rank 0" in str(err)


def test_rexec_refuses_an_info_missing_a_field_naming_it(inst1):
    info = shell_info()
    del info["service"]
    err = refused(inst1, info)
    assert err.errnum == errno.EPROTO
    assert "rexec.exec: info: object missing required field `service`" in str(err)


def test_rexec_refuses_contradicting_fields(inst1):
    info = dict(shell_info(), counts=[1, 1])
    err = refused(inst1, info)
    assert err.errnum == errno.EINVAL and "info: counts: 2 entries for 1 shells" in str(err)


def test_a_misspelled_hook_fails_the_job_at_load_naming_the_hooks(inst1, tmp_path):
    marker = tmp_path / "ran"
    plugin = tmp_path / "typo.py"
    plugin.write_text(textwrap.dedent("""
        from fluxlite.shell.plugin import ShellPlugin
        class Recorder(ShellPlugin):
            name = "recorder"
            def task_exited(self, task):
                pass
    """))
    cp = inst1.cli("run", "-o", f"plugins={plugin}", "touch", str(marker))
    assert cp.returncode != 0
    lines = [ln for ln in cp.stderr.splitlines() if "FATAL" in ln]
    assert len(lines) == 1, cp.stderr
    assert lines[0].endswith(
        f"{plugin}: plugin 'recorder': task_exited names no shell plugin topic (hooks: "
        "shell_init, shell_start, task_init, task_exec, task_exit, shell_signal, "
        "shell_critical_ranks, shell_lost, shell_tasks_complete, shell_exit)"), lines
    assert not marker.exists()   # no task started


def test_a_user_plugin_works_through_its_context(inst4, tmp_path):
    """Typed facts, a subscription made at shell.init, a call to the leader's
    service served by the plugin itself, and a line in the job's log."""
    log = tmp_path / "calls.log"
    plugin = tmp_path / "ctx.py"
    plugin.write_text(textwrap.dedent(f"""
        from fluxlite.shell.plugin import ShellPlugin, handler

        class Ctx(ShellPlugin):
            name = "ctx"
            def _note(self, text):
                with open({str(log)!r}, "a") as f:
                    f.write(f"{{self.shell.rank}} {{text}}\\n")
            def shell_init(self):
                i = self.shell.info
                self._note(f"info {{i.nshells}} {{i.ntasks}} {{i.counts}} {{i.broker_rank}}")
                self.shell.subscribe("task.exit", self._exited)
            def _exited(self, task):
                self._note(f"exit {{task.rank}} {{task.exitcode}}")
            async def shell_start(self):
                if not self.shell.is_leader:
                    r = await self.shell.call_leader("ctx-hello", {{"from": self.shell.rank}})
                    self._note(f"answered {{r['seen']}}")
                self.shell.log("ctx says hi")
            @handler("ctx-hello")
            def _hello(self, msg, req):
                return {{"seen": msg.payload["from"]}}
    """))
    cp = inst4.cli("run", "-N2", "-n4", "-o", f"plugins={plugin}", "sh", "-c",
                   'exit $FLUXLITE_TASK_RANK', timeout=90)
    assert cp.returncode == 3, cp.stderr
    assert cp.stderr.count("INFO: ctx says hi") == 2, cp.stderr
    lines = sorted(log.read_text().splitlines())
    assert lines == ["0 exit 0 0", "0 exit 1 1", "0 info 2 4 [2, 2] 0",
                     "1 answered 1", "1 exit 2 2", "1 exit 3 3", "1 info 2 4 [2, 2] 1"]


def test_a_plugin_hears_the_signals_the_shell_passes_on(inst1, tmp_path):
    """`shell.signal`: a cancel's SIGTERM reaches the shell, which passes it on to its
    task, then tells the plugins (the task is not reaped yet)."""
    plugin = tmp_path / "sig.py"
    plugin.write_text(textwrap.dedent("""
        from fluxlite.shell.plugin import ShellPlugin
        class Sig(ShellPlugin):
            name = "sig"
            def shell_signal(self, signum):
                alive = [t.rank for t in self.shell.tasks if t.status is None]
                self.shell.log(f"heard signal {signum}, tasks {alive}")
    """))
    h = inst1.handle()
    jobid = jobid_of(inst1.cli("submit", "-o", f"plugins={plugin}", "sleep", "300"))
    wait_event(h, jobid, "shell.start", "exec")
    inst1.cli("cancel", fluid.f58(jobid), check=True)
    r = api.wait(h, jobid, timeout=60)
    assert r["result"] == "CANCELED"
    logged = [e["context"]["message"] for e in api.event_watch(h, jobid, "output", follow=False)
              if e["name"] == "log"]
    assert logged == [f"heard signal {signal.SIGTERM.value}, tasks [0]"], logged

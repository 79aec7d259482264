"""kill -9 a broker: node loss, shrink, critical ranks pushed to the job shell,
doom that ignores non-critical ranks, persistent and non-persistent instances.

Every test kills real broker processes and checks, through the fixture, that
no broker, shell or task process is left behind afterwards."""

import os
import re
import textwrap
import time

import pytest

from fluxlite.client.sync import Handle
from fluxlite.jobapi import api
from fluxlite.testing import jobid_of, wait_event, wait_fifo, wait_pids_gone
from fluxlite.util import fluid


def exceptions(h, jobid):
    return [e["context"] for e in api.event_watch(h, jobid, follow=False)
            if e["name"] == "exception"]


def shell_and_task_pids(inst, rank: int) -> set[int]:
    """Pids below the broker of `rank` (its spawner, job shells, tasks)."""
    broker = inst.broker_pid(rank)
    from fluxlite.util import procs
    return procs.descendants({broker})


@pytest.fixture
def parent(instance_factory):
    # kary:0: every rank a direct child of rank 0, as in Flux's resilience tests
    return instance_factory(4, topo="kary:0", cores_per_rank=2)


def loop_script(tmp_path, fifo, body="fluxlite run -n1 true || echo small job failed",
                count=40, extra_opts="") -> str:
    p = tmp_path / "loop.sh"
    p.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        {extra_opts}
        i=0
        while [ $i -lt {count} ]; do
            {body}
            i=$((i+1))
            if [ $i -eq 3 ]; then echo running > {fifo}; fi
        done
        echo "final: $(fluxlite resource list -no '{{nnodes}}' -s all)"
        fluxlite resource list
        exit 4
        """))
    p.chmod(0o755)
    return str(p)


# ---------------------------------------------------------------- node loss
def test_killed_broker_takes_its_shells_and_tasks(instance_factory):
    inst = instance_factory(4, setattrs=["tbon.lost-timeout=none"])
    h = inst.handle()
    jobid = jobid_of(inst.cli("submit", "-N4", "sh", "-c", "sleep 300 & sleep 300"))
    wait_event(h, jobid, "shell.start", "exec")
    below = shell_and_task_pids(inst, 3)
    assert len(below) >= 4  # spawner, shell, sh, sleeps
    t0 = time.monotonic()
    inst.kill_broker(3)
    assert wait_pids_gone(below, 5) == set(), "processes of the dead broker survived"
    gone = time.monotonic() - t0
    inst.wait_membership(lambda s: 3 in s.get("lost", set()), timeout=5)
    r = api.wait(h, jobid, timeout=30)
    ex = [e for e in exceptions(h, jobid) if e["type"] == "node-failure"][0]
    assert ex["severity"] == 0 and ex["context"]["rank"] == 3
    assert ex["context"]["shell_rank"] == 3 and ex["context"]["host"] == os.uname().nodename
    assert r["result"] == "FAILED"
    assert "lost" in inst.cli("overlay", "status", check=True).stdout
    assert re.search(r"lost\s+\S*\s+1", inst.cli("resource", "status", check=True).stdout)
    inst.cli("run", "-N3", "true", check=True)  # the rest keeps serving
    print(f"processes of the killed broker gone after {gone:.3f}s")


def test_run_on_two_nodes_loses_its_second_rank(instance_factory):
    inst = instance_factory(2)
    import subprocess

    from fluxlite.testing import _readline, fluxlite_command
    p = subprocess.Popen(fluxlite_command() + ["run", "-N2", "sh", "-c",
                                               "echo ready; exec sleep 60"],
                         env=inst.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert _readline(p.stdout, 30) and _readline(p.stdout, 30)  # both tasks run
    inst.kill_broker(1)
    assert p.wait(30) == 143  # rank 0's task was terminated (SIGTERM), as in Flux
    err = p.stderr.read().decode()
    assert re.search(r"type=node-failure severity=0 node failure on \S+ \(rank 1, shell rank 1\)",
                     err), err


def test_shrink_fails_what_no_longer_fits(parent):
    h = parent.handle()
    running = jobid_of(parent.cli("submit", "-N3", "sleep", "300"))
    wait_event(h, running, "start")
    small = jobid_of(parent.cli("submit", "-N1", "sleep", "300"))
    wait_event(h, small, "start")
    pending = jobid_of(parent.cli("submit", "-N4", "true"))
    behind = jobid_of(parent.cli("submit", "-N1", "true"))  # queued behind it (FIFO)
    assert api.info(h, pending)["state"] == "SCHED"  # FIFO: waits for whole nodes
    parent.kill_broker(3)  # rank 3 runs the -N1 job; the -N3 job is on 0-2
    r = api.wait(h, pending, timeout=10)
    assert r["result"] == "FAILED"
    assert "unsatisfiable request: need 4 exclusive node(s) with 1 core(s) each, " \
        "only 3 eligible" in r["errstr"]
    assert api.wait(h, small, timeout=10)["result"] == "FAILED"  # it ran on the lost rank
    assert api.info(h, running)["state"] == "RUN"  # untouched
    assert api.info(h, behind)["state"] == "SCHED"
    cp = parent.cli("run", "-N4", "true")
    assert cp.returncode == 1 and "only 3 eligible" in cp.stderr
    out = parent.cli("resource", "list", "-s", "all", check=True).stdout
    assert re.search(r"all\s+3\s+6", out), out
    parent.cli("cancel", fluid.f58(running), check=True)
    api.wait(h, running, timeout=30)
    # the job queued behind the refused one runs once there is room
    assert api.wait(h, behind, timeout=30)["result"] == "COMPLETED"


# ----------------------------------------------- persistent instance jobs
def test_batch_survives_loss_of_a_leaf(parent, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    h = parent.handle()
    jobid = jobid_of(parent.cli("batch", "-N2", "--output", str(out),
                                loop_script(tmp_path, fifo)))
    wait_fifo(fifo)
    parent.kill_broker(1)  # hosts the child's rank 1
    r = api.wait(h, jobid, timeout=120)
    text = out.read_text()
    assert r["returncode"] == 4, text          # the script ran to its end
    assert "final: 1" in text                 # the child shrank to one rank (-s all)
    ex = exceptions(h, jobid)
    assert [(e["type"], e["severity"]) for e in ex] == [("node-failure", 2)]
    assert ex[0]["context"]["shell_rank"] == 1 and ex[0]["context"]["rank"] == 1


def test_batch_with_exit_timeout_still_survives(parent, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    h = parent.handle()
    script = tmp_path / "outlive.sh"
    # small jobs until the child has shrunk, then 2 s more: a timer that the loss had
    # armed (exit-timeout=1s) would fire in that time, so surviving proves it ignored
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo running > {fifo}
        while [ "$(fluxlite resource list -s all -no '{{nnodes}}')" != 1 ]; do
            fluxlite run -n1 true
        done
        sleep 2
        echo "final: $(fluxlite resource list -s all -no '{{nnodes}}')"
        exit 4
        """))
    script.chmod(0o755)
    jobid = jobid_of(parent.cli("batch", "-N2", "-o", "exit-timeout=1s", "--output", str(out),
                                str(script)))
    wait_fifo(fifo)
    parent.kill_broker(1)
    r = api.wait(h, jobid, timeout=120)
    assert r["returncode"] == 4, out.read_text()
    assert "final: 1" in out.read_text()
    ignored = [e["context"] for e in api.event_watch(h, jobid, "exec", follow=False)
               if e["name"] == "doom.ignore"]
    assert {"shell_rank": 1, "what": "lost shell"} in ignored
    assert not [e for e in exceptions(h, jobid) if e["severity"] == 0]


def test_batch_no_persist_ends_promptly(parent, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    h = parent.handle()
    jobid = jobid_of(parent.cli("batch", "-N2", "--no-persist", "--output",
                                str(tmp_path / "out"), loop_script(tmp_path, fifo, count=400)))
    wait_fifo(fifo)
    t0 = time.monotonic()
    parent.kill_broker(1)
    r = api.wait(h, jobid, timeout=30)
    elapsed = time.monotonic() - t0
    fatal = [e for e in exceptions(h, jobid) if e["severity"] == 0]
    # the parent (its job-exec losing shell rank 1) and the child (its rank 0 losing
    # critical rank 1) both see the loss; whichever speaks first, it is a node-failure
    assert fatal and fatal[0]["type"] == "node-failure", fatal
    host = os.uname().nodename
    parent_view = [e for e in fatal if e.get("context", {}).get("reason") == "node failure"]
    assert parent_view, fatal
    assert f"node failure on {host} (rank 1, shell rank 1)" in parent_view[0]["note"]
    assert parent_view[0]["context"] == {"shell_rank": 1, "rank": 1, "host": host,
                                         "reason": "node failure"}
    assert r["result"] == "FAILED"
    # promptly: the 400-job script was cut short, not left to run to its end (the time
    # itself is a benchmark figure: `make bench`, figure 11)
    assert "final:" not in (tmp_path / "out").read_text()
    print(f"--no-persist job inactive {elapsed:.3f}s after the kill")


def test_full_size_jobs_fail_fast_after_a_loss(parent, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    out = tmp_path / "out"
    script = loop_script(tmp_path, fifo, count=8,
                         body='fluxlite run -N2 true 2>>' + str(tmp_path / "err") +
                              ' || echo "full-size job failed"')
    h = parent.handle()
    jobid = jobid_of(parent.cli("batch", "-N2", "--output", str(out), script))
    wait_fifo(fifo)
    parent.kill_broker(1)
    r = api.wait(h, jobid, timeout=120)
    text = out.read_text()
    assert r["returncode"] == 4, text  # the script continued to its end
    assert "full-size job failed" in text
    assert "unsatisfiable request: need 2 exclusive node(s) with 1 core(s) each, " \
        "only 1 eligible" in (tmp_path / "err").read_text()


def test_interior_rank_is_critical_leaf_is_not(instance_factory):
    for victim, fatal in ((3, False), (1, True)):
        inst = instance_factory(4, topo="kary:0")
        h = inst.handle()
        jobid = jobid_of(inst.cli("alloc", "-N4", "--bg", "--broker-opts=-Stbon.topo=kary:2",
                                  timeout=60))
        assert h.call("job-exec.critical-ranks-get", {"id": jobid})["ranks"] == "0-1"
        inst.kill_broker(victim)
        ex = None
        for x in api.event_watch(h, jobid, timeout=30):
            if x["name"] == "exception":
                ex = x["context"]
                break
        assert ex["type"] == "node-failure" and ex["context"]["shell_rank"] == victim
        assert ex["severity"] == (0 if fatal else 2)
        if not fatal:
            uri = inst.cli("uri", fluid.f58(jobid), check=True).stdout.strip()
            with Handle(uri) as child:  # the child carries on without its leaf
                assert child.call("broker.ping", nodeid=0)["rank"] == 0
            inst.cli("cancel", fluid.f58(jobid), check=True)
        assert api.wait(h, jobid, timeout=60)["result"] in ("FAILED", "CANCELED")
        inst.stop()


def test_plugin_sees_critical_ranks_updates_and_loss(parent, tmp_path):
    log = tmp_path / "calls.log"
    plugin = tmp_path / "watch.py"
    plugin.write_text(textwrap.dedent(f"""
        from fluxlite.shell.plugin import ShellPlugin

        class Watcher(ShellPlugin):
            name = "watcher"
            def _note(self, text):
                with open({str(log)!r}, "a") as f:
                    f.write(text + "\\n")
            def shell_critical_ranks(self, ranks, seq):
                self._note(f"critical {{','.join(map(str, sorted(ranks)))}} seq={{seq}}")
            def shell_lost(self, shell_rank, severity, message):
                self._note(f"lost {{shell_rank}} severity={{severity}}")
    """))
    h = parent.handle()
    jobid = jobid_of(parent.cli("alloc", "-N4", "--bg", "-o", f"plugins={plugin}", timeout=60))
    # the child narrowed the set to its rank 0 (kary:32: no interior ranks) when it came up
    h.call("job-exec.critical-ranks", {"id": jobid, "ranks": "0-1"})
    h.call("job-exec.critical-ranks", {"id": jobid, "ranks": "0,2"})
    parent.kill_broker(3)
    wait_event(h, jobid, "exception")
    parent.cli("cancel", fluid.f58(jobid), check=True)
    api.wait(h, jobid, timeout=60)
    lines = log.read_text().splitlines()
    assert lines[:4] == ["critical 0,1,2,3 seq=0", "critical 0 seq=1",
                         "critical 0,1 seq=2", "critical 0,2 seq=3"]
    assert "lost 3 severity=2" in lines


def test_shell_exit_timeout_names_lingering_ranks(instance_factory):
    inst = instance_factory(2, setattrs=["exec.shell-exit-timeout=1s"])
    h = inst.handle()
    jobid = jobid_of(inst.cli("submit", "-N2", "-o", "exit-timeout=none", "sh", "-c",
                              "test $FLUXLITE_TASK_RANK -eq 1 && exec sleep 300; sleep 0.5"))
    wait_event(h, jobid, "shell.start", "exec")
    h.call("job-exec.critical-ranks", {"id": jobid, "ranks": "0"})
    r = api.wait(h, jobid, timeout=30)
    assert r["result"] == "FAILED"
    assert re.search(r"job shells still active on \S+ \(rank 1\) 1s after leader shell exit",
                     r["errstr"]), r["errstr"]
    ex = [e for e in api.event_watch(h, jobid, "exec", follow=False) if e["name"] == "shell-exit"]
    assert ex[0]["context"]["active_ranks"] == "1"


def test_leader_shell_is_always_critical(instance_factory):
    inst = instance_factory(3)
    h = inst.handle()
    inst.cli("resource", "drain", "0", check=True)
    jobid = jobid_of(inst.cli("submit", "-N2", "sleep", "300"))  # on ranks 1-2
    wait_event(h, jobid, "shell.start", "exec")
    h.call("job-exec.critical-ranks", {"id": jobid, "ranks": "1"})
    assert h.call("job-exec.critical-ranks-get", {"id": jobid})["ranks"] == "0-1"
    inst.kill_broker(1)  # hosts shell rank 0
    r = api.wait(h, jobid, timeout=30)
    fatal = [e for e in exceptions(h, jobid) if e["severity"] == 0]
    assert fatal and fatal[0]["type"] == "node-failure" and r["result"] == "FAILED"

"""Jobs end to end through the real CLI: exit codes, doom (a port of flux-core's
t2614-job-shell-doom.t), cancel, time limits, unsatisfiable requests, output,
many jobs in a row, plugins."""

import json
import os
import re
import textwrap
import time

import pytest

from fluxlite.jobapi import api
from fluxlite.testing import one_error_line
from fluxlite.util import fluid


@pytest.fixture(scope="module")
def early_exit_script(tmp_path_factory):
    """Task rank 1 exits 200 at once; the others sleep 30 s."""
    p = tmp_path_factory.mktemp("doom") / "testscript.sh"
    p.write_text("#!/bin/sh\ntest $FLUXLITE_TASK_RANK -eq 1 && exit 200\nexec sleep 30\n")
    p.chmod(0o755)
    return str(p)


def jobid_of(cp) -> int:
    return fluid.parse(cp.stdout.strip().splitlines()[0])


def exec_events(inst, jobid):
    return [e["name"] for e in api.event_watch(inst.handle(), jobid, "exec")]


# ------------------------------------------------------------------ exit codes
@pytest.mark.parametrize("cmd,code,words", [
    (["true"], 0, None),
    (["false"], 1, "task(s) exited with exit code 1"),
    (["sh", "-c", "exit 3"], 3, "task(s) exited with exit code 3"),
    (["sh", "-c", "kill -TERM $$"], 143, "task(s) Terminated"),
    (["nosuchcommand-xyz"], 127, "start failed: nosuchcommand-xyz: No such file or directory"),
])
def test_run_exit_codes(inst4, cmd, code, words):
    cp = inst4.cli("run", *cmd)
    assert cp.returncode == code, cp.stderr
    if words:
        assert words in cp.stderr


def test_run_streams_output_of_every_task(inst4):
    cp = inst4.cli("run", "-n4", "sh", "-c", "echo hello from $FLUXLITE_TASK_RANK; "
                                            "echo err $FLUXLITE_TASK_RANK >&2", check=True)
    assert sorted(cp.stdout.splitlines()) == [f"hello from {r}" for r in range(4)]
    assert sorted(cp.stderr.splitlines()) == [f"err {r}" for r in range(4)]
    cp = inst4.cli("run", "-N4", "-l", "printenv", "FLUXLITE_TASK_RANK", check=True)
    assert sorted(cp.stdout.splitlines()) == [f"{r}: {r}" for r in range(4)]


def test_task_environment(inst4):
    cp = inst4.cli("run", "-N2", "-n4", "sh", "-c",
                   'echo $FLUXLITE_TASK_RANK $FLUXLITE_TASK_LOCAL_ID $FLUXLITE_JOB_SIZE '
                   '$FLUXLITE_JOB_NNODES $FLUXLITE_JOB_ID', check=True)
    rows = sorted(tuple(line.split()) for line in cp.stdout.splitlines())
    assert [r[:4] for r in rows] == [("0", "0", "4", "2"), ("1", "1", "4", "2"),
                                     ("2", "0", "4", "2"), ("3", "1", "4", "2")]
    assert len({r[4] for r in rows}) == 1 and rows[0][4].startswith(("ƒ", "f"))


def test_job_tmpdir_is_private_and_goes_with_the_job(inst4):
    """FLUXLITE_JOB_TMPDIR: one directory per job per rank, writable by the tasks,
    gone once the job is over."""
    cp = inst4.cli("run", "-N2", "sh", "-c",
                   'test -d "$FLUXLITE_JOB_TMPDIR" && touch "$FLUXLITE_JOB_TMPDIR/x" && '
                   'echo "$FLUXLITE_JOB_TMPDIR"', check=True)
    dirs = set(cp.stdout.split())
    assert len(dirs) == 2
    assert not any(os.path.exists(d) for d in dirs)


def test_output_to_file(inst1, tmp_path):
    cp = inst1.cli("run", "--output", str(tmp_path / "out-{{id}}.txt"), "-l", "sh", "-c",
                   "echo one; echo two >&2", check=True)
    assert cp.stdout == ""
    files = list(tmp_path.glob("out-*.txt"))
    assert len(files) == 1
    assert sorted(files[0].read_text().splitlines()) == ["0: one", "0: two"]


# ------------------------------------------------------------------------ doom
def test_first_task_exit_posts_shell_task_exit(inst1):
    jobid = jobid_of(inst1.cli("submit", "true", check=True))
    cp = inst1.cli("job", "wait-event", "-t", "20", "-p", "exec", fluid.f58(jobid),
                   "shell.task-exit", check=True)
    assert "shell.task-exit" in cp.stdout and "exitcode=0" in cp.stdout


@pytest.mark.parametrize("nodes", [None, "2"])
def test_exit_timeout_fails_job(instance_factory, early_exit_script, nodes):
    inst = instance_factory(2)
    args = ["run", "-n2"] + (["-N", nodes] if nodes else []) + \
        ["-o", "exit-timeout=1s", early_exit_script]
    cp = inst.cli(*args, timeout=60)
    assert cp.returncode != 0
    assert re.search(r"exception.*type=exec.*Exit 200.*exit-timeout=1s has expired", cp.stderr)


@pytest.mark.parametrize("nodes", [None, "2"])
def test_exit_on_error_fails_job(instance_factory, early_exit_script, nodes):
    inst = instance_factory(2)
    args = ["run", "-n2"] + (["-N", nodes] if nodes else []) + \
        ["-o", "exit-on-error", early_exit_script]
    cp = inst.cli(*args, timeout=60)
    assert cp.returncode != 0
    assert re.search(r"task rank 1 on host \S+ failed \(Exit 200\) and exit-on-error is set",
                     cp.stderr)


@pytest.mark.parametrize("option", ["exit-timeout=1s", "exit-on-error"])
def test_killed_follower_shell_ends_job(instance_factory, option):
    """A task kills its own shell (kill -9 $PPID): that shell is lost and the job ends."""
    inst = instance_factory(2)
    cp = inst.cli("run", "-N2", "-o", option, "sh", "-c",
                  'test $FLUXLITE_TASK_RANK -eq 1 && kill -9 $PPID; exec sleep 30', timeout=60)
    assert cp.returncode != 0
    assert re.search(r"type=node-failure severity=0 shell rank 1 .*Killed", cp.stderr), cp.stderr


def test_sigsegv_with_exit_on_error(inst1):
    cp = inst1.cli("submit", "-o", "exit-on-error", "sh", "-c", "kill -SEGV $$", check=True)
    jobid = jobid_of(cp)
    api.wait(inst1.handle(), jobid)
    events = list(api.event_watch(inst1.handle(), jobid))
    finish = [e for e in events if e["name"] == "finish"][0]
    assert finish["context"]["status"] == 35584
    notes = [e["context"]["note"] for e in events if e["name"] == "exception"]
    assert any("Segmentation fault" in n and "exit-on-error" in n for n in notes)


def test_sigsegv_with_exit_timeout(instance_factory):
    inst = instance_factory(2)
    cp = inst.cli("run", "-n2", "-o", "exit-timeout=0.5s", "sh", "-c",
                  'test $FLUXLITE_TASK_RANK -eq 1 && kill -SEGV $$; exec sleep 30', timeout=60)
    assert cp.returncode != 0
    assert re.search(r"task rank 1 .*\(Segmentation fault\) and exit-timeout=0.5s has expired",
                     cp.stderr)


@pytest.mark.parametrize("value", ["aaa", "false", "-1"])
def test_bad_exit_timeout_rejected_at_submit(inst1, value):
    cp = inst1.cli("run", "-o", f"exit-timeout={value}", "true")
    assert cp.returncode != 0
    assert "exit-timeout is not a valid Flux Standard Duration" in cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1
    assert api.list_jobs(inst1.handle(), "all") == []  # nothing was submitted


@pytest.mark.parametrize("value", ["none", "100", "42.34"])
def test_good_exit_timeout_accepted(inst1, value):
    inst1.cli("run", "-o", f"exit-timeout={value}", "true", check=True)


@pytest.mark.parametrize("nodes", ["1", "2"])
def test_lingering_process_does_not_trigger_timer(instance_factory, nodes):
    """A task leaves a background process behind: the job still completes, and the
    straggler is killed with its shell (the instance checks for leaks at teardown)."""
    inst = instance_factory(2)
    cp = inst.cli("run", "-N", nodes, "-n2", "-o", "exit-timeout=0.5s", "sh", "-c",
                  "sleep 30 >/dev/null 2>&1 & sleep 1.5", timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert "exception" not in cp.stderr


def test_daemon_in_a_session_of_its_own_dies_with_its_job(inst1):
    """A task's child that escapes its process group and session (setsid) is an
    orphan of the spawner once the job's shell exits; it is killed then, not at
    instance teardown."""
    from fluxlite.testing import wait_pids_gone
    cp = inst1.cli("run", "sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!",
                   timeout=60)
    assert cp.returncode == 0, cp.stderr
    pid = int(cp.stdout.split()[0])
    assert wait_pids_gone({pid}, timeout=10) == set()


def test_malformed_shell_option_is_an_error(inst1):
    cp = inst1.cli("run", "-o", "exit-timeout=soon", "true")
    assert cp.returncode != 0 and "invalid shell option exit-timeout='soon'" in cp.stderr


# ------------------------------------------------------- cancel, limits, fit
def test_cancel_running_job(inst4):
    h = inst4.handle()
    jobid = jobid_of(inst4.cli("submit", "-N2", "sleep", "60", check=True))
    for e in api.event_watch(h, jobid):
        if e["name"] == "start":
            break
    inst4.cli("cancel", fluid.f58(jobid), check=True)
    r = api.wait(h, jobid, timeout=30)
    assert r["result"] == "CANCELED" and not r["success"]
    cp = inst4.cli("job", "attach", fluid.f58(jobid))
    assert cp.returncode == 143
    assert "type=cancel severity=0" in cp.stderr


def test_cancel_pending_job(instance_factory):
    inst = instance_factory(1, cores_per_rank=1)
    h = inst.handle()
    blocker = jobid_of(inst.cli("submit", "sleep", "60", check=True))
    pending = jobid_of(inst.cli("submit", "true", check=True))
    assert api.info(h, pending)["state"] == "SCHED"
    inst.cli("cancel", fluid.f58(pending), check=True)
    assert api.wait(h, pending, timeout=30)["result"] == "CANCELED"
    names = [e["name"] for e in api.event_watch(h, pending)]
    assert "alloc" not in names and names[-1] == "clean"
    inst.cli("cancel", fluid.f58(blocker), check=True)
    assert api.wait(h, blocker, timeout=30)["result"] == "CANCELED"


def test_time_limit(inst1):
    cp = inst1.cli("run", "-t", "0.5s", "sleep", "30", timeout=60)
    assert cp.returncode == 142
    assert "type=timeout severity=0 resource allocation expired" in cp.stderr
    job = api.list_jobs(inst1.handle(), "all")[0]
    assert job["result"] == "TIMEOUT"


def test_bad_time_limit(inst1):
    cp = inst1.cli("run", "-t", "soon", "true")
    assert cp.returncode == 2 and "is not MINUTES or a Flux Standard Duration" in cp.stderr


def test_unsatisfiable_is_denied_by_the_scheduler(inst4):
    # as Flux's (job-ingest without a feasibility validator, the default): the job is
    # taken, then denied by the scheduler, a fatal alloc exception
    known = len(api.list_jobs(inst4.handle(), "all"))
    cp = inst4.cli("run", "-N", "99", "true")
    assert cp.returncode == 1
    assert re.fullmatch(r"\d+\.\d{3}s: job\.exception \S+ type=alloc severity=0 "
                        r"unsatisfiable request: need 99 exclusive node\(s\) with 1 core\(s\) "
                        r"each, only 4 eligible", one_error_line(cp))
    cp = inst4.cli("submit", "-n", "9999", "true")
    assert cp.returncode == 0 and cp.stderr == ""
    jobid = fluid.parse(cp.stdout.strip())
    result = api.wait(inst4.handle(), jobid)
    assert not result["success"]
    assert result["errstr"] == "Fatal exception type=alloc unsatisfiable request: " \
        "need 9999 slot(s) of 1 core(s), only 8 such slot(s) available (total cores: 8)"
    assert len(api.list_jobs(inst4.handle(), "all")) == known + 2
    cp = inst4.cli("run", "-N2", "-n1", "true")
    assert cp.returncode != 0 and "must not be greater than task count" in cp.stderr


def test_kill_signal(inst1):
    h = inst1.handle()
    jobid = jobid_of(inst1.cli("submit", "sleep", "60", check=True))
    for e in api.event_watch(h, jobid):
        if e["name"] == "start":
            break
    inst1.cli("job", "kill", "-s", "USR1", fluid.f58(jobid), check=True)
    r = api.wait(h, jobid, timeout=30)
    assert r["returncode"] == 128 + 10 and r["result"] == "FAILED"
    cp = inst1.cli("job", "kill", "-s", "NOSUCH", fluid.f58(jobid))
    assert cp.returncode != 0 and "invalid signal" in cp.stderr


def test_job_kill_signals_the_tasks_not_the_shell(instance_factory):
    """SIGKILL and SIGSTOP cannot be forwarded by a shell: they go to the tasks, so
    the job ends as 'task(s) Killed' (137) with no exception, and a stopped job's
    shells keep serving."""
    from fluxlite.testing import tagged_processes
    inst = instance_factory(2)
    h = inst.handle()

    def state_of(name: str) -> set[str]:
        out = set()
        for pid, cmd in tagged_processes(inst.tag).items():
            if cmd.startswith(name):
                with open(f"/proc/{pid}/stat") as f:
                    out.add(f.read().rsplit(")", 1)[1].split()[0])
        return out

    jobid = jobid_of(inst.cli("submit", "-N2", "sleep", "300", check=True))
    for e in api.event_watch(h, jobid, "exec", timeout=30):
        if e["name"] == "shell.start":
            break
    inst.cli("job", "kill", "-s", "STOP", fluid.f58(jobid), check=True)
    # a stop has no event to wait on: look at the tasks' state, for a bounded time
    deadline = time.monotonic() + 10
    while state_of("sleep") != {"T"} and time.monotonic() < deadline:
        time.sleep(0.05)
    assert state_of("sleep") == {"T"}
    assert "T" not in state_of("fluxlite-shell")
    inst.cli("job", "kill", "-s", "CONT", fluid.f58(jobid), check=True)
    inst.cli("job", "kill", "-s", "KILL", fluid.f58(jobid), check=True)
    r = api.wait(h, jobid, timeout=30)
    assert r["returncode"] == 137 and r["result"] == "FAILED"
    assert not [e for e in api.event_watch(h, jobid, follow=False) if e["name"] == "exception"]


def test_many_jobs_in_a_row(inst4):
    """More jobs than `submit --wait` keeps waits in flight (WAIT_WINDOW): the last
    one's exit code, the largest, is the command's."""
    from fluxlite.jobapi.api import WAIT_WINDOW
    n = WAIT_WINDOW + 44
    cp = inst4.cli("submit", f"--cc=1-{n}", "--quiet", "--wait", "sh", "-c",
                   f"exit $(({{cc}} == {n} ? 5 : {{cc}} % 3))", timeout=300)
    assert cp.returncode == 5
    jobs = api.list_jobs(inst4.handle(), "all")
    assert len(jobs) == n and all(j["state"] == "INACTIVE" for j in jobs)
    codes = sorted(j["returncode"] for j in jobs)
    assert codes.count(5) == 1
    assert [codes.count(c) for c in (0, 1, 2)] == [len([i for i in range(1, n) if i % 3 == c])
                                                   for c in (0, 1, 2)]
    for j in jobs:
        assert j["result"] == ("COMPLETED" if j["returncode"] == 0 else "FAILED")


def test_eventlogs(inst4):
    jobid = jobid_of(inst4.cli("submit", "-N2", "true", check=True))
    api.wait(inst4.handle(), jobid)
    main = [e["name"] for e in api.event_watch(inst4.handle(), jobid)]
    assert main == ["submit", "validate", "depend", "priority", "alloc", "start", "finish",
                    "release", "free", "clean"]
    ex = exec_events(inst4, jobid)
    assert ex[:4] == ["init", "starting", "shell.init", "shell.start"]
    assert ex[-2:] == ["complete", "done"]
    cp = inst4.cli("job", "eventlog", "--format", "json", fluid.f58(jobid), check=True)
    assert [json.loads(line)["name"] for line in cp.stdout.splitlines()] == main
    R = json.loads(inst4.cli("job", "info", fluid.f58(jobid), "R", check=True).stdout)
    assert R["execution"]["R_lite"][0]["rank"] == "0-1"
    cp = inst4.cli("job", "eventlog", "nosuchjob")
    assert cp.returncode != 0 and "error parsing jobid" in cp.stderr


def test_one_shell_eventlog_order(inst4):
    """A job's only shell does not wait for job-exec's barrier answers, but it exits
    only once they came: every exec eventlog still has its barriers before the end."""
    cp = inst4.cli("submit", "--cc=1-20", "--wait", "true", check=True, timeout=120)
    for jobid in map(fluid.parse, cp.stdout.split()):
        assert exec_events(inst4, jobid) == ["init", "starting", "shell.init", "shell.start",
                                             "shell.task-exit", "shell-exit", "complete",
                                             "done"]


# --------------------------------------------------------------------- plugins
@pytest.mark.parametrize("nodes", [1, 2])
def test_user_plugin_callbacks(inst4, tmp_path, nodes):
    log = tmp_path / "calls.log"
    plugin = tmp_path / "recorder.py"
    plugin.write_text(textwrap.dedent(f"""
        from fluxlite.shell.plugin import ShellPlugin

        class Recorder(ShellPlugin):
            name = "recorder"
            def _note(self, what):
                with open({str(log)!r}, "a") as f:
                    f.write(f"{{self.shell.rank}} {{what}}\\n")
            def shell_init(self): self._note("shell.init")
            def task_init(self, task): self._note(f"task.init {{task.rank}}")
            def task_exec(self, task): self._note(f"task.exec {{task.rank}}")
            def shell_start(self): self._note("shell.start")
            def task_exit(self, task): self._note(f"task.exit {{task.rank}} {{task.exitcode}}")
            def shell_critical_ranks(self, ranks, seq):
                self._note(f"critical {{sorted(ranks)}} {{seq}}")
            def shell_tasks_complete(self): self._note("shell.tasks-complete")
            def shell_exit(self): self._note("shell.exit")
    """))
    inst4.cli("run", f"-N{nodes}", "-o", f"plugins={plugin}", "sh", "-c", "exit 0", check=True)
    lines = log.read_text().splitlines()
    for rank in map(str, range(nodes)):
        mine = [line.split(" ", 1)[1] for line in lines if line.startswith(rank + " ")]
        assert mine[0] == "shell.init" and mine[-1] == "shell.exit"
        assert mine.index("shell.start") > mine.index(f"task.exec {rank}")
        assert f"task.exit {rank} 0" in mine
    leader = [line for line in lines if line.startswith("0 ")]
    assert f"0 critical {list(range(nodes))} 0" in leader
    assert "0 shell.tasks-complete" in leader


def test_broken_user_plugin_fails_the_job(inst1, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("raise RuntimeError('nope')\n")
    cp = inst1.cli("run", "-o", f"plugins={bad}", "true")
    assert cp.returncode != 0 and "RuntimeError: nope" in cp.stderr
    cp = inst1.cli("run", "-o", f"plugins={tmp_path / 'missing.py'}", "true")
    assert cp.returncode != 0 and "no such file" in cp.stderr



# -------------------------------------------------------------- interactive
def _start_run(inst, *args):
    """`fluxlite run` in the background; its task prints 'ready' once it runs."""
    import subprocess

    from fluxlite.testing import _readline, fluxlite_command
    p = subprocess.Popen(fluxlite_command() + ["run", *args], env=inst.env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert _readline(p.stdout, 30).strip() == "ready"
    return p


def test_ctrl_c_twice_cancels(inst1):
    import signal
    # the task ignores SIGINT, so only the cancel can end it
    p = _start_run(inst1, "sh", "-c", "trap '' INT; echo ready; while :; do sleep 1; done")
    from fluxlite.testing import _readline
    p.send_signal(signal.SIGINT)
    # signals do not queue: send the second once the first has been handled
    assert "one more ctrl-C within 2s to cancel" in _readline(p.stderr, 30)
    p.send_signal(signal.SIGINT)
    assert p.wait(30) != 0
    err = p.stderr.read().decode()
    assert "type=cancel" in err and "interrupted by ctrl-C" in err
    assert api.list_jobs(inst1.handle(), "all")[0]["result"] == "CANCELED"


def test_submit_wait_and_progress(inst1):
    cp = inst1.cli("submit", "--cc=1-5", "--wait", "--progress", "true", check=True)
    assert len(cp.stdout.split()) >= 5
    cp = inst1.cli("submit", "--cc=1-3", "--quiet", "--wait", "sh", "-c", "exit {cc}")
    assert cp.returncode == 3 and cp.stdout == ""


def test_job_wait_all_and_raise(inst1):
    ids = [jobid_of(inst1.cli("submit", "sleep", "60", check=True)) for _ in range(2)]
    for i in ids:
        inst1.cli("job", "raise", "-t", "test", "-s", "0", fluid.f58(i), "raised", "by",
                  "test", check=True)
    cp = inst1.cli("job", "wait", "--all")
    assert cp.returncode == 1 and "raised by test" in cp.stderr
    events = list(api.event_watch(inst1.handle(), ids[0]))
    ex = [e for e in events if e["name"] == "exception"][0]["context"]
    assert (ex["type"], ex["severity"], ex["note"]) == ("test", 0, "raised by test")
    cp = inst1.cli("job", "raise", fluid.f58(ids[0]), "again")
    assert cp.returncode != 0 and "inactive" in cp.stderr


def test_submit_watch_shows_output(inst1):
    cp = inst1.cli("submit", "--cc=1-2", "--watch", "sh", "-c", "echo out {cc}; exit {cc}")
    assert cp.returncode == 2
    lines = cp.stdout.splitlines()
    assert "out 1" in lines and "out 2" in lines


def test_vanished_watchers_leave_no_state(inst1):
    """CLIs that exit, and one killed mid-stream, leave no watch behind in the KVS."""
    import signal
    import subprocess

    from fluxlite.testing import _readline, fluxlite_command
    h = inst1.handle()
    for _ in range(3):
        inst1.cli("run", "true", check=True)
    jobid = jobid_of(inst1.cli("submit", "sleep", "60", check=True))
    follower = subprocess.Popen(fluxlite_command() + ["job", "eventlog", "-F",
                                                      fluid.f58(jobid)],
                                env=inst1.env, stdout=subprocess.PIPE)
    assert "submit" in _readline(follower.stdout, 30)
    assert h.call("kvs.stats", nodeid=0)["watchers"] == 1
    follower.send_signal(signal.SIGKILL)
    follower.wait()
    inst1.cli("cancel", fluid.f58(jobid), check=True)
    api.wait(h, jobid, timeout=30)
    assert h.call("kvs.stats", nodeid=0)["watchers"] == 0


def test_shell_init_failure_is_a_clear_exit_1(inst1, tmp_path):
    cp = inst1.cli("run", "-o", f"output.stdout.path={tmp_path}/no/such/dir/out", "true")
    assert cp.returncode == 1, cp.stderr
    assert "No such file or directory" in cp.stderr and "Terminated" not in cp.stderr


def test_user_plugin_options(inst1, tmp_path):
    plugin = tmp_path / "opt.py"
    plugin.write_text(
        "from fluxlite.shell.plugin import ShellPlugin\n"
        "def positive(v):\n"
        "    if int(v) <= 0: raise ValueError('must be positive')\n"
        "class P(ShellPlugin):\n"
        "    name = 'p'\n"
        "    options = {'p.count': positive}\n")
    out = tmp_path / "out"
    inst1.cli("run", "-o", f"plugins={plugin}", "-o", "p.count=2", "-o",
              f"output.stdout.path={out}", "echo", "hi", check=True)
    assert out.read_text() == "hi\n"
    cp = inst1.cli("run", "-o", f"plugins={plugin}", "-o", "p.count=0", "true")
    assert cp.returncode != 0 and "invalid shell option p.count=0: must be positive" in cp.stderr
    # a name no plugin claims is accepted with one warning line (Flux's are open)
    cp = inst1.cli("run", "-o", f"plugins={plugin}", "-o", "q.other=1", "true")
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr.count("shell option 'q.other' is not known") == 1, cp.stderr


def test_exit_on_error_false_is_off(inst1):
    inst1.cli("run", "-n2", "-o", "exit-on-error=FALSE", "sh", "-c",
              "test $FLUXLITE_TASK_RANK -eq 1 && exit 1; sleep 0.3", timeout=60)
    job = api.list_jobs(inst1.handle(), "all")[0]
    assert job["returncode"] == 1 and job["exception"]["occurred"] is False


def test_exclusive_slots_get_whole_nodes(instance_factory):
    inst = instance_factory(2, cores_per_rank=2)
    h = inst.handle()
    first = jobid_of(inst.cli("submit", "sleep", "60", check=True))
    for e in api.event_watch(h, first):
        if e["name"] == "alloc":
            break
    excl = jobid_of(inst.cli("submit", "-x", "true", check=True))
    api.wait(h, excl, timeout=30)
    info = api.info(h, excl)
    assert info["ranks"] == "1" and info["ncores"] == 2  # not beside the first job
    inst.cli("cancel", fluid.f58(first), check=True)
    api.wait(h, first, timeout=30)


def test_relative_plugin_path_is_the_submitters(inst1, tmp_path):
    (tmp_path / "p.py").write_text("from fluxlite.shell.plugin import ShellPlugin\n"
                                   "class P(ShellPlugin):\n    name = 'p'\n")
    inst1.cli("run", "-o", "plugins=p.py", "true", check=True, cwd=str(tmp_path))


def test_wait_reports_a_cancel(inst1):
    jobid = jobid_of(inst1.cli("submit", "sleep", "60", check=True))
    inst1.cli("cancel", fluid.f58(jobid), check=True)
    cp = inst1.cli("job", "wait", fluid.f58(jobid))
    assert cp.returncode == 1 and cp.stderr.endswith(": Fatal exception type=cancel \n")


def test_run_forwards_stdin(instance_factory):
    inst = instance_factory(2)
    cp = inst.cli("run", "sh", "-c", "read x; echo got=$x", input="hello\n", check=True)
    assert cp.stdout == "got=hello\n"
    cp = inst.cli("run", "-N2", "-l", "cat", input="a\nb\n", check=True)
    assert sorted(cp.stdout.splitlines()) == ["0: a", "0: b", "1: a", "1: b"]


def test_binary_output_and_input_file_are_exact(inst1, tmp_path):
    import subprocess

    from fluxlite.testing import fluxlite_command
    blob = bytes(range(256)) * 64
    src = tmp_path / "blob"
    src.write_bytes(blob)
    cp = subprocess.run(fluxlite_command() + ["run", "--input", str(src), "cat"],
                        env=inst1.env, capture_output=True, timeout=60)
    assert cp.returncode == 0 and cp.stdout == blob
    cp = subprocess.run(fluxlite_command() + ["run", "cat"], env=inst1.env, input=blob,
                        capture_output=True, timeout=60)
    assert cp.returncode == 0 and cp.stdout == blob


def test_piped_input_a_task_does_not_read_is_no_failure(instance_factory):
    """The shell ignores SIGPIPE (as Flux's): tasks that never read, or close, their
    stdin leave the rest of a piped input unread and the job still succeeds."""
    inst = instance_factory(2)
    lots = "".join(f"{i}\n" for i in range(100000))
    cp = inst.cli("run", "-N2", "hostname", input=lots, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == [os.uname().nodename] * 2
    cp = inst.cli("run", "sh", "-c", "exec 0<&-; echo closed", input=lots, timeout=60)
    assert (cp.returncode, cp.stdout) == (0, "closed\n"), cp.stderr


def test_unreadable_input_file_and_unrunnable_command(inst1, tmp_path):
    cp = inst1.cli("run", "--input", str(tmp_path / "nosuch"), "cat")
    assert cp.returncode == 1
    assert f"cannot open input file {tmp_path / 'nosuch'}: No such file or directory" in cp.stderr
    assert "ValueError" not in cp.stderr
    cp = inst1.cli("run", str(tmp_path))   # a directory: found, not executable
    assert cp.returncode == 126 and "Permission denied" in cp.stderr
    cp = inst1.cli("run", "no-such-command-here")
    assert cp.returncode == 127 and "No such file or directory" in cp.stderr


def test_lines_of_tasks_writing_at_once_never_splice(instance_factory, tmp_path):
    """stdout is line-buffered: 4 tasks printing 100,000 lines each, to the terminal
    and to one file, give 400,000 whole lines, none lost."""
    inst = instance_factory(2)
    expected = sorted(str(i) for i in range(1, 100001)) * 4
    cp = inst.cli("run", "-n4", "seq", "1", "100000", timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert sorted(cp.stdout.splitlines()) == sorted(expected)
    out = tmp_path / "seq.out"
    inst.cli("run", "-n4", "--output", str(out), "seq", "1", "100000", check=True, timeout=120)
    assert sorted(out.read_text().splitlines()) == sorted(expected)


def test_labelled_file_output_ends_an_unfinished_last_line(inst1, tmp_path):
    out = tmp_path / "lab.out"
    inst1.cli("run", "-n2", "-l", "--output", str(out), "sh", "-c", r'printf "a\nb"',
              check=True)
    assert sorted(out.read_text().splitlines()) == ["0: a", "0: b", "1: a", "1: b"]


def test_a_jobspec_the_job_manager_refuses_is_one_line_and_no_job(inst1):
    """The CLI builds without checking; the job-manager's check at submit names the
    field, the command prints it on one line and exits 1, and no job is made."""
    cp = inst1.cli("submit", "--setattr=system.duration=abc", "true")
    assert cp.returncode == 1, cp.stderr
    assert cp.stderr.strip().splitlines() == [
        "fluxlite submit: jobspec: attributes.system.duration: expected `float`, "
        "got `str`"]
    assert inst1.cli("jobs", "-a", "-n", "-o", "{id}").stdout.strip() == ""

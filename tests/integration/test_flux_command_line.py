"""A Flux user's command lines, through the real CLI: shell options as an open
namespace, -q as --queue, '# flux:' directives, eventlogs a line an object, the
jobs formats and filters, getattr of an unset attribute, numeric log levels,
abbreviated long options, Ctrl-C on run, and the submission options Flux has.

Expected outputs come from docs/flux-side-by-side.md (`record()`), the record of
what Flux prints beside what fluxlite prints."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fluxlite.job import eventlog as jel
from fluxlite.jobapi import api
from fluxlite.testing import fluxlite_command, jobid_of, one_error_line
from fluxlite.util import fluid

pytestmark = pytest.mark.timeout(120)

RECORD = Path(__file__).resolve().parents[2] / "docs" / "flux-side-by-side.md"


def record(name: str) -> dict[str, list[str]]:
    """The ```flux and ```fluxlite blocks under '### name' in the side-by-side record."""
    text = RECORD.read_text()
    section = text.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    blocks = dict(re.findall(r"```(flux|fluxlite)\n(.*?)```", section, re.S))
    return {k: v.splitlines() for k, v in blocks.items()}


def matches(pattern: str, line: str, prog: str = "") -> bool:
    """`line` as the record's `pattern`, its placeholders filled."""
    rx = re.escape(pattern)
    for ph, sub in (("<ID>", r"\S+"), ("<T>", r"[0-9.]+"), ("<N>", r"\d+"), ("<MSG>", r".+"),
                    ("<PROG>", re.escape(prog))):
        rx = rx.replace(re.escape(ph), sub)
    return re.fullmatch(rx, line) is not None


def jobspec(inst, jobid: str) -> dict:
    return json.loads(inst.cli("job", "info", jobid, "jobspec", check=True).stdout)


def shell_options(inst, jobid: str) -> dict:
    return jobspec(inst, jobid)["attributes"]["system"]["shell"]["options"]


# ------------------------------------------------------------------ shell options
def test_flux_shell_options_are_accepted(inst1):
    cp = inst1.cli("run", "-o", "cpu-affinity=off", "-o", "gpu-affinity=per-task",
                   "-o", "mpi=none", "-o", "nosetpgrp", "-o", "verbose=0", "-o",
                   "exit-timeout=none", "-o", "exit-on-error", "-o", "signal", "-o",
                   "rlimit.core=0", "-o", "output.mode=append", "-o", "pty.interactive",
                   "-o", "hwloc.xmlfile=/x.xml", "echo", "hi")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.splitlines() == record("shell-options-accepted")["fluxlite"]
    assert cp.stderr == ""
    for value in ("on", "per-task", "map:0;1", "off"):
        inst1.cli("run", "-o", f"cpu-affinity={value}", "true", check=True)


def test_an_unknown_shell_option_is_accepted_with_one_warning(inst1):
    cp = inst1.cli("submit", "--cc=1-3", "--wait", "-o", "cpu-afinity=off", "true")
    assert cp.returncode == 0, cp.stderr
    assert len(cp.stdout.split()) == 3
    [expected] = record("shell-option-unknown")["fluxlite"]
    lines = cp.stderr.splitlines()
    assert len(lines) == 1 and matches(expected, lines[0], "fluxlite submit"), cp.stderr
    # the job carries it, for a plugin that reads it
    jobid = cp.stdout.split()[0]
    assert shell_options(inst1, jobid)["cpu-afinity"] == "off"


@pytest.mark.parametrize("opt, allowed", [
    ("cpu-affinity=sideways", "on, off, per-task or map:LIST"),
    ("gpu-affinity=7", "on, off, per-task or map:LIST"),
    ("verbose=loud", "a level 0, 1, 2"),
    ("rlimit.core=lots", "malformed value"),
    ("signal=bogus", "signum"),
])
def test_a_malformed_value_of_a_known_shell_option_is_refused(inst1, opt, allowed):
    line = one_error_line(inst1.cli("run", "-o", opt, "true"))
    assert line.startswith(f"fluxlite run: invalid shell option {opt.split('=')[0]}=")
    assert allowed in line
    if opt.startswith("cpu-affinity"):
        [expected] = record("shell-option-malformed")["fluxlite"]
        assert matches(expected, line, "fluxlite run")


def test_verbose_shows_the_shell_log_lines(inst1):
    quiet = inst1.cli("run", "true", check=True)
    assert "fluxlite-shell" not in quiet.stderr
    cp = inst1.cli("run", "-o", "verbose", "-n2", "true", check=True)
    [pattern] = record("shell-verbose")["fluxlite"]
    lines = cp.stderr.splitlines()
    assert lines and all(matches(pattern, line) for line in lines), cp.stderr
    assert any("task 1: Exit 0" in line for line in lines)
    assert "DEBUG" not in cp.stderr
    cp = inst1.cli("run", "-o", "verbose=2", "true", check=True)
    assert "DEBUG: task 0: started true (pid" in cp.stderr


def test_nosetpgrp_keeps_tasks_in_the_shell_process_group(inst1):
    probe = [sys.executable, "-c", "import os; print(os.getpgid(0) == os.getpgid(os.getppid()))"]
    assert inst1.cli("run", *probe, check=True).stdout == "False\n"
    assert inst1.cli("run", "-o", "nosetpgrp", *probe, check=True).stdout == "True\n"


def test_a_user_plugin_option_nobody_claims_is_warned_about_by_the_shell(inst1, tmp_path):
    plugin = tmp_path / "p.py"
    plugin.write_text("from fluxlite.shell.plugin import ShellPlugin\n"
                      "class P(ShellPlugin):\n    name = 'p'\n")
    cp = inst1.cli("run", "-o", f"plugins={plugin}", "-o", "their.option=1", "echo", "ok")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == "ok\n"
    assert cp.stderr.count("shell option 'their.option' is not known") == 1


# ------------------------------------------------------------------- -q / --queue
QUEUES = '[queues.batch]\n[queues.debug]\n'


@pytest.fixture
def queued(instance_factory, tmp_path):
    """An instance with two named queues and no default one, as a Flux config gives."""
    conf = tmp_path / "queues.toml"
    conf.write_text(QUEUES)
    return instance_factory(1, start_args=[f"--config-path={conf}"])


def test_q_is_queue_and_quiet_is_long(queued, inst1):
    cp = queued.cli("submit", "-q", "batch", "--wait", "true")
    assert cp.returncode == 0, cp.stderr
    jobid = cp.stdout.strip()
    assert jobspec(queued, jobid)["tasks"][0]["command"] == ["true"]
    assert jobspec(queued, jobid)["attributes"]["system"]["queue"] == "batch"
    assert queued.cli("submit", "-q", "debug", "--quiet", "--wait", "true",
                      check=True).stdout == ""
    out = queued.cli("jobs", "-a", check=True).stdout.splitlines()
    assert out[0] == record("submit-queue")["fluxlite"][0]
    assert [line.split()[:2] for line in out[1:] if line.split()[0] == jobid] == \
        [[jobid, "batch"]]
    listed = queued.cli("jobs", "-a", "-q", "batch", "-n", "-o", "{id}", check=True).stdout
    assert listed.split() == [jobid]
    # with no job in a queue, no QUEUE column (as Flux's ?:)
    other = inst1.cli("submit", "--wait", "true", check=True).stdout.strip()
    header = inst1.cli("jobs", "-a", other, check=True).stdout.splitlines()[0]
    assert "QUEUE" not in header
    # in an instance without named queues, -q names one that does not exist (as Flux)
    cp = inst1.cli("submit", "-q", "batch", "true")
    assert cp.returncode != 0 and "queue 'batch' does not exist" in cp.stderr


def test_batch_and_alloc_take_q_as_queue(queued):
    cp = queued.cli("batch", "-q", "debug", "--urgency=hold", "--wrap", "true")
    jobid = fluid.f58(jobid_of(cp))
    assert jobspec(queued, jobid)["attributes"]["system"]["queue"] == "debug"
    queued.cli("cancel", jobid, check=True)


# ------------------------------------------------------------------ directives
def test_flux_directives_are_always_honoured(instance_factory, tmp_path):
    inst = instance_factory(2)
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n# flux: -N2\n# flux: --job-name=two\ntrue\n")
    env = {k: v for k, v in os.environ.items() if "COMPAT" not in k}
    cp = inst.cli("batch", script, env=env)
    assert cp.returncode == 0 and cp.stderr == "", cp.stderr
    jobid = cp.stdout.strip()
    inst.cli("job", "wait-event", "-t", "60", jobid, "clean", check=True)
    out = inst.cli("jobs", "-a", "-n", "-o", "{nnodes} {name}", jobid, check=True).stdout
    assert out.split() == record("batch-directives")["fluxlite"] + ["two"]


# ------------------------------------------------------------------- eventlogs
def test_eventlogs_print_one_json_object_a_line(inst1):
    jobid = inst1.cli("submit", "--wait", "true", check=True).stdout.strip()
    info = inst1.cli("job", "info", jobid, "eventlog", check=True).stdout.splitlines()
    key = jel.job_key(fluid.parse(jobid), "eventlog")
    kvs = inst1.cli("kvs", "get", key, check=True).stdout.splitlines()
    assert info == kvs
    entries = [json.loads(line) for line in info]
    assert [e["name"] for e in entries][0] == "submit" and entries[-1]["name"] == "clean"
    [pattern] = record("eventlog-lines")["fluxlite"]
    assert matches(pattern, info[0]), info[0]


# ------------------------------------------------------------------------ jobs
def test_jobs_named_formats_deps_and_endreason(inst1):
    inst1.cli("submit", "--wait", "--job-name=ok", "true", check=True)
    deps = inst1.cli("jobs", "-a", "-o", "deps", check=True).stdout.splitlines()
    assert deps[0] == record("jobs-deps")["fluxlite"][0]
    assert deps[1].split()[1:5] == ["ok", "16", "16", "INACTIVE"]
    end = inst1.cli("jobs", "-a", "-o", "endreason", check=True).stdout.splitlines()
    assert end[0] == record("jobs-endreason")["fluxlite"][0]
    assert end[1].endswith(" Exit 0")


def test_jobs_sentinels_conversions_and_fields(instance_factory, tmp_path):
    inst = instance_factory(2)
    two = inst.cli("submit", "--wait", "-N2", "--cwd", tmp_path, "true",
                   check=True).stdout.strip()
    out = inst.cli("jobs", "-a", "-n", "-o", "{ranks}|{runtime!H}|{cwd}|{t_depend!D}|"
                   "{annotations.sched.reason_pending}|{queue}", two, check=True).stdout
    ranks, runtime, cwd, t_depend, reason, queue = out.rstrip("\n").split("|")
    assert ranks == record("jobs-ranks")["fluxlite"][0]
    assert runtime == record("jobs-duration-H")["fluxlite"][0]
    assert cwd == str(tmp_path)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", t_depend)
    assert (reason, queue) == ("", "")
    # ?: drops an empty column, heading and all; +: widens to the longest value
    lines = inst.cli("jobs", "-a", "-o", "{id.f58} ?:{queue:<8} +:{name:<2}|", two,
                     check=True).stdout.splitlines()
    assert lines == ["JOBID NAME|", f"{two} true|"]


def test_jobs_filters_name_since_include(instance_factory):
    inst = instance_factory(2)
    a = inst.cli("submit", "--wait", "--job-name=alpha", "true", check=True).stdout.strip()
    b = inst.cli("submit", "--wait", "--job-name=beta", "true", check=True).stdout.strip()

    def ids(*args):
        return inst.cli("jobs", "-n", "-o", "{id}", *args, check=True).stdout.split()
    assert ids("-a", "--name=alpha") == [a]
    assert set(ids("--since=-1h")) == {a, b}           # --since implies -a
    line = one_error_line(inst.cli("jobs", "--since=tomorrow"))
    assert line.endswith("--since=tomorrow appears to be in the future")
    ranks = {j: inst.cli("jobs", "-n", "-o", "{ranks}", j, check=True).stdout.strip()
             for j in (a, b)}
    on0 = {j for j, r in ranks.items() if r == "0"}
    assert set(ids("-a", "-i", "0")) == on0
    host = inst.getattr("hostname")
    assert set(ids("-a", "--include", host)) == {a, b}
    line = one_error_line(inst.cli("jobs", "--since", "not a time at all"))
    assert "invalid datetime" in line


# ------------------------------------------------------- attributes, log levels
def test_getattr_of_an_unset_attribute_fails(inst1):
    cp = inst1.cli("getattr", "jobid")
    [expected] = record("getattr-unset")["fluxlite"]
    assert matches(expected, one_error_line(cp), "fluxlite getattr")
    assert cp.returncode == 1 and cp.stdout == ""
    assert inst1.cli("getattr", "rank", check=True).stdout == "0\n"


def test_getattr_reads_fluxs_attr_topic_user_attributes_too(inst1):
    """getattr asks attr.get, as flux getattr does: an attribute a program set with
    attr.set (Flux.attr_set) reads back like the broker's own."""
    with inst1.handle() as h:
        h.call("attr.set", {"name": "site.label", "value": "blue"})
        assert h.getattr("site.label") == "blue"
    assert inst1.cli("getattr", "site.label", check=True).stdout == "blue\n"


def test_numeric_log_levels(inst1):
    inst1.cli("setattr", "log-stderr-level", "7", check=True)
    out = inst1.cli("getattr", "log-stderr-level", check=True).stdout.splitlines()
    assert out == record("setattr-numeric-level")["fluxlite"]
    inst1.cli("setattr", "log-stderr-level", "3", check=True)
    line = one_error_line(inst1.cli("setattr", "log-stderr-level", "9"))
    assert "not a log level" in line and "0-7" in line


def test_numeric_log_level_at_start(tmp_path):
    cp = subprocess.run(fluxlite_command() + ["start", "-s", "1", "-S", "log-stderr-level=6",
                                              "fluxlite", "getattr", "log-stderr-level"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == "6\n"


# ------------------------------------------------------- abbreviated long options
def test_unambiguous_long_option_prefixes_are_accepted(inst1):
    assert inst1.cli("resource", "list", "--state=up", check=True).stdout == \
        inst1.cli("resource", "list", "--states=up", check=True).stdout
    cp = inst1.cli("run", "--job-n=pfx", "--lab", "echo", "--outp=1", check=True)
    assert cp.stdout == "0: --outp=1\n"  # the job's own arguments are untouched
    assert inst1.cli("jobs", "-a", "-n", "-o", "{name}", check=True).stdout.split()[0] == "pfx"
    cp = inst1.cli("jobs", "--stat")
    [expected] = record("option-prefix")["fluxlite"]
    assert cp.returncode == 2 and matches(expected, one_error_line(cp), "fluxlite jobs")


# ------------------------------------------------------------------- Ctrl-C on run
def _run_in_background(inst, *args):
    return subprocess.Popen(fluxlite_command() + list(args), env=inst.env, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _wait_running(inst, timeout: float = 30) -> int:
    h = inst.handle()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = api.list_jobs(h, "active")
        for j in running:
            if j["state"] == "RUN":
                for e in api.event_watch(h, j["id"], "exec"):
                    if e["name"] == "shell.start":
                        return j["id"]
        time.sleep(0.05)
    raise AssertionError("no job started")


def _stderr_line(proc, timeout: float = 10) -> str:
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(proc.stderr, selectors.EVENT_READ)
    assert sel.select(timeout), "no line on stderr"
    return proc.stderr.readline().rstrip("\n")


def test_ctrl_c_once_keeps_the_job_twice_cancels_it(inst1):
    proc = _run_in_background(inst1, "run", "sleep", "300")
    try:
        jobid = _wait_running(inst1)
        proc.send_signal(signal.SIGINT)
        [expected] = record("run-ctrl-c")["fluxlite"]
        assert matches(expected, _stderr_line(proc), "fluxlite run")
        h = inst1.handle()
        assert api.info(h, jobid)["state"] == "RUN"      # kept, nothing sent to it
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert code != 0
    cp = inst1.cli("jobs", "-a", "-n", "-o", "{result} {exception.note}", fluid.f58(jobid),
                   check=True)
    assert cp.stdout.strip() == "CANCELED interrupted by ctrl-C"


def test_ctrl_c_then_ctrl_z_detaches(inst1):
    proc = _run_in_background(inst1, "run", "sleep", "300")
    try:
        jobid = _wait_running(inst1)
        proc.send_signal(signal.SIGINT)
        _stderr_line(proc)
        proc.send_signal(signal.SIGTSTP)
        assert _stderr_line(proc).endswith("detaching...")
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
    h = inst1.handle()
    assert api.info(h, jobid)["state"] == "RUN"
    inst1.cli("cancel", fluid.f58(jobid), check=True)


# ------------------------------------------------------------ submission options
def test_per_resource_options(instance_factory):
    inst = instance_factory(2)
    cp = inst.cli("run", "-N2", "--tasks-per-node=2", "sh", "-c",
                  "echo $FLUXLITE_TASK_RANK $FLUXLITE_SHELL_RANK", check=True)
    assert sorted(cp.stdout.splitlines()) == ["0 0", "1 0", "2 1", "3 1"]
    assert inst.cli("run", "--cores=2", "nproc", check=True).stdout.splitlines() == \
        record("per-resource")["fluxlite"]
    inst.cli("run", "--cores=2", "--tasks-per-core=2", "-l", "true", check=True)
    jobid = inst.cli("jobs", "-a", "-n", "-o", "{id} {ntasks} {ncores}", "-c", "1",
                     check=True).stdout.split()
    assert jobid[1:] == ["4", "2"]
    ncores = int(inst.cli("resource", "list", "--states=up", "-n", "-o", "{ncores}",
                          check=True).stdout)
    inst.cli("run", "-N1", "--tasks-per-core=1", "true", check=True)
    row = inst.cli("jobs", "-a", "-n", "-o", "{ntasks}", "-c", "1", check=True).stdout.split()
    assert row == [str(ncores // 2)]
    line = one_error_line(inst.cli("run", "-n2", "--cores=2", "true"))
    assert "Per-resource options can't be used with per-task options" in line
    line = one_error_line(inst.cli("run", "--tasks-per-node=1", "--tasks-per-core=1", "true"))
    assert "Do not specify both" in line


def test_unbuffered_output_comes_before_the_line_ends(inst1, tmp_path):
    flag = tmp_path / "go"
    script = f"printf partial; while [ ! -e {flag} ]; do sleep 0.05; done; echo"
    import selectors
    for opts, early in (([], False), (["-u"], True)):
        proc = _run_in_background(inst1, "run", *opts, "sh", "-c", script)
        try:
            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)
            got = bool(sel.select(3 if not early else 30))
            assert got == early
            if early:
                assert os.read(proc.stdout.fileno(), 7) == b"partial"
            flag.touch()
            assert proc.wait(timeout=60) == 0
        finally:
            proc.kill()
            proc.wait()
        flag.unlink()


def test_signal_before_the_time_limit(inst1):
    code = ("import signal, sys, time\n"
            "signal.signal(signal.SIGUSR2, lambda *a: (print('warned'), sys.exit(0)))\n"
            "time.sleep(60)\n")
    cp = inst1.cli("run", "-t", "4s", "--signal=USR2@3", sys.executable, "-c", code)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == "warned\n"
    for bad, why in (("--signal=NOPE", "invalid signal"), ("--signal=@x", "invalid time")):
        assert why in one_error_line(inst1.cli("run", bad, "true"))


def test_rlimit_and_add_file(inst1, tmp_path):
    cp = inst1.cli("run", "--rlimit=nofile=123", "--rlimit=core=0", "sh", "-c",
                   "ulimit -n; ulimit -c", check=True)
    assert cp.stdout.split() == ["123", "0"]
    assert "unknown limit" in one_error_line(inst1.cli("run", "--rlimit=bogus=1", "true"))
    data = tmp_path / "params.ini"
    data.write_text("x=1\n")
    cp = inst1.cli("run", f"--add-file={data}", "--add-file=notes.txt=line one\nline two\n",
                   "sh", "-c", "cat {{tmpdir}}/params.ini $FLUXLITE_JOB_TMPDIR/notes.txt",
                   check=True)
    assert cp.stdout == "x=1\nline one\nline two\n"
    assert "reserved" in one_error_line(inst1.cli("run", "--add-file=script=a\nb", "true"))


def test_dry_run_prints_the_jobspec_and_submits_nothing(inst1):
    for cmd in (["run"], ["submit"], ["batch", "--wrap"], ["alloc"]):
        cp = inst1.cli(*cmd, "--dry-run", "-q", "dbg", "hostname", check=True)
        spec = json.loads(cp.stdout.splitlines()[0])
        assert spec["version"] == 1 and spec["attributes"]["system"]["queue"] == "dbg"
    assert inst1.cli("jobs", "-a", "-n", "-o", "{id}", check=True).stdout == ""


def test_verbose_run_and_alloc(inst1):
    cp = inst1.cli("run", "-vv", "true", check=True)
    lines = cp.stderr.splitlines()
    assert matches(record("run-verbose")["fluxlite"][0], lines[0])
    names = [line.split()[1] for line in lines[1:]]
    assert names[0] == "job.submit" and names[-1] == "job.clean"
    assert not any(n.startswith("exec.") for n in names)
    # -vvv adds the exec eventlog's events (Flux's third level), each stamped
    cp = inst1.cli("run", "-vvv", "echo", "hi", check=True)
    assert cp.stdout == "hi\n"
    stamped = [line.split()[:2] for line in cp.stderr.splitlines()[1:]]
    assert all(stamp.endswith("s:") for stamp, _ in stamped)
    execs = [name for _, name in stamped if name.startswith("exec.")]
    assert "exec.shell.start" in execs and execs[-1] == "exec.done"
    assert [name for _, name in stamped if name.startswith("job.")][-1] == "job.clean"
    cp = inst1.cli("alloc", "-v", "true", check=True)
    assert cp.stderr.startswith("jobid: ƒ")


def test_bcc_wait_event_and_logs(inst1, tmp_path):
    cp = inst1.cli("submit", "--bcc=1-2", "--wait", "--output", f"{tmp_path}/o{{cc}}",
                   "sh", "-c", "echo ${FLUXLITE_JOB_CC:-unset}", check=True)
    assert len(cp.stdout.split()) == 2
    assert (tmp_path / "o1").read_text() == (tmp_path / "o2").read_text() == "unset\n"
    assert "only one of --cc or --bcc" in one_error_line(
        inst1.cli("submit", "--cc=1", "--bcc=1", "true"))
    cp = inst1.cli("submit", "--wait-event=start", "sleep", "30", check=True)
    jobid = cp.stdout.strip()
    state = inst1.cli("jobs", "-n", "-o", "{state}", jobid, check=True).stdout.strip()
    assert state in ("RUN", "CLEANUP")
    inst1.cli("cancel", jobid, check=True)
    cp = inst1.cli("submit", "--wait-event=exec.shell.start", "true", check=True)
    assert cp.stdout.strip()
    log, err = tmp_path / "ids.log", tmp_path / "err.log"
    cp = inst1.cli("submit", "--cc=1-2", f"--log={log}", f"--log-stderr={err}",
                   "--wait", "false")
    assert cp.returncode == 1 and cp.stdout == "" and cp.stderr == ""
    assert len(log.read_text().split()) == 2
    cp = inst1.cli("bulksubmit", "--bcc=1", "--quiet", "--wait", "sh", "-c",
                   "test -z \"$FLUXLITE_JOB_CC\"", ":::", "a")
    assert cp.returncode == 0, cp.stderr


PMI_MAPPING = (
    "import os, socket\n"
    "s = socket.socket(fileno=int(os.environ['PMI_FD']))\n"
    "f = s.makefile('rw')\n"
    "def ask(t):\n"
    "    f.write(t + '\\n'); f.flush(); return f.readline().strip()\n"
    "ask('cmd=init pmi_version=1 pmi_subversion=1')\n"
    "kvs = ask('cmd=get_my_kvsname').split('kvsname=')[1]\n"
    "got = ask(f'cmd=get kvsname={kvs} key=PMI_process_mapping').split('value=')[1]\n"
    "print(os.environ['FLUXLITE_TASK_RANK'], os.environ['FLUXLITE_SHELL_RANK'],\n"
    "      os.environ['FLUXLITE_TASK_LOCAL_ID'], got)\n"
    "ask('cmd=finalize')\n")


def _placement(inst, *args):
    """(rank, node, local id) of every task, and the PMI_process_mapping they read."""
    cp = inst.cli("run", *args, sys.executable, "-c", PMI_MAPPING, check=True, timeout=120)
    rows = sorted(tuple(line.split()) for line in cp.stdout.splitlines())
    assert len({r[3] for r in rows}) == 1
    return [tuple(int(x) for x in r[:3]) for r in rows], rows[0][3]


def test_taskmap_schemes_place_tasks_and_pmi_agrees(instance_factory):
    inst = instance_factory(2, cores_per_rank=3)
    assert _placement(inst, "-N2", "-n4", "--taskmap=block") == (
        [(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1)], "(vector,(0,2,2))")
    assert _placement(inst, "-N2", "-n4", "--taskmap=cyclic") == (
        [(0, 0, 0), (1, 1, 0), (2, 0, 1), (3, 1, 1)], "(vector,(0,2,1),(0,2,1))")
    assert _placement(inst, "-N2", "-n6", "--taskmap=cyclic:2") == (
        [(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1), (4, 0, 2), (5, 1, 2)],
        "(vector,(0,2,2),(0,2,1))")
    assert _placement(inst, "-N2", "-n4", "--taskmap=manual:[[1,1,2,1],[0,1,2,1]]") == (
        [(0, 1, 0), (1, 1, 1), (2, 0, 0), (3, 0, 1)], "(vector,(1,1,2),(0,1,2))")
    jobid = jobid_of(inst.cli("submit", "-N2", "-n4", "--taskmap=cyclic", "--wait", "true",
                              check=True))
    tm = inst.cli("job", "taskmap", str(jobid), check=True).stdout
    assert tm == '{"version":1,"map":[[0,2,1,2]]}\n'
    # a manual map that does not fit the job's tasks per node fails the job, saying why
    cp = inst.cli("run", "-N2", "-n4", "--taskmap=manual:[[0,1,4,1]]", "true")
    assert cp.returncode != 0 and "the job runs [2, 2]" in cp.stderr


def test_taskmap_hostfile_places_tasks_by_host_name(instance_factory, tmp_path):
    """Task N runs on the host of line N (the list read again from the top); a host
    names the first of the job's nodes on it, as Flux's hostfile plugin: here both
    brokers share this machine's name, so every task lands on the job's first node."""
    import socket
    inst = instance_factory(2, cores_per_rank=2)
    hostfile = tmp_path / "hosts"
    hostfile.write_text(f"{socket.gethostname()}\n")
    assert _placement(inst, "-N2", "-n3", f"--taskmap=hostfile:{hostfile}") == (
        [(0, 0, 0), (1, 0, 1), (2, 0, 2)], "(vector,(0,1,3))")
    hostfile.write_text(f"{socket.gethostname()}\nnosuchhost\n")
    cp = inst.cli("run", "-N2", "-n2", f"--taskmap=hostfile:{hostfile}", "true")
    assert cp.returncode != 0 and "host nosuchhost is not one of the job's nodes" in cp.stderr


@pytest.mark.parametrize("bad,why", [
    ("cyclic:0", "not a positive integer"), ("manual:[[0,1]]", "not an RFC 34 map"),
    ("manual:nojson", "not RFC 34 JSON"), ("spiral", "not supported (block, cyclic"),
    ("hostfile:/nonexistent/hosts", "No such file"), ("hostfile:", "give the file")])
def test_taskmap_bad_values_say_why(inst1, bad, why):
    cp = inst1.cli("run", f"--taskmap={bad}", "true")
    assert cp.returncode == 2 and why in one_error_line(cp)


def test_begin_time_in_words(inst1):
    jobid = inst1.cli("submit", "--begin-time=in 5 minutes", "true", check=True).stdout.strip()
    info = inst1.cli("jobs", "-n", "-o", "{state} {dependencies}", jobid, check=True).stdout
    assert info.split()[0] == "DEPEND" and info.split()[1].startswith("begin@")
    inst1.cli("cancel", jobid, check=True)
    jobid = inst1.cli("submit", "--begin-time=tomorrow", "true", check=True).stdout.strip()
    inst1.cli("cancel", jobid, check=True)


# ------------------------------------------------------------------------- start
def test_start_broker_options_and_verbose():
    cp = subprocess.run(fluxlite_command() + [
        "start", "-v", "-s", "2", "-o,-Stbon.topo=kary:1,-Slog-stderr-level=3",
        "fluxlite", "getattr", "tbon.topo"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == "kary:1\n"
    assert cp.stderr.startswith("fluxlite start: 2 brokers on this machine")
    cp = subprocess.run(fluxlite_command() + ["start", "-o", "-Snosuch=1", "true"],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode != 0 and "unknown attribute 'nosuch'" in cp.stderr


# ------------------------------------------------------------------- the README
def _readme_session() -> list[str]:
    readme = (RECORD.parents[1] / "README.md").read_text()
    block = readme.split("## A first session", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].rstrip() if "  #" in line else line
            for line in block.splitlines() if line.strip()]


@pytest.mark.timeout(240)
def test_readme_first_session_runs_as_written(tmp_path):
    """Every line of the README's first session, in order, inside the instance its first
    line starts (without a terminal: alloc's shell reads no commands and ends, as
    `exit` would end it)."""
    import shutil
    lines = _readme_session()
    assert lines[0] == "bin/fluxlite start --size 4" and lines[-1] == "exit"
    if shutil.which("mpicc") is None:
        pytest.fail("the README's session needs an MPI's mpicc (MPICH: apt install mpich)") \
            if os.environ.get("CI") == "true" else \
            pytest.skip("no mpicc: the README's MPI lines need an MPI (apt install mpich)")
    script = tmp_path / "session.sh"
    root = RECORD.parents[1]
    # in a scratch directory (batch writes its output file where it is submitted)
    body = "\n".join(lines[1:-1]).replace("/tmp/mpi_hello", str(tmp_path / "mpi_hello")) \
        .replace("tests/programs/", f"{root}/tests/programs/")
    # then, before the instance ends, let the batch job finish (a person would be slower)
    script.write_text("set -e\n" + body + "\nfluxlite queue drain\n")
    env = {k: v for k, v in os.environ.items() if k != "FLUXLITE_URI"}
    cp = subprocess.run([str(root / "bin" / "fluxlite"), "start", "--size", "4", "sh",
                         str(script)], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                        capture_output=True, text=True, timeout=200)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    out = cp.stdout.splitlines()
    assert {"a", "b", "c", "after"} <= set(out)
    assert sorted(line for line in out if line.startswith("rank ")) == \
        [f"rank {r} of 4" for r in range(4)]
    assert any("maintenance" in line for line in out)   # queue status names the reason
    batch_out = list(tmp_path.glob("fluxlite-*.out"))
    assert len(batch_out) == 1 and "STATE" in batch_out[0].read_text()


# ------------------------------------------------------------ job attach: stdin
def test_job_attach_forwards_stdin(instance_factory):
    inst = instance_factory(2)
    jobid = inst.cli("submit", "-N2", "-n2", "cat", check=True).stdout.strip()
    cp = inst.cli("job", "attach", "-l", jobid, input="hi there\n", timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert sorted(cp.stdout.splitlines()) == ["0: hi there", "1: hi there"]
    one = inst.cli("submit", "cat", check=True).stdout.strip()
    cp = inst.cli("job", "attach", one, input="hi\n", timeout=60)
    assert cp.stdout.splitlines() == record("attach-stdin")["fluxlite"], cp.stderr
    jobid = inst.cli("submit", "sh", "-c", "read x; echo got $x", check=True).stdout.strip()
    cp = inst.cli("job", "attach", jobid, input="one\n", timeout=60)
    assert (cp.returncode, cp.stdout) == (0, "got one\n"), cp.stderr
    # stdin that arrives before the job starts is kept for its tasks
    held = inst.cli("submit", "--urgency=hold", "cat", check=True).stdout.strip()
    proc = subprocess.Popen(fluxlite_command() + ["job", "attach", held], env=inst.env,
                            text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        inst.cli("job", "urgency", held, "default", check=True)
        out, err = proc.communicate("early\n", timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert (proc.returncode, out) == (0, "early\n"), err


def test_run_with_a_pty_shows_the_terminal_output(inst1):
    for opt in ("pty", "pty.interactive"):
        cp = inst1.cli("run", "-o", opt, "sh", "-c", "tty; exit 3")
        assert cp.returncode == 3, cp.stderr
        assert cp.stdout.strip().startswith("/dev/pts/")

"""The smaller commands of flux(1) through the real CLI, their output compared with
what Flux's man pages (flux-core doc/man1) fix: version, config get, jobtap
list, module list, logger, event pub/sub, hostlist, env, pgrep/pkill, pstree,
queue enable/disable/list, resource info/R/eventlog, kvs put -j/-r, mkdir,
kvs eventlog get/append/wait-event, and the job subcommands submit FILE,
taskmap, timeleft, hostpids, memo, info KEY, id --to; and the guide naming every
flux(1) command that fluxlite lacks."""

import json
import os
import socket
import subprocess

import pytest

from fluxlite.jobapi import api
from fluxlite.protocol import kvs as kvsv
from fluxlite.testing import fluxlite_command, jobid_of, one_error_line
from fluxlite.util import fluid


def out(inst, *args, **kw) -> str:
    return inst.cli(*args, check=True, **kw).stdout


# ------------------------------------------------------------ instance tools
def test_version_names_commands_and_broker(inst1):
    lines = out(inst1, "version").splitlines()
    keys = [ln.split(":")[0] for ln in lines]
    # flux version's order: the commands and libraries, the broker and its URI, the build
    assert keys == ["commands", "python", "broker", "FLUXLITE_URI", "build-options"]
    assert lines[3].split("\t")[-1] == inst1.env["FLUXLITE_URI"]
    outside = {k: v for k, v in inst1.env.items() if k != "FLUXLITE_URI"}
    cp = subprocess.run(fluxlite_command() + ["version"], env=outside, capture_output=True,
                        text=True, timeout=30, check=True)
    assert cp.stdout.splitlines()[0].startswith("commands:")


def test_config_get(instance_factory):
    inst = instance_factory(2, topo="kary:1")
    assert json.loads(out(inst, "config", "get")) == {"tbon": {"topo": "kary:1"}}
    assert out(inst, "config", "get", "tbon.topo") == "kary:1\n"   # a string prints bare
    assert out(inst, "config", "get", "tbon") == '{"topo":"kary:1"}\n'
    cp = inst.cli("config", "get", "resource.noverify")
    assert (cp.returncode, one_error_line(cp)) == (
        1, "fluxlite config get: resource.noverify is not set")
    assert out(inst, "config", "get", "--default=x", "resource.noverify") == "x\n"
    cp = inst.cli("config", "get", "-q", "resource.noverify")
    assert (cp.returncode, cp.stdout, cp.stderr) == (1, "", "")
    cp = inst.cli("config", "get", "-t", "integer", "tbon.topo")
    assert one_error_line(cp).endswith("tbon.topo does not have the requested type")


def test_jobtap_and_module_list(inst4):
    assert out(inst4, "jobtap", "list") == ""     # no plugin but the built-in ones
    assert ".priority-default" in out(inst4, "jobtap", "list", "-a").split()
    lines = out(inst4, "module", "list").splitlines()
    assert lines[0] == "Module                   Idle  S Sendq Recvq Service"   # %-24s %4s
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[1:]}
    assert {"kvs", "job-manager", "sched", "rexec", "broker"} <= set(rows)
    # the other services it answers, by Flux's names (attr.*, service.*, event.*)
    assert rows["broker"][-1].split(",") == ["attr", "service", "event"]
    leaf = [ln.split()[0] for ln in out(inst4, "module", "list", "-r", "3").splitlines()[1:]]
    assert "rexec" in leaf and "kvs" not in leaf   # rank 3 runs no rank-0 service


def test_logger_reaches_dmesg(inst1):
    inst1.cli("logger", "--appname=myapp", "-s", "err", "disk", "is", "full", check=True)
    inst1.cli("logger", "plain", "note", check=True)
    ring = out(inst1, "dmesg")
    assert "myapp.error[0]: disk is full" in ring
    assert "logger.info[0]: plain note" in ring      # notice, the default
    cp = inst1.cli("logger", "-s", "loud", "x")
    assert cp.returncode == 2


def test_event_pub_and_sub(inst1):
    seq = out(inst1, "event", "pub", "-s", "test.zero", '{"n": 0}')
    assert seq.startswith("seq=")
    with inst1.cli_background("event", "sub", "-c", "2", "test.") as sub:
        # the subscriber may subscribe after a first event: publish (each waits until
        # the event came back) until it has two, within a bound
        for n in range(1, 40):
            inst1.cli("event", "pub", "-l", f"test.n{n}", f'{{"n": {n}}}', check=True,
                      timeout=30)
            if sub.poll() is not None:
                break
        text, _ = sub.communicate(timeout=30)
        assert sub.returncode == 0
    lines = text.splitlines()
    assert len(lines) == 2
    first = int(lines[0].split("test.n")[1].split("\t")[0])
    assert lines == [f'test.n{first}\t{{"n": {first}}}',
                     f'test.n{first + 1}\t{{"n": {first + 1}}}']


# ------------------------------------------------------------------ hostlist
def test_hostlist_literal_and_instance_sources(inst4):
    host = socket.gethostname()
    assert out(inst4, "hostlist", "-e", "n[1-3],m1") == "n1 n2 n3 m1\n"
    assert out(inst4, "hostlist", "-c", "n[1-3]", "n2") == "4\n"
    assert out(inst4, "hostlist", "-u", "n[1-3]", "n2") == "n[1-3]\n"
    assert out(inst4, "hostlist", "-m", "n[1-5]", "n3") == "n[1-2,4-5]\n"
    assert out(inst4, "hostlist", "-i", "n[1-5]", "n[4-9]") == "n[4-5]\n"
    assert out(inst4, "hostlist", "-X", "n[1-3]", "n[3-4]") == "n[1-2,4]\n"
    assert out(inst4, "hostlist", "-F", "n3", "n[1-5]") == "2\n"
    assert out(inst4, "hostlist", "-e", "-d", "\\n", "-n", "-1", "n[1-5]") == "n5\n"
    assert out(inst4, "hostlist", "n[1-3]", input="n9\n") == "n[1-3]\n"
    assert out(inst4, "hostlist", input="n9\nn8\n") == "n[9,8]\n"   # stdin by default
    cp = inst4.cli("hostlist", "-q", "-m", "n1", "n1")
    assert (cp.returncode, cp.stdout) == (1, "")
    assert out(inst4, "hostlist", "-l", "-e") == " ".join([host] * 4) + "\n"
    assert out(inst4, "hostlist", "-c", "instance") == "4\n"
    inst4.cli("resource", "drain", "2", "testing", check=True)
    assert out(inst4, "hostlist", "-c", "avail") == "3\n"
    jobid = jobid_of(inst4.cli("submit", "-N2", "--wait", "true", check=True))
    assert out(inst4, "hostlist", "-c", fluid.f58(jobid)) == "2\n"


def test_env_prints_exports_and_runs_a_command(inst1):
    lines = out(inst1, "env").splitlines()
    assert f'export FLUXLITE_URI="{inst1.env["FLUXLITE_URI"]}"' in lines
    assert any(ln.startswith('export PATH="') for ln in lines)
    assert out(inst1, "env", "sh", "-c", "echo $FLUXLITE_URI") == inst1.env["FLUXLITE_URI"] + "\n"
    cp = inst1.cli("env", "no-such-command-here")
    assert cp.returncode == 127


# --------------------------------------------------------------- pgrep, pkill
def test_pgrep_and_pkill(instance_factory):
    inst = instance_factory(1, cores_per_rank=3)
    a = jobid_of(inst.cli("submit", "--job-name=alpha", "sleep", "300", check=True))
    b = jobid_of(inst.cli("submit", "--job-name=beta", "sleep", "300", check=True))
    done = jobid_of(inst.cli("submit", "--job-name=alpine", "--wait", "true", check=True))
    assert out(inst, "pgrep", "^al") == f"{fluid.f58(a)}\n"
    assert out(inst, "pgrep", "-a", "^al").split() == [fluid.f58(a), fluid.f58(done)]
    listed = out(inst, "pgrep", "-o", "{id.f58} {name}", "beta").splitlines()
    assert listed == ["JOBID NAME", f"{fluid.f58(b)} beta"]
    assert inst.cli("pgrep", "nomatch").returncode == 1
    assert inst.cli("pgrep", "(").returncode == 2
    cp = inst.cli("pkill", "a$")   # alpha, beta
    assert (cp.returncode, cp.stderr) == (0, "fluxlite pkill: Canceled 2 jobs\n")
    h = inst.handle()
    for i in (a, b):
        assert api.wait(h, i, timeout=30)["result"] == "CANCELED"
    assert inst.cli("pkill", "alpha").returncode == 1    # none active matches now


# -------------------------------------------------------------------- pstree
def test_pstree_draws_nested_instances(instance_factory, tmp_path):
    inst = instance_factory(2, cores_per_rank=2)
    assert out(inst, "pstree") == ".\n"
    fifo = tmp_path / "inner"
    os.mkfifo(fifo)
    solo = jobid_of(inst.cli("submit", "--job-name=solo", "sleep", "300", check=True))
    batch = jobid_of(inst.cli("batch", "-N1", "--job-name=outer", "--wrap",
                              "fluxlite submit -n1 sleep 300; fluxlite submit -n1 sleep 300;"
                              "fluxlite job wait-event $(fluxlite job last) start >/dev/null;"
                              f"echo up > {fifo}; sleep 300", check=True))
    from fluxlite.testing import wait_fifo
    assert wait_fifo(fifo, timeout=60) == "up\n"
    assert out(inst, "pstree") == ".\n├── outer\n│   └── 2*[sleep]\n└── solo\n"
    assert out(inst, "pstree", "-X", "--ascii") == (
        ".\n|-- outer\n|   |-- sleep\n|   `-- sleep\n`-- solo\n")
    assert out(inst, "pstree", "-L", "0") == ".\n├── outer\n└── solo\n"
    assert out(inst, "pstree", "-a", "--skip-root=yes") == (
        "outer:R\n└── 2*[sleep:R]\nsolo:R\n")
    detailed = out(inst, "pstree", "-x").splitlines()
    assert detailed[0].split() == ["JOBID", "USER", "ST", "NTASKS", "NNODES", "RUNTIME"]
    assert detailed[1].split()[0] == fluid.f58(batch) and detailed[1].endswith(" outer")
    assert detailed[3].split()[0] == fluid.f58(solo) and detailed[3].endswith(" solo")
    inst.cli("cancel", "--all", check=True)


# --------------------------------------------------------------------- queue
def test_queue_disable_refuses_submissions_and_enable_restores(inst1):
    assert out(inst1, "queue", "list").splitlines()[0] == (
        "EN ST TDEFAULT   TLIMIT     NNODES     NCORES      NGPUS")
    assert out(inst1, "queue", "disable", "-m", "maintenance today") == (
        "Job submission is disabled: maintenance today\n")
    cp = inst1.cli("submit", "true")
    assert (cp.returncode, one_error_line(cp)) == (
        1, "fluxlite submit: job submission is disabled: maintenance today")
    assert out(inst1, "queue", "status") == (
        "Job submission is disabled: maintenance today\nScheduling is started\n")
    row = out(inst1, "queue", "list", "-n").split()
    assert row[:2] == ["✗", "✔"] or row[:2] == ["n", "y"]
    assert out(inst1, "queue", "enable") == "Job submission is enabled\n"
    inst1.cli("run", "true", check=True)
    assert out(inst1, "queue", "disable", "--quiet") == ""
    assert "disabled by administrator" in out(inst1, "queue", "status")


# ------------------------------------------------------------------ resource
def test_resource_info_R_and_eventlog(instance_factory):
    inst = instance_factory(2, cores_per_rank=2)
    assert out(inst, "resource", "info") == "2 Nodes, 4 Cores, 0 GPUs\n"
    R = json.loads(out(inst, "resource", "R"))
    assert R["execution"]["R_lite"] == [{"rank": "0-1", "children": {"core": "0-1"}}]
    jobid_of(inst.cli("submit", "-N1", "sleep", "300", check=True))
    inst.cli("job", "wait-event", "-t", "30s", "ƒ" if False else out(inst, "job", "last").strip(),
             "start", check=True)
    assert out(inst, "resource", "info", "-s", "free") == "1 Nodes, 2 Cores, 0 GPUs\n"
    assert out(inst, "resource", "info", "-i", "1") == "1 Nodes, 2 Cores, 0 GPUs\n"
    names = [ln.split()[1] for ln in out(inst, "resource", "eventlog").splitlines()]
    assert names[:2] == ["resource-define", "online"]
    inst.cli("resource", "drain", "1", "bad disk", check=True)
    got = out(inst, "resource", "eventlog", "--wait", "drain", "-t", "30s").splitlines()
    assert got[-1].split()[1:] == ["drain", 'idset="1"', 'reason="bad', 'disk"']
    inst.cli("cancel", "--all", check=True)


# ----------------------------------------------------------------------- kvs
def test_kvs_put_json_raw_mkdir(inst1):
    inst1.cli("kvs", "put", "-j", 'a.b={"x": 1}', check=True)
    assert json.loads(out(inst1, "kvs", "get", "a.b")) == {"x": 1}
    cp = inst1.cli("kvs", "put", "-j", "a.c=notjson")
    assert one_error_line(cp) == "fluxlite kvs put: a.c: value is not valid JSON: 'notjson'"
    inst1.cli("kvs", "put", "-r", "a.d=[1]", check=True)
    assert kvsv.value(inst1.handle().call("kvs.lookup", {"key": "a.d"})) == "[1]"
    inst1.cli("kvs", "put", "-r", "a.e=-", input="from stdin", check=True)
    assert kvsv.value(inst1.handle().call("kvs.lookup", {"key": "a.e"})) == "from stdin"
    inst1.cli("kvs", "mkdir", "d.e", "a.b", check=True)
    assert out(inst1, "kvs", "ls", "-F", "d") == "e.\n"
    assert out(inst1, "kvs", "ls", "a.b") == ""     # the value became an empty directory


def test_kvs_eventlog_get_append_wait_event(inst1):
    inst1.cli("kvs", "eventlog", "append", "-t", "100.5", "log", "first", '{"a": 1}',
              check=True)
    inst1.cli("kvs", "eventlog", "append", "log", "second", check=True)
    lines = out(inst1, "kvs", "eventlog", "get", "log").splitlines()
    assert lines[0] == "100.500000 first a=1" and lines[1].endswith(" second")
    raw = [json.loads(ln) for ln in out(inst1, "kvs", "eventlog", "get", "-u", "log").split("\n")
           if ln]
    assert raw[0] == {"timestamp": 100.5, "name": "first", "context": {"a": 1}}
    assert out(inst1, "kvs", "eventlog", "wait-event", "-q", "log", "second") == ""
    cp = inst1.cli("kvs", "eventlog", "wait-event", "-t", "0.2s", "log", "third")
    assert cp.returncode == 1 and "timeout waiting for event 'third'" in cp.stderr
    with inst1.cli_background("kvs", "eventlog", "wait-event", "-W", "-t", "30s",
                              "later", "ready") as waiter:
        inst1.cli("kvs", "eventlog", "append", "later", "ready", check=True)
        text, _ = waiter.communicate(timeout=30)
    assert text.split()[1] == "ready" and waiter.returncode == 0
    cp = inst1.cli("kvs", "eventlog", "append", "log", "x", "[1]")
    assert one_error_line(cp).endswith("context must be a JSON object, got '[1]'")


# ----------------------------------------------------------------------- job
JOBSPEC_YAML = """\
version: 1
resources:
  - type: slot
    count: 2
    label: task
    with:
      - type: core
        count: 1
tasks:
  - command: ["sh", "-c", "echo task $FLUXLITE_TASK_RANK"]
    slot: task
    count:
      per_slot: 1
attributes:
  system:
    duration: 0
"""


def test_job_submit_a_jobspec_file(inst1, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(JOBSPEC_YAML)
    jobid = out(inst1, "job", "submit", str(path)).strip()
    assert sorted(out(inst1, "job", "attach", jobid).splitlines()) == ["task 0", "task 1"]
    import yaml
    as_json = json.dumps(yaml.safe_load(JOBSPEC_YAML))
    jobid = out(inst1, "job", "submit", "--urgency=0", input=as_json).strip()
    assert api.list_jobs(inst1.handle(), "all", ids=[fluid.parse(jobid)])[0]["urgency"] == 0
    inst1.cli("cancel", jobid, check=True)
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: [1\n")
    cp = inst1.cli("job", "submit", str(bad))
    assert one_error_line(cp).startswith(f"fluxlite job submit: {bad}: not a JSON or YAML")


def test_job_taskmap_forms(instance_factory):
    inst = instance_factory(2, cores_per_rank=2)
    jobid = jobid_of(inst.cli("submit", "-N2", "-n4", "--wait", "true", check=True))
    f58 = fluid.f58(jobid)
    assert out(inst, "job", "taskmap", f58) == '{"version":1,"map":[[0,2,2,1]]}\n'
    assert out(inst, "job", "taskmap", "--to=raw", f58) == "0-1;2-3\n"
    assert out(inst, "job", "taskmap", "--to=pmi", f58) == "(vector,(0,2,2))\n"
    assert out(inst, "job", "taskmap", "--to=multiline", f58) == "0: 0\n1: 0\n2: 1\n3: 1\n"
    assert out(inst, "job", "taskmap", "--taskids=1", f58) == "2-3\n"
    assert out(inst, "job", "taskmap", "--ntasks=0", f58) == "2\n"
    assert out(inst, "job", "taskmap", "--nodeid=3", f58) == "1\n"
    assert out(inst, "job", "taskmap", "--hostname=0", f58) == socket.gethostname() + "\n"
    assert out(inst, "job", "taskmap", "--to=raw", "(vector,(0,2,2))") == "0-1;2-3\n"
    cp = inst.cli("job", "taskmap", "--ntasks=0", "--nodeid=1", f58)
    assert cp.returncode == 1


def test_job_timeleft_hostpids_memo(instance_factory):
    inst = instance_factory(1, cores_per_rank=2)
    jobid = jobid_of(inst.cli("submit", "-n2", "-t", "10m", "sleep", "300", check=True))
    f58 = fluid.f58(jobid)
    inst.cli("job", "wait-event", "-t", "30s", "-p", "exec", f58, "shell.start", check=True)
    left = int(out(inst, "job", "timeleft", f58))
    assert 500 < left <= 600
    assert out(inst, "job", "timeleft").strip() == "4294967295"   # the instance: no limit
    assert out(inst, "job", "timeleft", "-H") == "infinity\n"
    pairs = out(inst, "job", "hostpids", f58).strip().split(",")
    host = socket.gethostname()
    assert [p.split(":")[0] for p in pairs] == [host, host]
    for p in pairs:
        with open(f"/proc/{p.split(':')[1]}/cmdline", "rb") as f:
            assert f.read().split(b"\0")[0] == b"sleep"
    assert out(inst, "job", "hostpids", "-r", "1", "-d", " ", f58) == pairs[1] + "\n"
    inst.cli("job", "memo", f58, "note=hello", "n=3", "a.b=true", check=True)
    memo = api.list_jobs(inst.handle(), "all", ids=[jobid])[0]["memo"]
    assert memo["note"] == "hello" and memo["n"] == 3 and memo["a"] == {"b": True}
    inst.cli("cancel", f58, check=True)
    api.wait(inst.handle(), jobid, timeout=30)
    assert out(inst, "job", "timeleft", f58) == "0\n"
    cp = inst.cli("job", "hostpids", f58)
    assert one_error_line(cp).endswith(f"job {f58} is inactive")


def test_job_info_any_key_and_id_forms(inst1):
    jobid = jobid_of(inst1.cli("submit", "--wait", "echo", "hi", check=True))
    f58 = fluid.f58(jobid)
    spec = json.loads(out(inst1, "job", "info", f58, "jobspec"))
    assert json.loads(out(inst1, "job", "info", f58, "J")) == spec
    assert json.loads(out(inst1, "job", "info", f58, "R"))["version"] == 1
    cp = inst1.cli("job", "info", f58, "nosuch")
    assert one_error_line(cp) == f"fluxlite job info: job {f58} has no nosuch"
    assert out(inst1, "job", "id", "--to=kvs", f58) == f"job.{fluid.dothex(jobid)}\n"
    assert out(inst1, "job", "id", "--to=hex", input=f"{f58}\n") == f"{hex(jobid)}\n"
    emoji = out(inst1, "job", "id", "--to=emoji", f58).strip()
    assert emoji == fluid.emoji(jobid) and out(inst1, "job", "id", emoji) == f"{jobid}\n"


# flux-core's own test values (t2201-job-cmd.t): the largest and smallest job ids
MAX_WORDS = "natural-analyze-verbal--natural-analyze-verbal"
MIN_WORDS = "academy-academy-academy--academy-academy-academy"


def test_job_ids_in_mnemonic_words(inst1, tmp_path):
    """`job id --to=words` spells ids as Flux does, any command takes the words as a job
    id, `jobs -o {id.words}` and the `{{id.words}}` template print them."""
    assert out(inst1, "job", "id", "--to=words", str(2**64 - 1), "0") == \
        f"{MAX_WORDS}\n{MIN_WORDS}\n"
    assert out(inst1, "job", "id", MAX_WORDS, MIN_WORDS) == f"{2**64 - 1}\n0\n"
    cp = inst1.cli("job", "id", "badwords-nosuch")
    assert cp.returncode != 0 and "badwords-nosuch" in one_error_line(cp)
    jobid = jobid_of(inst1.cli("submit", "--wait", f"--output={tmp_path}/{{{{id.words}}}}.out",
                               "echo", "hi", check=True))
    words = out(inst1, "job", "id", "--to=words", str(jobid)).strip()
    assert fluid.parse(words) == jobid and words.count("-") == 6
    assert (tmp_path / f"{words}.out").read_text() == "hi\n"
    assert json.loads(out(inst1, "job", "info", words, "jobspec"))["tasks"][0]["command"] == \
        ["echo", "hi"]
    assert out(inst1, "jobs", "-a", "-n", "-o", "{id.words} {id.dec}") == f"{words} {jobid}\n"
    assert out(inst1, "jobs", "-a", "-o", "{id.words}").splitlines()[0].strip() == "JOBID"
    assert out(inst1, "jobs", "-a", "-n", "-o", "{id.emoji} {id.dec}") == \
        f"{fluid.emoji(jobid)} {jobid}\n"


@pytest.mark.parametrize("group,sub", [("config", "get"), ("jobtap", "list"),
                                       ("module", "list"), ("event", "sub"),
                                       ("kvs", "eventlog")])
def test_groups_list_their_subcommands(group, sub):
    cp = subprocess.run(fluxlite_command() + [group, "--help"], capture_output=True,
                        text=True, timeout=30, check=True)
    assert f"  {sub}" in cp.stdout


# ------------------------------------------------------------ the guide's section 9


FLUX_COMMANDS = """alloc archive batch broker bulksubmit cancel config content cron dmesg dump
env event exec filemap fsck getattr hostlist housekeeping hwloc job jobs jobtap keygen
kvs logger mini modprobe module multi-prog overlay pgrep ping pmi proxy pstree python
queue resource restore run shutdown sproc start startlog submit top update uptime uri
version watch""".split()


def test_guide_names_every_flux_command_fluxlite_lacks():
    import pathlib

    from fluxlite.cli import COMMANDS
    guide = pathlib.Path(__file__).resolve().parents[2] / "docs" / "guide.md"
    text = guide.read_text()
    section = text[text.index("## 9. Differences from Flux"):
                   text.index("## 10. Flux compatibility")]
    missing = [c for c in FLUX_COMMANDS if c not in COMMANDS and f"`{c}`" not in section
               and f"`{c}`/" not in section and f"/`{c}`" not in section]
    assert missing == [], f"section 9 does not say these Flux commands are absent: {missing}"
    assert "PMIx" in section and "PMI-2" in section and "JournalConsumer" in section
    assert "backfill" in section and "flux-sched" in section and "`job wait`" in section

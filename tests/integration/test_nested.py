"""Instances as jobs: batch, alloc (with a command, interactive, --bg), proxy, uri,
nesting, critical ranks declared to the parent, cancel."""

import json
import os
import subprocess
import sys

import pexpect
import pytest

from fluxlite.client.sync import Handle
from fluxlite.jobapi import api
from fluxlite.testing import fluxlite_command, jobid_of, wait_fifo
from fluxlite.util import fluid


@pytest.fixture
def parent(instance_factory):
    return instance_factory(4, cores_per_rank=2)


def write_script(path, body: str) -> str:
    path.write_text(body)
    path.chmod(0o755)
    return str(path)


def test_batch_runs_script_in_its_own_instance(parent, tmp_path):
    script = write_script(tmp_path / "job.sh", """#!/bin/sh
# fluxlite: -N2
echo "level=$(fluxlite getattr instance-level) size=$(fluxlite getattr size)"
fluxlite run -N2 hostname
fluxlite resource list
exit 5
""")
    cp = parent.cli("batch", script, cwd=str(tmp_path))
    jobid = jobid_of(cp)
    # the script is in the jobspec: changing the file now must change nothing
    (tmp_path / "job.sh").write_text("#!/bin/sh\necho CHANGED\nexit 0\n")
    r = api.wait(parent.handle(), jobid, timeout=60)
    assert r["returncode"] == 5 and r["result"] == "FAILED"
    text = (tmp_path / f"fluxlite-{fluid.f58(jobid)}.out").read_text()
    assert "CHANGED" not in text
    assert "level=1 size=2" in text
    lines = text.splitlines()
    host = os.uname().nodename
    assert lines.count(host) >= 2
    free = [line.split() for line in lines if line.strip().startswith("free")][0]
    assert free[1:3] == ["2", "4"]  # the allocation: 2 nodes of 2 cores, nothing else
    spec = json.loads(parent.cli("job", "info", fluid.f58(jobid), "jobspec", check=True).stdout)
    opts = spec["attributes"]["system"]["shell"]["options"]
    assert opts["exit-timeout"] == "none" and opts["instance"] == 1
    assert spec["resources"][0]["count"] == 2


def test_batch_output_option_and_wrap(parent, tmp_path):
    out = tmp_path / "wrap.out"
    # as in Flux, the arguments joined by spaces are the script
    jobid = jobid_of(parent.cli("batch", "--output", str(out), "--wrap", "echo", "wrapped",
                                "$(fluxlite getattr size)"))
    assert api.wait(parent.handle(), jobid, timeout=60)["success"]
    assert out.read_text().strip() == "wrapped 1"


def test_batch_bad_input(parent, tmp_path):
    cp = parent.cli("batch", str(tmp_path / "missing.sh"))
    assert cp.returncode != 0 and "cannot read batch script" in cp.stderr
    noshebang = write_script(tmp_path / "x.sh", "echo hi\n")
    cp = parent.cli("batch", noshebang)
    assert cp.returncode != 0 and "must start with '#!'" in cp.stderr
    # a request that can never fit is a job (as Flux's), denied by the scheduler
    cp = parent.cli("batch", "-N", "9", "--wrap", "true", check=True)
    r = api.wait(parent.handle(), fluid.parse(cp.stdout.strip()))
    assert "unsatisfiable request: need 9 exclusive node(s)" in r["errstr"]
    cp = parent.cli("batch", "--broker-opts=oops", "--wrap", "true")
    assert cp.returncode != 0 and "broker options start with '-'" in cp.stderr


def test_exit_timeout_default_can_be_overridden(parent):
    jobid = jobid_of(parent.cli("batch", "-o", "exit-timeout=5s", "--output", "/dev/null",
                                "--wrap", "true"))
    spec = json.loads(parent.cli("job", "info", fluid.f58(jobid), "jobspec").stdout)
    assert spec["attributes"]["system"]["shell"]["options"]["exit-timeout"] == "5s"
    api.wait(parent.handle(), jobid, timeout=60)


def test_alloc_with_command(parent):
    cp = parent.cli("alloc", "-N2", "sh", "-c",
                    "fluxlite run -N2 -l printenv FLUXLITE_TASK_RANK; exit 7", timeout=60)
    assert cp.returncode == 7, cp.stderr
    assert sorted(cp.stdout.split("\n")[:2]) == ["0: 0", "1: 1"]


def test_alloc_interactive_on_a_terminal(parent):
    env = dict(parent.env, SHELL="/bin/sh", PS1="alloc$ ")
    child = pexpect.spawn(fluxlite_command()[0], ["alloc", "-N2"], env=env, timeout=60,
                          encoding="utf-8")
    try:
        child.expect_exact("alloc$ ")
        child.sendline("echo size=$(fluxlite getattr size) level=$(fluxlite getattr "
                       "instance-level)")
        child.expect_exact("size=2 level=1")
        child.expect_exact("alloc$ ")
        child.sendline("exit 3")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 3


def test_alloc_bg_proxy_uri_and_shutdown(parent):
    jobid = jobid_of(parent.cli("alloc", "-N2", "--bg", timeout=60))
    f58 = fluid.f58(jobid)
    uri = parent.cli("uri", f58, check=True).stdout.strip()
    assert uri.startswith("local://")
    with Handle(uri) as child:
        assert child.getattr("size") == "2"
        assert child.getattr("jobid") == f58
        assert child.getattr("parent-uri") == parent.uri
    cp = parent.cli("proxy", f58, "fluxlite", "run", "-N2", "hostname", check=True)
    assert len(cp.stdout.split()) == 2
    listing = parent.cli("jobs", "-no", "{id} {instance} {uri}", check=True).stdout
    assert f"{f58} yes {uri}" in listing
    rows = parent.cli("jobs", "--instances", check=True).stdout.splitlines()
    assert rows[0].split() == ["JOBID", "USER", "NAME", "ST", "NNODES", "DEPTH", "TIME", "URI"]
    assert rows[1].split()[0] == f58 and rows[1].split()[4:6] == ["2", "1"]
    parent.cli("proxy", f58, "fluxlite", "shutdown", check=True)
    r = api.wait(parent.handle(), jobid, timeout=60)
    assert r["success"], r
    cp = parent.cli("uri", f58)
    assert cp.returncode != 0 and "no longer running" in cp.stderr
    cp = parent.cli("uri", "ƒ1")
    assert cp.returncode != 0


def test_batch_inside_batch(parent, tmp_path):
    inner = tmp_path / "inner.out"
    outer = write_script(tmp_path / "outer.sh", f"""#!/bin/sh
id=$(fluxlite batch --output {inner} --wrap 'echo inner level $(fluxlite getattr instance-level)')
fluxlite job wait $id
""")
    jobid = jobid_of(parent.cli("batch", "-N2", "--output", str(tmp_path / "outer.out"), outer))
    r = api.wait(parent.handle(), jobid, timeout=90)
    assert r["success"], (tmp_path / "outer.out").read_text()
    assert inner.read_text().strip() == "inner level 2"


@pytest.mark.parametrize("topo,expected", [("kary:2", "0-1"), ("kary:0", "0")])
def test_child_declares_critical_ranks(parent, topo, expected):
    jobid = jobid_of(parent.cli("alloc", "-N4", "--bg", f"--broker-opts=-Stbon.topo={topo}",
                                timeout=60))
    h = parent.handle()
    assert h.call("job-exec.critical-ranks-get", {"id": jobid})["ranks"] == expected
    names = [(e["name"], (e.get("context") or {}).get("ranks"))
             for e in api.event_watch(h, jobid, "exec", follow=False)]
    assert ("critical-ranks", expected) in names
    parent.cli("cancel", fluid.f58(jobid), check=True)
    assert api.wait(h, jobid, timeout=60)["result"] == "CANCELED"


@pytest.mark.parametrize("topo,expected", [("kary:2", "0-1"), ("kary:0", "0")])
def test_batch_declares_critical_ranks(parent, tmp_path, topo, expected):
    """The same for a -N4 batch job: its script holds the instance up until the test
    has looked (it reads a FIFO the test writes), then the job completes."""
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    jobid = jobid_of(parent.cli("batch", "-N4", f"--broker-opts=-Stbon.topo={topo}",
                                "--output", str(tmp_path / "out"), "--wrap", "read x <", str(fifo)))
    h = parent.handle()
    for e in api.event_watch(h, jobid, "exec", timeout=60):
        if e["name"] == "critical-ranks":
            assert e["context"]["ranks"] == expected
            break
    assert h.call("job-exec.critical-ranks-get", {"id": jobid})["ranks"] == expected
    with open(fifo, "w") as f:
        f.write("go\n")
    assert api.wait(h, jobid, timeout=60)["success"]


def test_no_persist_keeps_every_rank_critical(parent):
    jobid = jobid_of(parent.cli("alloc", "-N2", "--bg", "--no-persist", timeout=60))
    h = parent.handle()
    assert h.call("job-exec.critical-ranks-get", {"id": jobid})["ranks"] == "0-1"
    parent.cli("cancel", fluid.f58(jobid), check=True)
    api.wait(h, jobid, timeout=60)


def test_critical_ranks_rpc_refuses_bad_requests(parent):
    h = parent.handle()
    jobid = jobid_of(parent.cli("alloc", "-N2", "--bg", timeout=60))
    done = jobid_of(parent.cli("submit", "true"))
    api.wait(h, done)

    def refused(payload, words, env=None):
        cp = subprocess.run(
            [sys.executable, "-c", "import json,sys\n"
             "from fluxlite.client.sync import Handle\n"
             "try:\n  Handle().call('job-exec.critical-ranks', json.loads(sys.argv[1]))\n"
             "except Exception as e:\n  print(type(e).__name__, e.errnum, e); sys.exit(1)\n",
             json.dumps(payload)], env=dict(parent.env, **(env or {})),
            capture_output=True, text=True, timeout=30)
        assert cp.returncode == 1 and words in cp.stdout, cp.stdout + cp.stderr
        return cp.stdout
    assert " 2 " in refused({"id": 1234, "ranks": "0"}, "unknown job id")      # ENOENT
    refused({"id": done, "ranks": "0"}, "is not running")
    assert " 22 " in refused({"id": jobid, "ranks": "foo"}, "invalid idset 'foo'")  # EINVAL
    refused({"id": jobid, "ranks": "0-5"}, "not shell ranks of job")
    assert " 71 " in refused({"id": jobid, "ranks": 3}, "ranks: expected `str`")   # EPROTO
    # a userid a client writes on its messages is not believed: the broker takes it
    # from the connection (EPERM for another user is tested in test_two_users.py)
    cp = subprocess.run(
        [sys.executable, "-c", "import json,sys\n"
         "from fluxlite.client.sync import Handle\n"
         "h = Handle(); h.userid, h.role = 4242, 2\n"
         "h.call('job-exec.critical-ranks', json.loads(sys.argv[1]))\n",
         json.dumps({"id": jobid, "ranks": "0"})], env=parent.env,
        capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0, cp.stderr
    # the owner's valid request works and is recorded
    h.call("job-exec.critical-ranks", {"id": jobid, "ranks": "0-1"})
    assert h.call("job-exec.critical-ranks-get", {"id": jobid})["ranks"] == "0-1"
    parent.cli("cancel", fluid.f58(jobid), check=True)
    api.wait(h, jobid, timeout=60)


def test_cancel_batch_takes_the_whole_instance_down(parent, tmp_path):
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    script = write_script(tmp_path / "long.sh", f"""#!/bin/sh
id=$(fluxlite submit -N2 sleep 300)
fluxlite job wait-event -p exec $id shell.start >/dev/null
echo started > {fifo}
fluxlite job wait $id
""")
    jobid = jobid_of(parent.cli("batch", "-N2", "--output", str(tmp_path / "o"), script))
    wait_fifo(fifo)  # the inner job started
    parent.cli("cancel", fluid.f58(jobid), check=True)
    r = api.wait(parent.handle(), jobid, timeout=60)
    assert r["result"] == "CANCELED"
    # the fixture asserts that no broker, shell or task of either instance is left


def test_child_attributes_and_clean_cancel(parent, tmp_path):
    out = tmp_path / "c.out"
    jobid = jobid_of(parent.cli("batch", "-N4", "--broker-opts=-Stbon.topo=kary:2", "--output",
                                str(out), "--wrap",
                                "fluxlite getattr broker.critical-ranks; "
                                "fluxlite kvs put printed=1; exec sleep 300"))
    h = parent.handle()
    for e in api.event_watch(h, jobid):
        if e["name"] == "memo":
            break
    # the script has printed once it says so in its instance's KVS
    parent.cli("proxy", fluid.f58(jobid), "fluxlite", "kvs", "get", "--waitcreate",
               "printed", check=True, timeout=60)
    uri = parent.cli("uri", fluid.f58(jobid), check=True).stdout.strip()
    rundir = Handle(uri).getattr("rundir")
    assert rundir.startswith(parent.getattr("rundir"))  # inside its parent's run directory
    parent.cli("cancel", fluid.f58(jobid), check=True)
    assert api.wait(h, jobid, timeout=60)["result"] == "CANCELED"
    text = out.read_text()
    assert text.splitlines()[0] == "0-1"
    assert "Traceback" not in text and "broker failed" not in text, text


def test_batch_from_stdin_and_bad_directives(parent, tmp_path):
    out = tmp_path / "stdin.out"
    jobid = jobid_of(parent.cli("batch", "--output", str(out),
                                input="#!/bin/sh\necho from stdin\n"))
    assert api.wait(parent.handle(), jobid, timeout=60)["success"]
    assert out.read_text().strip() == "from stdin"
    bad = write_script(tmp_path / "bad.sh", "#!/bin/sh\n# fluxlite: -N2 --bogus\ntrue\n")
    cp = parent.cli("batch", bad)
    assert cp.returncode != 0
    assert f"argument parsing failed at {bad} line 2: No such option '--bogus'" in cp.stderr
    cp = parent.cli("batch", "/bin/true")
    assert cp.returncode != 0 and "does not appear to be a script" in cp.stderr


def test_directives_merge_with_the_command_line(parent, tmp_path):
    """As Flux's batch: the command line wins for single options, repeatable ones add up,
    and every directive (--output, --error, --quiet) takes effect."""
    script = write_script(tmp_path / "d.sh", """#!/bin/sh
# fluxlite: -o exit-timeout=5s -N2
# fluxlite: -S user.foo=1 --env=FOO=bar
# fluxlite: --error=err.txt --output=out.txt --quiet

echo "FOO=$FOO BAZ=$BAZ size=$(fluxlite getattr size)"
echo to-stderr >&2
""")
    cp = parent.cli("batch", "-N1", "-o", "exit-on-error", "-S", "user.bar=2", "--env=BAZ=1",
                    script, cwd=str(tmp_path))
    assert cp.returncode == 0 and cp.stdout == "", cp.stderr   # --quiet from the directive
    jobid = api.list_jobs(parent.handle(), "all")[0]["id"]
    assert api.wait(parent.handle(), jobid, timeout=60)["success"]
    assert (tmp_path / "out.txt").read_text() == "FOO=bar BAZ=1 size=1\n"
    assert (tmp_path / "err.txt").read_text() == "to-stderr\n"
    spec = json.loads(parent.cli("job", "info", fluid.f58(jobid), "jobspec", check=True).stdout)
    opts = spec["attributes"]["system"]["shell"]["options"]
    assert opts["exit-timeout"] == "5s" and opts["exit-on-error"] == 1
    assert spec["attributes"]["user"] == {"foo": 1, "bar": 2}


@pytest.mark.parametrize("body, words", [
    ("# fluxlite: N2\ntrue\n", "line 2: unknown directive 'N2'"),
    ("# fluxlite: -N1\necho hi\n# fluxlite: -N2\n", "line 4: orphan 'fluxlite:' directive"),
    ("# fluxlite: --wrap\ntrue\n", "line 2: --wrap cannot be a directive"),
])
def test_bad_directives_are_refused(parent, tmp_path, body, words):
    script = write_script(tmp_path / "bad.sh", "#!/bin/sh\n" + body)
    cp = parent.cli("batch", script)
    assert cp.returncode != 0 and words in cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1
    assert api.list_jobs(parent.handle(), "all") == []


@pytest.mark.parametrize("opt, words", [
    ("-Snosuch.attr=1", "unknown attribute 'nosuch.attr'"),
    ("-Stbon.topo=kary:x", "invalid value for tbon.topo"),
    ("--bogus", "No such option '--bogus'"),
    ("oops", "broker options start with '-'"),
])
def test_bad_broker_opts_are_refused_at_submit(parent, opt, words):
    for cmd in (["batch", f"--broker-opts={opt}", "--wrap", "true"],
                ["alloc", "--bg", f"--broker-opts={opt}"]):
        cp = parent.cli(*cmd)
        assert cp.returncode != 0 and words in cp.stderr, cp.stderr
        assert len(cp.stderr.strip().splitlines()) == 1
    assert api.list_jobs(parent.handle(), "all") == []


def test_broker_opts_split_on_commas(parent):
    cp = parent.cli("alloc", "-N2", "--broker-opts=-Stbon.topo=kary:1,-Sexec.kill-timeout=2s",
                    "sh", "-c", "fluxlite getattr tbon.topo; fluxlite getattr exec.kill-timeout",
                    timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["kary:1", "2s"]


def test_broker_opts_take_fluxs_broker_options(parent, tmp_path):
    """Flux's broker options in --broker-opts: -cPATH (or -c,PATH, --config-path=PATH)
    is the instance's config path, --setattr=NAME=VALUE and -S,NAME=VALUE are -S,
    and -v (the broker's chatter) is taken."""
    conf = tmp_path / "b.toml"
    conf.write_text('[tbon]\ntorpid_max = "7s"\n')
    show = ("fluxlite getattr config.path; fluxlite getattr tbon.torpid-timeout; "
            "fluxlite getattr exec.kill-timeout; fluxlite config reload && echo reloaded")
    for opts in (f"-c{conf},--setattr=exec.kill-timeout=3s,-v",
                 f"-c,{conf},-S,exec.kill-timeout=3s,--verbose=2",
                 f"--config-path={conf},-Sexec.kill-timeout=3s,-vv"):
        cp = parent.cli("alloc", "-N1", f"--broker-opts={opts}", "sh", "-c", show,
                        timeout=60)
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.split() == [str(conf), "7s", "3s", "reloaded"], opts


@pytest.mark.parametrize("cmd", ["batch", "alloc"])
def test_help_shows_instance_defaults(parent, cmd):
    out = parent.cli(cmd, "--help", check=True).stdout
    assert "exit-timeout=none" in " ".join(out.split())
    assert "--no-persist" in out


@pytest.mark.parametrize("cmd", [["batch", "--wrap", "true"], ["alloc", "true"]])
def test_fewer_slots_than_nodes_is_refused(parent, cmd):
    """As `run -N2 -n1` is: every node of an instance job holds at least one slot."""
    cp = parent.cli(cmd[0], "-N2", "-n1", *cmd[1:])
    assert cp.returncode != 0
    assert cp.stderr.strip() == \
        f"fluxlite {cmd[0]}: node count (2) must not be greater than slot count (1)"
    assert api.list_jobs(parent.handle(), "all") == []

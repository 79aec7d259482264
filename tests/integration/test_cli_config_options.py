"""flux-config(1) through the real CLI: get -c/--config-path (offline, no
instance), set, unset, load (PATH, or JSON or TOML on stdin), reload (the config
path the instance started with) and builtin; and that a change takes effect
where Flux's does: [queues] and [policy] at once, the attributes that may change
at run time on every rank, a key read only at start not until the next start."""

from __future__ import annotations

import json
import os
import select
import subprocess
import threading
import time

import pytest
from tcpconf import local_tcp_config

from fluxlite.client.sync import Handle
from fluxlite.testing import fluxlite_command, one_error_line
from fluxlite.util import idset

pytestmark = pytest.mark.timeout(180)

CONF = """\
[tbon]
torpid_max = "5s"

[site]
name = "lab"

[queues.debug]
[queues.batch]
"""


def offline(*args, **kw) -> subprocess.CompletedProcess:
    """`fluxlite ARGS` with no instance to talk to."""
    env = {k: v for k, v in os.environ.items() if k != "FLUXLITE_URI"}
    return subprocess.run(fluxlite_command() + list(args), env=env, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL, **kw)


def out(inst, *args, **kw) -> str:
    return inst.cli("config", *args, check=True, **kw).stdout


def got(inst, *args):
    return json.loads(out(inst, "get", *args))


@pytest.fixture
def confdir(tmp_path):
    d = tmp_path / "conf.d"
    d.mkdir()
    (d / "a.toml").write_text(CONF)
    return d


@pytest.fixture
def inst2(instance_factory, confdir):
    return instance_factory(2, conf=str(confdir))


# ------------------------------------------------------------------- get -c
def test_get_config_path_reads_without_an_instance(confdir, tmp_path):
    (confdir / "b.toml").write_text('[site]\nrow = 4\n[tbon]\ntorpid_max = "7s"\n')
    (confdir / "ignored.txt").write_text("not toml")
    cp = offline("config", "get", "-c", str(confdir))
    assert cp.returncode == 0, cp.stderr
    # *.toml in name order, each merged into the ones before; as written, unchecked
    assert json.loads(cp.stdout) == {"tbon": {"torpid_max": "7s"},
                                     "site": {"name": "lab", "row": 4},
                                     "queues": {"debug": {}, "batch": {}}}
    cp = offline("config", "get", "--config-path", str(confdir), "--type=fsd-integer",
                 "tbon.torpid_max")
    assert (cp.returncode, cp.stdout) == (0, "7\n")
    js = tmp_path / "c.json"
    js.write_text('{"site": {"name": "json"}}')
    assert offline("config", "get", "-c", str(js), "site.name").stdout == "json\n"
    toml = tmp_path / "c.conf"
    toml.write_text('[site]\nname = "toml"\n')
    assert offline("config", "get", "-c", str(toml), "site.name").stdout == "toml\n"
    cp = offline("config", "get", "-c", str(toml), "site.row")
    assert one_error_line(cp) == "fluxlite config get: site.row is not set"


@pytest.mark.parametrize("content,said", [
    (None, "No such file or directory"),
    ("[site\n", "is not valid TOML"),
])
def test_get_config_path_bad_input(tmp_path, content, said):
    path = tmp_path / "bad.toml"
    if content is not None:
        path.write_text(content)
    cp = offline("config", "get", "-c", str(path))
    assert cp.stdout == "" and said in one_error_line(cp) and str(path) in cp.stderr


# -------------------------------------------------------------------- set, unset
def test_set_and_unset_take_effect_on_every_rank(inst2):
    inst2.cli("config", "set", "--type=fsd", "tbon.lost-timeout", "20s", check=True)
    assert got(inst2, "tbon") == {"torpid_max": "5s", "lost-timeout": "20s"}
    for rank in ("0", "1"):
        assert inst2.cli("getattr", "-r", rank, "tbon.lost-timeout",
                         check=True).stdout == "20s\n"
    # without --type: the type of the value now
    inst2.cli("config", "set", "site.name", "lab2", check=True)
    assert out(inst2, "get", "site.name") == "lab2\n"
    inst2.cli("config", "set", "-t", "integer", "site.rack.row", "0x10", check=True)
    inst2.cli("config", "set", "-t", "boolean", "site.open", "False", check=True)
    assert got(inst2, "site") == {"name": "lab2", "rack": {"row": 16}, "open": False}
    # unset: the key goes, and what it set is back to its default everywhere
    inst2.cli("config", "unset", "tbon.lost-timeout", check=True)
    assert "lost-timeout" not in got(inst2, "tbon")
    assert inst2.cli("getattr", "-r", "1", "tbon.lost-timeout", check=True).stdout == "10s\n"
    cp = inst2.cli("config", "unset", "site.no.such")   # as Flux's: nothing to remove
    assert (cp.returncode, cp.stderr) == (0, "")


@pytest.mark.parametrize("args,said", [
    (("site.color", "red"), "Type is unknown, please specify --type"),
    (("-t", "fsd-integer", "tbon.lost-timeout", "1"),
     "Invalid type for the set subcommand: fsd-integer"),
    (("-t", "integer", "site.row", "four"), "Error parsing integer value"),
    (("-t", "object", "site.t", "[1]"), "Error parsing json object"),
    (("-t", "fsd", "tbon.lost-timeout", "soon"), "Error parsing Flux Standard Duration"),
    (("-t", "string", "tbon.lost-timeout", "soon"), "invalid value for tbon.lost-timeout"),
    (("-t", "string", "tbon.bogus", "1"), "unknown key 'tbon.bogus'"),
    (("-t", "string", "site.name.first", "x"), "site.name is not a table"),
])
def test_set_bad_input(inst2, args, said):
    before = got(inst2)
    cp = inst2.cli("config", "set", *args)
    assert cp.stdout == "" and said in one_error_line(cp)
    assert got(inst2) == before          # nothing changed


def test_changes_only_on_rank_0(inst2):
    uri = inst2.cli("getattr", "-r", "1", "local-uri", check=True).stdout.strip()
    cp = inst2.cli("config", "set", "site.name", "x", env={"FLUXLITE_URI": uri})
    assert one_error_line(cp).endswith("configuration can only be changed on rank 0")
    cp = inst2.cli("config", "reload", env={"FLUXLITE_URI": uri})
    assert one_error_line(cp) == ("fluxlite config reload: reload: configuration can only "
                                  "be changed on rank 0")
    cp = inst2.cli("config", "reload", "--follower-noop", env={"FLUXLITE_URI": uri})
    assert (cp.returncode, cp.stderr) == (0, "")
    # followers read the leader's config
    inst2.cli("config", "set", "site.name", "lab3", check=True)
    assert inst2.cli("config", "get", "site.name", env={"FLUXLITE_URI": uri},
                     check=True).stdout == "lab3\n"


# ------------------------------------------------------------------------- load
def test_load_replaces_queues_and_policy_at_once(inst2, tmp_path):
    # JSON on stdin: queue batch goes, queue new comes, debug keeps its state
    inst2.cli("queue", "stop", "debug", check=True)
    inst2.cli("config", "load", input=json.dumps({"queues": {"debug": {}, "new": {}}}),
              check=True)
    assert got(inst2) == {"queues": {"debug": {}, "new": {}}}
    status = inst2.cli("queue", "status", check=True).stdout
    assert "new: Scheduling is started" in status and "batch" not in status
    assert "debug: Scheduling is stopped" in status
    # TOML on stdin: a policy limit is enforced on the next submission
    inst2.cli("config", "load", input='[queues.debug]\n[policy.limits]\nduration = "1m"\n',
              check=True)
    cp = inst2.cli("submit", "-q", "debug", "-t", "5m", "true")
    assert cp.returncode != 0 and "duration" in cp.stderr
    # a directory: its *.toml
    d = tmp_path / "next"
    d.mkdir()
    (d / "q.toml").write_text("[queues.q1]\n[queues.q2]\n")
    inst2.cli("config", "load", str(d), check=True)
    assert inst2.cli("queue", "list", "-n", "-o", "{queue}",
                     check=True).stdout.split() == ["q1", "q2"]


def test_load_refuses_removing_a_queue_with_jobs(inst2):
    jobid = inst2.cli("submit", "-q", "batch", "sleep", "300", check=True).stdout.strip()
    try:
        cp = inst2.cli("config", "load", input='{"queues": {"debug": {}}}')
        assert one_error_line(cp) == ("fluxlite config load: load: queue batch has 1 "
                                      "active job: it cannot be removed until they end")
        assert "batch" in got(inst2, "queues")      # nothing changed
    finally:
        inst2.cli("cancel", jobid, check=True)


def test_load_start_only_key_waits_for_the_next_start(inst2):
    inst2.cli("config", "load", input='{"resource": {"exclude": "1"}, "tbon": '
                                      '{"topo": "kary:1"}}', check=True)
    assert got(inst2, "resource") == {"exclude": "1"}        # in the config...
    assert inst2.cli("getattr", "tbon.topo", check=True).stdout != "kary:1\n"
    status = inst2.cli("resource", "status", "-s", "exclude", "-n", "-o", "{ranks}",
                       check=True).stdout
    assert "1" not in status                                 # ...not in effect
    log = inst2.cli("dmesg", check=True).stdout
    assert ("resource.exclude changed in the config: read only at start, it takes effect "
            "when the instance next starts") in log


@pytest.mark.parametrize("args,stdin,said", [
    ((), "x = \n", "TOML parse error"),
    ((), "[1, 2]", "not a config object"),
    ((), '{"tbon": {"lost-timeout": "soon"}}', "load: invalid value for tbon.lost-timeout"),
    ((), '{"queues": {"q": {"requires": 3}}}', "queues.q.requires"),
    ((), '{"queues": {"a": {}}, "policy": {"jobspec": {"defaults": {"system": '
         '{"queue": "zz"}}}}}', "'zz' is not a configured queue"),
    (("/nonexistent/conf.d",), None, "Error parsing config: cannot read config"),
])
def test_load_bad_input(inst2, args, stdin, said):
    before = got(inst2), inst2.cli("queue", "status", check=True).stdout
    cp = inst2.cli("config", "load", *args, input=stdin)
    assert cp.stdout == "" and said in one_error_line(cp)
    assert (got(inst2), inst2.cli("queue", "status", check=True).stdout) == before


# ----------------------------------------------------------------------- reload
def test_reload_reads_the_start_config_path(inst2, confdir):
    assert inst2.cli("getattr", "config.path", check=True).stdout == f"{confdir}\n"
    inst2.cli("config", "set", "site.name", "changed", check=True)
    (confdir / "b.toml").write_text('[tbon]\nlost-timeout = "30s"\n')
    inst2.cli("config", "reload", check=True)
    assert got(inst2, "site") == {"name": "lab"}            # the files, again
    assert got(inst2, "tbon") == {"torpid_max": "5s", "lost-timeout": "30s"}
    assert inst2.cli("getattr", "-r", "1", "tbon.lost-timeout", check=True).stdout == "30s\n"
    (confdir / "c.toml").write_text("[site\n")
    cp = inst2.cli("config", "reload")
    assert one_error_line(cp).startswith("fluxlite config reload: reload: Config file error:")
    assert got(inst2, "site") == {"name": "lab"}


def test_reload_remakes_every_start_config_source_in_order(instance_factory, confdir,
                                                          tmp_path):
    """start -c PATH --conf FILE --conf KEY=VAL --conf JSON: reload reads the paths
    again and merges the --conf values after them, as at start."""
    extra = tmp_path / "extra.toml"
    extra.write_text("[site]\nrow = 1\n")
    inst = instance_factory(2, start_args=[
        "-c", str(confdir), "--conf", str(extra), "--conf", "site.name=override",
        "--conf", '{"tbon": {"lost-timeout": "40s"}}'])
    start = got(inst)
    assert start["site"] == {"name": "override", "row": 1}
    assert start["tbon"] == {"torpid_max": "5s", "lost-timeout": "40s"}
    extra.write_text("[site]\nrow = 2\n")
    inst.cli("config", "reload", check=True)
    assert got(inst, "site") == {"name": "override", "row": 2}
    assert got(inst, "tbon") == {"torpid_max": "5s", "lost-timeout": "40s"}
    assert inst.cli("getattr", "-r", "1", "tbon.lost-timeout", check=True).stdout == "40s\n"
    assert got(inst, "queues") == {"debug": {}, "batch": {}}


def test_reload_without_a_config_path_changes_nothing(inst1):
    cp = inst1.cli("getattr", "config.path")
    assert cp.returncode != 0
    inst1.cli("config", "load", input='{"site": {"name": "x"}}', check=True)
    inst1.cli("config", "reload", check=True)       # as Flux: no path, nothing to read
    assert got(inst1) == {"site": {"name": "x"}}


# ------------------------------------------------- a rank that joins after a change
def wait_for_line(stream, needle: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"no line with {needle!r} within {timeout}s"
        line = stream.readline()
        assert line, f"end of output before a line with {needle!r}"
        if needle in line:
            return


def test_a_rank_that_joins_again_gets_the_config(tmp_path):
    # two brokers of fixed hosts (node0, node1) on this machine, over TCP
    conf, _, _ = local_tcp_config(tmp_path, extra="\n[tbon]\ntorpid-timeout = \"1s\"\n"
                                                 "lost-timeout = \"2s\"\n")
    rundir = tmp_path / "rank0"
    rundir.mkdir(mode=0o700)

    def broker(host, *extra, stderr=subprocess.DEVNULL):
        return subprocess.Popen(fluxlite_command() + ["broker", "--config-path", conf,
                                                      "--hostname", host, *extra],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=stderr, text=True)

    procs = [broker("node0", "--rundir", str(rundir), "-Sbroker.rc2-none=1",
                    "-Slog-stderr-level=info", stderr=subprocess.PIPE), broker("node1")]
    env = dict(os.environ, FLUXLITE_URI=f"local://{rundir}/local")
    h = None
    try:
        wait_for_line(procs[0].stderr, "->run", 60)       # rank 0 serves clients
        threading.Thread(target=procs[0].stderr.read, daemon=True).start()
        h = Handle(env["FLUXLITE_URI"])

        def members(predicate):
            for snap in h.stream("overlay.watch", nodeid=0, timeout=60):
                if predicate({k: idset.decode(v) for k, v in snap["ranks"].items()}):
                    return
        members(lambda ms: ms.get("online") == {0, 1})
        procs[1].kill()
        procs[1].wait(30)
        members(lambda ms: 1 in ms.get("lost", set()))
        cp = subprocess.run(fluxlite_command() + ["config", "set", "-t", "fsd",
                                                  "exec.kill-timeout", "7s"],
                            env=env, capture_output=True, text=True, timeout=60)
        assert cp.returncode == 0, cp.stderr
        log = h.rpc("broker.dmesg-follow", {"new": True}, nodeid=0, streaming=True)
        procs[1] = broker("node1")          # node1 starts again, from the config file
        given = None
        while given is None:
            h.wait(log, 60)
            given = next((e for e in log.take()["entries"]
                          if e.get("event") == "config given to ranks that joined"), None)
        assert given["ranks"] == "1"
        assert h.call("attr.get", {"name": "exec.kill-timeout"}, nodeid=1)["value"] == "7s"
        assert h.call("config.get", nodeid=1)["exec"] == {"kill-timeout": "7s"}
    finally:
        if h is not None:
            h.close()
        subprocess.run(fluxlite_command() + ["shutdown"], env=env, capture_output=True,
                       timeout=60)
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(30)


# ---------------------------------------------------------------------- builtin
def test_builtin_names():
    from fluxlite.util.compat import compat_dirs
    cp = offline("config", "builtin", "python_path")
    assert (cp.returncode, cp.stdout) == (0, compat_dirs()[1] + "\n")
    assert os.path.isdir(cp.stdout.strip())
    assert offline("config", "builtin", "--installed", "exec_path").stdout == \
        compat_dirs()[0] + "\n"
    assert offline("config", "builtin", "--intree", "confdir").stdout == "/etc/flux\n"
    assert os.path.isdir(offline("config", "builtin", "rundir").stdout.strip())


@pytest.mark.parametrize("name,said", [
    ("rc1_path", "rc1_path has no value in fluxlite: no rc1 script"),
    ("nosuchname", "nosuchname is invalid (names: confdir, rundir, python_path, "
                   "exec_path)"),
])
def test_builtin_bad_names(name, said):
    cp = offline("config", "builtin", name)
    assert cp.stdout == "" and said in one_error_line(cp)

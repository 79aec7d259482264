"""Real instances: joining, routing, events, exit status, broker loss, bad input."""

import json
import os
import signal
import subprocess

import msgpack
import pytest
import zmq

from fluxlite.client.sync import Handle
from fluxlite.errors import FluxliteError
from fluxlite.protocol import message as m
from fluxlite.testing import Instance, assert_no_leaks, fluxlite_command, tagged_processes
from fluxlite.util import hostlist


@pytest.mark.parametrize("size", [1, 4, 16])
def test_all_ranks_join_and_answer_ping(instance_factory, size):
    inst = instance_factory(size, topo="kary:2" if size == 16 else None)
    snap = inst.wait_membership(lambda s: len(s.get("online", ())) == size)
    assert snap["online"] == set(range(size))
    out = inst.cli("overlay", "status", check=True).stdout
    assert out.count(": full") == size
    h = inst.handle()
    for rank in range(size):
        assert h.call("broker.ping", {"seq": rank}, nodeid=rank)["rank"] == rank
    assert inst.getattr("size") == str(size)
    assert inst.cli("ping", "--count", "2", str(size - 1), check=True).stdout.count("time=") == 2


def test_attributes(inst4):
    h = inst4.handle()
    assert h.getattr("rank", 2) == "2"
    assert h.getattr("tbon.topo") == "kary:32"
    assert h.getattr("instance-level") == "0"
    assert int(h.getattr("broker.pid", 3)) != int(h.getattr("broker.pid", 0))
    rundir = h.getattr("rundir")
    assert os.stat(rundir).st_mode & 0o777 == 0o700
    assert h.getattr("local-uri", 1).endswith("/local-1")
    # every rank knows every rank's host (one machine here: four times its name)
    assert h.getattr("hostlist", 3) == hostlist.encode([h.getattr("hostname")] * 4)
    cp = inst4.cli("getattr", "nosuch")
    assert cp.returncode != 0 and "unknown attribute 'nosuch'" in cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1
    inst4.cli("setattr", "tbon.torpid-timeout", "4s", check=True)
    assert inst4.cli("getattr", "tbon.torpid-timeout").stdout.strip() == "4s"
    cp = inst4.cli("setattr", "size", "9")
    assert cp.returncode != 0 and "cannot be changed" in cp.stderr
    names = inst4.cli("lsattr", check=True).stdout.split()
    assert {"rank", "size", "broker.pid", "tbon.topo", "local-uri", "rundir"} <= set(names)


def test_events_reach_every_rank_in_order(instance_factory):
    inst = instance_factory(4, topo="kary:2")
    handles = []
    for rank in range(4):
        h = Handle(inst.getattr("local-uri", rank))
        got = []
        h.on_event = lambda msg, got=got: got.append((msg.seq, msg.payload["n"]))
        h.subscribe("test.")
        handles.append((h, got))
    pub = inst.handle()
    for n in range(50):
        pub.call("event.publish", m.event_publish_payload("test.count", {"n": n}))
    for h, got in handles:
        assert h.run_until(lambda got=got: len(got) >= 50, timeout=10)
        assert [n for _, n in got] == list(range(50))
        seqs = [s for s, _ in got]
        assert seqs == sorted(seqs) and len(set(seqs)) == 50
        h.close()


@pytest.mark.parametrize("cmd,code", [
    (["true"], 0), (["sh", "-c", "exit 7"], 7), (["sh", "-c", "kill -TERM $$"], 128 + 15),
])
def test_exit_status_propagates(cmd, code):
    inst = Instance(2)
    cp = subprocess.run(fluxlite_command() + ["start", "-s", "2", "--"] + cmd, env=inst.env,
                        capture_output=True, timeout=60)
    assert cp.returncode == code, cp.stderr
    assert_no_leaks(inst.tag)


def test_initial_program_sees_uri_and_rundir_is_removed():
    inst = Instance(1)
    cp = subprocess.run(fluxlite_command() + ["start", "sh", "-c",
                                              'echo "$FLUXLITE_URI"; fluxlite getattr rundir'],
                        env=inst.env, capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    uri, rundir = cp.stdout.split()
    assert uri.startswith("local://") and uri.endswith("/local-0")
    assert not os.path.exists(rundir)
    assert_no_leaks(inst.tag)


def test_missing_command_is_127():
    inst = Instance(1)
    cp = subprocess.run(fluxlite_command() + ["start", "no-such-command-xyz"], env=inst.env,
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 127
    assert "no-such-command-xyz" in cp.stderr
    assert_no_leaks(inst.tag)


def test_killed_rank0_is_reported():
    inst = Instance(2).start()
    inst.kill_broker(0)
    assert inst.proc.wait(30) == 128 + signal.SIGKILL
    assert "rank 0 broker" in inst.stderr_tail() and "Killed" in inst.stderr_tail()
    assert_no_leaks(inst.tag)


def test_sigterm_to_launcher_shuts_down_cleanly():
    inst = Instance(4)
    inst.READY_PROGRAM = ["sh", "-c", 'echo "$FLUXLITE_URI"; exec sleep 300']
    inst.start()
    inst.proc.send_signal(signal.SIGTERM)
    assert inst.proc.wait(30) == 128 + signal.SIGTERM
    assert_no_leaks(inst.tag)


@pytest.mark.parametrize("args,words", [
    (["--size", "0"], "0 is not in the range"),
    (["--size", "-3"], "is not in the range"),
    (["--size", "100000"], "is not in the range"),
    (["--size", "many"], "is not a valid integer"),
    (["--topo", "kary:x"], "invalid topology"),
    (["--topo", "tree"], "invalid topology"),
    (["--frobnicate"], "no such option"),
    (["-S", "nosuch=1"], "unknown attribute"),
    (["-S", "tbon.lost-timeout=soon"], "invalid value for tbon.lost-timeout"),
    (["-S", "tbon.keepalive-period=0"], "must be longer than 0s"),
    (["-S", "resource.cores=abc"], "invalid value for resource.cores"),
    (["-S", "broker.critical-ranks=0-5"], "this instance has ranks 0-0"),
])
def test_start_bad_input(args, words):
    cp = subprocess.run(fluxlite_command() + ["start"] + args + ["true"],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode != 0
    assert words.lower() in cp.stderr.lower()
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr


def test_no_instance_at_uri():
    env = dict(os.environ, FLUXLITE_URI="local:///tmp/fl-nonexistent/local-0")
    cp = subprocess.run(fluxlite_command() + ["ping", "0"], env=env, capture_output=True,
                        text=True, timeout=30)
    assert cp.returncode != 0 and "no instance" in cp.stderr
    env.pop("FLUXLITE_URI")
    cp = subprocess.run(fluxlite_command() + ["getattr", "size"], env=env, capture_output=True,
                        text=True, timeout=30)
    assert cp.returncode != 0 and "FLUXLITE_URI is not set" in cp.stderr


def test_unknown_service_is_enosys(inst1):
    cp = inst1.cli("ping", "nosuchservice")
    assert cp.returncode != 0
    assert "No service matching nosuchservice.ping is registered" in cp.stderr
    cp = inst1.cli("ping", "5")
    assert cp.returncode != 0 and "rank 5 does not exist" in cp.stderr


def test_kill_leaf_is_lost_and_rest_keeps_working(instance_factory):
    # lost-timeout none: the loss must be noticed from the closed connection itself
    inst = instance_factory(4, setattrs=["tbon.lost-timeout=none"])
    inst.wait_membership(lambda s: len(s.get("online", ())) == 4)
    inst.kill_broker(3)
    inst.wait_membership(lambda s: s.get("lost") == {3}, timeout=5)
    out = inst.cli("overlay", "status", check=True).stdout
    assert "3 " in out and "lost" in out.splitlines()[-1]
    assert "0 " in out.splitlines()[0] and "degraded" in out.splitlines()[0]
    h = inst.handle()
    for rank in (0, 1, 2):
        assert h.call("broker.ping", nodeid=rank)["rank"] == rank
    with pytest.raises(Exception, match="unreachable"):
        h.call("broker.ping", nodeid=3)


def test_kill_interior_loses_subtree_and_children_exit(instance_factory):
    inst = instance_factory(7, topo="kary:2", setattrs=["tbon.lost-timeout=none"])
    inst.wait_membership(lambda s: len(s.get("online", ())) == 7)
    orphans = [inst.broker_pid(r) for r in (3, 4)]
    inst.kill_broker(1)
    snap = inst.wait_membership(lambda s: s.get("lost") == {1, 3, 4}, timeout=5)
    assert snap["online"] == {0, 2, 5, 6}
    from fluxlite.testing import wait_pids_gone
    assert wait_pids_gone(orphans, 10) == set()
    h = inst.handle()
    assert h.call("broker.ping", nodeid=6)["rank"] == 6


def test_inflight_rpc_fails_with_ehostunreach(instance_factory):
    inst = instance_factory(3, topo="kary:1", setattrs=["tbon.lost-timeout=none"])
    inst.wait_membership(lambda s: len(s.get("online", ())) == 3)
    h = inst.handle()
    # a streaming RPC to rank 2 stays open; killing rank 1 (on its path) must fail it at once
    pending = h.rpc("overlay.watch", nodeid=2, streaming=True)  # rank 2 answers EINVAL...
    h.wait(pending, 10)
    with pytest.raises(FluxliteError):
        pending.take()
    # ...so use a request that rank 2 never answers: a ping to a service a client registers
    owner = Handle(inst.getattr("local-uri", 2))
    owner.call("service.add", {"service": "sink"})
    owner.on_request = lambda msg: None  # never answers
    pending = h.rpc("sink.anything", nodeid=2)
    assert owner.run_until(lambda: False, timeout=0.2) is False  # the request is parked there
    inst.kill_broker(1)
    h.wait(pending, 5)
    with pytest.raises(Exception) as info:
        pending.take()
    assert getattr(info.value, "errnum", None) == 113  # EHOSTUNREACH
    owner.close()


def test_garbage_on_every_socket_is_survived(inst4):
    ctx = zmq.Context.instance()
    rundir = inst4.getattr("rundir")
    for path in ("local-0", "tbon-0"):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.RCVTIMEO, 10000)
        s.connect(f"ipc://{rundir}/{path}")
        s.send(b"garbage")
        s.send_multipart([b"\xc1\xc1", b""])
        s.send_multipart([msgpack.packb([1, 0, "broker.ping", 0, 0, 0, 0, "", 0, 0, [2.5]]), b""])
        s.send_multipart([msgpack.packb([1, 0, "broker.ping", -2, 9, 0, 0, "", 0, 0, []]), b""])
        s.send_multipart([msgpack.packb([1, 0, "kvs.ping", 0, 9, 0, 0, "", 0, 0, []]), b"\xc1"])
        if path == "local-0":
            # a valid header with an undecodable payload: answered with EPROTO
            s.send_multipart([msgpack.packb([1, 0, "attr.get", 0, 7, 0, 0, "", 0, 0, []]),
                              b"\xc1"])
            # the negative nodeid was refused as a malformed frame; the bad kvs.ping
            # payload was answered with EPROTO, and so was the getattr
            replies = [m.decode(s.recv_multipart()) for _ in range(2)]
            assert [(r.matchtag, r.errnum) for r in replies] == [(9, 71), (7, 71)]
        else:
            # a request from a peer that never said hello is refused
            reply = m.decode(s.recv_multipart())
            assert reply.topic == "disconnect" and "not said hello" in reply.payload["reason"]
            s.send_multipart(m.encode(m.Message.control("hello", {"version": 999, "rank": 1})))
            reply = m.decode(s.recv_multipart())
            assert reply.topic == "disconnect" and "999" in reply.payload["reason"]
            s.send_multipart(m.encode(m.Message.control("hello", {"version": 1, "rank": 77})))
            reply = m.decode(s.recv_multipart())
            assert reply.topic == "disconnect" and "not a child" in reply.payload["reason"]
        s.close()
    # a client that vanishes with a stream open
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(f"ipc://{rundir}/local-0")
    s.send_multipart(m.encode(m.Message.request("overlay.watch", nodeid=0, flags=m.STREAMING,
                                                matchtag=5)))
    s.recv_multipart()
    s.close()
    h = inst4.handle()
    for rank in range(4):
        assert h.call("broker.ping", nodeid=rank)["rank"] == rank
    # the bad frames were logged, not fatal; the version mismatch names both versions
    log = inst4.cli("dmesg", check=True).stdout
    assert "protocol version mismatch" in log
    assert "malformed" in log
    # membership changes are still streamed (the vanished watcher was dropped)
    inst4.wait_membership(lambda s: len(s.get("online", ())) == 4)


def test_dmesg_shows_state_transitions(inst1):
    out = inst1.cli("dmesg", check=True).stdout
    for line in ("parent-none: join->init", "init-success: init->quorum",
                 "quorum-full: quorum->run"):
        assert line in out


def test_shutdown_command_ends_instance():
    inst = Instance(4).start()
    inst.cli("shutdown", check=True)
    # a deliberate shutdown ends the initial program and is a clean exit
    assert inst.proc.wait(30) == 0
    assert_no_leaks(inst.tag)


def test_help_on_every_command():
    """--help of every command and of every subcommand of a group, nested ones too
    (kvs eventlog get)."""
    import click

    from fluxlite.cli import COMMANDS, cli

    def paths(words, command):
        yield words
        if isinstance(command, click.Group):
            for sub in command.list_commands(None):
                yield from paths(words + [sub], command.get_command(None, sub))

    ctx = click.Context(cli)
    every = [p for name in COMMANDS for p in paths([name], cli.get_command(ctx, name))]
    assert ["kvs", "eventlog", "wait-event"] in every and ["job", "taskmap"] in every
    for words in every:
        cp = subprocess.run(fluxlite_command() + words + ["--help"], capture_output=True,
                            text=True, timeout=30)
        assert cp.returncode == 0, (words, cp.stderr)
        assert "Usage:" in cp.stdout, words


def test_start_without_command_runs_interactive_shell():
    import pexpect
    inst = Instance(2)
    env = dict(inst.env, SHELL="/bin/sh", PS1="inside$ ")
    child = pexpect.spawn(fluxlite_command()[0], ["start", "-s", "2"], env=env, timeout=60,
                          encoding="utf-8")
    try:
        child.expect_exact("inside$ ")
        child.sendline("fluxlite getattr size")
        child.expect_exact("2")
        child.expect_exact("inside$ ")
        child.sendintr()  # Ctrl-C goes to the shell, not to the instance
        child.expect_exact("inside$ ")
        child.sendline("exit 4")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 4
    assert_no_leaks(inst.tag)


def test_sigint_to_launcher_shuts_down_cleanly():
    inst = Instance(4)
    inst.READY_PROGRAM = ["sh", "-c", 'echo "$FLUXLITE_URI"; exec sleep 300']
    inst.start()
    inst.proc.send_signal(signal.SIGINT)
    # the launcher asks rank 0 to shut down, which terminates the initial program
    assert inst.proc.wait(30) == 128 + signal.SIGINT  # as a command stopped by Ctrl-C
    assert_no_leaks(inst.tag)


def test_leak_check_sees_brokers_spawners_and_shells(inst4):
    """The leak check finds processes by an environment tag: it must see every kind."""
    from fluxlite.jobapi import api
    from fluxlite.util import fluid
    h = inst4.handle()
    jobid = fluid.parse(inst4.cli("submit", "-N2", "sleep", "60", check=True).stdout.strip())
    for e in api.event_watch(h, jobid, "exec"):
        if e["name"] == "shell.start":
            break
    names = list(tagged_processes(inst4.tag).values())
    assert sum(n.startswith("fluxlite-broker") for n in names) == 4
    assert sum(n.startswith("fluxlite-spawner") for n in names) == 4
    assert sum(n.startswith("fluxlite-shell") for n in names) == 2
    assert sum(n.startswith("sleep") for n in names) == 2, names
    inst4.cli("cancel", fluid.f58(jobid), check=True)
    api.wait(h, jobid, timeout=30)


def test_conf_file_getattr_rank_ping_service_and_json_views(instance_factory, tmp_path):
    """`start --conf FILE` from the command line, `getattr --rank`, `ping SERVICE`,
    `overlay status --json`, and the JSON-lines log in the run directory."""
    conf = tmp_path / "site.toml"
    conf.write_text('[tbon]\ntopo = "kary:1"\n')
    inst = instance_factory(3, conf=str(conf))
    assert inst.cli("getattr", "tbon.topo", check=True).stdout.strip() == "kary:1"
    assert inst.cli("getattr", "--rank", "2", "rank", check=True).stdout.strip() == "2"
    ping = inst.cli("ping", "--count", "2", "kvs", check=True).stdout.splitlines()
    assert len(ping) == 2 and all(line.startswith("0!kvs.ping") for line in ping)
    status = json.loads(inst.cli("overlay", "status", "--json", check=True).stdout)
    assert status["size"] == 3 and status["topo"] == "kary:1"
    assert [(r["rank"], r["parent"], r["state"]) for r in status["ranks"]] == \
        [(0, None, "online"), (1, 0, "online"), (2, 1, "online")]
    rundir = inst.cli("getattr", "rundir", check=True).stdout.strip()
    with open(os.path.join(rundir, "broker-0.log")) as f:
        first = json.loads(f.readline())
    assert first["rank"] == 0 and first["event"] == "parent-none: join->init"
    bad = tmp_path / "bad.toml"
    bad.write_text("[tbon]\nnosuch = 1\n")
    cp = subprocess.run(fluxlite_command() + ["start", "--conf", str(bad), "true"],
                        capture_output=True, text=True, timeout=30)
    assert cp.returncode != 0 and len(cp.stderr.strip().splitlines()) == 1
    assert "nosuch" in cp.stderr

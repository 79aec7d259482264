"""Hostile input against real instances: each defect issue 10 found, as an attack.

Every test attacks a running instance the way a buggy or malicious local
process would (through the API, or with hand-made frames on its sockets) and
then checks two things: the attack got a clear error naming what was wrong (or
was dropped), and the instance is still whole (it answers and runs jobs, and,
through the Instance fixture, leaves no process behind).
"""

from __future__ import annotations

import copy
import errno
import math
import os
import signal
import subprocess
import sys
import time

import pytest
from rawpeer import RawPeer, header, local_endpoint, rss_kib, tbon_endpoint

from fluxlite.errors import FluxliteError
from fluxlite.job import jobspec as js
from fluxlite.protocol import message as m
from fluxlite.protocol.schema import MAX_COUNT
from fluxlite.testing import fluxlite_command, jobid_of, wait_event
from fluxlite.util import fluid


def refused(h, topic, payload, errnum, *words, nodeid=None):
    """The call fails with `errnum`, and its sentence holds every one of `words`."""
    with pytest.raises(FluxliteError) as info:
        h.call(topic, payload, nodeid=nodeid, timeout=10)
    err = info.value
    assert err.errnum == errnum, f"{topic} {payload!r}: {err.errname} {err.message}"
    for w in words:
        assert w in err.message, f"{topic}: {w!r} not in {err.message!r}"
    return err.message


def still_whole(inst, nodes: int = 1) -> None:
    """The instance answers and runs a job on `nodes` nodes."""
    inst.cli("ping", "--count=1", "0", check=True)
    cp = inst.cli("run", f"-N{nodes}", "echo", "alive", check=True)
    assert cp.stdout.split() == ["alive"] * nodes


# -------------------------------------------------------------- 1. job ids
JOB_ID_METHODS = [
    ("job-manager.info", {}),
    ("job-manager.cancel", {}),
    ("job-manager.raise", {"type": "test", "severity": 0}),
    ("job-manager.kill", {"signum": 15}),
    ("job-manager.wait", {}),
    ("job-manager.memo", {"memo": {}}),
    ("job-exec.kill", {"signum": 15}),
    ("job-exec.critical-ranks", {"ranks": "0"}),
    ("job-exec.critical-ranks-get", {}),
]


@pytest.mark.parametrize("bad,errnum,words", [
    (-1, errno.EINVAL, ["id", ">= 0"]),
    (-(2 ** 63), errno.EINVAL, ["id", ">= 0"]),
    (2 ** 63, errno.EINVAL, ["id", "<="]),
    (True, errno.EPROTO, ["id", "bool"]),
    (1.5, errno.EPROTO, ["id", "float"]),
    ("ƒ1", errno.EPROTO, ["id", "str"]),
])
def test_bad_job_ids_are_refused_by_every_method(inst1, bad, errnum, words):
    """A negative id once looped rank 0 forever in f58(); now every method that takes
    an id refuses any id that is not an integer from 0 to 2**63-1, naming the field."""
    h = inst1.handle()
    for topic, rest in JOB_ID_METHODS:
        refused(h, topic, {"id": bad, **rest}, errnum, topic, *words)
    still_whole(inst1)


def test_f58_refuses_what_is_not_a_job_id():
    for bad in (-1, 2 ** 64, 1.5, True, None):
        with pytest.raises(ValueError, match="invalid job id"):
            fluid.f58(bad)
    assert fluid.parse(fluid.f58(2 ** 64 - 1)) == 2 ** 64 - 1


# ------------------------------------------------------------ 2. task counts
@pytest.mark.parametrize("count,field", [
    ({"total": 10 ** 8}, "tasks[0].count.total"),
    ({"per_slot": MAX_COUNT + 1}, "tasks[0].count.per_slot"),
    ({"per_node": 2 ** 40}, "tasks[0].count.per_node"),
    ({"total": 0}, "tasks[0].count.total"),
])
def test_huge_task_counts_are_refused_at_once(inst1, count, field):
    """tasks[0].count once made rank 0 lay out 1e8 tasks one by one (20 s without
    answering anyone); now counts have Flux's lower bound and a finite upper one."""
    h = inst1.handle()
    spec = js.Jobspec.from_command(["true"]).jobspec
    spec["tasks"][0]["count"] = count
    t0 = time.monotonic()
    refused(h, "job-manager.submit", {"jobspec": spec}, errno.EINVAL, field)
    refused(h, "sched.feasibility", {"jobspec": spec}, errno.EINVAL, field)
    assert time.monotonic() - t0 < 10  # an answer, not a stalled loop (bound: the RPC's)
    still_whole(inst1)


def test_counts_that_multiply_past_the_limit_are_refused(inst1):
    h = inst1.handle()
    spec = js.Jobspec.from_command(["true"], num_tasks=MAX_COUNT).jobspec
    spec["tasks"][0]["count"] = {"per_slot": 2}
    refused(h, "job-manager.submit", {"jobspec": spec}, errno.EINVAL,
            "tasks[0].count.per_slot", f"at most {MAX_COUNT}")


# --------------------------------------------------- 7. malformed jobspecs
def _set(path, value):
    def mutate(spec):
        node = spec
        for k in path[:-1]:
            node = node.setdefault(k, {}) if isinstance(node, dict) else node[k]
        node[path[-1]] = value
    return mutate


def _drop(path):
    def mutate(spec):
        node = spec
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]
    return mutate


SYS = ("attributes", "system")
MALFORMED = [
    ("version True", _set(("version",), True), errno.EPROTO, "version"),
    ("version 2", _set(("version",), 2), errno.EINVAL, "version"),
    ("duration NaN", _set(SYS + ("duration",), math.nan), errno.EINVAL, "duration"),
    ("duration inf", _set(SYS + ("duration",), math.inf), errno.EINVAL, "duration"),
    ("duration -1", _set(SYS + ("duration",), -1), errno.EINVAL, "duration"),
    ("duration True", _set(SYS + ("duration",), True), errno.EPROTO, "duration"),
    ("name 5", _set(SYS + ("job", "name"), 5), errno.EPROTO, "attributes.system.job.name"),
    ("name list", _set(SYS + ("job", "name"), ["x"]), errno.EPROTO, "job.name"),
    ("job 5", _set(SYS + ("job",), 5), errno.EPROTO, "attributes.system.job"),
    ("shell 5", _set(SYS + ("shell",), 5), errno.EPROTO, "attributes.system.shell"),
    ("options 5", _set(SYS + ("shell",), {"options": 5}), errno.EPROTO, "shell.options"),
    ("cwd 5", _set(SYS + ("cwd",), 5), errno.EPROTO, "attributes.system.cwd"),
    ("env value", _set(SYS + ("environment",), {"A": 1}), errno.EPROTO, "environment"),
    ("user 5", _set(("attributes", "user"), 5), errno.EPROTO, "attributes.user"),
    ("unknown attr", _set(("attributes", "bogus"), {}), errno.EINVAL, "bogus"),
    ("no attributes", _drop(("attributes",)), errno.EPROTO, "attributes"),
    ("no system", _drop(SYS), errno.EPROTO, "system"),
    ("extra key", _set(("extra",), 1), errno.EINVAL, "extra"),
    ("resources {}", _set(("resources",), {}), errno.EPROTO, "resources"),
    ("two resources", lambda s: s["resources"].append(dict(s["resources"][0])),
     errno.EINVAL, "resources"),
    ("gpu", _set(("resources", 0, "type"), "gpu"), errno.EINVAL, "resources[0].type"),
    ("no with", _drop(("resources", 0, "with")), errno.EPROTO, "with"),
    ("with [5]", _set(("resources", 0, "with"), [5]), errno.EPROTO, "resources[0].with[0]"),
    ("core count 0", _set(("resources", 0, "with", 0, "count"), 0), errno.EINVAL,
     "resources[0].with[0].count"),
    ("slot count str", _set(("resources", 0, "count"), "2"), errno.EPROTO,
     "resources[0].count"),
    ("no label", _drop(("resources", 0, "label")), errno.EPROTO, "label"),
    ("command []", _set(("tasks", 0, "command"), []), errno.EINVAL, "tasks[0].command"),
    ("command [1]", _set(("tasks", 0, "command"), [1]), errno.EPROTO, "tasks[0].command[0]"),
    ("count 5", _set(("tasks", 0, "count"), 5), errno.EPROTO, "tasks[0].count"),
    ("count two keys", _set(("tasks", 0, "count"), {"per_slot": 1, "total": 2}),
     errno.EINVAL, "tasks[0].count"),
    ("count {}", _set(("tasks", 0, "count"), {}), errno.EINVAL, "tasks[0].count"),
    ("slot not a string", _set(("tasks", 0, "slot"), 5), errno.EPROTO, "tasks[0].slot"),
    ("tasks []", _set(("tasks",), []), errno.EINVAL, "tasks"),
]


def test_malformed_jobspecs_are_one_clear_error_never_eio(inst1):
    """Each malformed jobspec is EPROTO (wrong type) or EINVAL (out of bounds) with the
    field's path, never EIO 'internal error', and nothing is left half-submitted."""
    h = inst1.handle()
    base = js.Jobspec.from_command(["true"]).jobspec
    for label, mutate, errnum, field in MALFORMED:
        spec = copy.deepcopy(base)
        mutate(spec)
        msg = refused(h, "job-manager.submit", {"jobspec": spec}, errnum, "jobspec", field)
        assert "internal error" not in msg, label
    refused(h, "job-manager.submit", {"jobspec": base, "urgency": True}, errno.EPROTO,
            "urgency")
    refused(h, "job-manager.submit", {"jobspec": base, "urgency": 32}, errno.EINVAL,
            "urgency")
    refused(h, "job-manager.submit", {"jobspec": 5}, errno.EPROTO, "jobspec")
    assert h.call("job-manager.list", {"states": "all"})["jobs"] == []
    still_whole(inst1)


def test_a_job_name_that_is_not_a_string_cannot_break_the_listing(inst1):
    """One job with a non-string name once broke `jobs -a` for everyone; it is now
    refused at submit; on the command line, a malformed attribute is one line on stderr."""
    h = inst1.handle()
    spec = js.Jobspec.from_command(["true"], name="true").jobspec
    spec["attributes"]["system"]["job"]["name"] = {"not": "a string"}
    refused(h, "job-manager.submit", {"jobspec": spec}, errno.EPROTO, "job.name")
    cp = inst1.cli("submit", "--setattr=system.batch=5", "true")
    assert cp.returncode != 0
    assert cp.stderr.count("\n") == 1 and "attributes.system.batch" in cp.stderr, cp.stderr
    inst1.cli("run", "--job-name=fine", "true", check=True)
    cp = inst1.cli("jobs", "-a", check=True)
    assert "fine" in cp.stdout


# ------------------------------------------- 4. credentials and forged answers
def test_credentials_come_from_the_connection_not_the_message(inst1):
    """A client that writes another userid (FLUXLITE_HANDLE_USERID once set it) or no
    role at all gets the credentials of its connection: its jobs are its own."""
    me = os.getuid()
    with RawPeer(local_endpoint(inst1)) as peer:
        spec = js.Jobspec.from_command(["true"]).jobspec
        resp = peer.call("job-manager.submit", {"jobspec": spec},
                         userid=me + 1001, role=m.ROLE_USER)
        assert resp.errnum == 0, resp.errstr
        jobid = resp.payload["id"]
        info = peer.call("job-manager.info", {"id": jobid}, userid=4242, role=0)
        assert info.errnum == 0 and info.payload["userid"] == me
        # an owner-only method works for the owner whatever role the header claims
        resp = peer.call("kvs.commit", {"ops": [{"key": "claimed", "value": 1}]}, role=0)
        assert resp.errnum == 0, resp.errstr
    wait = inst1.handle().call("job-manager.wait", {"id": jobid}, timeout=30)
    assert wait["success"], wait


def test_a_forged_response_changes_nothing(instance_factory):
    """A RESPONSE sent to local-0 with the route of the scheduler's resource.acquire
    stream once made it drop three live ranks for good; a client may now answer only
    requests routed to it, so the forgery is dropped and logged."""
    inst = instance_factory(4, cores_per_rank=1)
    h = inst.handle()
    with RawPeer(local_endpoint(inst)) as peer:
        for tag in range(0, 64):
            for route in ([b""], [], [0], [b"", b"x"], [-1]):
                for body in ({"shrink": "1-3"}, {"down": "1-3"}, {"resources": {}}):
                    peer.send([header(mtype=m.RESPONSE, flags=m.STREAMING,
                                      topic="resource.acquire", nodeid=0, matchtag=tag,
                                      route=route), m._packb(body)])
        # a request after the forgeries: answered only once all of them were handled
        assert peer.call("broker.ping", {}, nodeid=0).errnum == 0
    status = h.call("sched.resource-status")
    assert status["removed"] == "" and status["down"] == {}
    assert sorted(status["all"]) == ["0", "1", "2", "3"]
    dmesg = inst.cli("dmesg", check=True).stdout
    assert "response from a client to no request of its dropped" in dmesg
    still_whole(inst, nodes=4)


# --------------------------------------------------------- 5. waits and watches
def test_a_killed_waiter_does_not_steal_the_next_waits_job(inst1, tmp_path):
    """`timeout -s KILL 0.5 fluxlite job wait` once left its wait registered, and the
    next `job wait` said "there are no waitable jobs".  Waits (and watches) now die
    with their client."""
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    jobid = jobid_of(inst1.cli("submit", "sh", "-c", f"read x < {fifo}"))
    wait_event(inst1.handle(), jobid, "start")
    killed = subprocess.run(["timeout", "-s", "KILL", "0.5"] + fluxlite_command() +
                            ["job", "wait"], env=inst1.env, capture_output=True, text=True,
                            timeout=30)
    assert killed.returncode in (128 + signal.SIGKILL, -signal.SIGKILL), killed
    # a second client dies the same way while it watches a key: once the KVS has
    # dropped its watch, the broker has also told the job-manager (one disconnect
    # pass covers every service a vanished client talked to)
    h = inst1.handle()
    h.call("kvs.commit", {"ops": [{"key": "marker", "value": 1}]})
    base = h.call("kvs.stats")["watchers"]
    watcher = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from fluxlite.client.sync import Handle\n"
         "h = Handle()\nw = h.stream('kvs-watch.lookup', {'key': 'marker', 'flags': 4})\n"
             "next(w)\n"
         "p = h.rpc('job-manager.wait', {})\nprint('ready', flush=True)\n"
         "h.wait(p)\n"],
        env=inst1.env, stdout=subprocess.PIPE, text=True)
    try:
        assert watcher.stdout.readline().strip() == "ready"
        assert h.call("kvs.stats")["watchers"] == base + 1
        watcher.kill()
    finally:
        watcher.wait()
        watcher.stdout.close()
    deadline = time.monotonic() + 10
    while h.call("kvs.stats")["watchers"] != base:
        assert time.monotonic() < deadline, "the dead client's watch was never dropped"
        h.poll(0.01)
    with open(fifo, "w") as f:
        f.write("go\n")
    cp = inst1.cli("job", "wait", timeout=30)
    assert cp.returncode == 0, cp.stderr
    assert "no waitable jobs" not in cp.stderr


def test_a_value_with_no_json_text_is_refused_at_commit(inst1):
    """Bytes inside a map once went into the KVS and made every later read of the key
    (and the watches on it) fail with EIO; NaN was kept as non-JSON text.  A value
    is bytes alone, or JSON."""
    h = inst1.handle()
    for op in ({"value": {"a": b"x"}}, {"value": [b"x"]}, {"value": math.nan},
               {"value": {"a": [math.inf]}}, {"append": [b"x"]}, {"append": [{"t": math.nan}]}):
        refused(h, "kvs.commit", {"ops": [{"key": "v", **op}]}, errno.EINVAL, "'v'",
                "cannot be stored")
    refused(h, "kvs.lookup", {"key": "v"}, errno.ENOENT, "v")
    h.call("kvs.commit", {"ops": [{"key": "v", "value": b"\x00\xff"}]})
    assert h.call("kvs.lookup", {"key": "v"})["val"]["data"] == "AP8="
    still_whole(inst1)


# ------------------------------------------------------------ 7. liveness
def test_a_stall_of_rank0_does_not_mark_live_children_unresponsive(instance_factory):
    """Stop rank 0 for longer than tbon.torpid-timeout: its children kept sending
    keepalives, so once it runs again it must read them before judging anyone."""
    # torpid 3s: wide enough that a loaded machine's late keepalives are not torpid
    inst = instance_factory(3, topo="kary:2", setattrs=["tbon.torpid-timeout=3s"])
    h = inst.handle()
    pid = inst.broker_pid(0)
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(4)  # the stall itself: longer than torpid-timeout, far below lost
    finally:
        os.kill(pid, signal.SIGCONT)
    for _ in range(2):  # two round trips: the second is handled after the first tick
        h.call("broker.ping", {}, nodeid=0, timeout=10)
    still_whole(inst, nodes=3)
    dmesg = inst.cli("dmesg", check=True).stdout
    assert "unresponsive" not in dmesg, dmesg
    health = h.call("overlay.health", nodeid=0)
    assert [c["state"] for c in health["children"]] == ["online", "online"]


# ---------------------------------------------------------- 7. memory bounds
def test_a_client_that_never_reads_is_dropped_and_rank0_stays_bounded(instance_factory):
    """A client that opens a stream and never reads once grew rank 0 without bound
    (+500 MB seen).  With broker.client-queue=256, at most that many messages wait
    for it; then it is dropped, its watch ends, and it is told why when it reads."""
    inst = instance_factory(1, setattrs=["broker.client-queue=256"])
    h = inst.handle()
    pid = inst.broker_pid(0)
    value = "v" * (32 << 10)
    h.call("kvs.commit", {"ops": [{"key": "flood", "value": value}]})
    base_watchers = h.call("kvs.stats")["watchers"]
    with RawPeer(local_endpoint(inst), rcvhwm=1, rcvbuf=4096) as slow:
        slow.send([header(topic="kvs-watch.lookup", flags=m.STREAMING, matchtag=7),
                   m._packb({"key": "flood", "flags": 4})])      # FLUX_KVS_WATCH
        assert slow.recv(10) is not None  # the watch is open (its first value)
        before = rss_kib(pid)
        dropped = False
        for _batch in range(40):  # up to 4000 changes of 32 KiB: 128 MB streamed
            pending = [h.rpc("kvs.commit", {"ops": [{"key": "flood",
                                                     "value": f"{i:08d}" + value}]})
                       for i in range(100)]
            for p in pending:
                h.wait(p, 30)
                p.take()
            if "dropping a client that does not read" in inst.cli("dmesg").stdout:
                dropped = True
                break
        grown = rss_kib(pid) - before
        assert dropped, "the non-reading client was never dropped"
        assert grown < 48 << 10, f"rank 0 grew by {grown} KiB while a client did not read"
        assert h.call("kvs.stats")["watchers"] == base_watchers
        # reading again, the client is told why it was dropped
        deadline = time.monotonic() + 20
        reason = None
        while reason is None and time.monotonic() < deadline:
            frames = slow.recv(1.0)
            if frames is None:
                continue
            msg = m.decode(frames)
            if msg.type == m.CONTROL and msg.topic == "disconnect":
                reason = msg.payload["reason"]
        assert reason and "client too slow" in reason and "broker.client-queue" in reason
    still_whole(inst)


def test_oversized_frames_are_refused_unread(instance_factory):
    """A 100 MB frame (more than broker.max-message-size) on the local or the tbon
    socket closes that connection before it is buffered: rank 0 does not grow."""
    inst = instance_factory(2)
    pid = inst.broker_pid(0)
    before = rss_kib(pid)
    blob = b"\0" * (100 << 20)
    for ep in (local_endpoint(inst), tbon_endpoint(inst)):
        with RawPeer(ep) as peer:
            peer.send([header(), blob])
            # a well-formed request on the same connection: the connection was closed,
            # so it goes unanswered (or, reconnected, is answered normally)
            peer.send([header(matchtag=99), b""])
            peer.recv(2.0)
    del blob
    inst.cli("ping", "--count=1", "0", check=True)
    grown = rss_kib(pid) - before
    print(f"rank 0 RSS {before} -> {before + grown} KiB after a 100 MB frame on each socket")
    assert grown < 32 << 10, f"rank 0 grew by {grown} KiB after a 100 MB frame"
    still_whole(inst, nodes=2)


def test_a_payload_larger_than_its_method_takes_is_refused_before_decoding(inst1):
    h = inst1.handle()
    env = {f"V{i}": "x" * 2000 for i in range(2200)}   # 4.4 MB: over submit's 4 MiB
    spec = js.Jobspec.from_command(["true"], environment=env).jobspec
    refused(h, "job-manager.submit", {"jobspec": spec}, errno.EINVAL, "payload",
            "at most")
    refused(h, "broker.ping", {"pad": "x" * (2 << 20)}, errno.EINVAL, "payload")
    still_whole(inst1)


# ---------------------------------------------------------------- the overlay
def test_a_peer_that_never_said_hello_is_refused_and_never_routed(instance_factory,
                                                                   tmp_path):
    """A process on the tbon socket that skips the hello (or says a wrong one) is told
    to go; what it sent is not routed, so rank 0's rexec never runs its command."""
    inst = instance_factory(2)
    marker = tmp_path / "ran"
    req = m.Message.request("rexec.exec", {"kind": "exec", "label": "evil",
                                           "argv": ["touch", str(marker)]},
                            nodeid=0, flags=m.STREAMING, matchtag=1, userid=os.getuid(),
                            role=m.ROLE_OWNER)
    cases = [
        ([m.encode(req)], "has not said hello"),
        ([m.encode(m.Message.control("hello", {"version": 2, "rank": 1}))], "version"),
        ([m.encode(m.Message.control("hello", {"version": 1, "rank": 7}))], "not a child"),
        ([m.encode(m.Message.control("hello", {"version": 1, "rank": [1]}))],
         "not a child"),
        ([[header(mtype=m.CONTROL, topic="hello"), b"\xc1garbage"]], "version"),
    ]
    for frames_list, words in cases:
        with RawPeer(tbon_endpoint(inst)) as peer:
            for frames in frames_list:
                peer.send(frames)
            msg = peer.recv_msg(10)
            assert msg is not None and msg.type == m.CONTROL and msg.topic == "disconnect"
            assert words in msg.payload["reason"], msg.payload
    assert not marker.exists()
    labels = [p["label"] for p in inst.handle().call("rexec.list", nodeid=0)["procs"]]
    assert "evil" not in labels
    still_whole(inst, nodes=2)


@pytest.mark.parametrize("bad_header", [
    [1, 0, {"unhashable": 1}, 0, 1, 0, 0, "", 0, 1, []],    # topic a map
    [[1], 0, "broker.ping", 0, 1, 0, 0, "", 0, 1, []],       # type a list
    [1, 0, "broker.ping", 0, 1, 0, 0, "", 0, 1, [{}]],       # route entry a map
    [1, 0, "broker.ping", True, 1, 0, 0, "", 0, 1, []],      # nodeid a bool
    [1, 0, "broker.ping", 0, 2 ** 40, 0, 0, "", 0, 1, []],   # matchtag out of range
    [1, 0, "broker.ping", 0, 1, 0, 0, "", 0, 1, [0] * 65],   # route too long
    [1, 0, "broker.ping"],                                   # too few fields
    {"type": 1},                                             # not an array
])
def test_malformed_headers_are_dropped_and_the_broker_carries_on(instance_factory,
                                                                  bad_header):
    inst = instance_factory(2)
    for ep in (local_endpoint(inst), tbon_endpoint(inst)):
        with RawPeer(ep) as peer:
            peer.send([m._packb(bad_header), b""])
            peer.send([b"\xc1", b""])
            peer.send([b"one frame only"])
            peer.send([b"a", b"b", b"c", b"d"])
            # a well-formed message last: its answer (a response on the local socket,
            # a refusal on the tbon one) means everything before it was handled
            peer.send([header(matchtag=5), b""])
            assert peer.recv_msg(10) is not None
    assert "malformed message" in inst.cli("dmesg", check=True).stdout
    still_whole(inst, nodes=2)

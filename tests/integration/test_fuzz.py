"""A seeded fuzz run at every socket a client or a peer can reach.

Targets, one instance of 3 brokers (kary:2, so rank 0 has a tbon socket):
- rank 0's local socket (what any client of the owner reaches),
- rank 0's tbon socket before a hello (what any process that can open it reaches),
- rank 0's tbon socket as a broker (a hello as rank 2 after the real one was killed:
  garbage from an authenticated peer),
- a running job's leader shell, through the broker (its service methods).

A second run sends the local socket's garbage as a guest (another uid, role
user, through guestuser.py): owner-only methods refuse it, nothing answers EIO.

Each gets thousands of frames of random and structured garbage (fuzzframes.py)
in a few seconds.  Then: no broker or shell crashed, no answer was EIO (a
handler that failed on input the schema let through), the job ends, and the
instance still runs jobs.  FLUXLITE_FUZZ_SECONDS (default 2 per target) and
FLUXLITE_FUZZ_SEED (default 1) choose the run; `make fuzz` runs longer.
"""

from __future__ import annotations

import collections
import errno
import glob
import json
import os
import time

import pytest
from fuzzframes import Fuzzer
from rawpeer import RawPeer, local_endpoint, rss_kib, tbon_endpoint

from fluxlite.job import jobspec as js
from fluxlite.protocol import message as m
from fluxlite.testing import jobid_of, wait_event

SECONDS = float(os.environ.get("FLUXLITE_FUZZ_SECONDS", "2"))
SEED = int(os.environ.get("FLUXLITE_FUZZ_SEED", "1"))


class Tally:
    """What one target got and what came back."""

    def __init__(self, name: str):
        self.name = name
        self.sent = 0
        self.seconds = 0.0
        self.errnos: collections.Counter = collections.Counter()

    def read(self, peer: RawPeer) -> None:
        while True:
            frames = peer.recv(0)
            if frames is None:
                return
            try:
                msg = m.decode(frames)
            except Exception:
                self.errnos["undecodable"] += 1
                continue
            if msg.type == m.RESPONSE:
                self.errnos[errno.errorcode.get(msg.errnum, msg.errnum) if msg.errnum
                            else "ok"] += 1
                if msg.errnum == errno.EIO:
                    self.errnos.setdefault("eio_examples", [])
                    if len(self.errnos["eio_examples"]) < 5:
                        self.errnos["eio_examples"].append(f"{msg.topic}: {msg.errstr}")

    def line(self) -> str:
        rate = self.sent / self.seconds if self.seconds else 0
        return f"{self.name}: {self.sent} frames in {self.seconds:.1f}s ({rate:.0f}/s)"


def blast(peer: RawPeer, tally: Tally, make_frames, seconds: float,
          after_each=None) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for _ in range(100):
            frames = make_frames()
            peer.send(frames)
            tally.sent += 1
            if after_each is not None:
                after_each(frames)
        tally.read(peer)
    tally.seconds = time.monotonic() - t0
    # everything sent has been handled once a request sent last is answered
    resp = peer.call("broker.ping", {}, nodeid=0, timeout=60) if after_each is None \
        else None
    if resp is not None:
        assert resp.errnum == 0
    tally.read(peer)


def _until(predicate, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.timeout(300 + 8 * SECONDS)
def test_fuzz_every_socket_then_the_instance_still_runs_jobs(instance_factory, tmp_path,
                                                             capsys):
    inst = instance_factory(3, topo="kary:2", setattrs=["log-stderr-level=critical"])
    h = inst.handle()
    pids = [inst.broker_pid(r) for r in range(3)]
    rss0 = rss_kib(pids[0])
    fuzz = Fuzzer(SEED, size=3, jobspec=js.Jobspec.from_command(["true"], environment={}).jobspec)
    tallies = []

    # a job that runs until the end: its leader shell is a target
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    jobid = jobid_of(inst.cli("submit", "-n1", "sh", "-c", f"read x < {fifo}"))
    init = wait_event(h, jobid, "shell.init", "guest.exec.eventlog")
    service, leader = init["context"]["service"], init["context"]["leader-rank"]
    wait_event(h, jobid, "start")

    # 1. the local socket
    t = Tally("local socket (rank 0)")
    with RawPeer(local_endpoint(inst)) as peer:
        blast(peer, t, fuzz.client_frames, SECONDS)
    tallies.append(t)

    # 2. the tbon socket, before any hello
    t = Tally("tbon socket, no hello")
    with RawPeer(tbon_endpoint(inst)) as peer:
        blast(peer, t, fuzz.peer_frames, SECONDS, after_each=lambda f: None)
        t.read(peer)
    tallies.append(t)

    # 3. the job's leader shell, through the broker
    t = Tally(f"job shell service {service}")
    with RawPeer(local_endpoint(inst)) as peer:
        blast(peer, t, lambda: fuzz.shell_frames(service, leader), SECONDS)
    tallies.append(t)

    # 4. the tbon socket as a broker: rank 2 is killed, and the fuzzer takes its place
    inst.kill_broker(2)
    inst.wait_membership(lambda s: 2 in s.get("lost", set()), timeout=15)
    t = Tally("tbon socket, after hello as rank 2")
    with RawPeer(tbon_endpoint(inst)) as peer:
        peer.send_msg(m.Message.control("hello", {"version": 1, "rank": 2, "pid": 1,
                                                  "hostname": "fuzz"}))
        ok = peer.recv_msg(10)
        assert ok is not None and ok.topic == "hello-ok", ok
        blast(peer, t, lambda: fuzz.peer_frames(authenticated=True), SECONDS,
              after_each=lambda f: None)
        t.read(peer)
        health = h.call("overlay.health", nodeid=0, timeout=60)
        assert health["children"][1]["state"] in ("online", "torpid"), health
    tallies.append(t)
    # the fake rank 2 went away: it is lost, as the real one was
    inst.wait_membership(lambda s: 2 in s.get("lost", set()), timeout=15)

    # what survived: every broker that was not killed, the job, the instance
    for pid in pids[:2]:
        os.kill(pid, 0)  # raises if the broker died
    # and nothing the fuzzers opened outlives them: traces, version waits
    _until(lambda: all(not h.call("module.stats-get", nodeid=r, timeout=10)["tracers"]
                       for r in (0, 1)), "module traces of gone clients left open")
    _until(lambda: h.call("kvs.stats-get", nodeid=0, timeout=10)["namespace"]["primary"]
           ["#versionwaiters"] == 0, "version waits of gone clients left open")
    with open(fifo, "w") as f:
        f.write("go\n")
    wait_event(h, jobid, "clean", timeout=60)
    for rank in (0, 1):
        h.call("broker.ping", {}, nodeid=rank, timeout=10)
    cp = inst.cli("run", "-N2", "echo", "alive", check=True, timeout=60)
    assert cp.stdout.split() == ["alive", "alive"]
    inst.cli("jobs", "-a", check=True)

    rundir = inst.getattr("rundir")
    for log in glob.glob(os.path.join(rundir, "shell-*.log")):
        with open(log, errors="replace") as f:
            text = f.read()
        where = text.find("Traceback")
        assert where < 0, f"a job shell failed in {log}:\n{text[max(0, where - 300):][:3000]}"
    eio = {t.name: t.errnos.get("eio_examples") for t in tallies if t.errnos.get("EIO")}
    assert not eio, f"handlers failed with EIO on fuzzed input: {eio}"
    assert sum(t.sent for t in tallies) >= 1000
    rss1 = rss_kib(pids[0])
    with capsys.disabled():
        print(f"\nfuzz seed {SEED}, {SECONDS:g}s per target, rank 0 RSS {rss0} -> {rss1} KiB")
        for t in tallies:
            answers = ", ".join(f"{k} {v}" for k, v in t.errnos.most_common()
                                if k != "eio_examples")
            print(f"  {t.line()}; answers: {answers}")


GUEST_FUZZ = """
import collections, errno, json, os, sys, time
sys.path.insert(0, {here!r})
from fuzzframes import Fuzzer
from rawpeer import RawPeer
from fluxlite.protocol import message as m
fuzz = Fuzzer({seed}, size=1, jobspec={jobspec!r})
got = collections.Counter()
eio = []
def read(peer):
    while (frames := peer.recv(0)) is not None:
        try:
            msg = m.decode(frames)
        except Exception:
            continue
        if msg.type == m.RESPONSE:
            got[errno.errorcode.get(msg.errnum, str(msg.errnum)) if msg.errnum else "ok"] += 1
            if msg.errnum == errno.EIO and len(eio) < 5:
                eio.append(msg.topic + ": " + msg.errstr)
with RawPeer({endpoint!r}) as peer:
    t0 = time.monotonic()
    sent = 0
    while time.monotonic() - t0 < {seconds}:
        for _ in range(100):
            peer.send(fuzz.client_frames())
            sent += 1
        read(peer)
    last = peer.call("broker.ping", {{}}, nodeid=0, timeout=60)
    read(peer)
print(json.dumps({{"sent": sent, "answers": got, "eio": eio, "ping": last.payload}}))
"""


@pytest.mark.timeout(300 + 2 * SECONDS)
def test_fuzz_as_a_guest_then_the_instance_still_runs_jobs(instance_factory, capsys):
    """The same garbage from a guest (role user, another uid): every owner-only method
    refuses it, nothing answers EIO, and nothing it left open outlives it."""
    import guestuser
    guestuser.need_root()
    inst = instance_factory(1, setattrs=["access.allow-guest-user=1",
                                         "log-stderr-level=critical"])
    h = inst.handle()
    code = GUEST_FUZZ.format(here=os.path.dirname(__file__), seed=SEED, seconds=SECONDS,
                             endpoint=local_endpoint(inst),
                             jobspec=js.Jobspec.from_command(["true"], environment={}).jobspec)
    cp = guestuser.python(inst, guestuser.GUEST, code, timeout=120 + 2 * SECONDS)
    assert cp.returncode == 0, cp.stderr[-3000:]
    out = json.loads(cp.stdout.strip().splitlines()[-1])
    assert out["ping"]["userid"] == guestuser.GUEST and out["ping"]["rolemask"] == 2
    assert not out["eio"], f"handlers failed with EIO on a guest's input: {out['eio']}"
    assert out["answers"].get("EPERM", 0) > 0, out["answers"]
    _until(lambda: not h.call("module.stats-get", nodeid=0, timeout=10)["tracers"],
           "a guest's module traces left open")
    _until(lambda: h.call("kvs.stats-get", nodeid=0, timeout=10)["namespace"]["primary"]
           ["#versionwaiters"] == 0, "a guest's version waits left open")
    cp = inst.cli("run", "echo", "alive", check=True, timeout=60)
    assert cp.stdout == "alive\n"
    with capsys.disabled():
        answers = ", ".join(f"{k} {v}" for k, v in sorted(out["answers"].items(),
                                                           key=lambda kv: -kv[1]))
        print(f"\nguest fuzz: {out['sent']} frames in {SECONDS:g}s; answers: {answers}")

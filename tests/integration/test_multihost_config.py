"""Config-file bootstrap across 4 network-namespace hosts: `fluxlite broker
--config-path FILE` on each host, TCP links with CURVE, the hosts table as the
ranks, lost ranks on kill -9 and a cut link, and peers without the key kept out."""

import json
import os
import select
import signal
import socket
import subprocess
import threading
import time

import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from fluxlite.client.sync import Handle
from fluxlite.jobapi import api
from fluxlite.testing import fluxlite_command, jobid_of
from fluxlite.testing import netns as testing_netns
from fluxlite.testing.netns import NetnsHosts
from fluxlite.util import curve, fluid, hostlist, idset

pytestmark = pytest.mark.timeout(240)

FL = fluxlite_command()
PORT = 8050
LOST = 2.0       # tbon.lost-timeout in these tests (the TCP default is 60s)
TORPID = 1.0


def write_config(path, cert, hosts, extra=""):
    with open(path, "w") as f:
        f.write(f"""[bootstrap]
curve_cert = "{cert}"
default_port = {PORT}
default_bind = "tcp://eth0:%p"
default_connect = "tcp://%h:%p"
hosts = [{{host = "{hosts.hostlist}"}}]

[tbon]
torpid-timeout = "{TORPID}s"
lost-timeout = "{LOST}s"
{extra}""")
    return str(path)


@pytest.fixture(scope="module")
def hosts():
    testing_netns.require_root()
    with NetnsHosts(4) as h:
        yield h


@pytest.fixture(scope="module")
def site(hosts, tmp_path_factory):
    """One shared certificate made by `fluxlite keygen` and a config naming the 4 hosts."""
    d = tmp_path_factory.mktemp("site")
    cert = str(d / "curve.cert")
    subprocess.run(FL + ["keygen", cert], check=True, timeout=60)
    other = str(d / "other.cert")
    subprocess.run(FL + ["keygen", other], check=True, timeout=60)
    conf = write_config(d / "conf.toml", cert, hosts)
    wrong = write_config(d / "wrong.toml", other, hosts)
    return {"dir": d, "cert": cert, "conf": conf, "wrong": wrong}


def read_line_with(stream, needle, timeout):
    """Lines from `stream` until one contains `needle`; AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([stream], [], [], max(0.0, left))
        assert ready, f"no line with {needle!r} within {timeout}s: {seen[-5:]}"
        line = stream.readline()
        assert line, f"end of output before {needle!r}: {seen[-5:]}"
        seen.append(line)
        if needle in line:
            return line


class Service:
    """The 4 brokers as a service (no initial program); rank 0 keeps its rundir."""

    def __init__(self, hosts, conf, rundir):
        self.hosts = hosts
        self.rundir = str(rundir)
        self.uri = f"local://{self.rundir}/local"
        self.procs = {}
        for i in (1, 2, 3):
            self.procs[i] = hosts.popen(hosts[i], FL + ["broker", "--config-path", conf],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self.procs[0] = hosts.popen(hosts[0], FL + ["broker", "--config-path", conf,
                                                    "--rundir", self.rundir,
                                                    "-Slog-stderr-level=info"],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
        read_line_with(self.procs[0].stderr, "->run", 60)
        # keep reading rank 0's log lines so that a full pipe never blocks it
        threading.Thread(target=self.procs[0].stderr.read, daemon=True).start()
        self.h = Handle(self.uri)

    def membership(self, predicate, timeout):
        last = {}
        for snap in self.h.stream("overlay.watch", nodeid=0, timeout=timeout):
            last = {k: idset.decode(v) for k, v in snap["ranks"].items()}
            if predicate(last):
                return last
        raise AssertionError(f"membership not reached within {timeout}s: {last}")

    def cli(self, *args, timeout=60):
        env = dict(os.environ, FLUXLITE_URI=self.uri)
        return subprocess.run(FL + list(args), env=env, capture_output=True, text=True,
                              timeout=timeout)

    def log(self):
        with open(os.path.join(self.rundir, "broker-0.log")) as f:
            return f.read()

    def stop(self):
        self.h.close()
        cp = self.cli("shutdown")
        assert cp.returncode == 0, cp.stderr
        assert self.procs[0].wait(60) == 0
        for _i, p in self.procs.items():
            if p.poll() is None:
                p.wait(60)


@pytest.fixture(scope="module")
def service(hosts, site):
    s = Service(hosts, site["conf"], site["dir"] / "rank0")
    try:
        s.membership(lambda ms: ms.get("online") == {0, 1, 2, 3}, 60)
        yield s
    finally:
        for h in hosts:
            if not hosts.link_is_up(h):
                hosts.restore(h)
        s.stop()


def test_run_N4_hostname_prints_the_four_names(hosts, site, tmp_path):
    """rank 0 runs the initial program given on its command line, then the
    instance shuts down: every broker exits 0."""
    others = [hosts.popen(hosts[i], FL + ["broker", "--config-path", site["conf"]],
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True) for i in (1, 2, 3)]
    cp = hosts.run(hosts[0], FL + ["broker", "--config-path", site["conf"],
                                   "fluxlite", "run", "-N4", "hostname"], timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert sorted(cp.stdout.split()) == sorted(hosts.names)
    for p in others:
        assert p.wait(60) == 0, p.stderr.read()


def test_tcp_attributes_and_endpoints(service, hosts):
    assert service.h.getattr("tbon.endpoint", 0) == f"tcp://eth0:{PORT}"
    assert service.h.getattr("tbon.parent-endpoint", 2) == f"tcp://{hosts[0].name}:{PORT}"
    assert service.h.getattr("tbon.lost-timeout", 3) == f"{LOST}s"
    assert service.h.getattr("size", 0) == "4"


def test_every_rank_knows_every_host(service, hosts):
    """The config's hosts are the `hostlist` attribute on every rank, and what names
    a job's or a rank's host (R, `jobs`, `overlay status`, `resource status`)."""
    assert service.h.getattr("hostlist", 0) == hosts.hostlist
    assert service.h.getattr("hostlist", 3) == hosts.hostlist
    jobid = jobid_of(service.cli("submit", "-N3", "true"))
    assert api.wait(service.h, jobid, timeout=60)["success"]
    f58 = fluid.f58(jobid)
    R = json.loads(service.cli("job", "info", f58, "R").stdout)
    want = hostlist.encode(hosts.names[:3])
    assert R["execution"]["nodelist"] == [want]
    assert service.cli("jobs", "-n", "-o", "{nodelist}", f58).stdout == f"{want}\n"
    cp = service.cli("overlay", "status", "--no-pretty")
    assert cp.stdout.splitlines() == [f"{r} {hosts.names[r]}: full" for r in range(4)]
    cp = service.cli("resource", "status", "-n", "-o", "{nodelist}")
    assert cp.stdout == f"{hosts.hostlist}\n", cp.stderr
    cp = service.cli("resource", "list", "-n", "-s", "all", "-o", "{nodelist}")
    assert cp.stdout == f"{hosts.hostlist}\n", cp.stderr
    # each job shell is told its own host, which its errors name
    cp = service.cli("run", "-N2", "/nonexistent")
    assert cp.returncode != 0
    for r in (0, 1):
        assert f"task {r} (host {hosts.names[r]}): start failed" in cp.stderr, cp.stderr


def test_broker_with_another_certificate_cannot_join(service, hosts, site):
    bad = hosts.popen(hosts[1], FL + ["broker", "--config-path", site["wrong"],
                                      "-Stbon.connect-timeout=3s"],
                      stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                      stderr=subprocess.PIPE, text=True)
    assert bad.wait(60) != 0
    assert "cannot join" in bad.stderr.read()
    refusals = [line for line in service.log().splitlines()
                if "connection refused" in line and hosts[1].address in line]
    assert len(refusals) == 1, refusals
    # the real rank 1 stays online throughout; nothing else joined
    ms = service.membership(lambda ms: True, 10)
    assert ms.get("online") == {0, 1, 2, 3}


def test_raw_dealer_with_a_wrong_key_cannot_send(service, hosts, site):
    """A client that knows rank 0's public key but holds another secret is
    refused by ZAP during the handshake: nothing it sends is ever delivered."""
    real = curve.load_certificate(site["cert"])
    mine = curve.generate()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    mon = sock.get_monitor_socket()
    events = []
    try:
        sock.setsockopt(zmq.CURVE_SERVERKEY, real.public)
        sock.setsockopt(zmq.CURVE_PUBLICKEY, mine.public)
        sock.setsockopt(zmq.CURVE_SECRETKEY, mine.secret)
        sock.connect(f"tcp://{hosts[0].address}:{PORT}")
        sock.send_multipart([b"hello", b"garbage"])
        deadline = time.monotonic() + 30
        while zmq.EVENT_HANDSHAKE_FAILED_AUTH not in events and time.monotonic() < deadline:
            if mon.poll(1000):
                events.append(recv_monitor_message(mon)["event"])
        assert zmq.EVENT_HANDSHAKE_FAILED_AUTH in events, events
        assert zmq.EVENT_HANDSHAKE_SUCCEEDED not in events
        assert sock.poll(500, zmq.POLLIN) == 0  # and nothing came back
    finally:
        mon.close(0)
        sock.close(0)
        ctx.destroy(linger=0)
    assert service.h.call("broker.ping", {}, nodeid=0, timeout=10) is not None
    ms = service.membership(lambda ms: True, 10)
    assert ms.get("online") == {0, 1, 2, 3}


def test_garbage_on_the_tcp_port_does_not_crash_rank0(service, hosts):
    for payload in (os.urandom(8192), b"\xff" * 64 + b"\x00" * 64, b"GET / HTTP/1.0\r\n\r\n"):
        with socket.create_connection((hosts[0].address, PORT), timeout=10) as s:
            s.sendall(payload)
    assert service.h.call("broker.ping", {}, nodeid=0, timeout=10) is not None
    assert service.procs[0].poll() is None


def test_batch_N2_nests_an_instance_across_two_hosts(service, hosts, tmp_path):
    """A batch job on 2 of the hosts starts its own instance through the job
    shell's PMI: the nested brokers trade TCP endpoints and CURVE keys that way,
    so its `run -N2 hostname` prints two different host names."""
    out = tmp_path / "out"
    jobid = jobid_of(service.cli("batch", "-N2", "--output", str(out), "--wrap",
                                 "fluxlite", "run", "-N2", "hostname"))
    result = api.wait(service.h, jobid, timeout=120)
    assert result["success"], (result, out.read_text() if out.exists() else "")
    names = out.read_text().split()
    assert len(names) == 2 and len(set(names)) == 2, names
    assert set(names) <= set(hosts.names), names


def test_kill_and_cut_lose_ranks_and_survivors_run_jobs(service, hosts):
    pid3 = int(service.h.getattr("broker.pid", 3))
    os.kill(pid3, signal.SIGKILL)
    ms = service.membership(lambda ms: 3 in ms.get("lost", set()), 30)
    assert ms["online"] == {0, 1, 2}
    cp = service.cli("run", "-N3", "hostname")
    assert cp.returncode == 0, cp.stderr
    assert sorted(cp.stdout.split()) == sorted(hosts.names[:3])

    t0 = time.monotonic()
    hosts.cut(hosts[2])
    ms = service.membership(lambda ms: 2 in ms.get("lost", set()), 30)
    took = time.monotonic() - t0
    assert took < LOST + 2.0, f"cut link lost after {took:.1f}s (lost-timeout {LOST}s)"
    assert ms["online"] == {0, 1}
    cp = service.cli("run", "-N2", "hostname")
    assert cp.returncode == 0, cp.stderr
    assert sorted(cp.stdout.split()) == sorted(hosts.names[:2])
    # the cut broker gives up its parent within the bound and exits
    service.procs[2].wait(LOST + 30)


# ---------------------------------------------------------------- one host, no root

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def local_config(tmp_path, body="", hosts='[{host = "node0"}, {host = "node1"}]',
                 cert=True, extra=""):
    lines = ["[bootstrap]"]
    if cert:
        path = tmp_path / "curve.cert"
        if not path.exists():
            subprocess.run(FL + ["keygen", str(path)], check=True, timeout=60)
        lines.append(f'curve_cert = "{path}"')
    lines += [f"default_port = {free_port()}", 'default_bind = "tcp://127.0.0.1:%p"',
              'default_connect = "tcp://127.0.0.1:%p"', f"hosts = {hosts}", body, extra]
    conf = tmp_path / "conf.toml"
    conf.write_text("\n".join(lines) + "\n")
    return str(conf)


def broker(*args, timeout=60):
    return subprocess.run(FL + ["broker", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def one_line_error(cp, *words):
    assert cp.returncode != 0
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1, cp.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_tcp_overlay_gets_the_tcp_liveness_defaults(tmp_path):
    conf = local_config(tmp_path)
    cp = broker("--config-path", conf, "--hostname", "node0", "-Sbroker.quorum-timeout=0.5s",
                "sh", "-c", "fluxlite getattr tbon.torpid-timeout; "
                            "fluxlite getattr tbon.lost-timeout")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["30s", "60s"]


def test_tcp_liveness_defaults_stay_tunable(tmp_path):
    conf = local_config(tmp_path, extra='[tbon]\ntorpid-timeout = "4s"\n')
    cp = broker("--config-path", conf, "--hostname", "node0", "-Sbroker.quorum-timeout=0.5s",
                "-Stbon.lost-timeout=9s", "sh", "-c", "fluxlite getattr tbon.torpid-timeout; "
                                                      "fluxlite getattr tbon.lost-timeout")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["4s", "9s"]


def test_hostname_not_in_hosts_is_one_clear_line(tmp_path):
    conf = local_config(tmp_path)
    one_line_error(broker("--config-path", conf, "--hostname", "elsewhere", "true"),
                   "'elsewhere' is not in hosts", "node[0-1]")


def test_unknown_key_and_duplicate_host_are_one_clear_line(tmp_path):
    conf = local_config(tmp_path, body="default_prot = 1")
    one_line_error(broker("--config-path", conf, "--hostname", "node0", "true"),
                   "unknown key 'default_prot'")
    conf = local_config(tmp_path, hosts='[{host = "node[0-1]"}, {host = "node1"}]')
    one_line_error(broker("--config-path", conf, "--hostname", "node0", "true"),
                   "'node1' is listed twice")
    conf = local_config(tmp_path, extra="[tbon]\nno-such = 1\n")
    one_line_error(broker("--config-path", conf, "--hostname", "node0", "true"),
                   "unknown key 'tbon.no-such'")


def test_tcp_overlay_without_a_certificate_is_refused(tmp_path):
    conf = local_config(tmp_path, cert=False)
    one_line_error(broker("--config-path", conf, "--hostname", "node0", "true"),
                   "curve_cert", "fluxlite keygen")


def test_plain_tcp_only_with_the_insecure_flag(tmp_path):
    conf = local_config(tmp_path, cert=False)
    cp = broker("--config-path", conf, "--hostname", "node0", "--insecure-plain-tcp",
                "-Sbroker.quorum-timeout=0.5s", "fluxlite", "getattr", "size")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.strip() == "2"


def test_config_options_need_config_path_and_start_refuses_bootstrap(tmp_path):
    one_line_error(broker("--hostname", "node0", "true"), "--hostname", "--config-path")
    conf = local_config(tmp_path)
    cp = subprocess.run(FL + ["start", "--conf", conf, "true"], capture_output=True,
                        text=True, timeout=60)
    one_line_error(cp, "[bootstrap]", "fluxlite broker --config-path")

"""Network-namespace hosts: own names and addresses, real TCP between them, a cut
link, Hydra launching across them, and nothing left behind afterwards."""

import json
import os
import select
import shutil
import signal
import subprocess
import sys

import pytest

from fluxlite.testing import missing_prerequisite
from fluxlite.testing import netns as testing_netns
from fluxlite.testing.netns import NetnsHosts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NETNS_EXEC = os.path.join(ROOT, "tests", "programs", "netns-exec")
NETNS_HOSTS = os.path.join(ROOT, "tests", "programs", "netns-hosts")

pytestmark = pytest.mark.timeout(180)

# listens on PORT, prints "ready", then answers one connection with its hostname
ECHO_SERVER = r"""
import socket, sys
s = socket.create_server(("", int(sys.argv[1])))
print("ready", flush=True)
c, _ = s.accept()
c.sendall(socket.gethostname().encode())
c.close()
"""
CONNECT = r"""
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3]))
print(c.recv(100).decode())
"""


@pytest.fixture(autouse=True)
def root_only():
    testing_netns.require_root()


def read_line(stream, timeout=30):
    ready, _, _ = select.select([stream], [], [], timeout)
    assert ready, f"no line within {timeout}s"
    return stream.readline()


def hosts_file():
    """/etc/hosts less the lines of network-namespace hosts (other runs may add theirs
    meanwhile); teardown must leave these untouched, byte for byte."""
    with open("/etc/hosts", "rb") as f:
        return [line for line in f if testing_netns.HOSTS_TAG.encode() not in line]


def test_hosts_have_their_own_names_and_talk_tcp_by_name():
    before = hosts_file()
    with NetnsHosts(3) as hosts:
        assert len({h.address for h in hosts}) == 3
        assert hosts.hostlist == f"fl{hosts.run_id}-h[0-2]"
        for h in hosts:
            assert hosts.run(h, ["hostname"], check=True).stdout == f"{h.name}\n"
        with open("/etc/hosts") as f:
            text = f.read()
        for h in hosts:
            assert f"{h.address}\t{h.name}\t" in text
        server = hosts.popen(hosts[0], [sys.executable, "-c", ECHO_SERVER, "7001"],
                             stdout=subprocess.PIPE, text=True)
        assert read_line(server.stdout) == "ready\n"
        cp = hosts.run(hosts[2], [sys.executable, "-c", CONNECT, hosts[0].name, "7001", "10"],
                       check=True)
        assert cp.stdout == f"{hosts[0].name}\n"   # the server side sees its own name
        assert server.wait(30) == 0
        # the root namespace reaches the hosts through the bridge
        assert hosts.bridge_address in subprocess.run(
            ["ip", "-br", "addr", "show", hosts.bridge], capture_output=True,
            text=True).stdout
    assert hosts_file() == before
    assert hosts.leftovers() == []


def test_teardown_removes_everything_even_when_the_test_fails():
    before = hosts_file()
    with pytest.raises(RuntimeError, match="the test failed"):
        with NetnsHosts(2) as hosts:
            sleeper = hosts.popen(hosts[0], ["sleep", "1000"])
            # a daemon that leaves the session it was started in
            escaped = hosts.run(hosts[1], ["sh", "-c", "setsid sleep 1000 >/dev/null 2>&1 & "
                                           "echo $!"], check=True)
            pids = [sleeper.pid, int(escaped.stdout)]
            names = hosts.names
            raise RuntimeError("the test failed")
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or _is_zombie(pid), pid
    live = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(n in live for n in names)
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert hosts.run_id not in links
    assert hosts_file() == before
    assert hosts.leftovers() == []


def _is_zombie(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return True
    return data[data.rfind(b")") + 2:][:1] in (b"Z", b"X")


def test_two_runs_at_once_do_not_collide():
    with NetnsHosts(2) as a, NetnsHosts(2) as b:
        assert a.run_id != b.run_id
        assert not set(a.names) & set(b.names)
        assert a.subnet != b.subnet and not a.subnet.overlaps(b.subnet)
        assert a.run(a[1], ["hostname"]).stdout != b.run(b[1], ["hostname"]).stdout
        with open("/etc/hosts") as f:
            text = f.read()
        assert all(n in text for n in a.names + b.names)
    assert a.leftovers() == [] and b.leftovers() == []


def test_cut_takes_a_host_off_the_network_and_restore_brings_it_back():
    with NetnsHosts(2) as hosts:
        target = hosts[1]
        server = hosts.popen(target, [sys.executable, "-c", ECHO_SERVER, "7002"],
                             stdout=subprocess.PIPE, text=True)
        assert read_line(server.stdout) == "ready\n"
        assert hosts.link_is_up(target)
        hosts.cut(target)
        assert not hosts.link_is_up(target)
        # a packet to a cut host is dropped: the connection attempt times out
        cp = hosts.run(hosts[0], [sys.executable, "-c", CONNECT, target.name, "7002", "2"])
        assert cp.returncode != 0
        assert "timed out" in cp.stderr or "unreachable" in cp.stderr.lower(), cp.stderr
        hosts.restore(target)
        assert hosts.link_is_up(target)
        cp = hosts.run(hosts[0], [sys.executable, "-c", CONNECT, target.name, "7002", "10"],
                       check=True)
        assert cp.stdout == f"{target.name}\n"


def test_a_dead_owners_hosts_are_swept_by_the_next_run():
    script = (f"import sys, time; sys.path.insert(0, {ROOT!r})\n"
              "from fluxlite.testing.netns import NetnsHosts\n"
              "h = NetnsHosts(2).start()\n"
              "print(h.run_id, flush=True)\n"
              "time.sleep(1000)\n")
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        run_id = read_line(owner.stdout).strip()
    finally:
        owner.kill()
        owner.wait()
    with open(os.path.join(testing_netns.STATE_DIR, run_id)) as f:
        stale = json.load(f)
    with NetnsHosts(1) as hosts:
        live = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert not any(n in live for n in stale["hosts"])
        assert f"fluxlite-netns {run_id}" not in open("/etc/hosts").read()
        assert not os.path.exists(os.path.join(testing_netns.STATE_DIR, run_id))
        assert hosts.run(hosts[0], ["hostname"]).returncode == 0


def test_netns_exec_runs_like_ssh_and_refuses_an_unknown_host():
    with NetnsHosts(1) as hosts:
        h = hosts[0].name
        cp = subprocess.run([NETNS_EXEC, "-x", "-o", "BatchMode=yes", f"me@{h}",
                             "echo", "'two  spaces'", "$(hostname)"],
                            capture_output=True, text=True, timeout=30)
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout == f"two  spaces {h}\n"     # words re-read by a shell, as ssh does
        cp = subprocess.run([NETNS_EXEC, "-x", "nosuchhost", "true"], capture_output=True,
                            text=True, timeout=30)
        assert cp.returncode == 255
        assert cp.stderr == "netns-exec: no network-namespace host named 'nosuchhost' " \
                            "(see 'ip netns list')\n"
        cp = subprocess.run([NETNS_EXEC, "-x"], capture_output=True, text=True, timeout=30)
        assert cp.returncode == 255 and cp.stderr.startswith("usage: netns-exec")


def test_mpiexec_launches_across_the_hosts_through_netns_exec():
    if shutil.which("mpiexec.hydra") is None:
        missing_prerequisite("mpiexec.hydra is not installed (apt-get install mpich)")
    with NetnsHosts(3) as hosts:
        p = subprocess.Popen(
            ["mpiexec.hydra", "-launcher", "ssh", "-launcher-exec", NETNS_EXEC,
             "-hosts", ",".join(hosts.names), "-iface", hosts.bridge, "-n", "3", "hostname"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
            env=dict(os.environ, FLUXLITE_TEST_TAG=hosts.tag))
        try:
            out, err = p.communicate(timeout=90)
        finally:
            if p.poll() is None:       # Hydra can hang when a proxy fails: end its session
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
        assert p.returncode == 0, err
        assert sorted(out.split()) == sorted(hosts.names)


def test_netns_hosts_program_runs_a_command_beside_the_hosts():
    before = hosts_file()
    cp = subprocess.run([NETNS_HOSTS, "-n", "2", "--", "sh", "-c",
                         f'for h in $(echo "$NETNS_HOSTS" | tr , " "); do '
                         f'{NETNS_EXEC} "$h" hostname; done; echo "$NETNS_HOSTLIST"; exit 3'],
                        capture_output=True, text=True, timeout=120)
    assert cp.returncode == 3, cp.stderr
    lines = cp.stdout.split()
    assert len(lines) == 3 and lines[0].endswith("-h0") and lines[1].endswith("-h1")
    assert lines[2] == lines[0][:-1] + "[0-1]"
    assert hosts_file() == before
    assert lines[0] not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                          text=True).stdout

"""Several hosts on one machine for tests: network namespaces joined by a bridge.

    with NetnsHosts(3) as hosts:
        hosts.run(hosts[1], ["hostname"]).stdout      # "fl3fa9c1-h1\\n"
        p = hosts.popen(hosts[0], ["fluxlite", "broker", ...])
        hosts.cut(hosts[2])                           # its link goes down

Each host is an `ip netns` with a veth pair whose outer end is enslaved to a
bridge in the root namespace; the bridge has an address on the same /24, so
the root namespace (mpiexec, slurmctld, a test) reaches every host and every
host reaches the others.  The host names go into /etc/hosts (MPICH's TCP and
`tcp://%h:%p` URIs need them), tagged so that only these lines are removed.
A process runs "on" a host as

    ip netns exec HOST unshare --uts sh -c 'hostname HOST && exec "$@"' HOST ARGV...

so gethostname() in it, and in everything it starts, is the host's name.
That is the way to give brokers their own host names: the `hostname` a job
runs, MPICH and Slurm all see it, which no broker-side override could give.

Names carry a random run id (host fl<id>-h<i>, bridge flbr<id>, veth
flv<id><i>) and the /24 is chosen under a lock among those no address or
route uses, so two test runs at once never collide.  `teardown()` (also on
an exception inside the `with`) kills every process in the namespaces and
every process started through `popen()`, deletes the namespaces, links and
bridge, removes its /etc/hosts lines, and raises AssertionError if anything
is still there.  A run whose owner died without tearing down (kill -9) is
swept by the next run.  Needs root and iproute2: `require_root()` skips a
test on a laptop without them, and fails it under CI.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import secrets
import signal
import subprocess
import uuid
from dataclasses import dataclass

from ..util import procs
from ..util.procs import wait_gone
from . import TAG_VAR, assert_no_leaks, find_tool, missing_prerequisite

STATE_DIR = "/run/fluxlite-netns"      # one file per live run: owner pid, names, subnet
LOCK_PATH = "/run/fluxlite-netns.lock"  # serialises subnet choice and /etc/hosts edits
HOSTS_FILE = "/etc/hosts"
SUBNET_POOL = ipaddress.ip_network("10.213.0.0/16")  # /24s are carved from this
HOSTS_TAG = "# fluxlite-netns"
INNER_IFACE = "eth0"


def require_root() -> None:
    """Skip the calling test unless it runs as root with iproute2 and unshare."""
    if os.geteuid() != 0:
        missing_prerequisite("network-namespace hosts need root (run the tests as root, "
                             "as CI does)")
    for tool, package in (("ip", "iproute2"), ("unshare", "util-linux")):
        if find_tool(tool) is None:
            missing_prerequisite(f"network-namespace hosts need `{tool}` "
                                 f"(apt-get install {package})")


@dataclass(frozen=True)
class Host:
    name: str       # host name, netns name and /etc/hosts name alike
    address: str    # its address on the bridge's subnet
    veth: str       # the outer end of its veth pair, in the root namespace
    index: int

    def __str__(self) -> str:
        return self.name


class NetnsHosts:
    """N hosts in network namespaces behind one bridge; see the module docstring."""

    def __init__(self, count: int = 4):
        if not 1 <= count <= 200:
            raise ValueError(f"count must be 1-200, not {count}")
        self.count = count
        self.run_id = secrets.token_hex(3)
        self.bridge = f"flbr{self.run_id}"
        self.tag = uuid.uuid4().hex      # FLUXLITE_TEST_TAG of processes started here
        self.subnet: ipaddress.IPv4Network | None = None
        self.bridge_address: str | None = None
        self.hosts: list[Host] = []
        self._procs: list[subprocess.Popen] = []
        self._started = False

    # ------------------------------------------------------------ access
    def __getitem__(self, i: int) -> Host:
        return self.hosts[i]

    def __iter__(self):
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    @property
    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    @property
    def hostlist(self) -> str:
        """The hosts as one RFC 29 hostlist, e.g. "fl3fa9c1-h[0-3]"."""
        from ..util import hostlist
        return hostlist.encode(self.names)

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    # ------------------------------------------------------------ life
    def __enter__(self) -> NetnsHosts:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.teardown()

    def start(self) -> NetnsHosts:
        self._started = True
        try:
            with _locked():
                _sweep_stale()
                self._choose_names_and_subnet()
                self._write_state()
                _ip("link", "add", self.bridge, "type", "bridge")
                _ip("addr", "add", f"{self.bridge_address}/{self.subnet.prefixlen}",
                    "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for h in self.hosts:
                self._make_host(h)
            with _locked():
                _add_hosts_lines([(h.address, h.name) for h in self.hosts], self._hosts_tag)
        except BaseException:
            try:
                self.teardown()
            except AssertionError:
                pass
            raise
        return self

    def teardown(self) -> None:
        """Remove everything this run made; AssertionError naming what could not be."""
        if not self._started:
            return
        self._started = False
        errors: list[str] = []
        pids: set[int] = set()
        for p in self._procs:
            if p.poll() is None:
                pids.add(p.pid)
                _signal_group(p.pid)
        for h in self.hosts:
            pids |= _kill_netns_pids(h.name)
        survivors = wait_gone(pids, 10)
        for p in self._procs:
            try:
                p.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        self._procs.clear()
        if survivors:
            errors.append(f"processes would not die: {sorted(survivors)}")
        try:
            assert_no_leaks(self.tag)
        except AssertionError as exc:
            errors.append(str(exc))
        errors += _remove_run(self.run_id, [h.name for h in self.hosts],
                              [h.veth for h in self.hosts], self.bridge, self._hosts_tag)
        left = self.leftovers()
        if left:
            errors.append("left behind: " + ", ".join(left))
        if errors:
            raise AssertionError("network-namespace hosts: " + "; ".join(errors))

    def leftovers(self) -> list[str]:
        """What of this run still exists (namespaces, links, /etc/hosts lines, state)."""
        left: list[str] = []
        live_ns = set(_netns_names())
        links = set(_link_names())
        for h in self.hosts:
            if h.name in live_ns:
                left.append(f"netns {h.name}")
            if h.veth in links:
                left.append(f"link {h.veth}")
        if self.bridge in links:
            left.append(f"bridge {self.bridge}")
        with open(HOSTS_FILE) as f:
            n = sum(1 for line in f if line.rstrip("\n").endswith(self._hosts_tag))
        if n:
            left.append(f"{n} line(s) in {HOSTS_FILE}")
        if os.path.exists(self._state_path):
            left.append(f"state file {self._state_path}")
        return left

    # ------------------------------------------------------------ running things
    def command(self, host: Host | str, argv: list[str]) -> list[str]:
        """`argv` wrapped to run on `host`, with the host's name as its hostname."""
        name = str(host)
        return [_ip_path(), "netns", "exec", name, find_tool("unshare") or "unshare",
                "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', name, *[str(a) for a in argv]]

    def popen(self, host: Host | str, argv: list[str], **kw) -> subprocess.Popen:
        """Start `argv` on `host` in its own session; it is killed at teardown."""
        env = dict(kw.pop("env", None) or os.environ)
        env.setdefault(TAG_VAR, self.tag)
        kw.setdefault("start_new_session", True)
        p = subprocess.Popen(self.command(host, argv), env=env, **kw)
        self._procs.append(p)
        return p

    def run(self, host: Host | str, argv: list[str], *, timeout: float = 60,
            check: bool = False, **kw) -> subprocess.CompletedProcess:
        """Run `argv` on `host` to completion (text output captured); on timeout its
        whole session is killed and TimeoutExpired raised."""
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        kw.setdefault("stdin", subprocess.DEVNULL)
        kw.setdefault("text", True)
        p = self.popen(host, argv, **kw)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(p.pid)
            p.communicate()
            raise
        cp = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        if check and cp.returncode != 0:
            raise AssertionError(f"{' '.join(map(str, argv))} on {host} exited "
                                 f"{cp.returncode}: {err}")
        return cp

    def cut(self, host: Host | str) -> None:
        """Cut the host off the network: its interface goes down inside its namespace
        (packets are dropped, no connection is reset), as a pulled cable would."""
        _ip("-n", str(host), "link", "set", INNER_IFACE, "down")

    def restore(self, host: Host | str) -> None:
        """Plug the cable back.  Neighbour entries that failed while it was cut are
        flushed on every host, so the next packet resolves the address again rather
        than failing at once with EHOSTUNREACH for the kernel's retry interval."""
        _ip("-n", str(host), "link", "set", INNER_IFACE, "up")
        for h in self:
            _ip("-n", str(h), "neigh", "flush", "dev", INNER_IFACE)

    def link_is_up(self, host: Host | str) -> bool:
        out = _ip("-n", str(host), "-o", "link", "show", INNER_IFACE)
        flags = out.split("<", 1)[1].split(">", 1)[0].split(",")
        return "UP" in flags

    # ------------------------------------------------------------ internals
    @property
    def _hosts_tag(self) -> str:
        return f"{HOSTS_TAG} {self.run_id}"

    @property
    def _state_path(self) -> str:
        return os.path.join(STATE_DIR, self.run_id)

    def _choose_names_and_subnet(self) -> None:
        links = set(_link_names())
        while self.bridge in links or any(n.startswith(f"fl{self.run_id}-")
                                          for n in _netns_names()):
            self.run_id = secrets.token_hex(3)
            self.bridge = f"flbr{self.run_id}"
        self.subnet = _free_subnet()
        addrs = list(self.subnet.hosts())
        self.bridge_address = str(addrs[0])
        self.hosts = [Host(f"fl{self.run_id}-h{i}", str(addrs[i + 1]),
                           f"flv{self.run_id}{i}", i) for i in range(self.count)]

    def _write_state(self) -> None:
        os.makedirs(STATE_DIR, mode=0o755, exist_ok=True)
        state = {"pid": os.getpid(), "start_time": procs.start_time(os.getpid()),
                 "subnet": str(self.subnet), "bridge": self.bridge,
                 "hosts": [h.name for h in self.hosts], "veths": [h.veth for h in self.hosts]}
        with open(self._state_path, "w") as f:
            json.dump(state, f)

    def _make_host(self, h: Host) -> None:
        inner = f"flp{self.run_id}{h.index}"
        _ip("netns", "add", h.name)
        _ip("link", "add", h.veth, "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", h.name)
        _ip("link", "set", h.veth, "master", self.bridge)
        _ip("link", "set", h.veth, "up")
        _ip("-n", h.name, "link", "set", inner, "name", INNER_IFACE)
        _ip("-n", h.name, "addr", "add", f"{h.address}/{self.subnet.prefixlen}",
            "dev", INNER_IFACE)
        _ip("-n", h.name, "link", "set", INNER_IFACE, "up")
        _ip("-n", h.name, "link", "set", "lo", "up")


# ---------------------------------------------------------------- helpers
def _ip_path() -> str:
    return find_tool("ip") or "ip"


def _ip(*args: str) -> str:
    cp = subprocess.run([_ip_path(), *args], capture_output=True, text=True, timeout=30)
    if cp.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {cp.stderr.strip() or cp.returncode}")
    return cp.stdout


class _locked:
    def __enter__(self):
        self.fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _netns_names() -> list[str]:
    out = subprocess.run([_ip_path(), "netns", "list"], capture_output=True, text=True,
                         timeout=30).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _link_names() -> list[str]:
    out = _ip("-o", "link", "show")
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) > 1:
            names.append(parts[1].strip().split("@")[0])
    return names


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 from the pool that no address or route on this machine touches."""
    used: list[ipaddress.IPv4Network] = []
    for line in _ip("-o", "-4", "addr", "show").splitlines():
        words = line.split()
        if "inet" in words:
            used.append(ipaddress.ip_interface(words[words.index("inet") + 1]).network)
    for line in _ip("-4", "route", "show", "table", "all").splitlines():
        first = line.split()[0] if line.split() else ""
        if first in ("default", "broadcast", "local", "unreachable", "prohibit", "blackhole"):
            first = line.split()[1] if len(line.split()) > 1 else ""
        try:
            used.append(ipaddress.ip_network(first, strict=False))
        except ValueError:
            continue
    for candidate in SUBNET_POOL.subnets(new_prefix=24):
        if not any(candidate.overlaps(u) for u in used if u.prefixlen > 0):
            return candidate
    raise RuntimeError(f"no free /24 left in {SUBNET_POOL} for network-namespace hosts")


def _add_hosts_lines(entries: list[tuple[str, str]], tag: str) -> None:
    with open(HOSTS_FILE, "a") as f:
        for address, name in entries:
            f.write(f"{address}\t{name}\t{tag}\n")


def _remove_hosts_lines(tag: str) -> None:
    """Rewrite /etc/hosts in place (it may be a bind mount) without the tagged lines."""
    with open(HOSTS_FILE, "r+") as f:
        lines = f.readlines()
        keep = [line for line in lines if not line.rstrip("\n").endswith(tag)]
        if len(keep) != len(lines):
            f.seek(0)
            f.writelines(keep)
            f.truncate()


def _signal_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _kill_netns_pids(name: str) -> set[int]:
    cp = subprocess.run([_ip_path(), "netns", "pids", name], capture_output=True, text=True,
                        timeout=30)
    pids = {int(p) for p in cp.stdout.split() if p.isdigit()} - {os.getpid()}
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def _remove_run(run_id: str, netns: list[str], veths: list[str], bridge: str,
                hosts_tag: str) -> list[str]:
    errors: list[str] = []
    live_ns = set(_netns_names())
    for name in netns:
        if name in live_ns:
            wait_gone(_kill_netns_pids(name), 10)
            try:
                _ip("netns", "del", name)
            except RuntimeError as exc:
                errors.append(str(exc))
    for link in veths + [bridge]:
        if link in set(_link_names()):
            try:
                _ip("link", "del", link)
            except RuntimeError as exc:
                # a veth goes by itself with its peer's namespace, maybe meanwhile
                if "Cannot find device" not in str(exc):
                    errors.append(str(exc))
    with _locked():
        _remove_hosts_lines(hosts_tag)
        try:
            os.unlink(os.path.join(STATE_DIR, run_id))
        except FileNotFoundError:
            pass
    return errors


def _sweep_stale() -> None:
    """Remove runs whose owner died without tearing down (called with the lock held)."""
    try:
        names = os.listdir(STATE_DIR)
    except FileNotFoundError:
        return
    for run_id in names:
        path = os.path.join(STATE_DIR, run_id)
        try:
            with open(path) as f:
                state = json.load(f)
        except (OSError, ValueError):
            continue
        if state.get("start_time") and procs.start_time(state["pid"]) == state["start_time"]:
            continue  # its owner lives
        # _remove_run takes the lock itself: do the parts that need it here
        for name in state.get("hosts", []):
            wait_gone(_kill_netns_pids(name), 10)
            subprocess.run([_ip_path(), "netns", "del", name], capture_output=True, timeout=30)
        for link in state.get("veths", []) + [state.get("bridge", "")]:
            if link:
                subprocess.run([_ip_path(), "link", "del", link], capture_output=True, timeout=30)
        _remove_hosts_lines(f"{HOSTS_TAG} {run_id}")
        os.unlink(path)

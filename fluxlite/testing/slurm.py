"""A small private Slurm cluster on this machine, for tests and benchmarks.

    with SlurmCluster(nodes=2) as slurm:
        slurm.srun("-N2", "--mpi=pmi2", "printenv", "PMI_RANK").stdout

`start()` makes a directory of its own under the temp dir holding a
generated munge key, a slurm.conf (and an empty plugstack.conf, so the
machine's /etc/slurm is never read), then starts, each in the foreground as
a child of this process:

- munged on a private socket (`AuthInfo=socket=...`), checked by a real
  munge/unmunge round trip;
- slurmctld on a free port, waited for with `scontrol ping`;
- one slurmd per node, `slurmd -N NAME`, every node `NodeHostname=localhost`
  on a port of its own (Debian's Slurm runs several slurmd on one host);

and waits until `sinfo` shows every node idle: a poll bounded by
`start_timeout`, since Slurm offers no event to wait on.  Commands talk to
it through `SLURM_CONF` (in `.env`; `srun()`, `sinfo()` use it).

`stop()` cancels the cluster's jobs, then stops exactly the daemons it
started (by pid and start time, never by name), waits for them and their
job-step daemons, and removes the directory; processes left carrying the
cluster's FLUXLITE_TEST_TAG fail it.  The daemons are recorded in
DIR/daemons.json, so `tests/programs/slurm-cluster stop DIR` can stop a
cluster that `slurm-cluster start` left running.

Needs root, slurm-wlm and munge (`require_slurm()` skips a test without
them, and fails it under CI).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

from ..errors import FluxliteError
from ..util import procs
from ..util.procs import wait_gone
from . import TAG_VAR, assert_no_leaks, find_tool, missing_prerequisite

DAEMONS = ("munged", "mungekey", "munge", "unmunge", "slurmctld", "slurmd", "srun", "sinfo",
           "scontrol", "scancel")
STATE_FILE = "daemons.json"


def require_slurm() -> None:
    """Skip the calling test unless Slurm and munge can run here (as root)."""
    missing = [d for d in DAEMONS if find_tool(d) is None]
    if missing:
        missing_prerequisite(f"a Slurm cluster needs {', '.join(missing)} "
                             "(apt-get install slurm-wlm munge)")
    if os.geteuid() != 0:
        missing_prerequisite("a private Slurm cluster needs root (its slurmd run jobs "
                             "as their submitters)")


class SlurmError(FluxliteError, RuntimeError):
    """The test cluster did not come up (a daemon exited, or no answer in time)."""


class SlurmCluster:
    """munged + slurmctld + N slurmd in a private directory; see the module docstring."""

    def __init__(self, nodes: int = 2, *, cpus_per_node: int = 4, start_timeout: float = 60,
                 base_dir: str | None = None):
        if not 1 <= nodes <= 64:
            raise ValueError(f"nodes must be 1-64, not {nodes}")
        self.node_count = nodes
        self.cpus_per_node = cpus_per_node
        self.start_timeout = start_timeout
        self.base_dir = base_dir
        self.tag = uuid.uuid4().hex
        self.dir: str | None = None
        self.node_names = [f"node{i}" for i in range(1, nodes + 1)]
        self.daemons: list[dict] = []        # {name, pid, start_time, argv}
        self._procs: dict[int, subprocess.Popen] = {}
        self.env: dict[str, str] = {}

    # ------------------------------------------------------------ life
    def __enter__(self) -> SlurmCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> SlurmCluster:
        self.dir = tempfile.mkdtemp(prefix="flslurm-", dir=self.base_dir)
        os.chmod(self.dir, 0o755)   # munged wants everyone to traverse to its socket
        conf = os.path.join(self.dir, "slurm.conf")
        self.env = _environment(conf, self.tag)
        try:
            self._write_files()
            self._start_munged()
            self._write_state()
            self._spawn("slurmctld", ["slurmctld", "-D", "-f", conf])
            self._wait_for("slurmctld to answer `scontrol ping`",
                           lambda: "is UP" in self._quiet(["scontrol", "ping"]))
            for name in self.node_names:
                self._spawn(f"slurmd-{name}", ["slurmd", "-D", "-N", name, "-f", conf])
            self._write_state()
            self._wait_for("every node to be idle in sinfo", self._all_idle)
        except BaseException:
            try:
                self.stop()
            except AssertionError:
                pass
            raise
        return self

    def stop(self, timeout: float = 30) -> None:
        """Cancel jobs, stop the daemons this cluster started, remove its directory."""
        if self.dir is None:
            return
        errors: list[str] = []
        if any(d["name"] == "slurmctld" and _alive(d) for d in self.daemons):
            self._quiet(["scancel", "--full", "--quiet", f"--user={os.getuid()}"])
        # the slurmd first, then the controller, munged last (the others talk to it)
        for group in ([d for d in self.daemons if d["name"].startswith("slurmd-")],
                      [d for d in self.daemons if d["name"] == "slurmctld"],
                      [d for d in self.daemons if d["name"] == "munged"]):
            live = [d for d in group if _alive(d)]
            for d in live:
                _kill(d["pid"], signal.SIGTERM)
            left = wait_gone({d["pid"] for d in live}, timeout)
            for pid in left:
                _kill(pid, signal.SIGKILL)
            if wait_gone(left, 5):
                errors.append(f"daemons would not die: {sorted(left)}")
        for p in self._procs.values():
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                errors.append(f"pid {p.pid} was not reaped")
        self._procs.clear()
        try:
            assert_no_leaks(self.tag)
        except AssertionError as exc:
            errors.append(str(exc))
        logs = self.logs() if errors else ""
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None
        self.daemons = []
        if errors:
            raise AssertionError("slurm cluster: " + "; ".join(errors) + logs)

    @classmethod
    def attach(cls, directory: str) -> SlurmCluster:
        """The cluster recorded in `directory` (by `slurm-cluster start`), to stop it."""
        try:
            with open(os.path.join(directory, STATE_FILE)) as f:
                state = json.load(f)
        except (OSError, ValueError) as exc:
            raise SlurmError(f"{directory} holds no cluster started by slurm-cluster: "
                             f"{exc}") from None
        self = cls(len(state["nodes"]))
        self.dir = directory
        self.tag = state["tag"]
        self.node_names = state["nodes"]
        self.daemons = state["daemons"]
        self.env = _environment(os.path.join(directory, "slurm.conf"), self.tag)
        return self

    # ------------------------------------------------------------ using it
    def srun(self, *args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        """Run `srun ARGS` against this cluster (text output captured); on timeout the
        srun session is killed and TimeoutExpired raised."""
        return self.command("srun", *args, timeout=timeout, **kw)

    def command(self, *argv: str, timeout: float = 60, env: dict | None = None,
                **kw) -> subprocess.CompletedProcess:
        e = dict(self.env)
        e.update(env or {})
        p = subprocess.Popen(list(argv), env=e, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                             start_new_session=True, **kw)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(p.pid)
            p.communicate()
            raise
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    def node_states(self) -> dict[str, str]:
        out = self._quiet(["sinfo", "-h", "-N", "-o", "%N %T"])
        states = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2:
                states[parts[0]] = parts[1]
        return states

    def logs(self, tail: int = 2000) -> str:
        """The end of every daemon's log (for failure messages)."""
        out = []
        for name in ["munged.log", "slurmctld.log"] + [f"slurmd-{n}.log"
                                                        for n in self.node_names]:
            path = os.path.join(self.dir or "", name)
            try:
                with open(path, errors="replace") as f:
                    out.append(f"\n--- {name}\n{f.read()[-tail:]}")
            except OSError:
                pass
        return "".join(out)

    # ------------------------------------------------------------ internals
    def _write_files(self) -> None:
        d = self.dir
        for sub in ("state", "spool"):
            os.mkdir(os.path.join(d, sub), 0o700)
        key = os.path.join(d, "munge.key")
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(os.urandom(128))      # what `mungekey --create` makes: 1024 random bits
        open(os.path.join(d, "plugstack.conf"), "w").close()
        ports = _free_ports(1 + self.node_count)
        lines = [
            "# written by fluxlite.testing.slurm for one test run; removed with it",
            f"ClusterName=fl{os.path.basename(d).split('-')[-1].lower()[:8]}",
            f"SlurmctldHost={socket.gethostname()}(127.0.0.1)",
            f"SlurmctldPort={ports[0]}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={d}/munge.sock",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/slurmctld.pid",
            f"SlurmdPidFile={d}/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/slurmctld.log",
            f"SlurmdLogFile={d}/slurmd-%n.log",
            f"PlugStackConfig={d}/plugstack.conf",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SchedulerType=sched/builtin",
            "SelectType=select/linear",
            "MpiDefault=none",
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",
            "KillWait=5",
        ]
        for name, port in zip(self.node_names, ports[1:]):
            lines.append(f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 "
                         f"Port={port} CPUs={self.cpus_per_node} State=UNKNOWN")
        lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        with open(os.path.join(d, "slurm.conf"), "w") as f:
            f.write("\n".join(lines) + "\n")

    def _start_munged(self) -> None:
        d = self.dir
        sock = os.path.join(d, "munge.sock")
        self._spawn("munged", ["munged", "--foreground", f"--key-file={d}/munge.key",
                               f"--socket={sock}", f"--pid-file={d}/munged.pid",
                               f"--log-file={d}/munged.log", f"--seed-file={d}/munged.seed"])

        def round_trip() -> bool:
            if not os.path.exists(sock):
                return False
            cred = subprocess.run(["munge", "-n", f"--socket={sock}"], capture_output=True,
                                  timeout=10)
            if cred.returncode != 0:
                return False
            back = subprocess.run(["unmunge", f"--socket={sock}"], input=cred.stdout,
                                  capture_output=True, timeout=10)
            return back.returncode == 0
        self._wait_for("munged to decode its own credential", round_trip)

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(os.path.join(self.dir, f"{name}.out"), "wb")
        try:
            p = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()
        self._procs[p.pid] = p
        self.daemons.append({"name": name, "pid": p.pid, "start_time": procs.start_time(p.pid),
                             "argv": argv})

    def _write_state(self) -> None:
        with open(os.path.join(self.dir, STATE_FILE), "w") as f:
            json.dump({"tag": self.tag, "nodes": self.node_names, "daemons": self.daemons}, f)

    def wait_idle(self) -> None:
        """Until every node is idle again (a node is "completing" for a moment after
        a step ends); bounded by start_timeout, a poll as Slurm has no event for it."""
        self._wait_for("every node to be idle in sinfo", self._all_idle)

    def _all_idle(self) -> bool:
        states = self.node_states()
        return all(states.get(n) == "idle" for n in self.node_names)

    def _wait_for(self, what: str, ready) -> None:
        """Poll `ready()` until true, at most start_timeout; fails early if a daemon died."""
        deadline = time.monotonic() + self.start_timeout
        delay = 0.05
        while not ready():
            dead = [d["name"] for d in self.daemons if d["pid"] in self._procs
                    and self._procs[d["pid"]].poll() is not None]
            if dead:
                raise SlurmError(f"{', '.join(dead)} exited while waiting for {what}"
                                 + self._outputs(dead))
            if time.monotonic() > deadline:
                raise SlurmError(f"timed out after {self.start_timeout}s waiting for {what}"
                                 + self.logs())
            time.sleep(delay)
            delay = min(delay * 2, 0.5)

    def _outputs(self, names: list[str]) -> str:
        out = []
        for name in names:
            try:
                with open(os.path.join(self.dir, f"{name}.out"), errors="replace") as f:
                    out.append(f"\n--- {name}\n{f.read()[-2000:]}")
            except OSError:
                pass
        return "".join(out) + self.logs()

    def _quiet(self, argv: list[str]) -> str:
        try:
            cp = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired:
            return ""
        return cp.stdout if cp.returncode == 0 else ""


# ---------------------------------------------------------------- helpers
def _environment(conf: str, tag: str) -> dict[str, str]:
    """What the daemons and commands of one cluster run with: its SLURM_CONF, the test
    tag, the sbin directories on PATH, and none of an enclosing job's SLURM_* variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "SBATCH_", "SRUN_"))}
    env["PATH"] = os.pathsep.join([env.get("PATH", ""), "/usr/local/sbin", "/usr/sbin",
                                   "/sbin"])
    env["SLURM_CONF"] = conf
    env[TAG_VAR] = tag
    return env


def _free_ports(n: int) -> list[int]:
    """n distinct TCP ports nothing listens on now (held open together while chosen)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _alive(daemon: dict) -> bool:
    """The recorded process is still the one we started (not a recycled pid)."""
    started = daemon["start_time"]
    return started is not None and procs.start_time(daemon["pid"]) == started


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass

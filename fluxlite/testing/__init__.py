"""Start real instances from tests (or scripts) and check that nothing leaks.

    with Instance(size=4, topo="kary:2") as inst:
        inst.cli("ping", "-c", "1", "3", check=True)
        inst.kill_broker(3)
        inst.wait_membership(lambda m: 3 in m.get("lost", set()), timeout=10)

The instance's initial program prints FLUXLITE_URI and then waits on stdin,
so "up" is an event (a line on a pipe) and "stop" is closing that pipe: no
sleeps, no polling.  Every process the instance starts inherits a unique
FLUXLITE_TEST_TAG, and `assert_no_leaks()` fails if any process carrying it is
still alive (after a bounded wait for processes that are already dying).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import weakref

from ..util import procs

TAG_VAR = "FLUXLITE_TEST_TAG"
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fluxlite_command() -> list[str]:
    """How to run the fluxlite CLI: the venv's console script, else this interpreter."""
    exe = os.path.join(os.path.dirname(sys.executable), "fluxlite")
    if os.access(exe, os.X_OK):
        return [exe]
    return [sys.executable, "-m", "fluxlite"]


def tagged_processes(tag: str) -> dict[int, str]:
    """pid -> command line of every live (non-zombie) process whose environment has the tag."""
    needle = f"{TAG_VAR}={tag}".encode()
    found: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
            if needle not in env.split(b"\0"):
                continue
            if procs.state(int(name)) in (None, "Z", "X"):
                continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found[int(name)] = cmd
    return found


def wait_pids_gone(pids, timeout: float) -> set[int]:
    """Wait on pidfds until every pid has exited or `timeout` passes; returns survivors."""
    from ..util.procs import wait_gone
    return wait_gone(pids, timeout)


def assert_no_leaks(tag: str, timeout: float = 10.0) -> None:
    """Fail if processes carrying `tag` outlive `timeout` (zombies do not count)."""
    procs = tagged_processes(tag)
    if procs:
        wait_pids_gone(procs, timeout)
        procs = tagged_processes(tag)
    if procs:
        for pid in procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        listing = "; ".join(f"{pid}: {cmd}" for pid, cmd in sorted(procs.items()))
        raise AssertionError(f"{len(procs)} process(es) left behind: {listing}")


def missing_prerequisite(message: str):
    """A test cannot run here (no root, no MPICH, no Slurm): skip it with `message`, which
    says what to install, or fail under CI (CI=true), where nothing may be missing."""
    import pytest
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI: {message}", pytrace=False)
    pytest.skip(message)


def find_tool(name: str) -> str | None:
    """The path of program `name` on PATH or in the sbin directories (system daemons and
    `ip` live there, and a non-login root shell may lack them on PATH), or None."""
    import shutil
    extra = ("/usr/local/sbin", "/usr/sbin", "/sbin")
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), *extra]))


def one_error_line(cp: subprocess.CompletedProcess) -> str:
    """The one stderr line of a command that failed (bad input: one line, nonzero exit)."""
    assert cp.returncode != 0, cp.stdout
    lines = cp.stderr.splitlines()
    assert len(lines) == 1, cp.stderr
    return lines[0]


def jobid_of(cp: subprocess.CompletedProcess) -> int:
    """The job id a successful submitting command (submit, batch, alloc --bg) printed last."""
    from ..util import fluid
    assert cp.returncode == 0, cp.stderr
    return fluid.parse(cp.stdout.strip().splitlines()[-1])


def wait_event(h, jobid: int, name: str, path: str = "eventlog", timeout: float = 60) -> dict:
    """Follow a job's eventlog until entry `name` appears (it may be there already)."""
    from ..jobapi import api
    for e in api.event_watch(h, jobid, path, timeout=timeout):
        if e["name"] == name:
            return e
    raise AssertionError(f"no {name} event in the {path} of job {jobid}")


def wait_fifo(path, timeout: float = 60) -> str:
    """Wait until something is written to the FIFO at `path` (a script saying it got
    somewhere) and return it; fails after `timeout`."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"nothing written to {path} within {timeout}s"
        return os.read(fd, 4096).decode()
    finally:
        os.close(fd)


class Instance:
    """A real fluxlite instance started with `fluxlite start`, for tests and demos."""

    READY_PROGRAM = ['sh', '-c', 'echo "$FLUXLITE_URI"; exec cat >/dev/null']

    def __init__(self, size: int = 1, *, topo: str | None = None, setattrs=(),
                 conf: str | None = None, cores_per_rank: int | None = None,
                 start_args=(), env: dict | None = None, start_timeout: float = 60.0):
        self.size = size
        self.tag = uuid.uuid4().hex
        self.env = dict(os.environ if env is None else env)
        self.env[TAG_VAR] = self.tag
        for var in ("FLUXLITE_URI", "FLUXLITE_KVS_NAMESPACE", "FLUX_KVS_NAMESPACE"):
            self.env.pop(var, None)   # (an enclosing job's, not this instance's)
        # as in a user's shell: `fluxlite` is on PATH (scripts and proxy commands use it)
        bindir = os.path.dirname(fluxlite_command()[0])
        if os.path.exists(os.path.join(bindir, "fluxlite")):
            self.env["PATH"] = bindir + os.pathsep + self.env.get("PATH", "")
        self.args = ["start", "--size", str(size)]
        if topo:
            self.args += ["--topo", topo]
        if cores_per_rank:
            self.args += ["--cores-per-rank", str(cores_per_rank)]
        if conf:
            self.args += ["--conf", conf]
        for s in setattrs:
            self.args += ["--setattr", s]
        self.args += list(start_args)
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.uri: str | None = None
        self.returncode: int | None = None
        self._stderr = tempfile.TemporaryFile()
        self._handles = []

    # ---------------------------------------------------------------- life
    def start(self) -> Instance:
        self.proc = subprocess.Popen(
            fluxlite_command() + self.args + ["--"] + self.READY_PROGRAM,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            env=self.env)
        line = _readline(self.proc.stdout, self.start_timeout)
        if not line:
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"instance did not come up: {self.stderr_tail()}")
        self.uri = line.strip()
        self.env["FLUXLITE_URI"] = self.uri
        return self

    def stop(self, timeout: float = 60.0) -> int:
        """Close the initial program's stdin (it exits 0) and wait for the launcher."""
        for h in self._handles:
            h.close()
        self._handles.clear()
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.returncode = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.returncode = self.proc.wait()
                raise AssertionError(f"instance did not shut down within {timeout}s: "
                                     f"{self.stderr_tail()}") from None
        else:
            self.returncode = self.proc.returncode
        self.proc.stdout.close()
        return self.returncode

    def __enter__(self) -> Instance:
        return self.start()

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            assert_no_leaks(self.tag)
            self._stderr.close()

    def stderr_tail(self, n: int = 4000) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-n:]

    # ------------------------------------------------------------ talking
    @contextlib.contextmanager
    def cli_background(self, *args):
        """`fluxlite ARGS...` running (text pipes) while the block runs; killed if it
        is still running when the block ends."""
        p = subprocess.Popen(fluxlite_command() + list(args), env=self.env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            yield p
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()

    def cli(self, *args, check: bool = False, timeout: float = 60.0, input: str | None = None,
            env: dict | None = None, cwd: str | None = None) -> subprocess.CompletedProcess:
        """Run `fluxlite ARGS...` against this instance; stdout/stderr captured as text."""
        e = dict(self.env)
        if env:
            e.update(env)
        stdin = {} if input is not None else {"stdin": subprocess.DEVNULL}
        cp = subprocess.run(fluxlite_command() + [str(a) for a in args], env=e, cwd=cwd,
                            capture_output=True, text=True, timeout=timeout, input=input,
                            **stdin)
        if check and cp.returncode != 0:
            raise AssertionError(f"fluxlite {' '.join(map(str, args))} exited {cp.returncode}: "
                                 f"{cp.stderr.strip()}")
        return cp

    def handle(self, uri: str | None = None):
        from ..client.sync import Handle
        h = Handle(uri or self.uri)
        self._handles.append(h)
        return h

    def getattr(self, name: str, rank: int | None = None) -> str:
        return self.handle().getattr(name, rank)

    def broker_pid(self, rank: int) -> int:
        return int(self.getattr("broker.pid", rank))

    def kill_broker(self, rank: int, sig: int = signal.SIGKILL) -> int:
        pid = self.broker_pid(rank)
        os.kill(pid, sig)
        return pid

    def wait_membership(self, predicate, timeout: float = 10.0) -> dict[str, set[int]]:
        """Follow rank 0's membership stream until predicate({state: set(ranks)}) holds."""
        from ..util import idset
        h = self.handle()
        deadline = time.monotonic() + timeout
        last: dict[str, set[int]] = {}
        for snap in h.stream("overlay.watch", nodeid=0, timeout=timeout):
            last = {k: idset.decode(v) for k, v in snap["ranks"].items()}
            if predicate(last):
                return last
            if time.monotonic() > deadline:
                break
        raise AssertionError(f"membership condition not met within {timeout}s: {last}")


_pending: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _readline(stream, timeout: float) -> str:
    """One line from a pipe within `timeout` ("" on timeout or end of file).

    Reads the file descriptor directly and keeps what follows the line for the
    next call: a buffered readline() could swallow a second line that select()
    would then never report."""
    buf = _pending.get(stream, b"")
    deadline = time.monotonic() + timeout
    fd = stream.fileno()
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(0.0, left))
        if not ready:
            _pending[stream] = buf
            return ""
        chunk = os.read(fd, 65536)
        if not chunk:
            _pending[stream] = b""
            return buf.decode(errors="replace")
        buf += chunk
    line, _, rest = buf.partition(b"\n")
    _pending[stream] = rest
    return (line + b"\n").decode(errors="replace")

"""fluxlite's benchmark: the figures behind the project's performance targets.

    .venv/bin/python bench/run.py                 # everything (what `make bench` runs)
    .venv/bin/python bench/run.py --only ping,rpc # a subset (names: --list)
    .venv/bin/python bench/run.py --quick         # fewer repetitions, a fast check

Each figure is one function that starts real instances (through
fluxlite.testing.Instance, which stops them and checks that no process is
left behind), measures, and appends rows to the result list.  At the end a
table (figure, value, target, flux-core, pass/miss) is printed and the rows are
written as JSON to bench/results/latest.json.  bench/README.md says what each
figure means.  Nothing here changes fluxlite; a figure whose measurement fails
is reported as "error" with the failing command and its message.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import platform
import select
import signal
import statistics
import subprocess
import sys
import time
import traceback
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from fluxlite.job import api  # noqa: E402
from fluxlite.testing import (  # noqa: E402
    TAG_VAR,
    Instance,
    assert_no_leaks,
    fluxlite_command,
    tagged_processes,
    wait_pids_gone,
)
from fluxlite.util import fluid, idset, procs  # noqa: E402

RESULTS = os.path.join(HERE, "results", "latest.json")


# ------------------------------------------------------------------ results
class Row:
    """One line of the table: a measured value and the target it is held to."""

    def __init__(self, figure: str, label: str, value, unit: str, *, op: str | None = None,
                 bound=None, flux_core: str = "", samples=None, note: str = "",
                 error: str = ""):
        self.figure, self.label, self.value, self.unit = figure, label, value, unit
        self.op, self.bound, self.flux_core = op, bound, flux_core
        self.samples = samples or []
        self.note, self.error = note, error

    @property
    def status(self) -> str:
        if self.error:
            return "error"
        if self.op is None or self.value is None:
            return "info"
        ok = {"<=": self.value <= self.bound, "<": self.value < self.bound,
              ">=": self.value >= self.bound}[self.op]
        return "pass" if ok else "miss"

    def target_text(self) -> str:
        return "-" if self.op is None else f"{self.op} {fmt(self.bound, self.unit)}"

    def as_dict(self) -> dict:
        return {"figure": self.figure, "label": self.label, "value": self.value,
                "unit": self.unit, "target": None if self.op is None else
                {"op": self.op, "bound": self.bound}, "flux_core": self.flux_core or None,
                "status": self.status, "samples": self.samples, "note": self.note or None,
                "error": self.error or None}


def fmt(value, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value:.3f} s" if value < 10 else f"{value:.1f} s"
    if unit == "ms":
        return f"{value:.3f} ms"
    if unit == "MB":
        return f"{value:.1f} MB"
    if unit in ("rpc/s", "jobs/s"):
        return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.1f} {unit}"
    if unit == "%":
        return f"{value:.0f} %"
    return f"{value} {unit}"


def progress(fig: str, text: str) -> None:
    print(f"[{fig}] {text}", flush=True)


def median(xs) -> float:
    return statistics.median(xs)


# ------------------------------------------------------------- /proc helpers
def proc_status(pid: int, field: str) -> float:
    """A kB field of /proc/PID/status (VmRSS, VmHWM) in MB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"/proc/{pid}/status has no {field}")


def ppid_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    return int(data[data.rfind(b")") + 2:].split()[1])


def cmdline_of(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode(errors="replace").strip()


def cli(inst: Instance, *args, timeout: float = 60.0) -> subprocess.CompletedProcess:
    """inst.cli that raises with the command and its stderr when it fails."""
    cp = inst.cli(*args, timeout=timeout)
    if cp.returncode != 0:
        raise RuntimeError(f"`fluxlite {' '.join(map(str, args))}` exited {cp.returncode}: "
                           f"{cp.stderr.strip()[-800:]}")
    return cp


def run_timed(argv: list[str], env: dict, timeout: float) -> float:
    """Run argv to completion; wall seconds.  The child never outlives this call."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    try:
        _, err = p.communicate(timeout=timeout)
        elapsed = time.perf_counter() - t0
    except BaseException:
        # timeout or Ctrl-C: ask politely (the launcher shuts its brokers down), then kill
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if p.poll() is None:
                p.send_signal(sig)
                try:
                    p.wait(wait)
                except subprocess.TimeoutExpired:
                    pass
        raise
    if p.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` exited {p.returncode}: "
                           f"{err.decode(errors='replace').strip()[-800:]}")
    return elapsed


# ------------------------------------------------------------------ figures
def fig_start(rows: list, quick: bool, ctx: dict) -> None:
    """1. `fluxlite start --size N true`, end to end, median of >= 5 runs."""
    targets = {1: (0.5, "1.8 s"), 16: (1.5, "5.4 s"), 64: (5.0, "17.5 s")}
    reps = 2 if quick else 5
    for n, (bound, fc) in targets.items():
        samples = []
        try:
            for i in range(reps):
                tag = uuid.uuid4().hex
                env = dict(os.environ)
                env.pop("FLUXLITE_URI", None)
                env[TAG_VAR] = tag
                try:
                    dt = run_timed(fluxlite_command() + ["start", "--size", str(n), "true"],
                                   env, timeout=120)
                finally:
                    assert_no_leaks(tag)
                samples.append(dt)
                progress("start", f"size {n} run {i + 1}/{reps}: {dt:.3f} s")
            rows.append(Row("1", f"start --size {n} true", median(samples), "s", op="<=",
                            bound=bound, flux_core=fc, samples=samples,
                            note=f"median of {len(samples)}"))
        except Exception as exc:
            rows.append(Row("1", f"start --size {n} true", None, "s", op="<=", bound=bound,
                            flux_core=fc, samples=samples, error=str(exc)))


def fig_lost(rows: list, quick: bool, ctx: dict) -> None:
    """2. SIGKILL of leaf rank 3 of a fresh size-4 instance -> rank 0 reports it lost."""
    reps = 2 if quick else 5
    samples = []
    try:
        for i in range(reps):
            with Instance(4) as inst:
                h = inst.handle()
                pid = inst.broker_pid(3)
                stream = h.stream("overlay.watch", nodeid=0, timeout=10)
                first = {k: idset.decode(v) for k, v in next(stream)["ranks"].items()}
                if 3 in first.get("lost", set()):
                    raise RuntimeError(f"rank 3 already lost before the kill: {first}")
                t0 = time.monotonic()
                os.kill(pid, signal.SIGKILL)
                for snap in stream:
                    if 3 in idset.decode(snap["ranks"].get("lost", "")):
                        dt = time.monotonic() - t0
                        break
                    if time.monotonic() - t0 > 10:
                        raise RuntimeError(f"rank 3 not lost 10 s after SIGKILL: {snap}")
                else:
                    raise RuntimeError("overlay.watch ended before rank 3 was lost")
                stream.close()
            samples.append(dt)
            progress("lost", f"sample {i + 1}/{reps}: {dt * 1000:.1f} ms")
        rows.append(Row("2", "kill -9 leaf -> lost", median(samples), "s", op="<", bound=0.5,
                        flux_core="0.9-1.3 s", samples=samples,
                        note=f"median of {len(samples)}, size 4"))
    except Exception as exc:
        rows.append(Row("2", "kill -9 leaf -> lost", None, "s", op="<", bound=0.5,
                        flux_core="0.9-1.3 s", samples=samples, error=str(exc)))


def _ping_samples(h, nodeid: int, count: int) -> list[float]:
    for _ in range(5):  # warm-up: connections and routes
        h.call("broker.ping", {"seq": 0}, nodeid=nodeid, timeout=10)
    out = []
    for seq in range(count):
        t0 = time.perf_counter()
        h.call("broker.ping", {"seq": seq}, nodeid=nodeid, timeout=10)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def fig_ping(rows: list, quick: bool, ctx: dict) -> None:
    """3. broker.ping round trip from a client of rank 0: to rank 15 (4 hops down) and rank 0."""
    count = 50 if quick else 200
    try:
        with Instance(16, topo="kary:2") as inst:
            h = inst.handle()
            level = inst.getattr("tbon.level", 15)
            for nodeid, label in ((15, f"ping rank 0 -> 15 (kary:2, level {level})"),
                                  (0, "ping rank 0 -> 0")):
                s = _ping_samples(h, nodeid, count)
                route = h.call("broker.ping", nodeid=nodeid, timeout=10).get("route", [])
                progress("ping", f"rank {nodeid}: median {median(s):.3f} ms over {count} "
                                 f"(route {route})")
                rows.append(Row("3", label, median(s), "ms", samples=[round(x, 4) for x in s],
                                note=f"median of {count}; p90 "
                                     f"{statistics.quantiles(s, n=10)[-1]:.3f} ms; "
                                     f"route {route}"))
    except Exception as exc:
        rows.append(Row("3", "ping", None, "ms", error=str(exc)))


def fig_rpc(rows: list, quick: bool, ctx: dict) -> None:
    """4. broker.ping RPCs per second from one client to rank 0: sequential and pipelined."""
    duration = 0.5 if quick else 2.0
    depth = 64
    try:
        with Instance(1) as inst:
            h = inst.handle()
            for _ in range(50):
                h.call("broker.ping", nodeid=0, timeout=10)
            # (a) sequential, in windows alternating with bare ZeroMQ round trips (4c)
            # so that both see the same machine: on a 2-core VM one window can be
            # halved by work elsewhere, so each figure is the median of its windows
            rates, bare_rates = [], []
            with BareEcho() as bare:
                for _ in range(WINDOWS):
                    n, t0 = 0, time.perf_counter()
                    end = t0 + duration / WINDOWS
                    while time.perf_counter() < end:
                        h.call("broker.ping", nodeid=0, timeout=10)
                        n += 1
                    rates.append(n / (time.perf_counter() - t0))
                    bare_rates.append(bare.rate(duration / WINDOWS))
            rate, floor = statistics.median(rates), statistics.median(bare_rates)
            ratio = statistics.median(a / b for a, b in zip(rates, bare_rates))
            progress("rpc", "sequential: " + ", ".join(f"{r:,.0f}" for r in rates) +
                     "/s; bare ZeroMQ: " + ", ".join(f"{r:,.0f}" for r in bare_rates) + "/s")
            rows.append(Row("4a", "RPC/s sequential", rate, "rpc/s", op=">=", bound=5000,
                            samples=rates, note=f"median of {WINDOWS} windows of "
                                                f"{duration / WINDOWS:g} s; {ratio:.0%} of the "
                                                "bare ZeroMQ rate measured beside it (4c)"))
            rows.append(Row("4c", "bare ZeroMQ round trips/s (floor)", floor, "rpc/s",
                            samples=bare_rates,
                            note="two processes, DEALER->ROUTER over ipc://, echo, no fluxlite: "
                                 "the ceiling for 4a on this machine at that moment"))
            # (b) pipelined: keep `depth` in flight, wait for the oldest
            inflight = collections.deque()
            n, t0 = 0, time.perf_counter()
            end = t0 + duration
            while True:
                now = time.perf_counter()
                while len(inflight) < depth and now < end:
                    inflight.append(h.rpc("broker.ping", nodeid=0))
                if not inflight:
                    break
                p = inflight.popleft()
                h.wait(p, timeout=10)
                p.take()
                n += 1
            rate = n / (time.perf_counter() - t0)
            progress("rpc", f"pipelined ({depth} in flight): {n} calls, {rate:,.0f}/s")
            rows.append(Row("4b", f"RPC/s pipelined ({depth} in flight)", rate, "rpc/s",
                            op=">=", bound=5000, note=f"{n} calls in {duration:g} s"))
    except Exception as exc:
        rows.append(Row("4", "RPC/s", None, "rpc/s", op=">=", bound=5000, error=str(exc)))


WINDOWS = 5  # sequential rates: the median of this many windows


class BareEcho:
    """Bare pyzmq sockets in two processes (a forked ROUTER that echoes, a DEALER):
    sequential round trips with no fluxlite code, what 4a would be if fluxlite
    cost nothing."""

    def __enter__(self):
        import tempfile

        import zmq
        self.dir = tempfile.mkdtemp(prefix="fl-bench-")
        endpoint = f"ipc://{self.dir}/echo"
        self.pid = os.fork()
        if self.pid == 0:  # the echo server: a fresh context after the fork
            try:
                ctx = zmq.Context()
                sock = ctx.socket(zmq.ROUTER)
                sock.bind(endpoint)
                while True:
                    frames = sock.recv_multipart()
                    sock.send_multipart(frames)
                    if frames[-1] == b"quit":
                        break
                # os._exit would drop the echoed "quit" still queued in the I/O thread
                sock.close(linger=2000)
                ctx.term()
            finally:
                os._exit(0)
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.connect(endpoint)
        self.rate(0.05)  # warm up
        return self

    def rate(self, duration: float) -> float:
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < duration:
            self.sock.send_multipart([b"header", b"x"])
            self.sock.recv_multipart()
            n += 1
        return n / (time.perf_counter() - t0)

    def __exit__(self, *exc):
        try:
            self.sock.send_multipart([b"quit"])
            if not self.sock.poll(5000):   # no echo: never hang the bench on it
                os.kill(self.pid, signal.SIGKILL)
        finally:
            self.sock.close(linger=0)
            self.ctx.term()
            os.waitpid(self.pid, 0)
            import shutil
            shutil.rmtree(self.dir, ignore_errors=True)


def fig_rss(rows: list, quick: bool, ctx: dict) -> None:
    """5. VmRSS of each idle broker of a size-4 instance, and of each broker's spawner."""
    brokers, spawners = {}, {}
    try:
        with Instance(4) as inst:
            for rank in range(4):
                pid = inst.broker_pid(rank)
                brokers[rank] = proc_status(pid, "VmRSS")
                kids = [k for k in procs.children(pid)
                        if cmdline_of(k).startswith("fluxlite-spawner")]
                if len(kids) != 1:
                    raise RuntimeError(f"rank {rank} (pid {pid}) has {len(kids)} "
                                       "fluxlite-spawner children, expected 1")
                spawners[rank] = proc_status(kids[0], "VmRSS")
            progress("rss", "brokers " + ", ".join(f"{r}: {v:.1f} MB" for r, v in brokers.items())
                     + "; spawners " + ", ".join(f"{r}: {v:.1f} MB" for r, v in spawners.items()))
            rows.append(Row("5", "RSS idle broker (max of 4 ranks)", max(brokers.values()), "MB",
                            op="<=", bound=40, samples=brokers,
                            note="per rank: " + ", ".join(f"{v:.1f}" for v in brokers.values())))
            rows.append(Row("5", "RSS spawner (max of 4 ranks)", max(spawners.values()), "MB",
                            samples=spawners,
                            note="per rank: " + ", ".join(f"{v:.1f}" for v in spawners.values())))
    except Exception as exc:
        rows.append(Row("5", "RSS idle broker", None, "MB", op="<=", bound=40, error=str(exc)))


def fig_run(rows: list, quick: bool, ctx: dict) -> None:
    """6. `fluxlite run true` end to end as a subprocess, in a size-4 instance, median of 20."""
    reps = 5 if quick else 20
    samples = []
    try:
        with Instance(4) as inst:
            for _i in range(reps):
                samples.append(run_timed(fluxlite_command() + ["run", "true"], inst.env, 60))
            progress("run", "samples " + " ".join(f"{s:.3f}" for s in samples))
            rows.append(Row("6", "run true (size 4)", median(samples), "s", op="<=", bound=0.12,
                            flux_core="0.19 s", samples=samples, note=f"median of {reps}"))
    except Exception as exc:
        rows.append(Row("6", "run true (size 4)", None, "s", op="<=", bound=0.12,
                        flux_core="0.19 s", samples=samples, error=str(exc)))


def _submit_many(inst: Instance, njobs: int) -> float:
    """`submit --cc=1-N --quiet --wait true`, end to end; returns seconds."""
    t0 = time.perf_counter()
    cli(inst, "submit", f"--cc=1-{njobs}", "--quiet", "--wait", "true",
        timeout=max(60, njobs * 0.5))
    return time.perf_counter() - t0


def fig_throughput(rows: list, quick: bool, ctx: dict) -> None:
    """7. 500 `true` jobs with one submit --cc --wait, jobs/s, in size 1 and size 4."""
    njobs = 100 if quick else 500
    for size in (1, 4):
        try:
            with Instance(size) as inst:
                dt = _submit_many(inst, njobs)
                rate = njobs / dt
                progress("throughput", f"size {size}: {njobs} jobs in {dt:.2f} s, {rate:.1f}/s")
                if size == 4:
                    # 8b: rank 0's footprint after the jobs (read while the instance is up)
                    ctx["rss_after"] = (proc_status(inst.broker_pid(0), "VmRSS"), njobs)
                rows.append(Row("7", f"throughput size {size}", rate, "jobs/s", op=">=",
                                bound=70, flux_core="33 jobs/s", samples=[dt],
                                note=f"{njobs} jobs in {dt:.2f} s"))
        except Exception as exc:
            rows.append(Row("7", f"throughput size {size}", None, "jobs/s", op=">=", bound=70,
                            flux_core="33 jobs/s", error=str(exc)))


def _find_shell(tag: str) -> int:
    """pid of the job shell among the instance's processes (child of a fluxlite-spawner)."""
    found = []
    for pid, cmd in tagged_processes(tag).items():
        if cmd.startswith("fluxlite-shell"):
            try:
                if cmdline_of(ppid_of(pid)).startswith("fluxlite-spawner"):
                    found.append(pid)
            except OSError:
                pass
    if len(found) != 1:
        raise RuntimeError(f"expected one fluxlite-shell child of a spawner, found {found}: "
                           f"{tagged_processes(tag)}")
    return found[0]


def fig_jobmem(rows: list, quick: bool, ctx: dict) -> None:
    """8. VmHWM of a job shell (job: sleep 1), and rank 0's VmRSS after the jobs of figure 7."""
    try:
        with Instance(4) as inst:
            jobid = cli(inst, "submit", "sleep", "1").stdout.strip()
            cli(inst, "job", "wait-event", "--path", "exec", "--quiet", "--timeout", "30",
                jobid, "shell.start")
            pid = _find_shell(inst.tag)
            hwm = 0.0
            # VmHWM only grows; keep the last reading taken before the shell exits
            while True:
                try:
                    hwm = max(hwm, proc_status(pid, "VmHWM"))
                except (OSError, RuntimeError):  # gone (or a zombie without mm)
                    break
                time.sleep(0.05)
            cli(inst, "job", "wait", jobid)
            progress("jobmem", f"job shell pid {pid}: VmHWM {hwm:.1f} MB")
            rows.append(Row("8a", "peak RSS job shell (VmHWM)", hwm, "MB",
                            note="1-task job `sleep 1`, size 4"))
            if "rss_after" not in ctx:
                njobs = 100 if quick else 500
                progress("jobmem", f"figure 7 not run: submitting {njobs} jobs here")
                _submit_many(inst, njobs)
                ctx["rss_after"] = (proc_status(inst.broker_pid(0), "VmRSS"), njobs)
    except Exception as exc:
        rows.append(Row("8a", "peak RSS job shell (VmHWM)", None, "MB", error=str(exc)))
    if "rss_after" in ctx:
        rss, njobs = ctx["rss_after"]
        progress("jobmem", f"rank 0 broker after {njobs} jobs: VmRSS {rss:.1f} MB")
        rows.append(Row("8b", f"RSS rank 0 broker after {njobs} jobs", rss, "MB",
                        flux_core="~270 MB", note="size 4"))


def fig_output_rss(rows: list, quick: bool, ctx: dict) -> None:
    """8c. Rank 0 VmRSS before and after 3 jobs that each write 50 MB of output (size 1)."""
    mb = 10 if quick else 50
    line = "0123456789abcdef" * 4
    script = f"yes {line} | head -c {mb}000000"
    try:
        with Instance(1) as inst:
            before = proc_status(inst.broker_pid(0), "VmRSS")
            cli(inst, "submit", "--cc=1-3", "--quiet", "--wait", "sh", "-c", script,
                timeout=600)
            after = proc_status(inst.broker_pid(0), "VmRSS")
            progress("output-rss", f"rank 0 VmRSS {before:.1f} MB before, {after:.1f} MB after "
                     f"3 x {mb} MB of output")
            rows.append(Row("8c", f"RSS rank 0 after 3 x {mb} MB output jobs", after, "MB",
                            op="<=", bound=before + 20, samples=[before, after],
                            note=f"{before:.1f} MB before the jobs"))
    except Exception as exc:
        rows.append(Row("8c", "RSS rank 0 after 3 x 50 MB output jobs", None, "MB",
                        error=str(exc)))


def fig_many_jobs(rows: list, quick: bool, ctx: dict) -> None:
    """8d. 10,000 `true` jobs through one submit --cc --wait with an inactive num-limit
    of 1,000 (size 4): jobs/s, and rank 0 VmRSS at the end."""
    njobs = 2000 if quick else 10000
    try:
        with Instance(4, setattrs=["job-manager.inactive-num-limit=1000"]) as inst:
            dt = _submit_many(inst, njobs)
            rate = njobs / dt
            rss = proc_status(inst.broker_pid(0), "VmRSS")
            hwm = proc_status(inst.broker_pid(0), "VmHWM")
            kept = len(cli(inst, "jobs", "-a", "--no-header", "-o", "{id}").stdout.split())
            progress("many-jobs", f"{njobs} jobs in {dt:.1f} s, {rate:.1f}/s; rank 0 VmRSS "
                     f"{rss:.1f} MB (peak {hwm:.1f} MB); {kept} jobs kept")
            rows.append(Row("8d", f"throughput {njobs} jobs, num-limit 1000", rate, "jobs/s",
                            op=">=", bound=70, samples=[dt],
                            note=f"{njobs} jobs in {dt:.1f} s (size 4); target: the 500-job "
                                 "figure 7"))
            rows.append(Row("8d", f"RSS rank 0 after {njobs} jobs, num-limit 1000", rss, "MB",
                            op="<=", bound=60, samples=[rss, hwm],
                            note=f"{kept} inactive jobs kept; peak (VmHWM) {hwm:.1f} MB"))
    except Exception as exc:
        rows.append(Row("8d", "throughput 10000 jobs, num-limit 1000", None, "jobs/s",
                        error=str(exc)))


def _submit_chain(h, n: int, chain: bool) -> float:
    """Submit n `true` jobs one after another through the job API (each afterany on the
    one before if `chain`), then wait for all; seconds."""
    from fluxlite.job.jobspec import Jobspec
    base = Jobspec.from_command(["true"], environment={"PATH": os.environ.get("PATH", "")})
    t0 = time.perf_counter()
    ids, prev = [], None
    for _ in range(n):
        spec = json.loads(json.dumps(base.jobspec))
        if chain and prev is not None:
            spec["attributes"]["system"]["dependencies"] = [
                {"scheme": "afterany", "value": fluid.f58(prev)}]
        prev = api.submit(h, spec)
        ids.append(prev)
    for jobid in ids:
        api.wait(h, jobid, timeout=600)
    return time.perf_counter() - t0


def fig_chain(rows: list, quick: bool, ctx: dict) -> None:
    """8e. A 1,000-job afterany dependency chain end to end (size 4): jobs/s, against the
    same jobs submitted the same way without dependencies."""
    njobs = 200 if quick else 1000
    try:
        with Instance(4) as inst:
            h = inst.handle()
            plain = njobs / _submit_chain(h, njobs, chain=False)
            chained = njobs / _submit_chain(h, njobs, chain=True)
            ratio = 100.0 * chained / plain
            progress("chain", f"{njobs} jobs: chain {chained:.1f}/s, plain {plain:.1f}/s "
                     f"({ratio:.0f}%)")
            rows.append(Row("8e", f"dependency chain of {njobs} (afterany)", chained, "jobs/s",
                            note=f"plain: {plain:.1f} jobs/s"))
            rows.append(Row("8e", "chain / plain throughput", ratio, "%", op=">=", bound=50))
    except Exception as exc:
        rows.append(Row("8e", "dependency chain of 1000 (afterany)", None, "jobs/s",
                        error=str(exc)))


# ------------------------------------------------ nested instances, node loss
def _submit_id(inst: Instance, *args, timeout: float = 60.0) -> int:
    """Run a submitting command (`submit`, `batch`, ...) and parse the job id it prints."""
    out = cli(inst, *args, timeout=timeout).stdout.strip().splitlines()
    if not out:
        raise RuntimeError(f"`fluxlite {' '.join(map(str, args))}` printed no job id")
    return fluid.parse(out[-1])


def _wait_event(h, jobid: int, name: str, path: str = "eventlog", timeout: float = 30.0):
    """The first `name` entry of a job eventlog (followed, not polled)."""
    for e in api.event_watch(h, jobid, path, timeout=timeout):
        if e["name"] == name:
            return e
    raise RuntimeError(f"job {fluid.f58(jobid)}: {path} eventlog ended without {name}")


def _fatal_node_failure(h, jobid: int) -> dict:
    """The job's severity-0 node-failure exception (raises if there is none)."""
    for e in api.event_watch(h, jobid, follow=False):
        ctx = e.get("context") or {}
        if e["name"] == "exception" and ctx.get("type") == "node-failure" \
                and ctx.get("severity") == 0:
            return ctx
    raise RuntimeError(f"job {fluid.f58(jobid)} has no fatal node-failure exception")


def fig_nested(rows: list, quick: bool, ctx: dict) -> None:
    """9. `batch -N2 --wrap true` submit -> INACTIVE, and `alloc -N2 true`, in a size-4 instance."""
    reps = 2 if quick else 5
    label_b = "batch -N2 --wrap true -> inactive"
    label_a = "alloc -N2 true"
    batch, alloc = [], []
    try:
        with Instance(4) as inst:
            h = inst.handle()
            for i in range(reps):
                t0 = time.perf_counter()
                jobid = _submit_id(inst, "batch", "-N2", "--output", "/dev/null",
                                   "--wrap", "true")
                r = api.wait(h, jobid, timeout=60)
                dt = time.perf_counter() - t0
                if not r.get("success"):
                    raise RuntimeError(f"`fluxlite batch -N2 --output /dev/null --wrap true` "
                                       f"job {fluid.f58(jobid)} {r.get('result')}: "
                                       f"{r.get('errstr')}")
                batch.append(dt)
                progress("nested", f"batch sample {i + 1}/{reps}: {dt:.3f} s")
            rows.append(Row("9a", label_b, median(batch), "s", flux_core="-", samples=batch,
                            note=f"median of {reps}, size 4"))
            for i in range(reps):
                dt = run_timed(fluxlite_command() + ["alloc", "-N2", "true"], inst.env, 60)
                alloc.append(dt)
                progress("nested", f"alloc sample {i + 1}/{reps}: {dt:.3f} s")
            rows.append(Row("9b", label_a, median(alloc), "s", flux_core="-", samples=alloc,
                            note=f"median of {reps}, size 4"))
    except Exception as exc:
        done = {r.label for r in rows}
        missing = [(fig, lab, smp) for fig, lab, smp in (("9a", label_b, batch),
                                                         ("9b", label_a, alloc))
                   if lab not in done]
        if not missing:  # both measured; the instance's stop or leak check failed
            missing = [("9", "nested (instance stop)", [])]
        for fig, lab, smp in missing:
            rows.append(Row(fig, lab, None, "s", flux_core="-", samples=smp, error=str(exc)))


def _job_processes(rank_pid: int, want_sleeps: int, timeout: float = 10.0) -> set[int]:
    """Descendants of a broker once its tasks are all there (`want_sleeps` sleep processes).

    shell.start is posted when the shells have started their tasks, but a task's own
    children (the `sleep 300 &` of `sh -c`) may not be forked yet: rescan until they are.
    """
    deadline = time.monotonic() + timeout
    while True:
        below = procs.descendants({rank_pid})
        sleeps = []
        for pid in below:
            try:
                if cmdline_of(pid).startswith("sleep"):
                    sleeps.append(pid)
            except OSError:
                pass
        if len(sleeps) >= want_sleeps:
            return below
        if time.monotonic() > deadline:
            raise RuntimeError(f"broker {rank_pid} has {len(sleeps)} sleep task(s) below it "
                               f"{timeout:g} s after shell.start, expected {want_sleeps}")
        time.sleep(0.005)


def fig_gone(rows: list, quick: bool, ctx: dict) -> None:
    """10. SIGKILL of rank 3's broker -> every process of its jobs gone (size 4, job -N4)."""
    reps = 2 if quick else 5
    label = "kill -9 broker -> its job procs gone"
    samples, counts = [], []
    try:
        for i in range(reps):
            with Instance(4) as inst:
                h = inst.handle()
                jobid = _submit_id(inst, "submit", "-N4", "sh", "-c", "sleep 300 & sleep 300")
                _wait_event(h, jobid, "shell.start", "exec")
                pid = inst.broker_pid(3)
                below = _job_processes(pid, 2)  # spawner, shell, sh, 2 x sleep
                t0 = time.monotonic()
                os.kill(pid, signal.SIGKILL)
                left = wait_pids_gone(below, 10)
                dt = time.monotonic() - t0
                if left:
                    raise RuntimeError(f"{len(left)} of {len(below)} processes below the killed "
                                       f"broker of rank 3 still alive 10 s after SIGKILL: "
                                       + "; ".join(f"{p}: {cmdline_of(p)}" for p in left
                                                   if os.path.exists(f"/proc/{p}")))
                r = api.wait(h, jobid, timeout=30)  # fails with node-failure: expected
                if r.get("result") != "FAILED":
                    raise RuntimeError(f"job {fluid.f58(jobid)} ended {r.get('result')} after "
                                       "its rank 3 was killed, expected FAILED")
            samples.append(dt)
            counts.append(len(below))
            progress("gone", f"sample {i + 1}/{reps}: {len(below)} processes gone after "
                             f"{dt * 1000:.1f} ms")
        rows.append(Row("10", label, median(samples), "s", op="<", bound=2.0,
                        flux_core="orphaned", samples=samples,
                        note=f"median of {reps}, size 4, job -N4; processes per sample: "
                             + ", ".join(map(str, counts))))
    except Exception as exc:
        rows.append(Row("10", label, None, "s", op="<", bound=2.0, flux_core="orphaned",
                        samples=samples, error=str(exc)))


def fig_critical(rows: list, quick: bool, ctx: dict) -> None:
    """11. SIGKILL of critical rank 1 of a size-2 instance -> its `-N2` job INACTIVE."""
    reps = 2 if quick else 5
    label = "kill -9 critical rank -> job inactive"
    samples = []
    try:
        for i in range(reps):
            with Instance(2) as inst:
                h = inst.handle()
                jobid = _submit_id(inst, "submit", "-N2", "sleep", "300")
                _wait_event(h, jobid, "shell.start", "exec")
                pid = inst.broker_pid(1)
                t0 = time.monotonic()
                os.kill(pid, signal.SIGKILL)
                r = api.wait(h, jobid, timeout=30)
                dt = time.monotonic() - t0
                if r.get("result") != "FAILED":
                    raise RuntimeError(f"job {fluid.f58(jobid)} ended {r.get('result')} after "
                                       "its rank 1 was killed, expected FAILED")
                _fatal_node_failure(h, jobid)
            samples.append(dt)
            progress("critical", f"sample {i + 1}/{reps}: {dt * 1000:.1f} ms")
        rows.append(Row("11", label, median(samples), "s", op="<", bound=2.0,
                        flux_core="1.9 s", samples=samples,
                        note=f"median of {reps}, size 2, job -N2 sleep 300"))
    except Exception as exc:
        rows.append(Row("11", label, None, "s", op="<", bound=2.0, flux_core="1.9 s",
                        samples=samples, error=str(exc)))


def fig_ping_under_load(rows: list, quick: bool, ctx: dict) -> None:
    """12. broker.ping to rank 0 while another client keeps submitting the largest
    jobspec job-manager.submit accepts (a ~1 MiB environment, its payload limit:
    decoding and validating it is the most work one valid request costs the loop)."""
    import threading

    from fluxlite.job.jobspec import Jobspec
    count = 50 if quick else 200
    try:
        with Instance(2) as inst:
            env = {f"V{i}": "x" * 1000 for i in range(1000)}
            spec = Jobspec.from_command(["true"], environment=env).jobspec
            stop = threading.Event()
            submitted, failed = [0], []

            def load():
                from fluxlite.client.sync import Handle
                h2 = Handle(inst.uri)   # a Handle belongs to its thread, closed there
                try:
                    while not stop.is_set():
                        api.submit(h2, spec)
                        submitted[0] += 1
                except Exception as exc:  # reported below: no load, no figure
                    failed.append(exc)
                finally:
                    h2.close()

            t = threading.Thread(target=load, daemon=True)
            t.start()
            h = inst.handle()
            try:
                while submitted[0] == 0 and t.is_alive():
                    h.call("broker.ping", {"seq": 0}, nodeid=0, timeout=10)
                s = _ping_samples(h, 0, count)
            finally:
                stop.set()
                t.join(60)
            if failed or not submitted[0]:
                raise RuntimeError(f"the loading client failed: {failed[:1]}")
            worst = max(s)
            progress("ping-load", f"median {median(s):.3f} ms, max {worst:.3f} ms over "
                                  f"{count} pings; {submitted[0]} large jobs submitted")
            rows.append(Row("12", "ping rank 0 during largest valid submits (max)", worst,
                            "ms", op="<", bound=100.0, samples=[round(x, 4) for x in s],
                            note=f"median {median(s):.3f} ms over {count}; "
                                 f"{submitted[0]} submits of a 1 MiB jobspec"))
    except Exception as exc:
        rows.append(Row("12", "ping during largest valid submits", None, "ms", error=str(exc)))


def fig_backlog(rows: list, quick: bool, ctx: dict) -> None:
    """18. 10,000 pending jobs scheduled behind a blocked wide job: jobs/s, and the
    slowest broker.ping to rank 0 while they are."""
    import threading
    njobs = 2000 if quick else 10000
    try:
        with Instance(4, cores_per_rank=2) as inst:
            h = inst.handle()
            blocker = fluid.parse(cli(inst, "submit", "-N1", "-t", "1h", "sleep", "3600")
                                  .stdout.strip())
            for e in api.event_watch(h, blocker):
                if e["name"] == "start":
                    break
            cli(inst, "queue", "stop")
            wide = fluid.parse(cli(inst, "submit", "-N4", "-t", "10m", "true").stdout.strip())
            waiter = subprocess.Popen(
                fluxlite_command() + ["submit", f"--cc=1-{njobs}", "--quiet", "--wait",
                                      "-t", "1m", "true"],
                env=inst.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            try:
                while api.alloc_query(h)["queue_length"] < njobs + 1:
                    if waiter.poll() is not None:
                        raise RuntimeError(f"submit --cc failed: {waiter.stderr.read()}")
                    time.sleep(0.2)
                stop, pings = threading.Event(), []

                def ping():
                    from fluxlite.client.sync import Handle
                    h2 = Handle(inst.uri)
                    try:
                        while not stop.is_set():
                            t0 = time.perf_counter()
                            h2.call("broker.ping", {"seq": 0}, nodeid=0, timeout=10)
                            pings.append((time.perf_counter() - t0) * 1000)
                            time.sleep(0.005)
                    finally:
                        h2.close()

                t = threading.Thread(target=ping, daemon=True)
                t.start()
                t0 = time.perf_counter()
                cli(inst, "queue", "start")
                _, err = waiter.communicate(timeout=1800)
                dt = time.perf_counter() - t0
                stop.set()
                t.join(30)
            finally:
                if waiter.poll() is None:
                    waiter.kill()
                    waiter.wait()
            if waiter.returncode != 0:
                raise RuntimeError(f"submit --cc exited {waiter.returncode}: {err.strip()}")
            state = api.info(h, wide)["state"]
            api.cancel(h, blocker)
            if state != "SCHED":
                raise RuntimeError(f"the wide job should still wait; it is {state}")
            rate, worst = njobs / dt, max(pings)
            progress("backlog", f"{njobs} jobs in {dt:.1f} s, {rate:.1f}/s; slowest ping "
                                f"{worst:.1f} ms (median {median(pings):.2f}) over {len(pings)}")
            rows.append(Row("18a", f"{njobs} pending jobs behind a blocked wide job", rate,
                            "jobs/s", samples=[dt],
                            note=f"{njobs} jobs in {dt:.1f} s (size 4, 2 cores a rank, "
                                 "rank 0 busy 1h, a -N4 job at the head)"))
            rows.append(Row("18b", "ping rank 0 while they are scheduled (max)", worst, "ms",
                            op="<", bound=100.0, samples=[round(x, 3) for x in pings],
                            note=f"median {median(pings):.2f} ms over {len(pings)} pings"))
    except Exception as exc:
        rows.append(Row("18", "pending jobs behind a blocked wide job", None, "jobs/s",
                        error=str(exc)))


def _build_mpi_hello(out: str, mpicc_name: str = "mpicc.mpich",
                     package: str = "mpich libmpich-dev") -> str:
    """tests/programs/mpi_hello.c built with `mpicc_name` (MPICH's by default) into `out`
    (RuntimeError without it)."""
    import shutil
    mpicc = shutil.which(mpicc_name)
    if mpicc is None:
        raise RuntimeError(f"{mpicc_name} not found: install {package}")
    path = os.path.join(out, f"mpi_hello.{mpicc_name}")
    subprocess.run([mpicc, "-o", path, os.path.join(ROOT, "tests", "programs", "mpi_hello.c")],
                   check=True, timeout=120, capture_output=True)
    return path


def _mpi_samples(hello: str, reps: int, samples: dict, ompi_hello: str = "") -> None:
    """Interleaved runs (drift hits every command alike) in a size-4 instance with 16
    cores per rank (room for -n64); samples[key] gets the wall times."""
    argv = {"true16": ["run", "-N4", "-n16", "true"],
            "mpi16": ["run", "-N4", "-n16", hello],
            "mpi64": ["run", "-N4", "-n64", hello],
            "off16": ["run", "-N4", "-n16", "-o", "pmi=off", hello],
            "ompi16": ["run", "-N4", "-n16", ompi_hello]}
    with Instance(4, cores_per_rank=16) as inst:
        run_timed(fluxlite_command() + argv["mpi16"], inst.env, 120)     # warm-up
        for _i in range(reps):
            for key in samples:
                samples[key].append(run_timed(fluxlite_command() + argv[key], inst.env, 120))
        progress("mpi", " ".join(f"{k}={median(v):.3f}" for k, v in samples.items()))


def fig_mpi(rows: list, quick: bool, ctx: dict) -> None:
    """13. `run -N4 -n16|-n64 ./mpi_hello` (MPICH over PMI-1; Open MPI over PMIx) beside
    `run -N4 -n16 true`, size 4."""
    import tempfile
    reps = 2 if quick else 5
    labels = {"true16": "run -N4 -n16 true", "mpi16": "run -N4 -n16 mpi_hello",
              "mpi64": "run -N4 -n64 mpi_hello", "off16": "run -N4 -n16 -o pmi=off mpi_hello",
              "ompi16": "run -N4 -n16 mpi_hello (Open MPI)"}
    samples: dict[str, list[float]] = {k: [] for k in labels}
    ompi_error = ""
    try:
        with tempfile.TemporaryDirectory(prefix="fluxlite-bench-mpi.") as tmp:
            hello = _build_mpi_hello(tmp)
            try:
                ompi = _build_mpi_hello(tmp, "mpicc.openmpi",
                                        "openmpi-bin libopenmpi-dev libpmix-dev")
            except Exception as exc:
                ompi, ompi_error = "", str(exc)
                del samples["ompi16"]
            _mpi_samples(hello, reps, samples, ompi)
    except Exception as exc:
        rows.append(Row("13", "run -N4 mpi_hello", None, "s", flux_core="-", error=str(exc)))
        return
    base, mpi16, off16 = (median(samples[k]) for k in ("true16", "mpi16", "off16"))
    note = f"median of {reps}, size 4"
    rows.append(Row("13a", labels["true16"], base, "s", flux_core="-",
                    samples=samples["true16"], note=note))
    rows.append(Row("13b", labels["mpi16"] + " - true", mpi16 - base, "s", op="<=",
                    bound=0.020, flux_core="-", samples=samples["mpi16"],
                    note=f"mpi_hello {mpi16:.3f} s; {note}"))
    rows.append(Row("13c", labels["mpi64"], median(samples["mpi64"]), "s", flux_core="-",
                    samples=samples["mpi64"], note=note))
    rows.append(Row("13d", labels["off16"], off16, "s", flux_core="-",
                    samples=samples["off16"], note=f"no PMI: 16 singletons; {note}"))
    rows.append(Row("13e", "run -N4 -n16 mpi_hello - pmi=off", mpi16 - off16, "s",
                    flux_core="-", note="the exchange and MPICH's multi-process init"))
    if ompi_error:
        rows.append(Row("13f", labels["ompi16"] + " - true", None, "s", flux_core="-",
                        error=ompi_error))
        return
    ompi16 = median(samples["ompi16"])
    rows.append(Row("13f", labels["ompi16"] + " - true", ompi16 - base, "s", flux_core="-",
                    samples=samples["ompi16"],
                    note=f"Open MPI over the shells' PMIx servers {ompi16:.3f} s; {note}"))

def fig_executor(rows: list, quick: bool, ctx: dict) -> None:
    """14. Executor.submit + result() throughput against submit --cc, and the Flux
    compatibility overhead: `flux run true` against `fluxlite run true`."""
    from fluxlite.job import Executor, Jobspec
    from fluxlite.util.compat import enable
    njobs = 200 if quick else 1000
    reps = 5 if quick else 20
    try:
        with Instance(1) as inst:
            cc = njobs / _submit_many(inst, njobs)
            spec = Jobspec.from_command(["true"])
            t0 = time.perf_counter()
            with Executor(inst.uri) as ex:
                futs = [ex.submit(spec) for _ in range(njobs)]
                codes = [f.result(timeout=max(60, njobs * 0.5)) for f in futs]
            rate = njobs / (time.perf_counter() - t0)
            if codes != [0] * njobs:
                raise RuntimeError(f"Executor: {sum(1 for c in codes if c)} jobs failed")
            progress("executor", f"{njobs} jobs: Executor {rate:.1f}/s, submit --cc {cc:.1f}/s")
            rows.append(Row("14", "Executor throughput", rate, "jobs/s", op=">=",
                            bound=round(0.9 * cc, 1), note=f"{njobs} jobs; target 90% of "
                            f"submit --cc ({cc:.1f} jobs/s)"))
            env = dict(inst.env)
            enable(env)
            flux = os.path.join(env["PATH"].split(os.pathsep)[0], "flux")
            plain, compat = [], []
            for _ in range(reps):
                plain.append(run_timed(fluxlite_command() + ["run", "true"], inst.env, 60))
                compat.append(run_timed([flux, "run", "true"], env, 60))
            over = (median(compat) - median(plain)) * 1000
            progress("executor", f"flux run {median(compat):.3f} s, fluxlite run "
                                 f"{median(plain):.3f} s")
            rows.append(Row("14", "flux run overhead", over, "ms", op="<=", bound=5,
                            samples=compat, note=f"median of {reps}: flux run "
                            f"{median(compat) * 1000:.0f} ms, fluxlite run "
                            f"{median(plain) * 1000:.0f} ms"))
    except Exception as exc:
        rows.append(Row("14", "Executor throughput", None, "jobs/s", error=str(exc)))


def _hosts_config(d: str, hosts, cert: str) -> str:
    path = os.path.join(d, "conf.toml")
    with open(path, "w") as f:
        f.write(f'[bootstrap]\ncurve_cert = "{cert}"\ndefault_port = 8050\n'
                f'default_bind = "tcp://eth0:%p"\ndefault_connect = "tcp://%h:%p"\n'
                f'hosts = [{{host = "{hosts.hostlist}"}}]\n')
    return path


def _hosts_start(hosts, conf: str, command: list[str], rundir: str | None = None):
    """Brokers on hosts 1-3, then rank 0 on host 0 (with COMMAND); returns the procs."""
    null = subprocess.DEVNULL
    procs = [hosts.popen(hosts[i], fluxlite_command() + ["broker", "--config-path", conf],
                         stdin=null, stdout=null, stderr=null) for i in (1, 2, 3)]
    extra = ["--rundir", rundir, "-Slog-stderr-level=info"] if rundir else []
    procs.insert(0, hosts.popen(hosts[0], fluxlite_command() + ["broker", "--config-path",
                                                                conf, *extra, *command],
                                stdin=null, stdout=null,
                                stderr=subprocess.PIPE if rundir else null, text=True))
    return procs


def _hosts_lost_sample(hosts, conf: str, rundir: str, how: str) -> float:
    """A fresh service instance with the TCP defaults; kill -9 rank 3's broker or cut
    host 2's link; seconds until rank 0 reports the rank lost."""
    from fluxlite.client.sync import Handle
    procs = _hosts_start(hosts, conf, [], rundir)
    h = None
    try:
        deadline = time.monotonic() + 60
        fd, seen = procs[0].stderr.fileno(), b""
        while b"->run" not in seen:                # every wait here is bounded
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RuntimeError("rank 0 did not reach run within 60 s")
            chunk = os.read(fd, 65536)             # raw reads: no buffered line unseen
            if not chunk:
                raise RuntimeError(f"rank 0 exited {procs[0].wait(10)} before run")
            seen = seen[-4096:] + chunk
        import threading  # keep reading rank 0's log lines: a full pipe would block it
        threading.Thread(target=procs[0].stderr.read, daemon=True).start()
        h = Handle(f"local://{rundir}/local")
        # before the stream (one RPC at a time), bounded: a hang becomes an error row
        pid3 = int(h.call("broker.getattr", {"name": "broker.pid"}, nodeid=3,
                          timeout=30)["value"])
        stream = h.stream("overlay.watch", nodeid=0, timeout=180)
        deadline = time.monotonic() + 60
        for snap in stream:
            if idset.decode(snap["ranks"].get("online", "")) == {0, 1, 2, 3}:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"not all 4 ranks online within 60 s: {snap['ranks']}")
        rank = 3 if how == "kill" else 2
        t0 = time.monotonic()
        if how == "kill":
            os.kill(pid3, signal.SIGKILL)
        else:
            hosts.cut(hosts[2])
        for snap in stream:        # each snapshot within 180 s, and all within 180 s
            if rank in idset.decode(snap["ranks"].get("lost", "")):
                dt = time.monotonic() - t0
                break
            if time.monotonic() - t0 > 180:
                raise RuntimeError(f"rank {rank} not reported lost within 180 s")
        else:
            raise RuntimeError(f"rank {rank} not reported lost")
        stream.close()
        return dt
    finally:
        if not hosts.link_is_up(hosts[2]):
            hosts.restore(hosts[2])
        if h is not None:
            h.close()
        env = dict(os.environ, FLUXLITE_URI=f"local://{rundir}/local")
        subprocess.run(fluxlite_command() + ["shutdown"], env=env, timeout=60,
                       capture_output=True)
        for p in procs:
            try:
                p.wait(90)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _hosts_hydra_starts(hosts, reps: int, ipc64: list) -> dict:
    """`mpiexec.hydra -n N fluxlite start true` with N/4 brokers on each of the 4 hosts (Hydra's
    ssh launcher through tests/programs/netns-exec), N = 4 and 64, beside `start --size 64
    true` on one host (appended to IPC64).  {N: samples, or the error text}."""
    import shutil
    out: dict[int, list[float] | str] = {}
    if shutil.which("mpiexec.hydra") is None:
        return {n: "mpiexec.hydra is not installed (apt-get install mpich)" for n in (4, 64)}
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PMI_") and k != "FLUXLITE_URI"}
    env[TAG_VAR] = hosts.tag          # the namespace hosts' teardown finds what is left
    netns_exec = os.path.join(ROOT, "tests", "programs", "netns-exec")
    for n in (4, 64):
        argv = ["mpiexec.hydra", "-launcher", "ssh", "-launcher-exec", netns_exec,
                "-hosts", ",".join(f"{h}:{n // 4}" for h in hosts.names),
                "-iface", hosts.bridge, "-n", str(n), *fluxlite_command(), "start", "true"]
        try:
            out[n] = [run_timed(argv, env, 60 + 3 * n) for _ in range(reps)]
            progress("hosts", f"mpiexec.hydra -n {n} start true: {median(out[n]):.3f} s")
        except Exception as exc:
            out[n] = str(exc)
    plain = dict(env)
    plain.pop(TAG_VAR)
    for _ in range(reps):
        ipc64.append(run_timed(fluxlite_command() + ["start", "--size", "64", "true"],
                               plain, 240))
    progress("hosts", f"start --size 64 true on one host: {median(ipc64):.3f} s")
    return out


def fig_hosts(rows: list, quick: bool, ctx: dict) -> None:
    """15. 4 network-namespace hosts over TCP+CURVE: start, lost.

    Start by `broker --config-path` and by Hydra (4 and 64 brokers) beside ipc on one
    host; kill -9 / link cut -> lost with the TCP defaults."""
    import tempfile

    from fluxlite.testing.netns import NetnsHosts
    if os.geteuid() != 0:
        rows.append(Row("15", "config bootstrap across 4 hosts", None, "s",
                        error="network-namespace hosts need root"))
        return
    reps = 2 if quick else 5
    starts, ipc, kills, cuts = [], [], [], []
    hydra: dict[int, list[float] | str] = {}
    ipc64: list[float] = []
    try:
        with tempfile.TemporaryDirectory(prefix="fluxlite-bench-hosts.") as d, \
                NetnsHosts(4) as hosts:
            cert = os.path.join(d, "curve.cert")
            subprocess.run(fluxlite_command() + ["keygen", cert], check=True, timeout=60)
            conf = _hosts_config(d, hosts, cert)
            for i in range(reps):
                t0 = time.perf_counter()
                procs = _hosts_start(hosts, conf, ["true"])
                codes = [p.wait(120) for p in procs]
                if any(codes):
                    raise RuntimeError(f"broker exit codes {codes}")
                starts.append(time.perf_counter() - t0)
                env = dict(os.environ)
                env.pop("FLUXLITE_URI", None)
                ipc.append(run_timed(fluxlite_command() + ["start", "--size", "4", "true"],
                                     env, 120))
                progress("hosts", f"start run {i + 1}/{reps}: tcp {starts[-1]:.3f} s, "
                                  f"ipc {ipc[-1]:.3f} s")
            hydra = _hosts_hydra_starts(hosts, reps, ipc64)
            for i in range(reps):
                for how, out in (("kill", kills), ("cut", cuts)):
                    rundir = os.path.join(d, f"r-{how}-{i}")
                    out.append(_hosts_lost_sample(hosts, conf, rundir, how))
                progress("hosts", f"lost {i + 1}/{reps}: kill {kills[-1]:.3f} s, "
                                  f"cut {cuts[-1]:.1f} s")
    except Exception as exc:
        rows.append(Row("15", "config bootstrap across 4 hosts", None, "s", error=str(exc)))
        return
    note = f"median of {reps}"
    rows.append(Row("15a", "4 hosts tcp+curve: broker --config-path ... true", median(starts),
                    "s", flux_core="-", samples=starts, note=note))
    rows.append(Row("15b", "1 host ipc: start --size 4 true", median(ipc), "s",
                    flux_core="-", samples=ipc, note=note))
    rows.append(Row("15c", "tcp: kill -9 leaf -> lost", median(kills), "s", op="<",
                    bound=1.0, flux_core="-", samples=kills, note=note))
    rows.append(Row("15d", "tcp: link cut -> lost (lost-timeout 60s)", median(cuts), "s",
                    op="<=", bound=61.0, flux_core="-", samples=cuts,
                    note=f"{note}; TCP defaults"))
    for fig, n in (("15e", 4), ("15f", 64)):
        name = f"4 hosts tcp+curve: mpiexec.hydra -n {n} fluxlite start true ({n // 4} per host)"
        if isinstance(hydra.get(n), list):
            rows.append(Row(fig, name, median(hydra[n]), "s", flux_core="-",
                            samples=hydra[n], note=f"{note}; Hydra over netns-exec"))
        else:
            rows.append(Row(fig, name, None, "s", flux_core="-", error=hydra.get(n, "not run")))
    if ipc64:
        rows.append(Row("15g", "1 host ipc: start --size 64 true", median(ipc64), "s",
                        flux_core="-", samples=ipc64, note=note))

def fig_srun(rows: list, quick: bool, ctx: dict) -> None:
    """16. `srun -N4 --mpi=pmi2 fluxlite start true` beside `srun -N4 true`, in a private
    4-node Slurm cluster (fluxlite.testing.slurm: four slurmd on this machine)."""
    from fluxlite.testing.slurm import SlurmCluster
    reps = 2 if quick else 5
    argv = {"true": ["srun", "-N4", "true"],
            "start": ["srun", "-N4", "--mpi=pmi2", *fluxlite_command(), "start", "true"]}
    samples: dict[str, list[float]] = {k: [] for k in argv}
    try:
        with SlurmCluster(nodes=4) as cluster:       # its stop() checks nothing is left
            run_timed(argv["true"], cluster.env, 120)                     # warm-up
            for _i in range(reps):
                for key in argv:
                    samples[key].append(run_timed(argv[key], cluster.env, 120))
            progress("srun", " ".join(f"{k}={median(v):.3f}" for k, v in samples.items()))
    except Exception as exc:
        rows.append(Row("16", "srun -N4 --mpi=pmi2 fluxlite start true", None, "s",
                        flux_core="-", error=str(exc)))
        return
    note = f"median of {reps}, 4 slurmd on one machine"
    rows.append(Row("16a", "srun -N4 true", median(samples["true"]), "s", flux_core="-",
                    samples=samples["true"], note=note))
    rows.append(Row("16b", "srun -N4 --mpi=pmi2 fluxlite start true",
                    median(samples["start"]), "s", flux_core="-", samples=samples["start"],
                    note=note))


def fig_state(rows: list, quick: bool, ctx: dict) -> None:
    """17. State directory: submit throughput with and without, restart with 10,000
    inactive jobs, the crash test's counts (bench/state.py)."""
    sys.path.insert(0, HERE)
    import state
    state.run(sys.modules[__name__], rows, quick)


FIGURES = {
    "start": fig_start,
    "lost": fig_lost,
    "ping": fig_ping,
    "rpc": fig_rpc,
    "rss": fig_rss,
    "run": fig_run,
    "throughput": fig_throughput,
    "jobmem": fig_jobmem,
    "output-rss": fig_output_rss,
    "many-jobs": fig_many_jobs,
    "chain": fig_chain,
    "nested": fig_nested,
    "gone": fig_gone,
    "critical": fig_critical,
    "ping-load": fig_ping_under_load,
    "mpi": fig_mpi,
    "executor": fig_executor,
    "hosts": fig_hosts,
    "srun": fig_srun,
    "state": fig_state,
    "backlog": fig_backlog,
}


# --------------------------------------------------------------------- main
def print_table(rows: list) -> None:
    head = ("figure", "value", "target", "flux-core", "status")
    table = [(f"{r.figure:<3} {r.label}", fmt(r.value, r.unit), r.target_text(),
              r.flux_core or "-", r.status) for r in rows]
    widths = [max(len(x[i]) for x in table + [head]) for i in range(5)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print()
    print(line.format(*head))
    print("  ".join("-" * w for w in widths))
    for t in table:
        print(line.format(*t))
    for r in rows:
        if r.error:
            print(f"\nerror in {r.figure} {r.label}:\n  {r.error}")


def git_commit() -> str | None:
    try:
        cp = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                            text=True, timeout=5)
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return cp.stdout.strip() + ("+dirty" if dirty else "") if cp.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def write_json(path: str, rows: list, args, started: float, interrupted: bool) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    doc = {
        "when": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version()},
        "quick": args.quick, "only": args.only, "interrupted": interrupted,
        "elapsed_s": round(time.monotonic() - started, 1),
        "results": [r.as_dict() for r in rows],
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=2, default=str)
        f.write("\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Measure fluxlite against its performance targets.")
    ap.add_argument("--only", metavar="NAME[,NAME]",
                    help="run only these figures: " + ", ".join(FIGURES))
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (a fast check)")
    ap.add_argument("--list", action="store_true", help="list the figure names and exit")
    ap.add_argument("--json", default=RESULTS, metavar="PATH",
                    help="where to write the results (default: bench/results/latest.json)")
    args = ap.parse_args(argv)
    if args.list:
        for name, fn in FIGURES.items():
            print(f"{name:<11} {fn.__doc__.strip().splitlines()[0]}")
        return 0
    names = list(FIGURES)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in FIGURES]
        if unknown:
            ap.error(f"unknown figure(s) {', '.join(unknown)}; choose from {', '.join(FIGURES)}")
    rows: list[Row] = []
    ctx: dict = {}
    started = time.monotonic()
    interrupted = False
    try:
        for name in names:
            t0 = time.monotonic()
            progress(name, FIGURES[name].__doc__.strip().splitlines()[0])
            try:
                FIGURES[name](rows, args.quick, ctx)
            except Exception as exc:  # a bug in the bench itself: report, go on
                traceback.print_exc()
                rows.append(Row("?", name, None, "", error=f"{type(exc).__name__}: {exc}"))
            progress(name, f"done in {time.monotonic() - t0:.1f} s")
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted: instances stopped; partial results follow", file=sys.stderr)
    print_table(rows)
    write_json(args.json, rows, args, started, interrupted)
    print(f"\n{len(rows)} rows in {time.monotonic() - started:.0f} s; written to "
          f"{os.path.relpath(args.json)}")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())

"""What every figure of the benchmark shares: the result row, value formatting,
progress lines, /proc readers, and the few ways a figure runs a command (a CLI
call that raises on failure, a timed subprocess, a submit that returns its id).

The figures live in bench/figures/, one module per family; bench/run.py runs them.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import time

from fluxlite.jobapi import api
from fluxlite.testing import Instance
from fluxlite.util import fluid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


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


def submit_many(inst: Instance, njobs: int) -> float:
    """`submit --cc=1-N --quiet --wait true`, end to end; returns seconds."""
    t0 = time.perf_counter()
    cli(inst, "submit", f"--cc=1-{njobs}", "--quiet", "--wait", "true",
        timeout=max(60, njobs * 0.5))
    return time.perf_counter() - t0


def submit_id(inst: Instance, *args, timeout: float = 60.0) -> int:
    """Run a submitting command (`submit`, `batch`, ...) and parse the job id it prints."""
    out = cli(inst, *args, timeout=timeout).stdout.strip().splitlines()
    if not out:
        raise RuntimeError(f"`fluxlite {' '.join(map(str, args))}` printed no job id")
    return fluid.parse(out[-1])


def wait_event(h, jobid: int, name: str, path: str = "eventlog", timeout: float = 30.0):
    """The first `name` entry of a job eventlog (followed, not polled)."""
    for e in api.event_watch(h, jobid, path, timeout=timeout):
        if e["name"] == name:
            return e
    raise RuntimeError(f"job {fluid.f58(jobid)}: {path} eventlog ended without {name}")


def fatal_node_failure(h, jobid: int) -> dict:
    """The job's severity-0 node-failure exception (raises if there is none)."""
    for e in api.event_watch(h, jobid, follow=False):
        ctx = e.get("context") or {}
        if e["name"] == "exception" and ctx.get("type") == "node-failure" \
                and ctx.get("severity") == 0:
            return ctx
    raise RuntimeError(f"job {fluid.f58(jobid)} has no fatal node-failure exception")

"""Node loss: how fast a killed broker is reported lost (figure 2), its processes
are gone (figure 10), and a job on a critical rank ends (figure 11).

bench/README.md says what each figure measures and why.
"""

from __future__ import annotations

import os
import signal
import time

from bench.common import (
    Row,
    cmdline_of,
    fatal_node_failure,
    median,
    progress,
    submit_id,
    wait_event,
)
from fluxlite.jobapi import api
from fluxlite.testing import (
    Instance,
    wait_pids_gone,
)
from fluxlite.util import fluid, idset, procs


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
                jobid = submit_id(inst, "submit", "-N4", "sh", "-c", "sleep 300 & sleep 300")
                wait_event(h, jobid, "shell.start", "exec")
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
                jobid = submit_id(inst, "submit", "-N2", "sleep", "300")
                wait_event(h, jobid, "shell.start", "exec")
                pid = inst.broker_pid(1)
                t0 = time.monotonic()
                os.kill(pid, signal.SIGKILL)
                r = api.wait(h, jobid, timeout=30)
                dt = time.monotonic() - t0
                if r.get("result") != "FAILED":
                    raise RuntimeError(f"job {fluid.f58(jobid)} ended {r.get('result')} after "
                                       "its rank 1 was killed, expected FAILED")
                fatal_node_failure(h, jobid)
            samples.append(dt)
            progress("critical", f"sample {i + 1}/{reps}: {dt * 1000:.1f} ms")
        rows.append(Row("11", label, median(samples), "s", op="<", bound=2.0,
                        flux_core="1.9 s", samples=samples,
                        note=f"median of {reps}, size 2, job -N2 sleep 300"))
    except Exception as exc:
        rows.append(Row("11", label, None, "s", op="<", bound=2.0, flux_core="1.9 s",
                        samples=samples, error=str(exc)))

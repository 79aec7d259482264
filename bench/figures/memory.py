"""Memory: brokers' and spawners' RSS (figure 5), a job shell's peak and rank 0
after many jobs (figure 8), output kept off the heap (8c), 10,000 jobs (8d).

bench/README.md says what each figure measures and why.
"""

from __future__ import annotations

import time

from bench.common import (
    Row,
    cli,
    cmdline_of,
    ppid_of,
    proc_status,
    progress,
    submit_many,
)
from fluxlite.testing import (
    Instance,
    tagged_processes,
)
from fluxlite.util import procs


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
                submit_many(inst, njobs)
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
            dt = submit_many(inst, njobs)
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

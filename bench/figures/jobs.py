"""Jobs: `run true` end to end (figure 6), submit throughput (figure 7), a
dependency chain (8e), the Executor and the Flux compatibility layer (figure
14), a backlog behind a blocked wide job (figure 18).

bench/README.md says what each figure measures and why.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

from bench.common import (
    Row,
    cli,
    median,
    proc_status,
    progress,
    run_timed,
    submit_many,
)
from fluxlite.jobapi import api
from fluxlite.testing import (
    Instance,
    fluxlite_command,
)
from fluxlite.util import fluid


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


def fig_throughput(rows: list, quick: bool, ctx: dict) -> None:
    """7. 500 `true` jobs with one submit --cc --wait, jobs/s, in size 1 and size 4."""
    njobs = 100 if quick else 500
    for size in (1, 4):
        try:
            with Instance(size) as inst:
                dt = submit_many(inst, njobs)
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


def fig_executor(rows: list, quick: bool, ctx: dict) -> None:
    """14. Executor.submit + result() throughput against submit --cc, and the Flux
    compatibility overhead: `flux run true` against `fluxlite run true`."""
    from fluxlite.job import Jobspec
    from fluxlite.jobapi import Executor
    from fluxlite.util.compat import enable
    njobs = 200 if quick else 1000
    reps = 5 if quick else 20
    try:
        with Instance(1) as inst:
            cc = njobs / submit_many(inst, njobs)
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

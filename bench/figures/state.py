"""The state directory (-Sstatedir), figure 17:

17a  submit throughput (figure 7's command, size 1) with a state directory, as a
     percentage of the same without one, A/B alternating in one run;
17b  restart time: `fluxlite start -Sstatedir=DIR true`, wall time from exec to exit,
     with 10,000 inactive jobs in DIR (the note gives the same with an empty DIR);
17c  the crash test's counts: rank 0 killed with SIGKILL at random moments while a
     client submits jobs and another writes keys, restarted each time; acknowledged,
     found after the restarts, lost.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import threading
import time

from bench.common import Row, median, progress, run_timed, submit_many
from fluxlite.jobapi import api
from fluxlite.protocol import kvs as kvsv
from fluxlite.testing import Instance, fluxlite_command


def _throughput(rows, quick):
    njobs = 100 if quick else 500
    rounds = 1 if quick else 5   # the ratio of two noisy rates: its median steadies by 5
    plain, durable = [], []
    for _ in range(rounds):
        with Instance(1) as inst:
            plain.append(njobs / submit_many(inst, njobs))
        sd = tempfile.mkdtemp(prefix="bench-state-")
        try:
            with Instance(1, setattrs=[f"statedir={sd}"]) as inst:
                durable.append(njobs / submit_many(inst, njobs))
        finally:
            shutil.rmtree(sd, ignore_errors=True)
    p, d = median(plain), median(durable)
    progress("state", f"submit --cc=1-{njobs}: {p:.1f}/s without, {d:.1f}/s with statedir")
    rows.append(Row("17a", "submit with statedir", 100.0 * d / p, "%", op=">=", bound=90,
                      samples=[plain, durable],
                      note=f"{d:.1f} against {p:.1f} jobs/s (size 1, {njobs} jobs, "
                           f"median of {rounds}, alternating)"))


def _restart(rows, quick):
    njobs = 2000 if quick else 10000
    sd = tempfile.mkdtemp(prefix="bench-state-")
    empty = tempfile.mkdtemp(prefix="bench-state-")
    try:
        with Instance(1, setattrs=[f"statedir={sd}"]) as inst:
            submit_many(inst, njobs)
        start = fluxlite_command() + ["start"]
        env = dict(os.environ)
        env.pop("FLUXLITE_URI", None)
        base = [run_timed(start + [f"-Sstatedir={empty}", "true"], env, 60)
                for _ in range(3)]
        full = [run_timed(start + [f"-Sstatedir={sd}", "true"], env, 120)
                for _ in range(3)]
        with Instance(1, setattrs=[f"statedir={sd}"]) as inst:
            # (as Flux's, --stats-only exits 1 when no job is active: read its output)
            stats = inst.cli("jobs", "--stats-only").stdout.strip()
        if f"{njobs} completed" not in stats:
            raise RuntimeError(f"restart lost jobs: {stats}")
        progress("state", f"restart with {njobs} inactive jobs: {median(full):.3f} s "
                            f"(empty: {median(base):.3f} s)")
        rows.append(Row("17b", f"restart, {njobs} inactive jobs", median(full), "s",
                          op="<", bound=2.0, samples=full,
                          note=f"start -Sstatedir=DIR true, median of 3; with an empty DIR "
                               f"{median(base):.3f} s"))
    finally:
        shutil.rmtree(sd, ignore_errors=True)
        shutil.rmtree(empty, ignore_errors=True)


def _crash(rows, quick):
    from fluxlite.client.sync import Handle
    from fluxlite.job import jobspec as js
    cycles = 3 if quick else 10
    spec = js.Jobspec.from_command(["true"]).jobspec
    rng = random.Random(17)
    jobs: list[int] = []
    keys: dict[str, str] = {}
    sd = tempfile.mkdtemp(prefix="bench-state-")

    def submitter(uri, stop):
        try:
            h = Handle(uri)
            try:
                for _ in range(50):
                    if stop.is_set():
                        return
                    jobs.append(api.submit(h, spec))
            finally:
                h.close()
        except Exception:
            pass

    def writer(uri, cycle, stop):
        try:
            h = Handle(uri)
            try:
                for n in range(50):
                    if stop.is_set():
                        return
                    key = f"bench.c{cycle}.k{n}"
                    h.call("kvs.commit", {"ops": [{"key": key, "value": n}]}, timeout=30)
                    keys[key] = n
            finally:
                h.close()
        except Exception:
            pass

    def found(inst) -> int:
        h = inst.handle()
        have = {j["id"] for j in h.call("job-manager.list", {"states": "all"},
                                        timeout=60)["jobs"]}
        n = sum(1 for j in jobs if j in have)
        for key, value in keys.items():
            try:
                n += kvsv.value(h.call("kvs.lookup", {"key": key}, timeout=30)) == value
            except Exception:
                pass
        return n

    try:
        for cycle in range(cycles):
            with Instance(1, setattrs=[f"statedir={sd}"]) as inst:
                stop = threading.Event()
                threads = [threading.Thread(target=submitter, args=(inst.uri, stop)),
                           threading.Thread(target=writer, args=(inst.uri, cycle, stop))]
                for t in threads:
                    t.start()
                time.sleep(rng.uniform(0.05, 0.5))   # the moment of the kill
                inst.kill_broker(0)
                inst.proc.wait(timeout=60)
                stop.set()
                for t in threads:
                    t.join(timeout=60)
        with Instance(1, setattrs=[f"statedir={sd}"]) as inst:
            acked = len(jobs) + len(keys)
            got = found(inst)
        progress("state", f"crash: {cycles} kills, {acked} acknowledged, {got} found")
        rows.append(Row("17c", f"crash test, {cycles} kills: lost", acked - got, "items",
                          op="<=", bound=0, samples=[acked, got],
                          note=f"acknowledged {len(jobs)} jobs + {len(keys)} kvs puts = "
                               f"{acked}; found after restart {got}"))
    finally:
        shutil.rmtree(sd, ignore_errors=True)


def fig_state(rows: list, quick: bool, ctx: dict) -> None:
    """17. State directory: submit throughput with and without, restart with 10,000
    inactive jobs, the crash test's counts."""
    for label, fn in (("17a", _throughput), ("17b", _restart), ("17c", _crash)):
        try:
            fn(rows, quick)
        except Exception as exc:
            rows.append(Row(label, "state directory", None, "", error=str(exc)))

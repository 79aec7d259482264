"""Starting instances: `fluxlite start` end to end (figure 1) and nested
instances through `batch` and `alloc` (figure 9).

bench/README.md says what each figure measures and why.
"""

from __future__ import annotations

import os
import time
import uuid

from bench.common import (
    Row,
    median,
    progress,
    run_timed,
    submit_id,
)
from fluxlite.jobapi import api
from fluxlite.testing import (
    TAG_VAR,
    Instance,
    assert_no_leaks,
    fluxlite_command,
)
from fluxlite.util import fluid


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
                jobid = submit_id(inst, "batch", "-N2", "--output", "/dev/null",
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

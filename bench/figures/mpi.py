"""MPI: `run` of an MPI hello world over the shells' PMI-1 (MPICH) and PMIx
(Open MPI) beside `run true` (figure 13).

bench/README.md says what each figure measures and why.
"""

from __future__ import annotations

import os
import subprocess

from bench.common import (
    ROOT,
    Row,
    median,
    progress,
    run_timed,
)
from fluxlite.testing import (
    Instance,
    fluxlite_command,
)


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

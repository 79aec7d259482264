"""fluxlite's benchmark: the figures behind the project's performance targets.

    .venv/bin/python bench/run.py                 # everything (what `make bench` runs)
    .venv/bin/python bench/run.py --only ping,rpc # a subset (names: --list)
    .venv/bin/python bench/run.py --quick         # fewer repetitions, a fast check

This is the runner: its options, the loop over the figures, the table and the
JSON.  Each figure is one function in a module of bench/figures/ (one module per
family: start, failure, rpc, memory, jobs, mpi, hosts, state) that starts real
instances (through fluxlite.testing.Instance, which stops them and checks that
no process is left behind), measures, and appends rows to the result list; what
they share is in bench/common.py.  At the end a table (figure, value, target,
flux-core, pass/miss) is printed and the rows are written as JSON to
bench/results/latest.json.  bench/README.md says what each figure means.
Nothing here changes fluxlite; a figure whose measurement fails is reported as
"error" with the failing command and its message.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from bench.common import Row, fmt, progress  # noqa: E402
from bench.figures import FIGURES  # noqa: E402

RESULTS = os.path.join(HERE, "results", "latest.json")


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

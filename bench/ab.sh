#!/bin/sh
# A/B comparison of two fluxlite trees on this machine, in one run.
#
#   bench/ab.sh OLD_TREE NEW_TREE [--rounds N] [bench/run.py options ...]
#
# Runs OLD's bench/run.py, then NEW's, then OLD's again, ... (N pairs, 3 by
# default), each with its tree's own virtualenv, so that the machine's drift hits
# both alike; then prints every row with each tree's median over its rounds and
# the change from OLD to NEW.  A tree without a .venv runs with NEW's (its own
# code still comes first on PYTHONPATH).  bench/README.md has more.
set -eu

usage() {
    echo "usage: bench/ab.sh OLD_TREE NEW_TREE [--rounds N] [bench/run.py options]" >&2
    exit 2
}
[ $# -ge 2 ] || usage
old=$(cd "$1" && pwd) || usage
new=$(cd "$2" && pwd) || usage
shift 2
rounds=3
if [ "${1:-}" = "--rounds" ]; then
    [ $# -ge 2 ] || usage
    rounds=$2
    shift 2
fi
case $rounds in
    ''|*[!0-9]*|0) echo "bench/ab.sh: --rounds takes a positive whole number, not '$rounds'" >&2; exit 2 ;;
esac
# Each tree runs with its own virtualenv when it has one, else with NEW's; either
# way PYTHONPATH puts the tree first, so its brokers and CLI run its own code.
if [ ! -x "$new/.venv/bin/python" ]; then
    echo "bench/ab.sh: $new has no .venv/bin/python (run make setup there)" >&2
    exit 2
fi
for tree in "$old" "$new"; do
    if [ ! -f "$tree/bench/run.py" ]; then
        echo "bench/ab.sh: $tree has no bench/run.py" >&2
        exit 2
    fi
done
python_of() {
    if [ -x "$1/.venv/bin/python" ]; then echo "$1/.venv/bin/python"; else echo "$new/.venv/bin/python"; fi
}

out=$(mktemp -d "${TMPDIR:-/tmp}/bench-ab.XXXXXX")
echo "A = $old ($(git -C "$old" rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "B = $new ($(git -C "$new" rev-parse --short HEAD 2>/dev/null || echo '?'))"
echo "results: $out"
i=1
while [ "$i" -le "$rounds" ]; do
    for side in A B; do
        if [ "$side" = A ]; then tree=$old; else tree=$new; fi
        echo "== round $i/$rounds: $side"
        (cd "$tree" && env -u FLUXLITE_URI PYTHONPATH="$tree" "$(python_of "$tree")" bench/run.py \
            --json "$out/$side.$i.json" "$@") >"$out/$side.$i.log" 2>&1 ||
            echo "   (exited $?; see $out/$side.$i.log)"
    done
    i=$((i + 1))
done

exec "$new/.venv/bin/python" - "$out" <<'PY'
import glob, json, os, statistics, sys

out = sys.argv[1]
table = {}   # (figure, label) -> {"A": [values], "B": [values], "unit": unit}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    side = os.path.basename(path).split(".")[0]
    with open(path) as f:
        for r in json.load(f)["results"]:
            row = table.setdefault((r["figure"], r["label"]), {"A": [], "B": [], "unit": r["unit"]})
            if r["value"] is not None:
                row[side].append(r["value"])

def show(xs):
    return f"{statistics.median(xs):.4g}" if xs else "error"

lines = [("figure", "unit", "A (median)", "B (median)", "B vs A", "A samples", "B samples")]
for (fig, label), row in table.items():
    a, b = row["A"], row["B"]
    change = (f"{100.0 * (statistics.median(b) / statistics.median(a) - 1):+.1f} %"
              if a and b and statistics.median(a) else "-")
    lines.append((f"{fig:<3} {label}", row["unit"], show(a), show(b), change,
                  " ".join(f"{x:.4g}" for x in a), " ".join(f"{x:.4g}" for x in b)))
widths = [max(len(x[i]) for x in lines) for i in range(len(lines[0]))]
print()
for n, line in enumerate(lines):
    print("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
    if n == 0:
        print("  ".join("-" * w for w in widths))
print("\nB vs A: change of the median value (for s, ms and MB lower is better; "
      "for rates higher is better).")
PY

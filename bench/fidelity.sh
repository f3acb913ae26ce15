#!/usr/bin/env bash
# Fidelity against the FGD paper's curves (fgd-benchmark.md §4): six policies x seeds 42-51, tune 1.3, on
# openb_pod_list_default; prints ours vs the reference for allocation % at arrived 100/130 (goal: within 0.5) and
# the fragmentation rate at 50-90 % (goal: within 2 points).
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
BIN=build/release/src/gpusched/cli/gpusched-lab
[ -x "$BIN" ] || { cmake --preset release >/dev/null && cmake --build --preset release --target gpusched-lab; }
OUT=$(mktemp -d)
"$BIN" simulate --trace-dir "$SHARED/traces/alibaba-gpu-v2023" --seeds 42-51 --jobs 2 --out "$OUT" >/dev/null
python3 - "$OUT" "$SHARED/traces/fgd-reference-results" <<'PY'
import csv, sys
ours_dir, ref_dir = sys.argv[1], sys.argv[2]
names = {'01-Random': 'random', '02-DotProd': 'dotprod', '03-GpuClustering': 'gpuclustering',
         '04-GpuPacking': 'gpupacking', '05-BestFit': 'bestfit', '06-FGD': 'fgd'}
def load(path, skip, key):
    out = {}
    for r in list(csv.reader(open(path)))[1:]:
        out.setdefault(key(r[1]), []).append([float(x) if x else float('nan') for x in r[skip:]])
    return out
mean = lambda rows, k: sum(r[k] for r in rows) / len(rows)
ra = load(f"{ref_dir}/analysis_allo_discrete.csv", 5, names.get)
rf = load(f"{ref_dir}/analysis_frag_ratio_discrete.csv", 4, names.get)
oa = load(f"{ours_dir}/alloc.csv", 5, str)
of = load(f"{ours_dir}/frag_ratio.csv", 4, str)
worst_a = worst_f = 0.0
print(f"{'policy':<14} {'alloc@100 ours/ref':>20} {'alloc@130 ours/ref':>20}   frag rate @50/60/70/80/90 ours-ref")
for p in names.values():
    cells = []
    for at in (100, 130):
        o, r = mean(oa[p], at), mean(ra[p], at)
        worst_a = max(worst_a, abs(o - r))
        cells.append(f"{o:6.2f}/{r:6.2f} ({o - r:+.2f})")
    d = [mean(of[p], at) - mean(rf[p], at) for at in (50, 60, 70, 80, 90)]
    worst_f = max(worst_f, max(abs(x) for x in d))
    print(f"{p:<14} {cells[0]:>20} {cells[1]:>20}   " + " ".join(f"{x:+.1f}" for x in d))
print(f"RESULT max_alloc_diff_pp={worst_a:.2f} max_frag_rate_diff_pts={worst_f:.1f}")
PY
rm -rf "$OUT"

#!/usr/bin/env bash
# fgd against a candidate policy and against the upper bound, on the 17 openb pod lists of the FGD paper's study:
# unallocated GPU % at 100 % arrived, mean of seeds 42-51, tune 1.3 (the paper's protocol). The bound is
# `gpusched-lab simulate --bound` (a GPU-only packing relaxation: no placement of the same arrivals can allocate more),
# printed as the unallocated % it leaves, beside what an offline packer of the same arrivals leaves (best fit
# decreasing in the same GPU-only relaxation: a packing, not a bound). "closed" is how much of fgd's gap to the bound
# the candidate closes.
# Usage: CANDIDATE=policy bench/beyond-fgd.sh [TRACE_DIR]   (default candidate: fgd-scarcity; trace dir
#        ../shared/traces/alibaba-gpu-v2023). Release build. Prints one line
#        RESULT default_unalloc=X worst_margin_pp=Y candidate=NAME
# (X: the candidate's unallocated % on default; Y: the smallest of fgd − candidate over the 17 lists).
set -euo pipefail
cd "$(dirname "$0")/.."
TRACE_DIR=${1:-../shared/traces/alibaba-gpu-v2023}
CANDIDATE=${CANDIDATE:-fgd-scarcity}
SEEDS=${SEEDS:-42-51}
BIN=build/release/src/gpusched/cli/gpusched-lab
if [ ! -x "$BIN" ]; then
  cmake --preset release >/dev/null && cmake --build --preset release --target gpusched-lab
fi
if [ ! -f "$TRACE_DIR/openb_pod_list_default.csv" ]; then
  echo "beyond-fgd: no openb trace at $TRACE_DIR" >&2
  exit 1
fi
TRACES=default,cpu050,cpu100,cpu200,cpu250,gpushare40,gpushare60,gpushare80,gpushare100,gpuspec10,gpuspec20,gpuspec25,gpuspec33,multigpu20,multigpu30,multigpu40,multigpu50
WORKLOADS=$(echo "$TRACES" | tr ',' '\n' | sed 's/^/openb_pod_list_/' | paste -sd, -)
POLICIES=fgd
[ "$CANDIDATE" != fgd ] && POLICIES="fgd,$CANDIDATE"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F)"
"$BIN" simulate --trace-dir "$TRACE_DIR" --workloads "$WORKLOADS" --policies "$POLICIES" --seeds "$SEEDS" \
  --tune 1.3 --jobs "$(nproc)" --bound >"$out"
python3 - "$out" "$CANDIDATE" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
candidate = sys.argv[2]
alloc, wall, bound, offline = {}, {}, {}, {}
section = "runs"
for line in text.splitlines():
    if line.startswith("upper bound"):
        section = "bound"
        continue
    m = re.match(r"(openb_pod_list_\S+) (.+?)\s+(\d+)\s+[\d.]+ \([^)]*\)\s+([\d.]+) \(", line)
    if section == "runs" and m:
        alloc[(m.group(1), m.group(2))] = float(m.group(4))
        wall[(m.group(1), m.group(2))] = float(line.split()[-1])
        continue
    m = re.match(r"(openb_pod_list_\S+)\s+\d+\s+([\d.]+) \([^)]*\)\s+([\d.]+) \(", line)
    if section == "bound" and m:
        bound[m.group(1)] = float(m.group(2))
        offline[m.group(1)] = float(m.group(3))
traces = sorted({w for w, _ in alloc}, key=lambda w: (w != "openb_pod_list_default", w))
print(f"{'trace':<14} {'fgd':>7} {candidate:>12} {'offline':>8} {'bound':>7} {'margin':>7} {'closed':>7} {'run s':>6}")
margins = []
for w in traces:
    f = 100 - alloc[(w, "fgd")]
    c = 100 - alloc[(w, candidate)]
    b = 100 - bound[w]
    o = 100 - offline[w]
    margin = f - c
    margins.append(margin)
    closed = 100 * margin / (f - b) if f - b > 1e-9 else 0.0
    print(f"{w.replace('openb_pod_list_', ''):<14} {f:>6.2f}% {c:>11.2f}% {o:>7.2f}% {b:>6.2f}% {margin:>+6.2f} {closed:>6.1f}% "
          f"{wall[(w, candidate)]:>6.3f}")
default = 100 - alloc[("openb_pod_list_default", candidate)]
print(f"RESULT default_unalloc={default:.2f} worst_margin_pp={min(margins):.2f} candidate={candidate}")
PY

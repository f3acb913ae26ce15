#!/usr/bin/env bash
# Simulator speed on the openb default trace (targets): one fgd run (goal <= 0.5 s wall) and the six
# policies x 10 seeds with --jobs 2 (goal <= 60 s). Median over REPEATS runs of each; release build.
# Usage: bench/sim-speed.sh [TRACE_DIR]   (default ../shared/traces/alibaba-gpu-v2023)
set -euo pipefail
cd "$(dirname "$0")/.."
TRACE_DIR=${1:-../shared/traces/alibaba-gpu-v2023}
REPEATS=${REPEATS:-5}
BIN=build/release/src/gpusched/cli/gpusched-lab
if [ ! -x "$BIN" ]; then
  cmake --preset release >/dev/null && cmake --build --preset release --target gpusched-lab
fi
if [ ! -f "$TRACE_DIR/openb_pod_list_default.csv" ]; then
  echo "sim-speed: no openb trace at $TRACE_DIR" >&2
  exit 1
fi
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.3f", m}'; }
wall() { local s e; s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N); echo "$e - $s" | bc -l; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F)"
one=$(for _ in $(seq "$REPEATS"); do wall "$BIN" simulate --trace-dir "$TRACE_DIR" --policies fgd --seeds 42; done | median)
echo "one fgd run, default trace (process wall, incl. trace load): median ${one} s over ${REPEATS} (goal <= 0.5 s)"
all=$(for _ in $(seq 3); do wall "$BIN" simulate --trace-dir "$TRACE_DIR" --seeds 42-51 --jobs 2; done | median)
echo "six policies x 10 seeds, --jobs 2: median ${all} s over 3 (goal <= 60 s)"
echo "RESULT fgd_one_run_s=${one} six_by_ten_jobs2_s=${all}"

#!/usr/bin/env bash
# Extender latency and throughput over loopback HTTP against a synthetic cluster of 5000 nodes x 8 GPUs, half of
# them partly allocated (the extender's targets): filter requests with 500 full Node objects (goal p99 <= 2 ms), 500
# names with nodeCacheCapable (goal p99 <= 0.3 ms), all 5000 names (goal p99 <= 2 ms), and sustained
# filter+prioritize requests per second with 500 names (goal >= 5000/s). Release build; REPEATS runs, medians.
# Usage: bench/extender-latency.sh [extra extender_load flags]
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${REPEATS:-5}
BIN=build/release/src/gpusched/extender/extender_load
if [ ! -f build/release/CMakeCache.txt ]; then
  cmake --preset release >/dev/null
fi
cmake --build --preset release --target extender_load >/dev/null
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.3f", m}'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F)"
results=()
for i in $(seq "$REPEATS"); do
  line=$("$BIN" --fixtures ../shared/fixtures/kube-scheduler-extender "$@" 2>/dev/null | tee /dev/stderr | grep '^RESULT')
  results+=("$line")
  echo "run $i: $line" >&2
done
field() { printf '%s\n' "${results[@]}" | sed -n "s/.*$1=\([0-9.]*\).*/\1/p" | median; }
echo "medians over $REPEATS runs:"
echo "RESULT p99_full_ms=$(field p99_full_ms) p99_floor_ms=$(field p99_floor_ms) p99_cached_ms=$(field p99_cached_ms) p99_cached5000_ms=$(field p99_cached5000_ms) rps=$(field rps)"

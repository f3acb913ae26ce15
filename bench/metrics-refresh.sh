#!/usr/bin/env bash
# The cost of a metrics refresh for 5000 nodes x 8 GPUs from Prometheus (goal: one query per metric,
# parse <= 50 ms). Release build.
#   decode: prometheus_benchmark on synthetic /api/v1/query answers, 40,000 series per metric: one metric and a full
#           refresh (7 metrics), for the default `max by (UUID)` queries (full:0) and the raw selectors with the
#           agent's whole label set (full:1); medians of REPEATS repetitions.
#   live:   (unless LIVE=0) a real Prometheus on loopback over a TSDB backfilled with promtool (40,000 GPUs x 7 DCGM
#           metrics, one sample each 30 s before the start), and PrometheusSource::Fetch against it: wall time per
#           refresh with the HTTP (server evaluation + transfer) and decode parts.
# Usage: bench/metrics-refresh.sh            (env: REPEATS=5, DECODE=1, LIVE=1, NODES=5000, BUILD=build/release)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${REPEATS:-5}
LIVE=${LIVE:-1}
DECODE=${DECODE:-1}
NODES=${NODES:-5000}
BUILD=${BUILD:-build/release}
BIN=$BUILD/src/gpusched/adapters/prometheus/prometheus_benchmark
[ -f "$BUILD/CMakeCache.txt" ] || cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUSCHED_BUILD_BENCHMARKS=ON >/dev/null
cmake --build "$BUILD" --target prometheus_benchmark >/dev/null

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
if [ "$DECODE" = 1 ]; then
  echo "== decode (synthetic answers, $((5000 * 8)) series per metric) =="
  "$BIN" --benchmark_filter='BM_(Metric|Refresh|ParseOnly)' --benchmark_repetitions="$REPEATS" \
    --benchmark_report_aggregates_only=true 2>/dev/null | grep -E '^(Benchmark|BM_.*_median)'
fi

[ "$LIVE" = 1 ] || exit 0
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  echo "live: skipped (prometheus/promtool not installed; scripts/install-deps.sh installs them)"
  exit 0
fi
TMP=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"' EXIT
python3 - "$TMP/data.om" "$NODES" <<'PY'
import sys, time
path, nodes = sys.argv[1], int(sys.argv[2])
t = int(time.time()) - 30
names = ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_POWER_USAGE",
         "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL"]
with open(path, "w") as f:
    for m, name in enumerate(names):
        f.write(f"# TYPE {name} gauge\n")
        for n in range(nodes):
            for g in range(8):
                uuid = f"GPU-{n:08x}-{g:04x}-4a2b-9c1d-{n * 8 + g:012x}"
                f.write(f'{name}{{gpu="{g}",UUID="{uuid}",device="nvidia{g}",modelName="NVIDIA A100-SXM4-80GB",'
                        f'Hostname="gpu-node-{n:05d}",hostname="gpu-node-{n:05d}"}} {(n * 7 + g * 13 + m) % 101} {t}\n')
    f.write("# EOF\n")
PY
start=$(date +%s.%N)
promtool tsdb create-blocks-from openmetrics "$TMP/data.om" "$TMP/tsdb" >/dev/null
echo "== live (real Prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}'), $((NODES * 8)) GPUs; backfill $(echo "$(date +%s.%N) - $start" | bc | cut -c1-5) s) =="
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'global:\n  scrape_interval: 15s\n' >"$TMP/prom.yml"
prometheus --config.file="$TMP/prom.yml" --storage.tsdb.path="$TMP/tsdb" --web.listen-address="127.0.0.1:$PORT" \
  --log.level=warn 2>"$TMP/prom.log" &
PID=$!
for _ in $(seq 600); do curl -sf "127.0.0.1:$PORT/-/ready" >/dev/null && break; sleep 0.1; done
GPUSCHED_PROMETHEUS_URL="http://127.0.0.1:$PORT" "$BIN" --benchmark_filter='BM_FetchLive' \
  --benchmark_repetitions="$REPEATS" --benchmark_report_aggregates_only=true 2>/dev/null |
  grep -E '^(Benchmark|BM_FetchLive)'

#!/usr/bin/env bash
# The agent's cost with the fake backend: /metrics scrape latency for 8 GPUs (goal p99 <= 5 ms),
# and CPU and memory at a 1 s sampling interval (goal < 1 % of a core, < 30 MiB RSS). Release build.
#   scrape: SCRAPES sequential GETs over one keep-alive connection (python http.client), p50/p99 per run;
#   cost:   the agent runs DURATION seconds, scraped every 15 s as Prometheus would; CPU from /proc/<pid>/stat
#           (utime+stime) over the run, RSS (VmRSS) at the end.
# Usage: bench/agent-overhead.sh [GPU SPEC, default 8xA100-80GB]
set -euo pipefail
cd "$(dirname "$0")/.."
SPEC=${1:-8xA100-80GB}
REPEATS=${REPEATS:-5}
SCRAPES=${SCRAPES:-2000}
DURATION=${DURATION:-60}
BIN=build/release/src/gpusched/cli/gpusched
[ -f build/release/CMakeCache.txt ] || cmake --preset release >/dev/null
cmake --build --preset release --target gpusched >/dev/null
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.3f", m}'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F)"
"$BIN" agent --standalone --fake-gpus "$SPEC" --listen "127.0.0.1:$PORT" --interval 1 2>/dev/null &
PID=$!
trap 'kill $PID 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done

p99s=()
for r in $(seq "$REPEATS"); do
  line=$(python3 - "$PORT" "$SCRAPES" <<'PY'
import http.client, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
c = http.client.HTTPConnection("127.0.0.1", port)
t = []
for i in range(n + 50):
    s = time.perf_counter()
    c.request("GET", "/metrics")
    r = c.getresponse()
    body = r.read()
    e = time.perf_counter()
    assert r.status == 200 and b"DCGM_FI_DEV_GPU_UTIL" in body
    if i >= 50:
        t.append((e - s) * 1000)
t.sort()
print(f"{t[len(t)//2]:.3f} {t[int(len(t)*0.99)]:.3f} {len(body)}")
PY
)
  read -r p50 p99 bytes <<<"$line"
  echo "scrape run $r: p50 ${p50} ms, p99 ${p99} ms (${bytes} bytes per page)"
  p99s+=("$p99")
done
scrape_p99=$(printf '%s\n' "${p99s[@]}" | median)

# CPU and memory over DURATION seconds at a 1 s interval, scraped every 15 s.
ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
c0=$(cpu); t0=$(date +%s.%N)
end=$((SECONDS + DURATION))
while ((SECONDS < end)); do curl -sf "127.0.0.1:$PORT/metrics" >/dev/null; sleep 15; done
c1=$(cpu); t1=$(date +%s.%N)
cpu_pct=$(echo "($c1 - $c0) / $ticks / ($t1 - $t0) * 100" | bc -l)
rss_kib=$(awk '/VmRSS/ {print $2}' "/proc/$PID/status")
printf 'agent at 1 s interval for %ds: CPU %.3f %% of one core, RSS %.1f MiB\n' "$DURATION" "$cpu_pct" "$(echo "$rss_kib / 1024" | bc -l)"
printf 'RESULT scrape_p99_ms=%s cpu_percent=%.3f rss_mib=%.1f\n' "$scrape_p99" "$cpu_pct" "$(echo "$rss_kib / 1024" | bc -l)"

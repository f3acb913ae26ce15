#!/usr/bin/env bash
# Probe starvation: one client opens 64, 256 and 1024 idle keep-alive connections to a daemon from 127.0.0.2, and
# 40 fresh /healthz probes follow from 127.0.0.1 as the kubelet sends them (new connection, 1 s timeout). Before the
# per-peer cap and idle eviction, 64 idle connections locked the agent's probes out (0 of 40 answered).
# Runs the agent (fake GPUs), the webhook (TLS) and the extender (no API server), each 3 times per count (a fresh
# daemon each), and prints `RESULT daemon=... idle=N probes_ok=K/40 ...` with the medians (bench/probe_starvation.py).
# Then the same with the attacker spread over 4 addresses (enough to fill the agent's 64 and the webhook's 32), and
# with slow heads instead of idle connections.
# Usage: bench/probe-starvation.sh   (BIN=path/to/gpusched to use another build; REPEATS, PROBES, IDLE to change)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/release/src/gpusched/cli/gpusched}
if [ ! -x "$BIN" ]; then
  [ -f build/release/CMakeCache.txt ] || cmake --preset release >/dev/null
  cmake --build --preset release --target gpusched >/dev/null
fi
REPEATS=${REPEATS:-3}
PROBES=${PROBES:-40}
IDLE=${IDLE:-64,256,1024}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F); $BIN"
run() { python3 bench/probe_starvation.py "$BIN" --repeats "$REPEATS" --probes "$PROBES" --idle "$IDLE" "$@"; }
for daemon in agent webhook extender; do
  run --daemon "$daemon"
done
run --daemon agent --peers 4
run --daemon webhook --peers 4 --idle 256,1024
run --daemon agent --peers 4 --mode slowhead

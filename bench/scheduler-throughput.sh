#!/usr/bin/env bash
# Pods bound per second against a real etcd + kube-apiserver on this machine: kube-scheduler (nvidia.com/gpu pods),
# then gpusched scheduler (nvidia.com/gpu pods, then fractional pods) on the same NODES fake nodes, one after the
# other in one run (bench/scheduler_throughput.py says how each figure is taken). Also the restart figure: process
# start to first bind with 2 x PODS pods bound, and RSS. Release build; the Kubernetes binaries as for the e2e tests.
# Usage: NODES=5000 PODS=1000 PREBOUND=48000 bench/scheduler-throughput.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/release/src/gpusched/cli/gpusched
if [ ! -x "$BIN" ]; then
  cmake --preset release >/dev/null && cmake --build --preset release --target gpusched
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F)"
GPUSCHED_BIN=$PWD/$BIN exec python3 bench/scheduler_throughput.py

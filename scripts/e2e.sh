#!/usr/bin/env bash
# Runs the end-to-end tests (ctest label e2e): a real etcd, kube-apiserver and kube-scheduler on loopback with
# `gpusched extender` (tests/e2e/README.md). Builds kube-apiserver and kube-scheduler first when they are not
# cached yet (scripts/build-k8s.sh, about 15 minutes once), so nothing is skipped here for want of binaries.
#
# Usage: scripts/e2e.sh [BUILD_DIR]     BUILD_DIR defaults to build/asan (configured and built already, e.g. by
#                                        `make test`); the gpusched binary ctest uses is that build's.
# Env:   GPUSCHED_K8S_BIN   use kube-apiserver and kube-scheduler from this directory instead (any release >= 1.20)
#        GPUSCHED_E2E_KEEP  keep the control plane's temporary directory (logs, certificates, configs)
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD_DIR="${1:-build/asan}"

if [[ ! -f "$BUILD_DIR/CTestTestfile.cmake" ]]; then
  echo "e2e: $BUILD_DIR is not a configured build directory" \
       "(try: cmake --preset asan && cmake --build --preset asan)" >&2
  exit 1
fi
command -v etcd >/dev/null || [[ -n "${GPUSCHED_ETCD:-}" ]] || {
  echo "e2e: etcd is missing (Debian package etcd-server; scripts/install-deps.sh)" >&2
  exit 1
}

# build-k8s.sh prints the bin directory on its last line of stdout (progress goes to stderr).
K8S_BIN="$(bash scripts/build-k8s.sh | tail -n 1)"
if [[ ! -x "$K8S_BIN/kube-apiserver" || ! -x "$K8S_BIN/kube-scheduler" ]]; then
  echo "e2e: scripts/build-k8s.sh did not leave kube-apiserver and kube-scheduler in '$K8S_BIN'" >&2
  exit 1
fi
export GPUSCHED_K8S_BIN="$K8S_BIN"
echo "e2e: Kubernetes binaries from $GPUSCHED_K8S_BIN ($("$GPUSCHED_K8S_BIN/kube-scheduler" --version))" >&2

exec ctest --test-dir "$BUILD_DIR" -L e2e --output-on-failure

#!/usr/bin/env bash
# Installs the Debian (bookworm/main) packages gpusched needs to build, test and lint.
# Idempotent: when every package is already installed it only prints a line and exits, without
# touching the network (no apt-get update). Otherwise it runs `apt-get update` once and installs
# only the missing packages. Uses sudo only when not root (non-interactive sudo -n without a TTY).
#
# Usage: scripts/install-deps.sh [--check] [--demo]
#   --check   list the missing packages and exit 1 if any are missing; install nothing.
#   --demo    only what `make demo` needs (the simulator: compiler, CMake, cairo, CLI11, spdlog, fmt, JSON).
# docs/dependencies.md says why each library was chosen.
set -euo pipefail

PACKAGES=(
  # build tools: CMakeLists.txt, CMakePresets.json (Ninja generator), pkg_check_modules, compiler cache
  cmake ninja-build pkg-config ccache g++ make
  # repo scripts: check-format.sh (git ls-files), check-layering.py, .ci/run
  git python3
  # scripts/check-rbac.py and tests/e2e: reading deploy/ manifests
  python3-yaml
  # lint: scripts/check-format.sh, the `tidy` preset (.clang-format, .clang-tidy)
  clang-format clang-tidy
  # plot/: PNG and SVG charts
  libcairo2-dev fonts-dejavu-core
  # bench/ scripts: arithmetic on timings
  bc
  # tests and benchmarks: gpusched_test / gpusched_benchmark in cmake/gpusched.cmake, property tests
  libgtest-dev libgmock-dev libbenchmark-dev librapidcheck-dev
  # cli/: flags (CLI11), logging and formatting (spdlog + fmt; GCC 12 has no <format>)
  libcli11-dev libspdlog-dev libfmt-dev
  # JSON: configs, annotations, extender wire format, reports
  nlohmann-json3-dev
  # adapters/k8s (API client over HTTPS: libcurl with OpenSSL), extender/ (HTTP server: cpp-httplib,
  # built by Debian with OpenSSL), config files and kubeconfig (yaml-cpp), /metrics (prometheus-cpp)
  libcurl4-openssl-dev libssl-dev openssl libcpp-httplib-dev libyaml-cpp-dev prometheus-cpp-dev
  # net/: the one HTTP(S) server layer of every daemon (Boost.Beast over Asio, header-only; 1.81, not the default
  # 1.74 of libboost-dev). cpp-httplib above stays for test fakes and the load generator's client only.
  libboost1.81-dev
  # extender request decoding on the hot path (full Node lists reach megabytes)
  libsimdjson-dev
  # fuzz targets (libFuzzer through clang-14)
  clang-14 libfuzzer-14-dev libclang-rt-14-dev
  # tests/e2e: a real etcd; scripts/build-k8s.sh builds kube-apiserver and kube-scheduler from Debian's
  # kubernetes source package with Debian's Go (apt-get source needs dpkg-dev)
  etcd-server golang-go golang-github-modern-go-reflect2-dev dpkg-dev
  # tests/integration/agent_metrics_test.cc: a real Prometheus (and promtool) scrapes the agent's /metrics, a
  # real InfluxDB 1.x receives its pushed samples
  prometheus influxdb
  # adapters/deviceplugin: the kubelet's device plugin and PodResources gRPC APIs over unix sockets (protoc and
  # the gRPC C++ plugin generate the code from proto/ at build time)
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  # interference/: the slowdown model's gradient-boosted trees (XGBoost C API) and the per-partner ridge
  # regressions' linear algebra (Eigen, header-only)
  libxgboost-dev libeigen3-dev
  debootstrap umoci
)

# `make demo` needs only the simulator's: a compiler, CMake, and the libraries of gpusched-lab's simulate.
DEMO_PACKAGES=(
  cmake ninja-build pkg-config ccache g++ make
  libcairo2-dev fonts-dejavu-core
  libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
)

check_only=0
for arg in "$@"; do
  case "$arg" in
    --check) check_only=1 ;;
    --demo) PACKAGES=("${DEMO_PACKAGES[@]}") ;;
    *) echo "usage: $0 [--check] [--demo]" >&2; exit 2 ;;
  esac
done

is_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! is_installed "$pkg"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: missing ${#missing[@]} of ${#PACKAGES[@]}: ${missing[*]}"
if ((check_only)); then
  exit 1
fi

sudo_cmd=()
if ((EUID != 0)); then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-deps: not root and sudo is not installed; install as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  if [[ -t 0 ]]; then
    sudo_cmd=(sudo)
  else
    sudo_cmd=(sudo -n)  # no TTY (CI): fail instead of waiting for a password
  fi
fi

"${sudo_cmd[@]}" apt-get update
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"

still_missing=()
for pkg in "${missing[@]}"; do
  if ! is_installed "$pkg"; then
    still_missing+=("$pkg")
  fi
done
if ((${#still_missing[@]} > 0)); then
  echo "install-deps: still missing after install: ${still_missing[*]}" >&2
  exit 1
fi
echo "install-deps: installed ${missing[*]}; all ${#PACKAGES[@]} packages present"

#!/usr/bin/env bash
# Coverage-guided fuzzing of every decoder of outside input with clang's libFuzzer (ASan + UBSan).
# Builds the fuzz targets in build/fuzz with clang++-14 and runs each for SECONDS (default 20) from the seed
# corpus (fuzz/seeds/<target>, plus the real kube-scheduler request bodies in ../shared for the extender targets).
# New corpus entries go to build/fuzz/corpus/<target> (never into the repository). A crash fails the script and
# leaves the reproducer in build/fuzz/artifacts/.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-20}"
shift || true
TARGETS=("$@")
if ((${#TARGETS[@]} == 0)); then
  TARGETS=(extender_args_fuzz binding_args_fuzz preemption_args_fuzz kube_objects_fuzz annotations_fuzz
           quantity_fuzz trace_fuzz prometheus_response_fuzz influx_response_fuzz interference_data_fuzz http_request_fuzz
           admission_review_fuzz)
fi
CLANG="${CLANGXX:-clang++-14}"
command -v "$CLANG" >/dev/null || { echo "fuzz: $CLANG not found (scripts/install-deps.sh installs clang-14)" >&2; exit 1; }

BUILD=build/fuzz
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER="$CLANG" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DGPUSCHED_FUZZ=ON -DGPUSCHED_BUILD_TESTS=OFF -DGPUSCHED_BUILD_BENCHMARKS=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=undefined" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
fi
cmake --build "$BUILD" --parallel "$(nproc)" --target "${TARGETS[@]}"

FIXTURES=../shared/fixtures/kube-scheduler-extender
mkdir -p "$BUILD/artifacts"
for t in "${TARGETS[@]}"; do
  seed_dir="fuzz/seeds/${t%_fuzz}"
  corpus="$BUILD/corpus/$t"
  mkdir -p "$corpus"
  dirs=("$corpus" "$seed_dir")
  if [[ "$t" == extender_args_fuzz || "$t" == binding_args_fuzz || "$t" == preemption_args_fuzz ]] && [[ -d "$FIXTURES" ]]; then
    dirs+=("$FIXTURES/1.32/cache-true" "$FIXTURES/1.32/cache-false" "$FIXTURES/1.20/cache-true" "$FIXTURES/1.20/cache-false")
  fi
  # The webhook's reviews may be as large as its body limit (4 MiB): the decoder's bounds are for such inputs.
  max_len=65536
  [[ "$t" == admission_review_fuzz ]] && max_len=$((4 << 20))
  echo "fuzz: $t for ${SECONDS_EACH}s"
  "$BUILD/fuzz/$t" -max_total_time="$SECONDS_EACH" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$BUILD/artifacts/$t-" -print_final_stats=1 "${dirs[@]}" 2>&1 | grep -E '^(#|INFO: seed|stat::number_of_executed_units|==|SUMMARY)' | tail -4
  [[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "fuzz: $t found a crash; see $BUILD/artifacts/" >&2; exit 1; }
done
echo "fuzz: all ${#TARGETS[@]} targets ran ${SECONDS_EACH}s each without a finding"

#!/usr/bin/env bash
# Self-test of scripts/check-layering.py: a temporary tree with one file that keeps the layering rules and one
# that breaks them; the check must flag the bad file (and only it), then pass once the bad file is gone.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
check="$here/check-layering.py"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "check-layering-selftest: FAIL: $*" >&2
  exit 1
}

mkdir -p "$tmp/src/gpusched/sched" "$tmp/src/gpusched/core"
# Good: sched may include policy, ports, core, common and standard headers.
cat >"$tmp/src/gpusched/sched/runner.cc" <<'CC'
#include "gpusched/sched/runner.h"

#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/core/node.h"
#include "gpusched/policy/placement_policy.h"
CC
# Bad: core may include only common (line 4), and no third-party header (line 5).
cat >"$tmp/src/gpusched/core/node.cc" <<'CC'
#include "gpusched/core/node.h"

#include "gpusched/common/ids.h"
#include "gpusched/sched/runner.h"
#include <nlohmann/json.hpp>
CC

set +e
out="$(python3 "$check" --root "$tmp" 2>&1)"
rc=$?
set -e
echo "$out"
[[ $rc -eq 1 ]] || fail "expected exit 1 with a bad file, got $rc"
grep -q '^src/gpusched/core/node.cc:4: core may not include "gpusched/sched/runner.h"' <<<"$out" ||
  fail "core -> sched include not flagged"
grep -q '^src/gpusched/core/node.cc:5: core may not include <nlohmann/json.hpp>' <<<"$out" ||
  fail "third-party header in core not flagged"
if grep -q 'runner.cc' <<<"$out"; then fail "good file flagged"; fi
n_violations="$(grep -c '^src/' <<<"$out" || true)"
[[ $n_violations -eq 2 ]] || fail "expected 2 violations, got $n_violations"

rm "$tmp/src/gpusched/core/node.cc"
out="$(python3 "$check" --root "$tmp")" || fail "expected exit 0 on the good tree: $out"
[[ $out == "layering: 1 files OK" ]] || fail "unexpected output on the good tree: $out"

echo "check-layering-selftest: OK"

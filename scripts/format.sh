#!/usr/bin/env bash
# Applies clang-format -i (.clang-format) to the files scripts/check-format.sh checks.
set -euo pipefail
exec "$(dirname "$0")/check-format.sh" --fix

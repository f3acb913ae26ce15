#!/usr/bin/env bash
# The install tree of a build: `cmake --install` into a staging prefix, then the installed binary runs
# (`gpusched --version`), the docs and deploy manifests are where docs/install.md says, and the Dockerfile's
# runtime packages match what the binary links (scripts/check-image-deps.py).
# Usage: scripts/check-install.sh BUILD_DIR   (e.g. build/release or build/ci)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: scripts/check-install.sh BUILD_DIR}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cmake --install "$build" --prefix "$stage" >/dev/null
version=$(sed -n 's/^project(gpusched VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
got=$("$stage/bin/gpusched" --version)
if [ "$got" != "gpusched $version" ]; then
  echo "check-install: the installed gpusched --version says '$got', not 'gpusched $version'" >&2
  exit 1
fi
for f in share/doc/gpusched/README.md share/doc/gpusched/install.md share/gpusched/deploy/rbac.yaml; do
  if [ ! -f "$stage/$f" ]; then
    echo "check-install: $f is not installed" >&2
    exit 1
  fi
done
echo "check-install: $(find "$stage" -type f | wc -l) files installed; $got"
python3 scripts/check-image-deps.py "$stage/bin/gpusched"

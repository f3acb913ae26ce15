#!/usr/bin/env bash
# The install tree of a build: `cmake --install` into a staging prefix, then the installed binaries run
# (`gpusched --version`, `gpusched-lab --version`), so does the kubectl plugin link (kubectl-gpusched), the docs and
# deploy manifests are where docs/install.md says, and each image's runtime packages match what its binary links
# (scripts/check-image-deps.py: Dockerfile for gpusched, Dockerfile.lab for gpusched-lab).
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
# The kubectl plugin: a link named kubectl-gpusched that answers as `kubectl gpusched`.
if [ ! -L "$stage/bin/kubectl-gpusched" ] || ! "$stage/bin/kubectl-gpusched" --help | grep -q "kubectl gpusched"; then
  echo "check-install: bin/kubectl-gpusched is missing or does not answer as the kubectl plugin" >&2
  exit 1
fi
for f in share/doc/gpusched/README.md share/doc/gpusched/LICENSE share/doc/gpusched/CHANGELOG.md share/doc/gpusched/install.md share/gpusched/deploy/base/extender/rbac.yaml share/gpusched/deploy/scheduler/kustomization.yaml share/gpusched/examples/shared-pod.yaml; do
  if [ ! -f "$stage/$f" ]; then
    echo "check-install: $f is not installed" >&2
    exit 1
  fi
done
# The installed overlays render on their own (kustomize paths stay inside the installed deploy/).
if command -v kubectl >/dev/null && kubectl kustomize "$stage/share/gpusched/deploy/agent" >/dev/null 2>&1; then
  for overlay in scheduler extender agent monitoring quickstart; do
    if ! kubectl kustomize "$stage/share/gpusched/deploy/$overlay" >/dev/null; then
      echo "check-install: the installed deploy/$overlay does not render with kubectl kustomize" >&2
      exit 1
    fi
  done
else
  echo "check-install: no kubectl >= 1.21 here: the installed overlays were not rendered"
fi
echo "check-install: $(find "$stage" -type f | wc -l) files installed; $got"
lab=$("$stage/bin/gpusched-lab" --version)
if [ "$lab" != "gpusched-lab $version" ]; then
  echo "check-install: the installed gpusched-lab --version says '$lab', not 'gpusched-lab $version'" >&2
  exit 1
fi
python3 scripts/check-image-deps.py "$stage/bin/gpusched"
python3 scripts/check-image-deps.py "$stage/bin/gpusched-lab" --dockerfile Dockerfile.lab

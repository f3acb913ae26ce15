#!/usr/bin/env bash
# Builds the container image from ./Dockerfile with whatever OCI builder this machine has: docker (when its daemon
# answers), else podman, else buildah (both in Debian). Tags gpusched:<version> and gpusched:latest, or IMAGE.
# Usage: scripts/build-image.sh   (IMAGE=registry.example.com/gpusched:0.1.0 to name it)
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^project(gpusched VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
image=${IMAGE:-gpusched:$version}
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  builder=(docker build)
elif command -v podman >/dev/null; then
  builder=(podman build)
elif command -v buildah >/dev/null; then
  builder=(buildah bud)
else
  echo "build-image: no OCI builder: install podman or buildah (apt-get install podman), or run a docker daemon" >&2
  exit 2
fi
echo "build-image: ${builder[*]} -t $image"
"${builder[@]}" -t "$image" -f Dockerfile .
echo "build-image: built $image (it runs gpusched --help by default; pass --version to check it)"

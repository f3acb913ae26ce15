#!/usr/bin/env bash
# Builds a container image with whatever OCI builder this machine has: docker (when its daemon answers), else
# podman, else buildah (both in Debian). The daemon image from ./Dockerfile (tag gpusched:<version>), or with `lab`
# the lab image from ./Dockerfile.lab (tag gpusched-lab:<version>); IMAGE names it otherwise.
# Usage: scripts/build-image.sh [daemons|lab]   (IMAGE=registry.example.com/gpusched:0.1.0 to name it)
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^project(gpusched VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
case "${1:-daemons}" in
  daemons) dockerfile=Dockerfile; image=${IMAGE:-gpusched:$version}; binary=gpusched ;;
  lab) dockerfile=Dockerfile.lab; image=${IMAGE:-gpusched-lab:$version}; binary=gpusched-lab ;;
  *) echo "usage: $0 [daemons|lab]" >&2; exit 2 ;;
esac
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
"${builder[@]}" -t "$image" -f "$dockerfile" .
echo "build-image: built $image (it runs $binary --help by default; pass --version to check it)"

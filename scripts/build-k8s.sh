#!/usr/bin/env bash
# Builds kube-apiserver and kube-scheduler (v1.20.2) once from Debian bookworm's `kubernetes` source package,
# with Debian's Go, into a cache outside the repository, and prints the directory that holds the binaries.
# The end-to-end tests (tests/e2e) take their control plane from there unless GPUSCHED_K8S_BIN names another one.
#
# Usage: scripts/build-k8s.sh            build when the cache lacks the binaries (or wait for a build under way);
#                                        print the bin directory last
#        scripts/build-k8s.sh --check    print the bin directory and exit 0 when it is ready, exit 1 otherwise
#        scripts/build-k8s.sh --background
#                                        start the build at the lowest CPU priority and return at once (`make test`
#                                        does this before compiling, so the Go build takes the cycles the C++ build
#                                        and the unit tests leave idle); its log is $CACHE/build.log, and a later
#                                        plain call waits for it and fails if it failed
# One build at a time: the cache directory's lock file serialises callers.
# Cache: $GPUSCHED_K8S_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/gpusched/k8s-1.20.2 (about 1.5 GB while
# building; the source and Go build cache are removed afterwards, leaving about 150 MB of binaries).
# Facts behind each step: ../shared/design/real-kubernetes.md. Nothing from Kubernetes enters the repository.
set -euo pipefail

if [[ -n "${GPUSCHED_K8S_BIN:-}" ]]; then
  if [[ -x "$GPUSCHED_K8S_BIN/kube-apiserver" && -x "$GPUSCHED_K8S_BIN/kube-scheduler" ]]; then
    echo "$GPUSCHED_K8S_BIN"
    exit 0
  fi
  echo "build-k8s: GPUSCHED_K8S_BIN=$GPUSCHED_K8S_BIN lacks kube-apiserver or kube-scheduler" >&2
  exit 1
fi

VERSION=v1.20.2
CACHE="${GPUSCHED_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpusched/k8s-1.20.2}"
BIN="$CACHE/bin"

if [[ -x "$BIN/kube-apiserver" && -x "$BIN/kube-scheduler" ]]; then
  echo "$BIN"
  exit 0
fi
if [[ "${1:-}" == "--check" ]]; then
  echo "build-k8s: no binaries in $BIN yet" >&2
  exit 1
fi
mkdir -p "$CACHE"
LOCK="$CACHE/.lock"
if [[ "${1:-}" == "--background" ]]; then
  # The child takes the lock before this returns, so a plain call made right after waits for it.
  exec 8>"$LOCK"
  if ! flock -n 8; then
    echo "build-k8s: a build is already under way (log: $CACHE/build.log)" >&2
    exit 0
  fi
  echo "build-k8s: building in the background at nice 19 (log: $CACHE/build.log)" >&2
  nice -n 19 setsid bash "$0" --locked >"$CACHE/build.log" 2>&1 </dev/null 8>&8 &
  exit 0
fi
if [[ "${1:-}" == "--locked" ]]; then
  # setsid made this a session of its own, and with the kernel's autogroup scheduling a session's niceness is its
  # autogroup's: lower that too, or the Go build gets half the CPU whatever `nice` says.
  echo 19 >/proc/self/autogroup 2>/dev/null || true
else
  # Wait for a build under way (a background one), then look again.
  exec 8>"$LOCK"
  if ! flock -n 8; then
    echo "build-k8s: waiting for the build under way (log: $CACHE/build.log)" >&2
    flock 8
  fi
  if [[ -x "$BIN/kube-apiserver" && -x "$BIN/kube-scheduler" ]]; then
    echo "$BIN"
    exit 0
  fi
  if [[ -s "$CACHE/build.log" ]]; then
    echo "build-k8s: the background build left no binaries; its log ends:" >&2
    tail -n 20 "$CACHE/build.log" >&2
    echo "build-k8s: building again in the foreground" >&2
  fi
fi

log() { echo "build-k8s: $*" >&2; }
sudo_cmd=()
if ((EUID != 0)); then sudo_cmd=(sudo -n); fi

for tool in go dpkg-source; do
  command -v "$tool" >/dev/null || { log "$tool is missing; run scripts/install-deps.sh"; exit 1; }
done
REFLECT2=/usr/share/gocode/src/github.com/modern-go/reflect2
[[ -d "$REFLECT2" ]] || { log "$REFLECT2 is missing (golang-github-modern-go-reflect2-dev)"; exit 1; }

WORK="$CACHE/work"
rm -rf "$WORK"
mkdir -p "$WORK/src" "$BIN"

# 1. The source package. apt-get source needs a deb-src entry for bookworm main.
if ! apt-get source --download-only --print-uris kubernetes >/dev/null 2>&1; then
  log "adding a deb-src entry for bookworm main"
  "${sudo_cmd[@]}" tee /etc/apt/sources.list.d/gpusched-deb-src.sources >/dev/null <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  "${sudo_cmd[@]}" apt-get update -o Dir::Etc::sourcelist=sources.list.d/gpusched-deb-src.sources \
    -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0 >&2
fi
(cd "$WORK/src" && apt-get source --download-only kubernetes >&2)
orig=$(ls "$WORK"/src/kubernetes_*.orig.tar.* | head -n 1)
log "unpacking $(basename "$orig")"
mkdir -p "$WORK/gopath/src/k8s.io"
TREE="$WORK/gopath/src/k8s.io/kubernetes"
mkdir -p "$TREE"
tar -xf "$orig" -C "$TREE" --strip-components=1

# 2. GOPATH mode only; the vendored reflect2 1.0.1 breaks with Go >= 1.18, Debian's 1.0.2 does not.
export GOPATH="$WORK/gopath" GO111MODULE=off GOPROXY=off CGO_ENABLED=0 GOFLAGS=
export GOCACHE="$WORK/gocache"
rm -rf "$TREE/vendor/github.com/modern-go/reflect2"
cp -r "$REFLECT2" "$TREE/vendor/github.com/modern-go/reflect2"
rm -f "$TREE/vendor/github.com/modern-go/reflect2/go.mod"

# 3. pkg/generated/openapi is generated by upstream's Makefile, not shipped: run the vendored openapi-gen.
cd "$TREE"
log "building openapi-gen"
go build -o "$WORK/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen
# vendor/k8s.io/<repo> are links to staging/src/k8s.io/<repo>; grep -r does not follow them, so search staging
# and name those packages by their vendor path.
dirs=$(grep -rl --include='*.go' --exclude='*_test.go' '+k8s:openapi-gen=' . \
  | sed 's|^\./staging/src/|./vendor/|' \
  | grep -v -e '^./vendor/k8s.io/code-generator/' -e '^./vendor/k8s.io/sample-apiserver/' \
      -e '/testdata/' -e '^./_output/' -e '^./hack/' -e '^./test/' \
  | xargs -n1 dirname | sort -u | sed 's|^\./|k8s.io/kubernetes/|' | paste -sd, -)
log "generating pkg/generated/openapi"
"$WORK/openapi-gen" --input-dirs "$dirs" --output-package k8s.io/kubernetes/pkg/generated/openapi \
  --output-file-base zz_generated.openapi --output-base "$GOPATH/src" \
  --go-header-file vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
  --report-filename "$WORK/openapi-violations.txt" >&2

# 4. The two binaries, version-stamped through the vendored import paths.
ldflags="-s -w"
for pkg in k8s.io/kubernetes/vendor/k8s.io/component-base/version k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=20 -X $pkg.gitTreeState=clean"
done
log "go build kube-apiserver kube-scheduler (about 13 min on 2 cores)"
go build -p "$(nproc)" -trimpath -ldflags "$ldflags" -o "$BIN/" ./cmd/kube-apiserver ./cmd/kube-scheduler
"$BIN/kube-apiserver" --version >&2
cd /
rm -rf "$WORK"
echo "$BIN"

#!/usr/bin/env bash
# Peak memory of `gpusched webhook` under the worst bodies its port accepts (goal: under the Deployment's 256Mi limit,
# deploy/base/webhook/webhook.yaml, whatever callers send). For each case a fresh webhook is started on loopback (plain
# HTTP, no --events: no API), the bodies are POSTed to /validate, N at once on N connections, and the peak resident
# set (VmHWM of /proc/<pid>/status) is read; REPEATS runs, the median printed.
#   deep      request.object nesting a million arrays (2 MB): refused before parsing (400)
#   wide      1.39 million empty objects in 4 MiB: refused before parsing (400)
#   strings   object and oldObject each one 1.5 MiB annotation value (just within the object limit): decoded, judged
#   keys      an UPDATE whose object and oldObject each hold 120,000 labels (each just within the object limit,
#             both within the value limit): decoded, judged (the heaviest review accepted: a std::map node per label)
#   gpukeys   a GPU pod CREATE with 120,000 labels: decoded, copied once by the validator, decoded as a pod request
#   Each at 1 and 4 at once; `wide` and `keys` also at 32 at once (the server's connection limit), whose bodies are all
#   held while they are read.
# Figures: RESULT lines with the median VmHWM in MiB and the HTTP statuses seen (429 = the decode limiter).
# Usage: bench/webhook-rss.sh          GPUSCHED_BIN=... to use another build (default: the release build, built
#                                      under the shared build lock when missing); REPEATS (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${REPEATS:-3}
BIN=${GPUSCHED_BIN:-build/release/src/gpusched/cli/gpusched}
if [[ -z "${GPUSCHED_BIN:-}" ]]; then
  [ -f build/release/CMakeCache.txt ] || cmake --preset release >/dev/null
  flock /tmp/gpusched-build.lock cmake --build --preset release --parallel 2 --target gpusched >/dev/null
fi
WORK=$(mktemp -d)
PID=
cleanup() {
  [[ -n "$PID" ]] && kill "$PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.1f", m}'; }

python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
def review(obj, old=None, op="CREATE"):
    r = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
         "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                     "resource": {"group": "", "version": "v1", "resource": "pods"}, "operation": op,
                     "namespace": "team-a", "name": "trainer", "userInfo": {"username": "alice"},
                     "object": "@O@", "oldObject": "@P@"}}
    text = json.dumps(r, separators=(",", ":"))
    return text.replace('"@O@"', obj).replace('"@P@"', old or "null")
pod = lambda extra: json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": dict({"name": "trainer"}, **extra),
    "spec": {"containers": [{"name": "main", "image": "cuda", "resources": {
        "limits": {"gpusched.io/gpu": "1", "gpusched.io/gpu-memory": "8000"},
        "requests": {"gpusched.io/gpu": "1", "gpusched.io/gpu-memory": "8000"}}}]}}, separators=(",", ":"))
bodies = {
    "deep": review('{"a":' + "[" * 1000000 + "]" * 1000000 + "}"),
    "wide": review('{"a":[' + ",".join(["{}"] * 1390000) + "]}"),
    "strings": review(pod({"annotations": {"note": "x" * (1536 * 1024 - 400)}}),
                      pod({"annotations": {"note": "y" * (1536 * 1024 - 400)}}), "UPDATE"),
    # 120,000 labels of 13 bytes each: just within the object limit, and twice that within the value limit.
    "keys": review(pod({"labels": {f"k{i:06d}": "" for i in range(120000)}}),
                   pod({"labels": {f"k{i:06d}": "" for i in range(120000)}}), "UPDATE"),
    "gpukeys": review(pod({"labels": {f"k{i:06d}": "" for i in range(120000)}})),
}
for name, body in bodies.items():
    assert len(body) <= 4 << 20, (name, len(body))
    with open(f"{work}/{name}.json", "w") as f:
        f.write(body)
PY

# Starts the webhook, POSTs body $1 $2 times at once, prints "<VmHWM MiB> <statuses>".
run_case() {
  local body=$1 n=$2 port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "$BIN" webhook --listen "127.0.0.1:$port" 2>"$WORK/log" &
  PID=$!
  for _ in $(seq 100); do curl -sf "127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.05; done
  local statuses
  statuses=$(python3 - "$port" "$WORK/$body.json" "$n" <<'PY'
import http.client, sys, threading
port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
body = open(path, "rb").read()
# Eight connections per source address (the webhook takes 16 from one address, 32 in all): the API server's
# replicas, or a proxy, reach it from a few addresses.
conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=120, source_address=(f"127.0.0.{2 + i // 8}", 0))
         for i in range(n)]
for c in conns:
    c.connect()
barrier, out = threading.Barrier(n), [None] * n
def post(i):
    barrier.wait()
    conns[i].request("POST", "/validate", body, {"Content-Type": "application/json"})
    r = conns[i].getresponse()
    r.read()
    out[i] = r.status
ts = [threading.Thread(target=post, args=(i,)) for i in range(n)]
for t in ts: t.start()
for t in ts: t.join()
print(",".join(f"{s}x{out.count(s)}" for s in sorted(set(out))))
PY
)
  local hwm
  hwm=$(awk '/^VmHWM:/ {printf "%.1f", $2 / 1024}' "/proc/$PID/status")
  kill -0 "$PID" || { echo "webhook died on $body x$n" >&2; exit 1; }
  kill "$PID"
  wait "$PID" 2>/dev/null || true
  PID=
  echo "$hwm $statuses"
}

echo "machine: $(nproc) cores, $(date -u +%F), binary $BIN"
for c in "deep 1" "deep 4" "wide 1" "wide 4" "wide 32" "strings 1" "strings 4" "keys 1" "keys 4" "keys 32" "gpukeys 1" \
  "gpukeys 4"; do
  set -- $c
  peaks=()
  statuses=
  for _ in $(seq "$REPEATS"); do
    out=$(run_case "$1" "$2")
    peaks+=("${out%% *}")
    statuses=${out#* }
  done
  echo "RESULT webhook_rss case=$1 concurrent=$2 peak_mib=$(printf '%s\n' "${peaks[@]}" | median) statuses=$statuses runs=$REPEATS"
done

"""Pods bound per second against a real etcd + kube-apiserver on this machine: kube-scheduler, then gpusched
scheduler, on the same cluster of fake nodes, one after the other in one run.

  1. NODES fake nodes (8 x A100-80GB each: the gpusched.io/gpus inventory and nvidia.com/gpu: 8), one POST each
     with their status (a Node may carry its status on create).
  2. kube-scheduler: PODS pods asking for nvidia.com/gpu: 1 are created first, then kube-scheduler is started (its
     client QPS raised to 5000 so that its own default of 50 is not what is measured); the rate is
     (PODS - 1) / (time of the last bind - time of the first bind), from a watch. kube-scheduler is stopped.
  3. gpusched scheduler, the same with schedulerName gpusched (nvidia.com/gpu: 1 pods), then stopped.
  4. gpusched scheduler again for PODS fractional pods (gpusched.io/gpu-core 30, gpu-memory 20000): its start,
     with PREBOUND + 2 x PODS pods bound, is the restart figure (process start to first bind), and its RSS after
     the last bind.
Before step 2, PREBOUND pods are created already bound (spec.nodeName and a gpusched.io/allocation of 10 % of GPU
0 or 1, ten per node, as an earlier run would have left them): the cluster every scheduler works on.
Ends with one line: RESULT nodes=N kube_pods_per_s=A gpusched_pods_per_s=B gpusched_shared_pods_per_s=C ...

Environment: NODES (5000), PODS (1000), PREBOUND (48000: 50,000 bound pods in all), GPUSCHED_BIN (the release
build), GPUSCHED_K8S_BIN / GPUSCHED_ETCD as for the end-to-end tests (tests/e2e/README.md), THREADS (16:
concurrent creating clients).
"""

import concurrent.futures
import http.client
import json
import os
import sys
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))

from control_plane import ControlPlane, free_port, wait_until  # noqa: E402
from kube import GPUS_ANNOTATION, Kube  # noqa: E402

NODES = int(os.environ.get("NODES", "5000"))
PODS = int(os.environ.get("PODS", "1000"))
PREBOUND = int(os.environ.get("PREBOUND", "48000"))
THREADS = int(os.environ.get("THREADS", "16"))
BIN = os.environ.get("GPUSCHED_BIN", os.path.join(REPO, "build", "release", "src", "gpusched", "cli", "gpusched"))
NOT_READY = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"}


def log(msg):
    sys.stderr.write(f"[scheduler-throughput {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


class FastClientControlPlane(ControlPlane):
    """kube-scheduler with a client that is not rate limited (its default is 50 requests/s)."""

    def scheduler_config_text(self):
        text = super().scheduler_config_text()
        return text.replace("clientConnection:\n", "clientConnection:\n  qps: 5000\n  burst: 5000\n", 1)


def node_object(i):
    name = f"bench-{i:05d}"
    inventory = [{"uuid": f"GPU-{name}-{g}", "index": g, "model": "A100-SXM4-80GB", "memory_mib": 81920}
                 for g in range(8)]
    resources = {"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                         "annotations": {GPUS_ANNOTATION: json.dumps(inventory, separators=(",", ":"))}},
            "spec": {},
            "status": {"capacity": resources, "allocatable": resources,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "fake node", "lastHeartbeatTime": now,
                                       "lastTransitionTime": now}]}}


def pod_object(name, scheduler, limits):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name},
            "spec": {"schedulerName": scheduler, "automountServiceAccountToken": False,
                     "terminationGracePeriodSeconds": 0,
                     # No node lifecycle controller runs here: the admission-time not-ready taint stays.
                     "tolerations": [NOT_READY],
                     "containers": [{"name": "main", "image": "registry.invalid/cuda:12",
                                     "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                                   "limits": {k: str(v) for k, v in limits.items()}}}]}}


def parallel(fn, items):
    with concurrent.futures.ThreadPoolExecutor(THREADS) as ex:
        for _ in ex.map(fn, items):
            pass


class BindWatch:
    """Watches a namespace's pods and records when each first shows spec.nodeName (monotonic time)."""

    def __init__(self, kube, namespace, resource_version):
        self.kube, self.namespace, self.rv = kube, namespace, resource_version
        self.bound = {}
        self.lock = threading.Lock()
        self.stop = False
        self.start = time.monotonic()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            conn = http.client.HTTPSConnection(self.kube.host, self.kube.port, timeout=30, context=self.kube.ctx)
            try:
                conn.request("GET", f"/api/v1/namespaces/{self.namespace}/pods?watch=1&resourceVersion={self.rv}"
                                    "&allowWatchBookmarks=true&timeoutSeconds=600")
                r = conn.getresponse()
                while not self.stop:
                    line = r.readline()
                    if not line:
                        break
                    event = json.loads(line)
                    obj = event.get("object", {})
                    self.rv = obj.get("metadata", {}).get("resourceVersion", self.rv)
                    name = obj.get("metadata", {}).get("name")
                    if obj.get("spec", {}).get("nodeName") and name:
                        with self.lock:
                            self.bound.setdefault(name, time.monotonic())
            except (OSError, http.client.HTTPException, ValueError) as e:
                if self.stop:
                    break
                log(f"watch of {self.namespace}: {e}; watching again")
                time.sleep(0.2)
            finally:
                conn.close()

    def count(self):
        with self.lock:
            return len(self.bound)

    def times(self):
        with self.lock:
            return sorted(self.bound.values())


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_phase(cp, kube, label, scheduler_name, limits, start):
    """Creates PODS pending pods in a namespace of their own, then calls start(); returns (rate, first_bind_s, proc)
    where first_bind_s is from start() to the first bind."""
    ns = f"bench-{label}"
    kube.ensure_namespace(ns)
    kube.ensure_service_account("default", ns)
    names = [f"{label}-{i:05d}" for i in range(PODS)]
    t0 = time.monotonic()
    parallel(lambda n: kube.create("pods", pod_object(n, scheduler_name, limits), namespace=ns), names)
    log(f"{label}: {PODS} pods created in {time.monotonic() - t0:.1f}s")
    rv = kube.call("GET", f"/api/v1/namespaces/{ns}/pods?limit=1")["metadata"]["resourceVersion"]
    watch = BindWatch(kube, ns, rv)
    t_start = time.monotonic()
    proc = start()
    wait_until(lambda: watch.count() >= PODS, 600, interval=0.2, what=f"{label}: all {PODS} pods bound",
               alive=[proc] if proc else ())
    watch.stop = True
    times = watch.times()
    rate = (len(times) - 1) / (times[-1] - times[0]) if times[-1] > times[0] else float("inf")
    log(f"{label}: first bind {times[0] - t_start:.2f}s after start, {PODS} bound in {times[-1] - times[0]:.2f}s: "
        f"{rate:.0f} pods/s")
    return rate, times[0] - t_start, proc


def prebound_pod(i):
    """Pod i of PREBOUND, bound as an earlier run would have left it: 10 per node, 10 % of one GPU each."""
    node_index, k = (i // 10) % NODES, i % 10
    node = f"bench-{node_index:05d}"
    gpu = k % 2
    allocation = {"node": node, "id": 1000 + i,
                  "containers": [{"name": "main", "gpus": [{"index": gpu, "uuid": f"GPU-{node}-{gpu}", "milli": 100,
                                                            "memory_mib": 8000, "exclusive": False}]}]}
    pod = pod_object(f"bound-{i:05d}", "gpusched",
                     {"gpusched.io/gpu": 1, "gpusched.io/gpu-core": 10, "gpusched.io/gpu-memory": 8000})
    pod["spec"]["nodeName"] = node
    pod["metadata"]["annotations"] = {"gpusched.io/allocation": json.dumps(allocation, separators=(",", ":"))}
    return pod


def create_prebound(kube):
    ns = "bench-bound"
    kube.ensure_namespace(ns)
    kube.ensure_service_account("default", ns)
    t0 = time.monotonic()
    parallel(lambda i: kube.create("pods", prebound_pod(i), namespace=ns), range(PREBOUND))
    log(f"{PREBOUND} bound pods created in {time.monotonic() - t0:.1f}s")


def main():
    if not os.access(BIN, os.X_OK):
        sys.exit(f"scheduler-throughput: no gpusched binary at {BIN} (build the release preset)")
    with FastClientControlPlane(kube_scheduler=False, log=log) as cp:
        kube = cp.kube()
        t0 = time.monotonic()
        parallel(lambda i: kube.create("nodes", node_object(i)), range(NODES))
        log(f"{NODES} nodes created in {time.monotonic() - t0:.1f}s")
        create_prebound(kube)

        def start_kube_scheduler():
            cp._start_scheduler()
            return cp.process("kube-scheduler")
        kube_rate, _, ks = run_phase(cp, kube, "kube", "default-scheduler", {"nvidia.com/gpu": 1},
                                     start_kube_scheduler)
        ks.stop()

        port = free_port()
        config = os.path.join(cp.dir, "gpusched-scheduler.yaml")
        with open(config, "w") as f:
            f.write(f'schedulerNames: [gpusched]\npolicy: binpack\nlisten: "127.0.0.1:{port}"\n'
                    "leaderElection: {enabled: false}\n")
        runs = []

        def start_gpusched():
            p = cp._spawn(f"gpusched-scheduler-{len(runs)}",
                          [BIN, "scheduler", "--config", config, "--kubeconfig", cp.kubeconfig])
            runs.append(p)
            return p
        whole_rate, _, g1 = run_phase(cp, kube, "whole", "gpusched", {"nvidia.com/gpu": 1}, start_gpusched)
        g1.stop()
        share = {"gpusched.io/gpu": 1, "gpusched.io/gpu-core": 30, "gpusched.io/gpu-memory": 20000}
        shared_rate, restart_s, g2 = run_phase(cp, kube, "shared", "gpusched", share, start_gpusched)
        rss = rss_mib(g2.pid)
        g2.stop()
        bound = PREBOUND + 2 * PODS
        log(f"restart: process start to first bind {restart_s:.2f}s with {NODES} nodes and {bound} bound pods; "
            f"RSS {rss:.0f} MiB")
        print(f"RESULT nodes={NODES} pods={PODS} kube_pods_per_s={kube_rate:.0f} gpusched_pods_per_s={whole_rate:.0f} "
              f"gpusched_shared_pods_per_s={shared_rate:.0f} restart_to_first_bind_s={restart_s:.2f} "
              f"bound_at_restart={bound} rss_mib={rss:.0f}", flush=True)


if __name__ == "__main__":
    main()

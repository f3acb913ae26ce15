"""End-to-end: `gpusched-lab simulate --from-cluster` and `gpusched status` (also as the kubectl plugin
kubectl-gpusched) against a real kube-apiserver (control_plane.py, no
kube-scheduler), as a user bound to deploy/base/viewer's ClusterRole: get, list and watch on nodes and pods only.

The cluster: node-a with 4 fake GPUs and node-b with 2, each running a pod that holds its GPU 0 (bound with a
gpusched.io/allocation annotation, as gpusched's scheduler binds). The files ask for a 1-GPU pod, then a Deployment of
one 3-GPU replica, and hold a Service (ignored). binpack puts the 1-GPU pod on the fuller node-b and the 3-GPU one on
node-a; spread puts the first on node-a and the second then fits nowhere. Checks: both outcomes, the reason, that
the command made only get/list requests (the audit log) and changed nothing (the same pods, the same
resourceVersions), and that the same user cannot write (the RBAC is real). A file that does not parse exits 2.
`status` as the same reader: the node table, the GPU rows with the pods holding them, the totals, JSON, and the same
output through a link named kubectl-gpusched. `why` as the same reader: a bound pod's node and GPUs; a pending pod
of high priority asking 4 GPUs: its node classes, the closest node, and the lower-priority pod whose eviction would
make room.
Environment: as test_extender.py (GPUSCHED_BIN, GPUSCHED_LAB_BIN, GPUSCHED_K8S_BIN, GPUSCHED_ETCD, GPUSCHED_E2E_KEEP).
"""
import json
import os
import subprocess
import sys
import time
import unittest

import yaml  # python3-yaml (scripts/install-deps.sh)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rbac_audit  # noqa: E402
from control_plane import ControlPlane, lab_binary, suite_skip_reason, write_kubeconfig  # noqa: E402
from kube import ALLOCATION_ANNOTATION, Kube, KubeError, gpu_pod  # noqa: E402

READER = "whatif-reader"
RBAC = "/apis/rbac.authorization.k8s.io/v1"

FILES = """apiVersion: v1
kind: Pod
metadata: {name: small}
spec:
  containers:
  - name: main
    image: registry.invalid/cuda:12
    resources: {limits: {nvidia.com/gpu: 1}, requests: {cpu: 100m, memory: 128Mi}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: big}
spec:
  replicas: 1
  selector: {matchLabels: {app: big}}
  template:
    metadata: {labels: {app: big}}
    spec:
      containers:
      - name: main
        image: registry.invalid/cuda:12
        resources: {limits: {nvidia.com/gpu: 3}, requests: {cpu: 100m, memory: 128Mi}}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
"""


def log(msg):
    sys.stderr.write(f"[e2e-whatif {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


@unittest.skipIf(suite_skip_reason("simulate"), suite_skip_reason("simulate") or "")
class WhatIfTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cp = ControlPlane(kube_scheduler=False, log=log)
        cls.addClassCleanup(cls.cp.stop)
        cls.cp.start()
        cls.kube = cls.cp.kube()
        cls.kube.ensure_service_account("default")
        for name, gpus in (("node-a", 4), ("node-b", 2)):
            inventory = cls.kube.create_gpu_node(name, gpus=gpus)
            pod = gpu_pod(f"running-{name}", {"nvidia.com/gpu": 1})
            cls.kube.create("pods", pod)
            g = inventory[0]
            allocation = {"node": name, "id": 1, "containers": [{"name": "main", "gpus": [
                {"index": 0, "uuid": g["uuid"], "milli": 1000, "memory_mib": g["memory_mib"], "exclusive": True}]}]}
            cls.kube.bind(pod["metadata"]["name"], name,
                          annotations={ALLOCATION_ANNOTATION: json.dumps(allocation, separators=(",", ":"))})
        # The reader: bound to deploy/base/viewer's ClusterRole (get, list and watch on nodes and pods), nothing else.
        rbac_audit.apply_rbac(cls.kube, "deploy/base/viewer/viewer.yaml")
        cls.kube.call("POST", f"{RBAC}/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": READER},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpusched-viewer"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": READER}]})
        crt, key = cls.cp.pki.client_cert(READER, f"/CN={READER}")
        cls.kubeconfig = write_kubeconfig(os.path.join(cls.cp.dir, "reader.kubeconfig"), cls.cp.server,
                                          cls.cp.pki.ca_crt, crt, key)
        cls.files = os.path.join(cls.cp.dir, "pods.yaml")
        with open(cls.files, "w") as f:
            f.write(FILES)

    def whatif(self, *extra):
        argv = [lab_binary(), "simulate", "--from-cluster", "--kubeconfig", self.kubeconfig,
                "-f", self.files, *extra]
        log("$ " + " ".join(argv))
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        log(r.stdout + r.stderr)
        return r

    def snapshot(self):
        return sorted((p["metadata"]["name"], p["metadata"]["resourceVersion"], p["spec"].get("nodeName", ""))
                      for p in self.kube.list("pods"))

    def test_1_policies_differ_and_nothing_is_written(self):
        before = self.snapshot()
        nodes_before = sorted(n["metadata"]["resourceVersion"] for n in self.kube.list("nodes"))
        r = self.whatif("--policies", "spread,binpack")
        self.assertEqual(r.returncode, 0, r.stderr)
        out = r.stdout
        self.assertIn("cluster: 2 nodes, 6 GPUs, 2.0 GPUs of compute allocated to 2 pods; nothing was written", out)
        self.assertRegex(out, r"spread\s+1/2")
        self.assertRegex(out, r"binpack\s+2/2")
        self.assertIn("under binpack (places the most)", out)
        self.assertRegex(out, r"small\s+node-b\s+1\s")
        self.assertRegex(out, r"big-0\s+node-a\s+1,2,3\s")
        self.assertIn("ignored (makes no pods to place now)", r.stderr)
        self.assertIn("Service web", r.stderr)
        # Nothing changed.
        self.assertEqual(self.snapshot(), before)
        self.assertEqual(sorted(n["metadata"]["resourceVersion"] for n in self.kube.list("nodes")), nodes_before)
        # The reader only read (the audit log), and could not have written (the RBAC is enforced).
        requests = [q for q in rbac_audit.requests_of(rbac_audit.read_audit_log(self.cp.audit_log), READER)]
        self.assertTrue(requests, "the audit log has no request of the reader")
        self.assertEqual({q.verb for q in requests}, {"list"}, requests)
        self.assertTrue(all(q.code == 200 for q in requests), requests)

    def test_2_the_reader_cannot_write(self):
        crt, key = self.cp.pki.client_cert(READER + "-writer", f"/CN={READER}")
        reader = Kube("127.0.0.1", self.cp.port, self.cp.pki.ca_crt, crt, key)
        with self.assertRaises(KubeError) as refused:
            reader.create("pods", gpu_pod("sneaky", {"nvidia.com/gpu": 1}))
        self.assertEqual(refused.exception.status, 403)
        self.assertEqual(len(reader.list("pods")), 2)  # while it may read

    def test_3_a_bad_file_is_a_usage_error(self):
        bad = os.path.join(self.cp.dir, "bad.yaml")
        with open(bad, "w") as f:
            f.write("apiVersion: v1\nkind: Pod\nmetadata: {name: x\n")
        r = subprocess.run([lab_binary(), "simulate", "--from-cluster", "--kubeconfig", self.kubeconfig,
                            "-f", bad], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("bad.yaml", r.stderr)


    def status(self, *args, binary=None):
        argv = [binary or os.environ["GPUSCHED_BIN"], "status", "--kubeconfig", self.kubeconfig, *args]
        log("$ " + " ".join(argv))
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        log(r.stdout + r.stderr)
        return r

    def test_4_status(self):
        r = self.status()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"(?m)^NODE\s+MODEL\s+GPUS\s+HEALTHY\s+GPU COMPUTE\s+GPU MEMORY \(MiB\)\s+CPU\s+PODS$")
        self.assertRegex(r.stdout, r"(?m)^node-a\s+\S+\s+4\s+4\s+1\.00/4 \(25%\)")
        self.assertRegex(r.stdout, r"(?m)^node-b\s+\S+\s+2\s+2\s+1\.00/2 \(50%\)")
        self.assertIn("cluster: 2 nodes, 6 GPUs (6 healthy), 2.00 GPUs of compute allocated (33%), 4.00 free", r.stdout)
        wide = self.status("-o", "wide", "node-a")
        self.assertEqual(wide.returncode, 0, wide.stderr)
        self.assertRegex(wide.stdout, r"(?m)^  gpu 0\s+\S+\s+yes\s+\[##########\] 100%\s+\S+\s+default/running-node-a$")
        self.assertRegex(wide.stdout, r"(?m)^  gpu 3\s+\S+\s+yes\s+\[\.\.\.\.\.\.\.\.\.\.\]   0%\s+\S+\s+-$")
        self.assertNotIn("node-b", wide.stdout)
        j = json.loads(self.status("-o", "json").stdout)
        self.assertEqual(j["totals"]["allocated_milli"], 2000)
        self.assertEqual([g["pods"] for g in j["nodes"][1]["gpus"]], [["default/running-node-b"], []])
        # -o yaml: the same document (PyYAML reads it back equal).
        yaml_out = self.status("-o", "yaml")
        self.assertEqual(yaml_out.returncode, 0, yaml_out.stderr)
        self.assertIn("kind: GpuClusterStatus\n", yaml_out.stdout)
        self.assertEqual(yaml.safe_load(yaml_out.stdout), j)
        # The kubectl plugin: the same binary through a link named kubectl-gpusched.
        link = os.path.join(self.cp.dir, "bin", "kubectl-gpusched")
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if not os.path.exists(link):
            os.symlink(os.environ["GPUSCHED_BIN"], link)
        plugin = self.status(binary=link)
        self.assertEqual(plugin.returncode, 0, plugin.stderr)
        self.assertEqual(plugin.stdout, r.stdout)
        helped = subprocess.run([link, "--help"], capture_output=True, text=True, timeout=30)
        self.assertIn("kubectl gpusched", helped.stdout)
        missing = self.status("no-such-node")
        self.assertEqual(missing.returncode, 1)
        self.assertIn('node "no-such-node" not found', missing.stderr)

    def pod_lists(self):
        """How many times the reader has listed pods so far (the audit log)."""
        return sum(1 for q in rbac_audit.requests_of(rbac_audit.read_audit_log(self.cp.audit_log), READER)
                   if q.verb == "list" and q.resource == "pods")

    def test_5_why(self):
        bound = subprocess.run([os.environ["GPUSCHED_BIN"], "why", "running-node-a", "--kubeconfig", self.kubeconfig],
                               capture_output=True, text=True, timeout=60)
        log(bound.stdout + bound.stderr)
        self.assertEqual(bound.returncode, 0, bound.stderr)
        self.assertIn("pod default/running-node-a: Pending, placed on node-a", bound.stdout)
        self.assertIn("container main: GPU 0 (GPU-node-a-0, whole)", bound.stdout)
        self.kube.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "whatif-high"},
            "value": 1000})
        self.kube.create("pods", gpu_pod("needs-four", {"nvidia.com/gpu": 4}, priority_class="whatif-high"))
        r = subprocess.run([os.environ["GPUSCHED_BIN"], "why", "needs-four", "-n", "default", "--kubeconfig",
                            self.kubeconfig], capture_output=True, text=True, timeout=60)
        log(r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("pod default/needs-four: Pending", r.stdout)
        self.assertIn("needs: 4 whole GPUs", r.stdout)
        self.assertRegex(r.stdout, r"4x \S+: 1 node, ")
        self.assertIn("closest node-a: 3 of 4 GPUs wholly free", r.stdout)
        self.assertIn("what would make it fit: on node-a, evicting default/running-node-a (priority 0)", r.stdout)
        # Pods of gpusched's own scheduler wait in a GPU queue (here the default one: no GpuQueue API is served):
        # where the pod stands, what the queue holds, whether its quota admits the pod.
        for name, pc in (("queued-old", None), ("queued-urgent", "whatif-high"), ("queued-me", None)):
            pod = gpu_pod(name, {"nvidia.com/gpu": 1}, priority_class=pc)
            pod["spec"]["schedulerName"] = "gpusched"
            self.kube.create("pods", pod)
            time.sleep(1.1)  # creationTimestamp has one-second resolution: the order is by age
        lists_before = self.pod_lists()
        q = subprocess.run([os.environ["GPUSCHED_BIN"], "why", "queued-me", "--kubeconfig", self.kubeconfig],
                           capture_output=True, text=True, timeout=60)
        log(q.stdout + q.stderr)
        self.assertEqual(q.returncode, 0, q.stderr)
        # The cluster and the queue's view come from one list of the pods (the audit log has it once the command
        # has exited: blocking mode).
        self.assertEqual(self.pod_lists() - lists_before, 1, "why lists the pods more than once")
        self.assertIn("GPU queue default: 3rd of 3 pending pod(s) (the scheduler takes them by priority, then age); "
                      "ahead of it: default/queued-old (priority 0), default/queued-urgent (priority 1000)", q.stdout)
        self.assertIn("the queue holds gpus=2 milli=2000 memory=0Mi (2 running)", q.stdout)
        self.assertIn("quota: admitted", q.stdout)
        self.assertNotIn("GPU queue", r.stdout)  # needs-four is kube-scheduler's: no GPU queue
        missing = subprocess.run([os.environ["GPUSCHED_BIN"], "why", "no-such-pod", "--kubeconfig", self.kubeconfig],
                                 capture_output=True, text=True, timeout=60)
        self.assertEqual(missing.returncode, 1)
        self.assertIn("pod default/no-such-pod", missing.stderr)

if __name__ == "__main__":
    unittest.main()

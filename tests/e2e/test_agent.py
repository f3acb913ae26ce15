"""End-to-end: `gpusched agent` against a real kube-apiserver (control_plane.py; the scheduler runs but is not
used). The agent runs with fake GPUs, no kubelet (the device plugin retries its registration and says so) and:
  - publishes the node's GPU inventory into the annotation gpusched.io/gpus once, and not again while nothing
    changes, also across a restart;
  - labels its DCGM metrics with the pods that hold each GPU (from their gpusched.io/allocation annotations) and
    exports gpusched's allocation gauges;
  - exits 0 on SIGTERM;
  - runs as its ServiceAccount with deploy/base/agent/agent.yaml's RBAC, which grants exactly the verbs it used (rbac_audit).
Environment: as test_extender.py (GPUSCHED_BIN, GPUSCHED_K8S_BIN, GPUSCHED_ETCD, GPUSCHED_E2E_KEEP).
"""
import http.client
import json
import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from control_plane import (ControlPlane, Process, free_port, suite_skip_reason, wait_until,  # noqa: E402
                           write_kubeconfig)
from kube import ALLOCATION_ANNOTATION, GPUS_ANNOTATION, gpu_pod  # noqa: E402
import monitoring_check  # noqa: E402
import rbac_audit  # noqa: E402

NODE = "agent-node-0"
# gRPC's own log lines (absl format, "E1126 13:00:00.000000 ..."), which do not go through gpusched's logger.
GRPC_LOG_LINE = re.compile(r"^[DIWE]\d{4} \d\d:\d\d:\d\d")


def log(msg):
    sys.stderr.write(f"[e2e-agent {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


SKIP_REASON = suite_skip_reason("agent")


def http_get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class AgentE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cp = ControlPlane(log=log)
        cls.addClassCleanup(cls.cp.stop)
        cls.cp.start()
        cls.kube = cls.cp.kube()
        cls.kube.ensure_service_account("default")
        # A GPU node as the kubelet would register it: no inventory annotation yet.
        cls.kube.create("nodes", {"apiVersion": "v1", "kind": "Node",
                                  "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
                                  "spec": {}})
        # The agent runs with exactly deploy/base/agent/agent.yaml's permissions: a client certificate for its ServiceAccount's
        # user name, which that file's ClusterRoleBinding names. tearDownClass compares them with what it used.
        rbac_audit.apply_rbac(cls.kube, rbac_audit.AGENT.manifest)
        crt, key = cls.cp.pki.client_cert("agent", f"/CN={rbac_audit.AGENT.user}")
        cls.agent_kubeconfig = write_kubeconfig(os.path.join(cls.cp.dir, "agent.kubeconfig"), cls.cp.server,
                                                cls.cp.pki.ca_crt, crt, key)
        cls.port = free_port()
        cls.runs = []

    @classmethod
    def tearDownClass(cls):
        try:
            rbac_audit.check_component(cls.kube, cls.cp.audit_log, rbac_audit.AGENT, log=log)
        except AssertionError:
            cls.cp.keep_dir = True  # the audit log and the agents' logs, for a look afterwards
            raise

    def start_agent(self, extra=()):
        n = len(self.runs) + 1
        plugin_dir = os.path.join(self.cp.dir, "device-plugins")
        os.makedirs(plugin_dir, exist_ok=True)
        proc = Process(f"gpusched-agent-{n}",
                       [os.environ["GPUSCHED_BIN"], "agent", "--fake-gpus", "4xA100-80GB", "--node-name", NODE,
                        "--kubeconfig", self.agent_kubeconfig, "--listen", f"127.0.0.1:{self.port}",
                        "--interval", "0.2", "--device-plugin-dir", plugin_dir,
                        "--pod-resources-socket", os.path.join(self.cp.dir, "no-pod-resources.sock"), *extra],
                       os.path.join(self.cp.dir, f"agent-{n}.log"))
        self.runs.append(proc)
        self.addCleanup(proc.stop)

        def up():
            try:
                return http_get(self.port, "/healthz")[0] in (200, 503)
            except OSError:
                return False
        wait_until(up, 30, what="agent /healthz", alive=[proc])
        return proc

    def node(self):
        return self.kube.get("nodes", NODE)

    def test_agent(self):
        agent = self.start_agent()
        inventory = self.kube.wait_for(
            lambda: self.node()["metadata"].get("annotations", {}).get(GPUS_ANNOTATION), 30,
            what="the agent's gpusched.io/gpus annotation")
        gpus = json.loads(inventory)
        self.assertEqual([g["index"] for g in gpus], [0, 1, 2, 3])
        self.assertTrue(all(g["memory_mib"] == 81920 and g["model"] for g in gpus), gpus)
        self.assertTrue(all(g["uuid"].startswith("GPU-") for g in gpus), gpus)
        rv = self.node()["metadata"]["resourceVersion"]
        time.sleep(2)  # ten samples with moving utilisation: nothing to publish
        self.assertEqual(self.node()["metadata"]["resourceVersion"], rv, "the agent patched an unchanged inventory")

        # Without a kubelet the device plugin says why it is not registered, and keeps trying.
        status, body = http_get(self.port, "/healthz")
        self.assertEqual(status, 200, body)  # alive: a restart would not bring a kubelet
        self.assertIn("device plugin not registered", body)
        self.assertIn("kubelet", body)
        status, body = http_get(self.port, "/readyz")
        self.assertEqual(status, 503, body)  # not ready: no pod can get a GPU here
        self.assertIn("device plugin not registered with the kubelet", body)
        status, body = http_get(self.port, "/version")
        self.assertEqual((status, json.loads(body)["component"]), (200, "agent"), body)

        # A pod bound here with an allocation: its name appears on its GPU's series; the gauges count it.
        uuid = gpus[1]["uuid"]
        allocation = {"node": NODE, "id": 1, "containers": [{"name": "main", "gpus": [
            {"index": 1, "uuid": uuid, "milli": 300, "memory_mib": 20000, "exclusive": False}]}]}
        pod = gpu_pod("trainer", {"gpusched.io/gpu": 1, "gpusched.io/gpu-core": 30, "gpusched.io/gpu-memory": 20000},
                      annotations={ALLOCATION_ANNOTATION: json.dumps(allocation)})
        pod["spec"]["nodeName"] = NODE
        self.kube.create("pods", pod)

        def labelled():
            _, text = http_get(self.port, "/metrics")
            util = [line for line in text.splitlines()
                    if line.startswith("DCGM_FI_DEV_GPU_UTIL{") and f'UUID="{uuid}"' in line]
            allocated = [line for line in text.splitlines()
                         if line.startswith("gpusched_gpu_allocated_milli{") and f'uuid="{uuid}"' in line]
            return util and all('pod="trainer"' in u and 'namespace="default"' in u and 'container="main"' in u
                                for u in util) and allocated and allocated[0].endswith(" 300")
        self.kube.wait_for(labelled, 30, what="pod labels and allocation gauge on /metrics")
        # Every agent metric the alerts and the dashboard of deploy/monitoring use is there (the device plugin's
        # too: it runs, unregistered, without a kubelet), and `promtool check metrics` finds nothing but
        # dcgm-exporter's own label names on the DCGM_* series.
        _, text = http_get(self.port, "/metrics")
        self.assertEqual(monitoring_check.check_exposition(
            text, ["gpusched_agent_", "gpusched_gpu_", "gpusched_pod_", "DCGM_"]), [])
        self.assertEqual(monitoring_check.promtool_check_metrics(text), [])
        self.assertIn('gpusched_pod_gpu_allocated_milli{gpu="1",uuid="' + uuid, text)

        # The first agent logs text lines: an RFC 3339 UTC timestamp, the level, the component.
        with open(agent.log_path, errors="replace") as f:
            lines = [x for x in f.read().splitlines()[1:] if not GRPC_LOG_LINE.match(x)]
        self.assertTrue(lines)
        for line in lines:
            self.assertRegex(line, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z (debug|info|warning|error) agent: ")

        # A restarted agent with the same GPUs patches nothing. This one logs JSON, kube-style verbose.
        agent.stop()
        self.assertEqual(agent.proc.returncode, 0, agent.tail(20))
        agent = self.start_agent(extra=("--log-format", "json", "--v=4"))
        self.kube.wait_for(lambda: http_get(self.port, "/metrics")[0] == 200, 10, what="/metrics after restart")
        time.sleep(2)
        self.assertEqual(self.node()["metadata"]["resourceVersion"], rv, "a restarted agent patched the node")
        agent.stop()
        self.assertEqual(agent.proc.returncode, 0, agent.tail(20))
        with open(agent.log_path, errors="replace") as f:
            lines = [x for x in f.read().splitlines()[1:] if not GRPC_LOG_LINE.match(x)]
        self.assertTrue(lines)
        for line in lines:
            entry = json.loads(line)
            self.assertEqual(sorted(entry), ["component", "level", "msg", "ts"], line)
            self.assertEqual(entry["component"], "agent")
            self.assertIn(entry["level"], ("debug", "info", "warning", "error"))
        for p in self.runs:
            with open(p.log_path, errors="replace") as f:
                self.assertNotRegex(f.read(), r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:", p.log_path)


if __name__ == "__main__":
    unittest.main()

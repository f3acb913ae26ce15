"""End-to-end: `gpusched doctor` against a real kube-apiserver (control_plane.py, no kube-scheduler).

A healthy scheduler-mode setup first: deploy/base/scheduler's GpuQueue CRD; the ServiceAccounts, roles and bindings
of deploy/base/{scheduler,webhook,agent}; deploy/base/webhook/webhook.yaml's two webhook configurations as that file
documents for Kubernetes < 1.28 (as test_webhook.py registers them), pointed at `gpusched webhook` on 127.0.0.1 with
the test CA as caBundle; a GPU node with the agent's inventory annotation and the device plugin's resources in
allocatable; an agent pod on it (Running, its IP this machine's non-loopback address) whose /readyz is served by a
real `gpusched agent --standalone` there, for the API server's pod proxy; and the scheduler's Lease, held and
renewed. Doctor says ok on every line and exits 0 (text and JSON).

Then broken one way at a time, each restored afterwards: the CRD deleted, a caBundle removed, an expired
certificate as caBundle, the webhook stopped with failurePolicy Fail (the dry run fails), the node's inventory
annotation removed, the Lease expired, a rule of the scheduler's ClusterRole removed: each gives FAIL on the check
that names it and exit 1. And an API server that is not there (a free port): the first line names the URL.
Environment: as test_extender.py (GPUSCHED_BIN, GPUSCHED_K8S_BIN, GPUSCHED_ETCD, GPUSCHED_E2E_KEEP).
"""
import base64
import datetime
import json
import os
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from control_plane import (REPO_ROOT, ControlPlane, Process, free_port, suite_skip_reason,  # noqa: E402
                           wait_until, write_kubeconfig)
from kube import GPUS_ANNOTATION  # noqa: E402
import rbac_audit  # noqa: E402
from test_webhook import deploy_document, pre_128_variant  # noqa: E402

NODE = "doc-node-1"
AGENT_POD = "gpusched-agent-doc"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpusched-scheduler"
CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gpuqueues.gpusched.io"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gpusched-webhook"
VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/gpusched-webhook"
SCHEDULER_ROLE = "/apis/rbac.authorization.k8s.io/v1/clusterroles/gpusched-scheduler"

SKIP_REASON = suite_skip_reason("doctor")


def log(msg):
    sys.stderr.write(f"[e2e-doctor {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def now_micro(delta_s=0.0):
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=delta_s)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def host_ip():
    """This machine's address on its default route (not loopback: the API server's pod proxy refuses loopback)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))  # no packet is sent: connect() on UDP only picks the route
        ip = s.getsockname()[0]
    except OSError:
        return None
    finally:
        s.close()
    return None if ip.startswith("127.") else ip


def webhook_pki(dir):
    """A CA of its own for the webhook, lasting 825 days like scripts/webhook-certs.sh's (the control plane's test CA
    lasts 3 days, which doctor rightly warns about), and a serving certificate for 127.0.0.1 signed by it.
    Returns (ca.crt, tls.crt, tls.key)."""
    os.makedirs(dir, exist_ok=True)
    with open(os.path.join(dir, "tls.ext"), "w") as f:
        f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n")
    for argv in (["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                  "ca.key", "-out", "ca.crt", "-days", "825", "-subj", "/CN=gpusched-webhook-ca",
                  "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"],
                 ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                  "tls.key", "-out", "tls.csr", "-subj", "/CN=gpusched-webhook"],
                 ["x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                  "-days", "825", "-sha256", "-extfile", "tls.ext", "-out", "tls.crt"]):
        subprocess.run(["openssl", *argv], cwd=dir, check=True, capture_output=True)
    return tuple(os.path.join(dir, n) for n in ("ca.crt", "tls.crt", "tls.key"))


def expired_ca(dir):
    """A self-signed CA certificate valid 2020-01-01 to 2020-01-02 only (openssl ca sets both dates)."""
    os.makedirs(dir, exist_ok=True)
    with open(os.path.join(dir, "ca.cnf"), "w") as f:
        f.write("[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\nnew_certs_dir = .\nserial = serial\n"
                "default_md = sha256\npolicy = p\n[p]\ncommonName = supplied\n")
    open(os.path.join(dir, "index.txt"), "w").close()
    with open(os.path.join(dir, "serial"), "w") as f:
        f.write("01\n")
    for argv in (["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                  "e.key", "-out", "e.csr", "-subj", "/CN=doctor-expired-ca"],
                 ["ca", "-batch", "-config", "ca.cnf", "-selfsign", "-keyfile", "e.key", "-in", "e.csr", "-out",
                  "e.crt", "-startdate", "20200101000000Z", "-enddate", "20200102000000Z"]):
        subprocess.run(["openssl", *argv], cwd=dir, check=True, capture_output=True)
    with open(os.path.join(dir, "e.crt"), "rb") as f:
        return base64.b64encode(f.read()).decode()


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class DoctorE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cp = ControlPlane(log=log, kube_scheduler=False)
        cls.addClassCleanup(cls.cp.stop)
        cls.cp.start()
        cp = cls.cp
        cls.admin = cp.kube()
        admin = cls.admin
        for ns in ("default", "kube-system"):
            admin.ensure_service_account("default", namespace=ns)
        with open(os.path.join(REPO_ROOT, "deploy", "base", "scheduler", "gpuqueue-crd.yaml")) as f:
            cls.crd_yaml = f.read()
        cls.create_crd()
        for c in (rbac_audit.SCHEDULER, rbac_audit.WEBHOOK, rbac_audit.AGENT):
            rbac_audit.apply_rbac(admin, c.manifest)

        # The webhook on 127.0.0.1, calling no API (neither --events nor --queues).
        ca_crt, cls.webhook_crt, cls.webhook_key = webhook_pki(os.path.join(cp.dir, "webhook-pki"))
        cls.webhook_port = free_port()
        cls.start_webhook()
        with open(ca_crt, "rb") as f:
            cls.ca_bundle = base64.b64encode(f.read()).decode()
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            admin.apply_yaml(pre_128_variant(deploy_document(kind), f"https://127.0.0.1:{cls.webhook_port}",
                                             cls.ca_bundle))
        wait_until(cls.dry_run_mutated, 30, what="the API server to call the mutating webhook",
                   alive=[cls.webhook])

        # A GPU node as the agent leaves it: inventory annotation, device plugin resources in allocatable.
        inventory = [{"uuid": f"GPU-{NODE}-{i}", "index": i, "model": "A100-SXM4-80GB", "memory_mib": 81920}
                     for i in range(2)]
        cls.inventory = json.dumps(inventory, separators=(",", ":"))
        admin.create_ready_node(NODE, {"kubernetes.io/hostname": NODE, "nvidia.com/gpu.present": "true"},
                                {GPUS_ANNOTATION: cls.inventory},
                                {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "2",
                                 "gpusched.io/gpu": "20", "keti.com/mpsgpu": "20"})

        # The agent's pod on it, Running at this machine's address, with a real agent's /readyz behind it.
        cls.ip = host_ip()
        cls.agent = None
        if cls.ip:
            agent_port = free_port()
            cls.agent = Process("gpusched-agent", [os.environ["GPUSCHED_BIN"], "agent", "--standalone",
                                                   "--fake-gpus", "2xA100-80GB", "--mps", "off", "--listen",
                                                   f"{cls.ip}:{agent_port}"],
                                os.path.join(cp.dir, "agent.log"))
            cls.addClassCleanup(cls.agent.stop)
            admin.create("pods", {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": AGENT_POD, "labels": {"app.kubernetes.io/name": "gpusched-agent"}},
                "spec": {"nodeName": NODE, "automountServiceAccountToken": False,
                         "containers": [{"name": "agent", "image": "gpusched:e2e",
                                         "ports": [{"name": "metrics", "containerPort": agent_port}],
                                         "readinessProbe": {"httpGet": {"path": "/readyz", "port": "metrics"}}}]}},
                namespace="kube-system")
            admin.patch("pods", AGENT_POD, {"status": {"phase": "Running", "podIP": cls.ip,
                                                       "podIPs": [{"ip": cls.ip}]}},
                        namespace="kube-system", sub="status")
        else:
            log("no non-loopback address here: agent-readiness will warn (the pod proxy refuses loopback)")

        # The scheduler's Lease, held.
        admin.call("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "gpusched-scheduler", "namespace": "kube-system"},
            "spec": {"holderIdentity": "gpusched-scheduler-e2e", "leaseDurationSeconds": 15,
                     "acquireTime": now_micro(), "renewTime": now_micro()}})

    @classmethod
    def create_crd(cls):
        cls.admin.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", cls.crd_yaml,
                       content_type="application/yaml")

        def established():
            status, body = cls.admin.raw("GET", CRD)
            return status == 200 and any(c.get("type") == "Established" and c.get("status") == "True"
                                         for c in (body.get("status") or {}).get("conditions") or [])
        wait_until(established, 30, what="the GpuQueue CRD to be Established")

    @classmethod
    def start_webhook(cls):
        cls.webhook = Process("gpusched-webhook",
                              [os.environ["GPUSCHED_BIN"], "webhook", "--listen", f"127.0.0.1:{cls.webhook_port}",
                               "--tls-cert", cls.webhook_crt, "--tls-key", cls.webhook_key],
                              os.path.join(cls.cp.dir, "webhook.log"))
        cls.addClassCleanup(lambda w=cls.webhook: w.stop())

    @classmethod
    def dry_run_mutated(cls):
        status, body = cls.admin.raw("POST", "/api/v1/namespaces/default/pods?dryRun=All", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e2e-probe"},
            "spec": {"automountServiceAccountToken": False, "containers": [{
                "name": "c", "image": "x", "resources": {"limits": {"gpusched.io/gpu-memory": "1024"}}}]}})
        return status == 201 and "gpusched.io/gpu" in body["spec"]["containers"][0]["resources"]["limits"]

    def renew_lease(self, delta_s=0.0):
        lease = self.admin.call("GET", LEASE)
        lease["spec"]["renewTime"] = now_micro(delta_s)
        self.admin.call("PUT", LEASE, lease)

    def doctor(self, *args, kubeconfig=None, renew=True):
        if renew:
            self.renew_lease()
        argv = [os.environ["GPUSCHED_BIN"], "doctor", "--kubeconfig", kubeconfig or self.cp.kubeconfig, *args]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=180)
        log(f"gpusched doctor {' '.join(args)} -> {res.returncode}\n{res.stdout}{res.stderr}")
        return res.returncode, res.stdout.splitlines()

    def line(self, lines, prefix):
        found = [ln for ln in lines if ln.startswith(prefix)]
        self.assertTrue(found, f"no line starting {prefix!r} in:\n" + "\n".join(lines))
        return found[0]

    def assertOnlyFailing(self, lines, check):
        """Exactly the lines of `check` fail; every other check is ok (or the agent check's known warning)."""
        for ln in lines:
            name = ln[6:].split(":", 1)[0]
            if name == check:
                continue
            self.assertTrue(ln.startswith("ok    ") or (self.agent is None and name == "agent-readiness"), ln)

    def test_0_unreachable_api_server(self):
        port = free_port()
        kubeconfig = write_kubeconfig(os.path.join(self.cp.dir, "nowhere.kubeconfig"), f"https://127.0.0.1:{port}",
                                      self.cp.pki.ca_crt, self.cp.pki.admin_crt, self.cp.pki.admin_key)
        rc, lines = self.doctor("--timeout", "3", kubeconfig=kubeconfig, renew=False)
        self.assertEqual(rc, 1)
        self.assertEqual(len(lines), 1, lines)  # nothing else is tried
        self.assertTrue(lines[0].startswith(f"FAIL  api-server: cannot reach the API server at "
                                            f"https://127.0.0.1:{port}: "), lines[0])
        self.assertIn("fix: check the server URL of the kubeconfig", lines[0])

    def test_0_usage_error(self):
        res = subprocess.run([os.environ["GPUSCHED_BIN"], "doctor", "--mode", "schedular"], capture_output=True,
                             text=True, timeout=30)
        self.assertEqual(res.returncode, 2, res.stderr)
        self.assertIn("--mode", res.stderr)
        self.assertIn("schedular", res.stderr)

    def test_1_agent_mode(self):
        rc, lines = self.doctor("--mode", "agent")
        self.assertEqual(rc, 0, lines)
        self.assertOnlyFailing(lines, None)
        checks = [ln[6:].split(":", 1)[0] for ln in lines]
        self.assertEqual(sorted(set(checks)), ["agent-readiness", "api-server", "device-plugin", "node-inventory",
                                               "rbac"])
        self.assertEqual(self.line(lines, "ok    rbac:"),
                         "ok    rbac: system:serviceaccount:kube-system:gpusched-agent: all 7 grants of "
                         "deploy/base/agent/agent.yaml allowed")

    def test_1_healthy(self):
        rc, lines = self.doctor()
        self.assertEqual(rc, 0, lines)
        self.assertOnlyFailing(lines, None)
        checks = [ln[6:].split(":", 1)[0] for ln in lines]
        for want in ("api-server", "crd", "webhook-config", "webhook-ca", "webhook-dry-run", "node-inventory",
                     "device-plugin", "agent-readiness", "leader-lease", "rbac"):
            self.assertIn(want, checks)
        self.assertEqual(checks.count("rbac"), 3, lines)  # scheduler, webhook, agent
        self.assertIn("reachable at https://127.0.0.1:", lines[0])
        self.assertIn("Kubernetes v1.", lines[0])
        self.assertIn("1 of 1 GPU node carry gpusched.io/gpus (2 GPUs)", self.line(lines, "ok    node-inventory"))
        self.assertIn("held by gpusched-scheduler-e2e", self.line(lines, "ok    leader-lease"))
        if self.agent is not None:
            self.assertIn("1 of 1 agents ready", self.line(lines, "ok    agent-readiness"))

        rc, out = self.doctor("-o", "json")
        self.assertEqual(rc, 0)
        report = json.loads("\n".join(out))
        self.assertEqual(report["kind"], "GpuschedDoctorReport")
        self.assertEqual(report["mode"], "scheduler")
        self.assertTrue(report["ok"])
        self.assertEqual(report["counts"]["fail"], 0)
        self.assertEqual(len(report["findings"]), len(lines))

    def test_2_crd_deleted(self):
        self.admin.call("DELETE", CRD)
        wait_until(lambda: self.admin.raw("GET", CRD)[0] == 404, 30, what="the CRD to be gone")
        try:
            rc, lines = self.doctor()
            self.assertEqual(rc, 1)
            self.assertTrue(self.line(lines, "FAIL  crd:").startswith(
                "FAIL  crd: gpuqueues.gpusched.io not found; fix: install it: kubectl apply -k deploy/scheduler"))
            # The scheduler's grants on gpuqueues are RBAC rules: they hold with or without the CRD.
            self.assertOnlyFailing(lines, "crd")
        finally:
            self.create_crd()

    def patch_webhook(self, path, ops):
        self.admin.call("PATCH", path, ops, content_type="application/json-patch+json")

    def test_3_ca_bundle_removed(self):
        self.patch_webhook(MUTATING, [{"op": "remove", "path": "/webhooks/0/clientConfig/caBundle"}])
        try:
            rc, lines = self.doctor()
            self.assertEqual(rc, 1)
            self.assertTrue(self.line(lines, "FAIL  webhook-ca: MutatingWebhookConfiguration").startswith(
                "FAIL  webhook-ca: MutatingWebhookConfiguration gpusched-webhook: no caBundle in webhook "
                "complete.gpu.gpusched.io; fix: by default the webhook patches caBundle itself once it runs"))
        finally:
            self.patch_webhook(MUTATING, [{"op": "add", "path": "/webhooks/0/clientConfig/caBundle",
                                           "value": self.ca_bundle}])

    def test_4_expired_certificate(self):
        expired = expired_ca(os.path.join(self.cp.dir, "expired"))
        ops = lambda b: [{"op": "replace", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": b}
                         for i in range(len(self.admin.call("GET", VALIDATING)["webhooks"]))]
        self.patch_webhook(VALIDATING, ops(expired))
        try:
            rc, lines = self.doctor()
            self.assertEqual(rc, 1)
            line = self.line(lines, "FAIL  webhook-ca: ValidatingWebhookConfiguration gpusched-webhook:")
            self.assertIn("has certificate CN=doctor-expired-ca that expired 2020-01-02T00:00:00Z", line)
            self.assertEqual(line.count("doctor-expired-ca"), 1, line)  # one bundle, its five webhooks named once
            self.assertIn("fix: renew the webhook's CA and serving certificate", line)
        finally:
            self.patch_webhook(VALIDATING, ops(self.ca_bundle))

    def test_5_webhook_stopped_with_failure_policy_fail(self):
        paths = (MUTATING, VALIDATING)

        def set_policy(policy):
            for path in paths:
                n = len(self.admin.call("GET", path)["webhooks"])
                self.patch_webhook(path, [{"op": "replace", "path": f"/webhooks/{i}/failurePolicy", "value": policy}
                                          for i in range(n)])
        set_policy("Fail")
        self.webhook.stop()
        try:
            def refused():
                status, body = self.admin.raw("POST", "/api/v1/namespaces/default/pods?dryRun=All", {
                    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e2e-probe"},
                    "spec": {"automountServiceAccountToken": False, "containers": [{"name": "c", "image": "x"}]}})
                return status >= 400 and "failed calling webhook" in json.dumps(body)
            wait_until(refused, 30, what="the API server to use failurePolicy Fail")
            rc, lines = self.doctor()
            self.assertEqual(rc, 1)
            line = self.line(lines, "FAIL  webhook-dry-run:")
            self.assertIn("the API server could not call the webhook for a dry-run GPU pod in namespace default", line)
            self.assertIn("failed calling webhook", line)
            self.assertIn("connection refused", line)
            self.assertOnlyFailing(lines, "webhook-dry-run")
        finally:
            set_policy("Ignore")
            self.start_webhook()
            wait_until(self.dry_run_mutated, 30, what="the webhook to answer again", alive=[self.webhook])

    def test_6_node_annotation_removed(self):
        self.admin.patch("nodes", NODE, {"metadata": {"annotations": {GPUS_ANNOTATION: None}}})
        try:
            rc, lines = self.doctor()
            self.assertEqual(rc, 1)
            self.assertTrue(self.line(lines, "FAIL  node-inventory:").startswith(
                f"FAIL  node-inventory: 0 of 1 GPU node carry gpusched.io/gpus; without: {NODE}; fix: the agent "
                "writes it"))
            self.assertTrue(self.line(lines, "warn  device-plugin:").startswith(
                "warn  device-plugin: not checked: no node carries the agent's inventory"))
        finally:
            self.admin.patch("nodes", NODE, {"metadata": {"annotations": {GPUS_ANNOTATION: self.inventory}}})

    def test_7_lease_expired(self):
        self.renew_lease(-60)
        rc, lines = self.doctor(renew=False)
        self.assertEqual(rc, 1)
        line = self.line(lines, "FAIL  leader-lease:")
        self.assertTrue(line.startswith("FAIL  leader-lease: Lease kube-system/gpusched-scheduler held by "
                                        "gpusched-scheduler-e2e was last renewed 1m"), line)
        self.assertIn("past its 15s duration", line)
        self.assertOnlyFailing(lines, "leader-lease")

    def test_8_role_rule_removed(self):
        role = self.admin.call("GET", SCHEDULER_ROLE)
        original = json.loads(json.dumps(role))
        role["rules"] = [r for r in role["rules"] if r["resources"] != ["pods/eviction"]]
        self.assertEqual(len(role["rules"]), len(original["rules"]) - 1)
        self.admin.call("PUT", SCHEDULER_ROLE, role)
        user = rbac_audit.SCHEDULER.user

        def refused():
            review = self.admin.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
                "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": user, "resourceAttributes": {"verb": "create", "resource": "pods",
                                                              "subresource": "eviction"}}})
            return not review["status"].get("allowed", False)
        try:
            wait_until(refused, 30, what="the authorizer to see the changed role")
            rc, lines = self.doctor()
            self.assertEqual(rc, 1)
            line = self.line(lines, f"FAIL  rbac: {user}:")
            self.assertIn("grants refused: create pods/eviction; fix: reapply its roles and bindings (ClusterRole "
                          "gpusched-scheduler): kubectl apply -k deploy/scheduler", line)
            self.assertOnlyFailing(lines, "rbac")
        finally:
            current = self.admin.call("GET", SCHEDULER_ROLE)
            original["metadata"] = current["metadata"]
            self.admin.call("PUT", SCHEDULER_ROLE, original)


if __name__ == "__main__":
    unittest.main()

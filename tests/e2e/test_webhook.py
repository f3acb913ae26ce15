"""End-to-end: `gpusched webhook` behind a real kube-apiserver (control_plane.py; admission webhooks are on by
default since 1.9). The test registers deploy/base/webhook/webhook.yaml's MutatingWebhookConfiguration and
ValidatingWebhookConfiguration changed only as that file documents for Kubernetes < 1.28 (matchConditions removed,
failurePolicy Ignore) and pointed at a URL on 127.0.0.1, with no caBundle. The webhook runs there as in the install
(--self-signed-ca-secret, as its ServiceAccount with the file's roles), with --extra-san 127.0.0.1 since the API
server reaches it by URL: it makes its CA Secret kube-system/gpusched-webhook-ca, patches the CA into caBundle of
every webhook of both configurations, and serves a certificate from it, with no other step. A restart keeps the CA.
Then, in namespace team-a (config: GPU pods there get schedulerName gpusched, so kube-scheduler leaves them alone):
  - alice (client certificate CN=alice, edit's verbs on pods in team-a) cannot create a pod with a forged
    gpusched.io/allocation, nor change or remove it on an existing pod by PATCH; the reason names the annotation
    and the user;
  - the extender's identity (deploy/base/extender/rbac.yaml's ServiceAccount, as a client certificate) may set it by PATCH and in a
    Binding; the cluster admin, not listed, may not bind with it;
  - gpu-core 150, exclusive and shared names mixed in a container, and a malformed model list are refused at
    admission with the reason;
  - memory-only pods (aliyun.com/gpu-mem: 8, gpusched.io/gpu-memory: 20000) are stored with gpusched.io/gpu: 1;
    a pod with Genius's labels (genius/gpu-number: 2) with gpusched.io/gpu: 2;
  - a pod without GPU resources is stored unchanged;
  - with the webhook stopped (SIGTERM, exit 0), a pod without GPU resources is still admitted (failurePolicy Ignore:
    the < 1.28 variant; on >= 1.28 matchConditions keep the API server from calling the webhook for it at all).
Also a server-side dry run of deploy/base/webhook/webhook.yaml. Environment: as test_extender.py (GPUSCHED_BIN, GPUSCHED_K8S_BIN,
GPUSCHED_ETCD, GPUSCHED_E2E_KEEP).
"""
import base64
import http.client
import json
import os
import re
import ssl
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from control_plane import (REPO_ROOT, ControlPlane, Process, free_port, suite_skip_reason,  # noqa: E402
                           wait_until, write_kubeconfig)
from kube import ALLOCATION_ANNOTATION, Kube, KubeError, gpu_pod  # noqa: E402
import monitoring_check  # noqa: E402
import rbac_audit  # noqa: E402

NS = "team-a"
ALICE = "alice"
EXTENDER_USER = "system:serviceaccount:kube-system:gpusched-extender"  # deploy/base/extender/rbac.yaml
DEPLOY = os.path.join(REPO_ROOT, "deploy", "base", "webhook", "webhook.yaml")
QUEUES = "/apis/gpusched.io/v1alpha1/gpuqueues"
ALLOCATION = json.dumps({"node": "wh-node-1", "id": 1, "containers": [{"name": "main", "gpus": [
    {"index": 0, "uuid": "GPU-wh-node-1-0", "milli": 300, "memory_mib": 20000, "exclusive": False}]}]})
CA_SECRET = "gpusched-webhook-ca"
SHARE = {"gpusched.io/gpu": 1, "gpusched.io/gpu-core": 30, "gpusched.io/gpu-memory": 20000}


def log(msg):
    sys.stderr.write(f"[e2e-webhook {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


SKIP_REASON = suite_skip_reason("webhook")


def deploy_documents():
    """deploy/base/webhook/webhook.yaml's documents as (kind, text), in file order."""
    with open(DEPLOY) as f:
        docs = [d for d in re.split(r"(?m)^---\s*$", f.read()) if re.search(r"(?m)^kind:", d)]
    return [(re.search(r"(?m)^kind:\s*(\S+)", d).group(1), d) for d in docs]


def deploy_document(kind):
    """The one document of deploy/base/webhook/webhook.yaml of that kind."""
    docs = [d for k, d in deploy_documents() if k == kind]
    if len(docs) != 1:
        raise AssertionError(f"deploy/base/webhook/webhook.yaml: {len(docs)} documents of kind {kind}, expected 1")
    return docs[0]


def webhook_args(port, cert_dir, config, kubeconfig):
    """`gpusched webhook` as the Deployment runs it (its own certificate), on 127.0.0.1:port."""
    return [os.environ["GPUSCHED_BIN"], "webhook", "--listen", f"127.0.0.1:{port}",
            "--self-signed-ca-secret", CA_SECRET, "--namespace", "kube-system", "--service", "gpusched-webhook",
            "--mutating-webhook-configuration", "gpusched-webhook",
            "--validating-webhook-configuration", "gpusched-webhook",
            "--extra-san", "127.0.0.1", "--cert-dir", cert_dir,
            "--config", config, "--events", "--queues", "--kubeconfig", kubeconfig]


def pre_128_variant(doc, url, ca_bundle=None):
    """A webhook configuration of deploy/base/webhook/webhook.yaml as its header tells clusters < 1.28 to change it (no
    matchConditions, failurePolicy Ignore), served at `url` instead of the Service."""
    webhooks = len(re.findall(r"(?m)^- name: ", doc))
    # Each webhook with matchConditions is failurePolicy Fail (the pod webhooks); the others are Ignore already.
    conditioned = len(re.findall(r"(?m)^  matchConditions:$", doc))
    subs = [(r"(?m)^  matchConditions:\n(?:(?:  - | {4,}).*\n?)*", "", conditioned),
            (r"(?m)^(  failurePolicy:) Fail$", r"\g<1> Ignore", conditioned),
            (r"(?m)^(    )service: \{[^}\n]*path: (/\w+)[^}\n]*\}$",
             rf"\g<1>url: {url}\g<2>" + (rf"\n\g<1>caBundle: {ca_bundle}" if ca_bundle else ""), webhooks)]
    for pattern, repl, want in subs:
        doc, n = re.subn(pattern, repl, doc)
        if n != want:
            raise AssertionError(f"deploy/base/webhook/webhook.yaml: expected {want} matches of {pattern!r}, found {n}")
    if re.search(r"(?m)^  failurePolicy: Fail$", doc):
        raise AssertionError("deploy/base/webhook/webhook.yaml: a Fail webhook without matchConditions")
    return doc


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class WebhookE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cp = ControlPlane(log=log)
        cls.addClassCleanup(cls.cp.stop)
        cls.cp.start()
        cp = cls.cp
        cls.admin = cp.kube()
        cls.admin.ensure_namespace(NS)
        cls.admin.ensure_service_account("default", namespace=NS)
        cls.admin.create_gpu_node("wh-node-1", gpus=1)
        # The extender's identity with exactly deploy/base/extender/rbac.yaml's permissions; alice with `edit` in team-a.
        with open(os.path.join(REPO_ROOT, "deploy", "base", "extender", "rbac.yaml")) as f:
            cls.admin.apply_yaml(f.read())
        # `edit` is an aggregated ClusterRole, filled by kube-controller-manager, which does not run here: give
        # alice edit's verbs on pods under another name.
        cls.admin.call("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "e2e-pod-editor"},
            "rules": [{"apiGroups": [""], "resources": ["pods"],
                       "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]}]})
        cls.admin.bind_cluster_role(ALICE, "e2e-pod-editor", NS)
        cls.alice = Kube("127.0.0.1", cp.port, cp.pki.ca_crt, *cp.pki.client_cert("alice", f"/CN={ALICE}"))
        cls.extender = Kube("127.0.0.1", cp.port, cp.pki.ca_crt,
                            *cp.pki.client_cert("extender", f"/CN={EXTENDER_USER}"))
        wait_until(lambda: cls.alice.raw("GET", f"/api/v1/namespaces/{NS}/pods")[0] == 200, 30,
                   what="alice's RoleBinding to take effect")

        # The webhook: default allowedUsers; GPU pods of team-a get gpusched's scheduler.
        config = os.path.join(cp.dir, "webhook.yaml")
        with open(config, "w") as f:
            f.write(f"schedulerName: gpusched\nnamespaces: [{NS}]\n")
        # --events as its ServiceAccount, with exactly deploy/base/webhook/webhook.yaml's role (tearDownClass
        # compares it with what the webhook used).
        rbac_audit.apply_rbac(cls.admin, rbac_audit.WEBHOOK.manifest)
        wcrt, wkey = cp.pki.client_cert("webhook-sa", f"/CN={rbac_audit.WEBHOOK.user}")
        kubeconfig = write_kubeconfig(os.path.join(cp.dir, "webhook.kubeconfig"), cp.server, cp.pki.ca_crt, wcrt,
                                      wkey)
        # The GpuQueue CRD, as the scheduler's install ships it (the webhook judges its objects), and another team's
        # queue, before the webhook starts: --queues lists them at start (then every 30 s).
        with open(os.path.join(REPO_ROOT, "deploy", "base", "scheduler", "gpuqueue-crd.yaml")) as f:
            cls.admin.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", f.read(),
                           content_type="application/yaml")
        wait_until(lambda: cls.admin.raw("GET", QUEUES)[0] == 200, 30, what="the GpuQueue CRD to be served")
        cls.admin.call("POST", QUEUES, {"apiVersion": "gpusched.io/v1alpha1", "kind": "GpuQueue",
                                        "metadata": {"name": "wh-team-b"}, "spec": {"namespaces": ["wh-team-b"]}})
        cls.port = free_port()
        # deploy/base/webhook/webhook.yaml's configurations, as documented for clusters < 1.28, at the webhook's URL,
        # with no caBundle: the webhook fills it.
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            cls.admin.apply_yaml(pre_128_variant(deploy_document(kind), f"https://127.0.0.1:{cls.port}"))
        cls.webhook_argv = lambda cert_dir: webhook_args(cls.port, cert_dir, config, kubeconfig)
        cls.webhook = Process("gpusched-webhook", cls.webhook_argv(os.path.join(cp.dir, "webhook-certs")),
                              os.path.join(cp.dir, "webhook.log"))
        cls.addClassCleanup(lambda: cls.webhook.stop())
        # It serves only once its certificate is made and caBundle patched.
        cls.ca_pem = wait_until(lambda: cls.secret_ca(), 30, what=f"Secret kube-system/{CA_SECRET}",
                                alive=[cls.webhook])
        cls.ca_file = os.path.join(cp.dir, "webhook-ca.crt")
        with open(cls.ca_file, "w") as f:
            f.write(cls.ca_pem)
        cls.tls = ssl.create_default_context(cafile=cls.ca_file)
        wait_until(lambda: cls.https_get("/healthz")[0] == 200, 30, what="webhook /healthz", alive=[cls.webhook])

        # The API server picks configurations up from its informer: wait until a dry run is refused.
        def refused():
            status, body = cls.alice.raw("POST", f"/api/v1/namespaces/{NS}/pods?dryRun=All",
                                         gpu_pod("probe", {"gpusched.io/gpu-core": 150}))
            return status == 422 and "gpu-core 150" in json.dumps(body)
        wait_until(refused, 30, what="the API server to call the webhook", alive=[cls.webhook])

    @classmethod
    def secret_ca(cls):
        """ca.crt of the webhook's CA Secret, or None while there is none."""
        status, secret = cls.admin.raw("GET", f"/api/v1/namespaces/kube-system/secrets/{CA_SECRET}")
        if status != 200:
            return None
        return base64.b64decode(secret["data"]["ca.crt"]).decode()

    @classmethod
    def served_certificate(cls):
        """The certificate the webhook serves (PEM), verified against its CA for 127.0.0.1."""
        conn = http.client.HTTPSConnection("127.0.0.1", cls.port, timeout=5, context=cls.tls)
        try:
            conn.connect()
            return ssl.DER_cert_to_PEM_cert(conn.sock.getpeercert(binary_form=True))
        finally:
            conn.close()

    def assertCaBundles(self, ca_pem):
        """Every webhook of both configurations trusts exactly `ca_pem`."""
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            config = self.admin.call("GET", f"/apis/admissionregistration.k8s.io/v1/{kind}/gpusched-webhook")
            self.assertGreater(len(config["webhooks"]), 0)
            for w in config["webhooks"]:
                self.assertEqual(base64.b64decode(w["clientConfig"]["caBundle"]).decode(), ca_pem, (kind, w["name"]))

    @classmethod
    def https_get(cls, path):
        conn = http.client.HTTPSConnection("127.0.0.1", cls.port, timeout=5, context=cls.tls)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            return r.status, r.read().decode()
        finally:
            conn.close()

    def run(self, result=None):
        # On a failure, show the webhook's log and the API server's errors.
        failures = len(result.failures) + len(result.errors) if result else 0
        out = super().run(result)
        if result and len(result.failures) + len(result.errors) > failures:
            log(f"webhook log:\n{self.webhook.tail(40)}\n{self.cp.log_tails(20)}")
            self.cp.keep_dir = True
        return out

    def assertRefused(self, call, status, *parts):
        with self.assertRaises(KubeError) as ctx:
            call()
        self.assertEqual(ctx.exception.status, status, ctx.exception)
        for part in parts:
            self.assertIn(part, str(ctx.exception))
        return ctx.exception

    def pod(self, name):
        return self.admin.get("pods", name, namespace=NS)

    @classmethod
    def tearDownClass(cls):
        try:
            rbac_audit.check_component(cls.admin, cls.cp.audit_log, rbac_audit.WEBHOOK, log=log)
        except AssertionError:
            cls.cp.keep_dir = True
            raise

    def test_1_deploy_file_passes_validation(self):
        for kind, doc in deploy_documents():
            if kind == "PodDisruptionBudget" and self.cp.version < (1, 21):
                continue  # policy/v1 came in 1.21
            # The configurations and roles the test created carry the same names.
            doc = re.sub(r"(?m)^  name: (gpusched-webhook(?:-certs)?)$", r"  name: \g<1>-dry-run", doc)
            self.admin.apply_yaml(doc, dry_run=True)

    def test_1b_the_webhook_made_its_own_certificate(self):
        secret = self.admin.call("GET", f"/api/v1/namespaces/kube-system/secrets/{CA_SECRET}")
        self.assertEqual(secret["metadata"]["labels"]["app.kubernetes.io/managed-by"], "gpusched-webhook")
        self.assertEqual(sorted(secret["data"]), ["ca.crt", "ca.key"])
        self.assertCaBundles(self.ca_pem)
        # The serving certificate chains to that CA (served_certificate verifies it) and names the Service.
        served = self.served_certificate()
        self.assertNotEqual(served, self.ca_pem)
        log_text = self.webhook.tail(200)
        self.assertIn(f"made a new CA in Secret kube-system/{CA_SECRET}", log_text)
        self.assertIn("issued a serving certificate for gpusched-webhook, gpusched-webhook.kube-system, "
                      "gpusched-webhook.kube-system.svc, gpusched-webhook.kube-system.svc.cluster.local, 127.0.0.1",
                      log_text)
        status, metrics = self.https_get("/metrics")
        self.assertEqual(status, 200)
        expiry = re.search(r"(?m)^gpusched_webhook_certificate_expiry_timestamp_seconds (\d+)$", metrics)
        self.assertIsNotNone(expiry, metrics)
        self.assertGreater(int(expiry.group(1)), time.time() + 300 * 86400)  # a year, less the backdating

    def test_2_forged_allocation_is_refused(self):
        for name, limits in (("forged-gpu", SHARE), ("forged-cpu", {"cpu": "100m"})):
            e = self.assertRefused(
                lambda: self.alice.create("pods", gpu_pod(name, limits, annotations={ALLOCATION_ANNOTATION: ALLOCATION}),
                                          namespace=NS),
                403, 'admission webhook "', 'user "alice" may not set the annotation gpusched.io/allocation')
            log(f"{name}: {e}")
            self.assertIsNone(self.pod(name))

    def test_3_only_the_scheduler_writes_the_allocation(self):
        self.admin.create("pods", gpu_pod("shared-1", SHARE), namespace=NS)
        self.assertEqual(self.pod("shared-1")["spec"]["schedulerName"], "gpusched")
        # The extender's identity sets it, as at bind: in the Binding, which the API server copies onto the pod.
        self.extender.bind("shared-1", "wh-node-1", namespace=NS, annotations={ALLOCATION_ANNOTATION: ALLOCATION})
        # alice may neither change nor remove it; relabelling her pod is fine.
        other = ALLOCATION.replace("GPU-wh-node-1-0", "GPU-wh-node-1-1")
        self.assertRefused(lambda: self.alice.patch("pods", "shared-1", {"metadata": {"annotations": {
            ALLOCATION_ANNOTATION: other}}}, namespace=NS), 403, 'user "alice" may not change')
        self.assertRefused(lambda: self.alice.patch("pods", "shared-1", {"metadata": {"annotations": {
            ALLOCATION_ANNOTATION: None}}}, namespace=NS), 403, 'user "alice" may not remove')
        # The pod hears of both (its describe shows who tried what); the same attempt again raises a count.
        self.assertRefused(lambda: self.alice.patch("pods", "shared-1", {"metadata": {"annotations": {
            ALLOCATION_ANNOTATION: other}}}, namespace=NS), 403, 'user "alice" may not change')

        # (The API server asks the webhook more than once per attempt: every denial after the first of its kind is
        # a repeat, folded into the first Event's count, which is written at once for the first repeat.)
        def told():
            events = self.admin.events_for("shared-1", namespace=NS, reason="AdmissionDenied")
            counts = [e.get("count", 1) for e in events]
            return events if len(events) == 2 and min(counts) >= 2 else None
        events = Kube.wait_for(told, 15, what="shared-1's two AdmissionDenied events, each counted again")
        self.assertEqual(sorted("to change its annotation" in e["message"] for e in events), [False, True], events)
        status, metrics = self.https_get("/metrics")
        self.assertEqual(status, 200)
        written = re.search(r'gpusched_webhook_events_total\{result="written"\} (\d+)', metrics)
        aggregated = re.search(r'gpusched_webhook_events_total\{result="aggregated"\} (\d+)', metrics)
        self.assertEqual(int(written.group(1)), 2, metrics)  # one Event per distinct denial, however often
        self.assertGreaterEqual(int(aggregated.group(1)), 2, metrics)
        uid = self.pod("shared-1")["metadata"]["uid"]
        for e in events:
            self.assertEqual(e["type"], "Warning")
            self.assertEqual(e["source"]["component"], "gpusched-webhook")
            self.assertEqual(e["involvedObject"]["uid"], uid)
            # Fixed words of the rule (the review's text, its user included, is not the Event's to repeat); written
            # because oldObject was the live pod (the webhook GETs it: a review POSTed to its port writes nothing).
            self.assertTrue(e["message"].startswith("gpusched webhook denied UPDATE pods: a request to "), e["message"])
        log(f"shared-1 events: {[(e['count'], e['message'][:120]) for e in events]}")
        self.alice.patch("pods", "shared-1", {"metadata": {"labels": {"team": "vision"}}}, namespace=NS)
        pod = self.pod("shared-1")
        self.assertEqual(pod["metadata"]["annotations"][ALLOCATION_ANNOTATION], ALLOCATION)
        self.assertEqual(pod["metadata"]["labels"]["team"], "vision")

        # Bindings: the cluster admin is not gpusched's scheduler; the extender's identity is.
        self.admin.create("pods", gpu_pod("shared-2", SHARE), namespace=NS)
        self.assertRefused(lambda: self.admin.bind("shared-2", "wh-node-1", namespace=NS,
                                                   annotations={ALLOCATION_ANNOTATION: ALLOCATION}),
                           403, "may not bind with the annotation gpusched.io/allocation")
        self.assertIsNone(self.pod("shared-2")["metadata"].get("annotations", {}).get(ALLOCATION_ANNOTATION))
        self.extender.bind("shared-2", "wh-node-1", namespace=NS, annotations={ALLOCATION_ANNOTATION: ALLOCATION})
        pod = self.pod("shared-2")
        self.assertEqual(pod["spec"]["nodeName"], "wh-node-1")
        self.assertEqual(pod["metadata"]["annotations"][ALLOCATION_ANNOTATION], ALLOCATION)

    def test_4_requests_that_can_never_be_met_are_refused(self):
        cases = [
            ("core-150", {"gpusched.io/gpu-core": 150}, {}, "gpusched.io/gpu-core 150 is above 100"),
            ("mixed", {"nvidia.com/gpu": 1, "gpusched.io/gpu-core": 30}, {},
             "mixes GPU resources of gpusched.io and nvidia.com/gpu"),
            ("models", SHARE, {"gpusched.io/gpu-model": "A100,H100"}, "separate models with '|'"),
        ]
        for name, limits, annotations, reason in cases:
            with self.subTest(name):
                e = self.assertRefused(lambda: self.alice.create("pods", gpu_pod(name, limits, annotations=annotations),
                                                                 namespace=NS), 422, reason)
                log(f"{name}: {e}")
                self.assertIsNone(self.pod(name))

    def test_5_memory_only_pods_get_their_device_count(self):
        for name, limits in (("gpushare", {"aliyun.com/gpu-mem": 8}),
                             ("memory-only", {"gpusched.io/gpu-memory": 20000})):
            with self.subTest(name):
                self.alice.create("pods", gpu_pod(name, limits), namespace=NS)
                pod = self.pod(name)
                resources = pod["spec"]["containers"][0]["resources"]
                self.assertEqual(resources["limits"].get("gpusched.io/gpu"), "1", resources)
                self.assertEqual(resources["requests"].get("gpusched.io/gpu"), "1", resources)
                for k in limits:  # kept as asked (the API server writes 20000 as "20k")
                    self.assertIn(k, resources["limits"])
                self.assertEqual(pod["spec"]["schedulerName"], "gpusched")

    def test_5b_genius_labelled_pods_get_their_device_count(self):
        """A pod that asks for GPUs only through Genius's labels gets gpusched.io/gpu (genius/gpu-number) in its
        first container's limits; labels that contradict themselves are refused with the label named."""
        self.alice.create("pods", gpu_pod("genius", {"cpu": "100m"}, labels={
            "genius/gpu-number": "2", "genius/gpu-memory-each": "8000"}), namespace=NS)
        limits = self.pod("genius")["spec"]["containers"][0]["resources"]["limits"]
        self.assertEqual(limits.get("gpusched.io/gpu"), "2", limits)
        e = self.assertRefused(lambda: self.alice.create("pods", gpu_pod("genius-bad", {"cpu": "100m"}, labels={
            "genius/gpu-memory-each": "1000", "genius/gpu-memory-total": "2000"}), namespace=NS),
            422, "genius/gpu-memory-each and genius/gpu-memory-total are both set")
        log(f"genius-bad: {e}")
        self.assertIsNone(self.pod("genius-bad"))

    def test_6_pods_without_gpus_are_unchanged(self):
        sent = gpu_pod("plain", {"cpu": "100m", "memory": "128Mi"})
        self.alice.create("pods", sent, namespace=NS)
        pod = self.pod("plain")
        self.assertEqual(pod["spec"]["containers"][0]["resources"], sent["spec"]["containers"][0]["resources"])
        self.assertEqual(pod["spec"]["schedulerName"], "default-scheduler")
        self.assertEqual(pod["metadata"].get("annotations", {}), {})

    def test_7_metrics_count_the_decisions(self):
        status, text = self.https_get("/metrics")
        self.assertEqual(status, 200)
        denied = re.search(r'(?m)^gpusched_webhook_admissions_total\{endpoint="validate",outcome="denied"\} (\d+)$',
                           text)
        patched = re.search(r'(?m)^gpusched_webhook_admissions_total\{endpoint="mutate",outcome="patched"\} (\d+)$',
                            text)
        self.assertTrue(denied and int(denied.group(1)) > 0, text)
        self.assertTrue(patched and int(patched.group(1)) > 0, text)
        self.assertEqual(monitoring_check.check_exposition(text, ["gpusched_webhook_"]), [])
        self.assertEqual(monitoring_check.promtool_check_metrics(text), [])

    def test_8_gpu_queues_that_break_their_own_rules_are_refused(self):
        """A GpuQueue whose guarantee exceeds its limit is refused by the webhook (this API server, older than 1.25,
        does not evaluate the CRD's CEL rule), at creation and by an update; a valid one is stored."""
        def queue(name, guaranteed, limit):
            return {"apiVersion": "gpusched.io/v1alpha1", "kind": "GpuQueue", "metadata": {"name": name},
                    "spec": {"guaranteed": {"gpus": guaranteed}, "limit": {"gpus": limit}}}
        e = self.assertRefused(lambda: self.admin.call("POST", QUEUES, queue("wh-qbad", 3, 2)), 422,
                               "queues.gpusched.io", "GpuQueue wh-qbad: guaranteed gpus 3 exceeds its limit 2")
        log(f"wh-qbad: {e}")
        self.assertEqual(self.admin.raw("GET", f"{QUEUES}/wh-qbad")[0], 404)
        self.admin.call("POST", QUEUES, queue("wh-qok", 2, 4))
        self.addCleanup(lambda: self.admin.raw("DELETE", f"{QUEUES}/wh-qok"))
        self.assertRefused(lambda: self.admin.call("PATCH", f"{QUEUES}/wh-qok", {"spec": {"guaranteed": {"gpus": 5}}},
                                                   content_type="application/merge-patch+json"),
                           422, "GpuQueue wh-qok: guaranteed gpus 5 exceeds its limit 4")
        self.assertEqual(self.admin.call("GET", f"{QUEUES}/wh-qok")["spec"]["guaranteed"], {"gpus": 2})

    def test_8b_handoff_variables_are_refused(self):
        # A pod without any GPU resource that names every GPU of the node for the NVIDIA runtime.
        pod = gpu_pod("sees-all", {"cpu": "100m"})
        pod["spec"]["containers"][0]["env"] = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
        self.assertRefused(lambda: self.alice.create("pods", pod, namespace=NS), 403,
                           'container "main" sets NVIDIA_VISIBLE_DEVICES in env')
        self.assertIsNone(self.pod("sees-all"))
        # The volume-mounts handoff's bypass: an emptyDir where the runtime looks for the GPUs' names.
        pod = gpu_pod("mounts-all", {"cpu": "100m"})
        pod["spec"]["volumes"] = [{"name": "fake", "emptyDir": {}}]
        pod["spec"]["containers"][0]["volumeMounts"] = [
            {"name": "fake", "mountPath": "/var/run/nvidia-container-devices/all"}]
        self.assertRefused(lambda: self.alice.create("pods", pod, namespace=NS), 403,
                           'container "main" mounts a volume at "/var/run/nvidia-container-devices/all"')
        self.assertIsNone(self.pod("mounts-all"))

    def test_8d_a_queue_label_must_name_a_queue_of_the_namespace(self):
        # wh-team-b admits namespace wh-team-b only: alice's pod in team-a may not join it, at creation or later.
        self.assertRefused(
            lambda: self.alice.create("pods", gpu_pod("joins-b", SHARE, labels={"gpusched.io/queue": "wh-team-b"}),
                                      namespace=NS),
            403, "pods of namespace team-a may not join queue wh-team-b: it admits namespaces wh-team-b only")
        self.assertIsNone(self.pod("joins-b"))
        self.alice.create("pods", gpu_pod("relabelled", {"cpu": "100m"}), namespace=NS)
        self.assertRefused(lambda: self.alice.patch("pods", "relabelled", {"metadata": {"labels": {
            "gpusched.io/queue": "wh-team-b"}}}, namespace=NS), 403, "may not join queue wh-team-b")
        self.assertNotIn("gpusched.io/queue", self.pod("relabelled")["metadata"]["labels"])
        # A queue nobody declared is the scheduler's to judge (it keeps the pod waiting).
        self.alice.create("pods", gpu_pod("undeclared", {"cpu": "100m"}, labels={"gpusched.io/queue": "nowhere"}),
                          namespace=NS)

    def test_8c_a_forged_review_writes_no_event(self):
        # A review POSTed straight to the webhook's port (as any pod could), about a real pod, with a denied change:
        # answered, but no Event, since its oldObject is not the live pod.
        self.admin.create("pods", gpu_pod("victim", {"cpu": "100m"}), namespace=NS)
        live = self.pod("victim")
        old = json.loads(json.dumps(live))
        old["metadata"]["resourceVersion"] = "1"
        new = json.loads(json.dumps(old))
        new["metadata"].setdefault("annotations", {})[ALLOCATION_ANNOTATION] = ALLOCATION
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": "forged-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                              "resource": {"group": "", "version": "v1", "resource": "pods"},
                              "operation": "UPDATE", "namespace": NS, "name": "victim",
                              "userInfo": {"username": "mallory: your GPUs are revoked"},
                              "object": new, "oldObject": old}}

        def unverified():
            m = re.search(r"gpusched_webhook_events_unverified_total (\d+)", self.https_get("/metrics")[1])
            return int(m.group(1))
        before = unverified()
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=10, context=self.tls)
        try:
            conn.request("POST", "/validate", json.dumps(review), {"Content-Type": "application/json"})
            r = conn.getresponse()
            answer = json.loads(r.read())
        finally:
            conn.close()
        self.assertEqual(r.status, 200)
        self.assertFalse(answer["response"]["allowed"], answer)
        self.assertEqual(unverified(), before + 1)  # counted before the answer went out
        self.assertEqual(self.admin.events_for("victim", namespace=NS, reason="AdmissionDenied"), [])

    def test_8e_a_restart_keeps_the_ca(self):
        before = self.admin.call("GET", f"/api/v1/namespaces/kube-system/secrets/{CA_SECRET}")
        first_served = self.served_certificate()
        self.webhook.stop()
        self.assertEqual(self.webhook.proc.returncode, 0, self.webhook.tail(20))
        # A fresh emptyDir, as a new pod would have.
        cls = type(self)
        cls.webhook = Process("gpusched-webhook", cls.webhook_argv(os.path.join(self.cp.dir, "webhook-certs-2")),
                              os.path.join(self.cp.dir, "webhook-2.log"))
        wait_until(lambda: self.https_get("/healthz")[0] == 200, 30, what="webhook /healthz after the restart",
                   alive=[cls.webhook])
        after = self.admin.call("GET", f"/api/v1/namespaces/kube-system/secrets/{CA_SECRET}")
        self.assertEqual(after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"])
        self.assertEqual(self.secret_ca(), self.ca_pem)
        self.assertCaBundles(self.ca_pem)
        self.assertNotEqual(self.served_certificate(), first_served)  # its own certificate, from the same CA
        self.assertNotIn("made a new CA", self.webhook.tail(200))
        self.assertNotIn("patched caBundle", self.webhook.tail(200))
        # And the API server still reaches it: a memory-only pod gets its device count.
        self.alice.create("pods", gpu_pod("after-restart", {"aliyun.com/gpu-mem": 8}), namespace=NS)
        limits = self.pod("after-restart")["spec"]["containers"][0]["resources"]["limits"]
        self.assertEqual(limits.get("gpusched.io/gpu"), "1")

    def test_9_an_outage_does_not_block_pods_without_gpus(self):
        self.webhook.stop()
        self.assertEqual(self.webhook.proc.returncode, 0, self.webhook.tail(20))
        with open(self.webhook.log_path, errors="replace") as f:
            self.assertNotRegex(f.read(), r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:")
        self.alice.create("pods", gpu_pod("during-outage", {"cpu": "100m"}), namespace=NS)
        self.assertIsNotNone(self.pod("during-outage"))
        # The documented < 1.28 trade-off: a GPU pod is admitted too, unchecked and without its device count.
        self.alice.create("pods", gpu_pod("gpu-during-outage", {"aliyun.com/gpu-mem": 8}), namespace=NS)
        limits = self.pod("gpu-during-outage")["spec"]["containers"][0]["resources"]["limits"]
        self.assertNotIn("gpusched.io/gpu", limits)


if __name__ == "__main__":
    unittest.main()

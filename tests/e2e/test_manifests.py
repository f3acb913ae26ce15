"""End-to-end: the install manifests of deploy/ against a real kube-apiserver, installed as users install them.

  1. Every overlay (deploy/scheduler, extender, agent, quickstart, and monitoring with its layouts monitoring/scheduler,
     monitoring/extender and monitoring/agent) renders with `kubectl kustomize`, and the API server accepts every
     rendered object in a server-side dry run (`kubectl apply --dry-run=server`).
  2. The quickstart (docs/quickstart.md) as a user types it, with kubectl: label a node, `kubectl apply -k
     deploy/quickstart`, `kubectl apply -f examples/shared-pod.yaml`, `kubectl get pod` shows the node and the
     allocation; then `kubectl delete -k deploy/quickstart` removes every object it created. There is no kubelet and
     no controller-manager here, so nothing runs the installed Deployment and DaemonSet: the test runs their
     containers itself, with the arguments and the ConfigMap the API server now holds, and as their
     ServiceAccounts (client certificates), so the installed RBAC is what they get.

What cannot be checked here, and how it is handled:
  * Kubernetes 1.20 (the release scripts/build-k8s.sh builds) has no policy/v1: PodDisruptionBudgets are sent as
    policy/v1beta1 (the same fields) to a server older than 1.21; clusters since 1.21 take the files as they are.
  * ServiceMonitor, PodMonitor and PrometheusRule are custom resources of the Prometheus Operator, whose
    definitions are not available here: the test installs stand-in definitions (any spec), so the dry run checks
    the objects' kinds, names and namespaces, not their specs. promtool checks the rules themselves
    (scripts/check-monitoring.py).
  * kubectl older than the server's skew policy: kubectl's client-side schema validation is off against servers
    older than 1.25 (they cannot validate fields themselves, and kubectl would reject the fields they drop, such
    as the webhooks' matchConditions, which deploy/base/webhook/webhook.yaml documents for such clusters).

Environment: as test_extender.py (GPUSCHED_BIN, GPUSCHED_K8S_BIN, GPUSCHED_ETCD, GPUSCHED_E2E_KEEP); KUBECTL (default
`kubectl` on PATH, >= 1.22: kustomize 4.1+ for the overlays' `labels` and directory resources).
"""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from control_plane import (ControlPlane, Process, free_port, suite_skip_reason, wait_until,  # noqa: E402
                           write_kubeconfig)
from kube import ALLOCATION_ANNOTATION, GPUS_ANNOTATION  # noqa: E402

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OVERLAYS = ["scheduler", "extender", "agent", "monitoring", "monitoring/scheduler", "monitoring/extender",
            "monitoring/agent", "quickstart"]
# What each overlay must hold, at least (kind, name): a missing component is a broken overlay even if it renders.
EXPECTED = {
    "scheduler": {("Deployment", "gpusched-scheduler"), ("Deployment", "gpusched-webhook"),
                  ("DaemonSet", "gpusched-agent"), ("DaemonSet", "gpusched-mps-control"),
                  ("PodDisruptionBudget", "gpusched-scheduler"),
                  ("ValidatingWebhookConfiguration", "gpusched-webhook"), ("ClusterRole", "gpusched-viewer")},
    "extender": {("Deployment", "gpusched-kube-scheduler"), ("Deployment", "gpusched-webhook"),
                 ("DaemonSet", "gpusched-agent"), ("DaemonSet", "gpusched-mps-control"),
                 ("ClusterRole", "gpusched-extender"),
                 ("ClusterRole", "gpusched-viewer")},
    "agent": {("DaemonSet", "gpusched-agent"), ("DaemonSet", "gpusched-mps-control"),
              ("ClusterRole", "gpusched-agent")},
    # deploy/monitoring is the scheduler layout; each layout scrapes the daemons of its install layout, no others
    # (scripts/check-monitoring.py checks that no other PodMonitor is there).
    "monitoring": {("PrometheusRule", "gpusched"), ("ConfigMap", "gpusched-dashboard"),
                   ("PodMonitor", "gpusched-agent"), ("PodMonitor", "gpusched-webhook"),
                   ("PodMonitor", "gpusched-scheduler")},
    "monitoring/scheduler": {("PrometheusRule", "gpusched"), ("ConfigMap", "gpusched-dashboard"),
                             ("PodMonitor", "gpusched-agent"), ("PodMonitor", "gpusched-webhook"),
                             ("PodMonitor", "gpusched-scheduler")},
    "monitoring/extender": {("PrometheusRule", "gpusched"), ("ConfigMap", "gpusched-dashboard"),
                            ("PodMonitor", "gpusched-agent"), ("PodMonitor", "gpusched-webhook"),
                            ("PodMonitor", "gpusched-extender")},
    "monitoring/agent": {("PrometheusRule", "gpusched"), ("ConfigMap", "gpusched-dashboard"),
                         ("PodMonitor", "gpusched-agent")},
    "quickstart": {("Deployment", "gpusched-scheduler"), ("DaemonSet", "gpusched-agent")},
}
NODE = "quickstart-gpu-0"


def log(msg):
    sys.stderr.write(f"[e2e-manifests {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def kubectl_binary():
    return os.environ.get("KUBECTL") or shutil.which("kubectl")


def _skip_reason():
    why = suite_skip_reason()
    if why:
        return why
    kubectl = kubectl_binary()
    if not kubectl:
        return "no kubectl on PATH (Debian: kubernetes-client; or set KUBECTL)"
    res = subprocess.run([kubectl, "kustomize", os.path.join(REPO_ROOT, "deploy", "agent")], capture_output=True,
                         text=True, timeout=60)
    if res.returncode != 0:
        return f"{kubectl} cannot render deploy/agent (the overlays need kustomize 4.1+, kubectl >= 1.22): " \
               f"{res.stderr.strip()[:300]}"
    return None


SKIP_REASON = _skip_reason()

# Stand-ins for the Prometheus Operator's custom resource definitions: any spec (see the module's docstring).
_STANDIN_CRDS = [("ServiceMonitor", "servicemonitors"), ("PodMonitor", "podmonitors"),
                 ("PrometheusRule", "prometheusrules")]


def standin_crd(kind, plural):
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.monitoring.coreos.com"},
            "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": kind + "List"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class ManifestsE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cp = ControlPlane(kube_scheduler=False, log=log)
        cls.addClassCleanup(cls.cp.stop)
        cls.cp.start()
        cls.kube = cls.cp.kube()
        cls.kube.ensure_service_account("default")
        cls.kubectl_bin = kubectl_binary()
        # kubectl as the cluster admin, through the admin kubeconfig (what a user's kubeconfig is).
        cls.env = dict(os.environ, KUBECONFIG=cls.cp.kubeconfig)
        for kind, plural in _STANDIN_CRDS:
            cls.kube.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", standin_crd(kind, plural))

        def established():
            status, body = cls.kube.raw("GET", "/apis/monitoring.coreos.com/v1")
            return status == 200 and all(p in json.dumps(body) for _, p in _STANDIN_CRDS)
        wait_until(established, 30, interval=0.2, what="the stand-in monitoring.coreos.com definitions")

    # -- kubectl ----------------------------------------------------------------------------------------------

    def kubectl(self, *args, stdin=None, check=True):
        argv = [self.kubectl_bin, *args]
        if self.cp.version < (1, 25) and args and args[0] in ("apply", "create"):
            argv.append("--validate=false")  # see the module's docstring
        res = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120, env=self.env,
                             cwd=REPO_ROOT)
        log(f"$ kubectl {' '.join(args)} -> {res.returncode}")
        if check and res.returncode != 0:
            self.fail(f"kubectl {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
        return res

    def rendered(self, overlay):
        """`kubectl kustomize deploy/<overlay>`: its text, adapted to this API server's version, and its objects."""
        text = self.kubectl("kustomize", f"deploy/{overlay}").stdout
        if self.cp.version < (1, 21):
            text = re.sub(r"(?m)^apiVersion:[ \t]*policy/v1[ \t]*$", "apiVersion: policy/v1beta1", text)
        return text, [d for d in yaml.safe_load_all(text) if d]

    def apply_overlay(self, overlay, *extra):
        """What `kubectl apply -k deploy/<overlay>` does; on a server older than 1.21 through the rendered text (the
        PodDisruptionBudgets' version, above)."""
        if self.cp.version < (1, 21):
            text, _ = self.rendered(overlay)
            return self.kubectl("apply", "-f", "-", *extra, stdin=text)
        return self.kubectl("apply", "-k", f"deploy/{overlay}", *extra)

    # -- tests ------------------------------------------------------------------------------------------------

    def test_1_every_overlay_renders_and_the_api_server_accepts_it(self):
        for overlay in OVERLAYS:
            with self.subTest(overlay=overlay):
                _, objs = self.rendered(overlay)
                have = {(o["kind"], o["metadata"]["name"]) for o in objs}
                missing = EXPECTED[overlay] - have
                self.assertFalse(missing, f"deploy/{overlay} lacks {sorted(missing)}")
                images = sorted({c["image"] for o in objs for c in self._containers(o)})
                for image in images:
                    self.assertRegex(image, r":[\w.-]+$", f"deploy/{overlay}: image {image} has no tag")
                res = self.apply_overlay(overlay, "--dry-run=server")
                accepted = [line for line in res.stdout.splitlines() if "(server dry run)" in line]
                self.assertEqual(len(accepted), len(objs), f"deploy/{overlay}: {len(objs)} objects rendered, "
                                 f"{len(accepted)} accepted:\n{res.stdout}\n{res.stderr}")
                log(f"deploy/{overlay}: {len(objs)} objects accepted by the API server (dry run); images {images}")
        # A dry run stores nothing.
        self.assertEqual([d["metadata"]["name"] for d in self._list("/apis/apps/v1/namespaces/kube-system/deployments")],
                         [])

    def test_1b_the_webhook_certificate_by_default_or_by_cert_manager(self):
        """deploy/scheduler's webhook makes its own certificate; with deploy/components/webhook-cert-manager it serves
        cert-manager's, and the roles it needed for its own are gone (rendered only: cert-manager's kinds are not
        served here)."""
        def webhook_parts(objs):
            by = {(o["kind"], o["metadata"]["name"]): o for o in objs}
            pod = by[("Deployment", "gpusched-webhook")]["spec"]["template"]["spec"]
            return by, pod["containers"][0]["args"], {v["name"]: v for v in pod["volumes"]}

        _, objs = self.rendered("scheduler")
        by, args, volumes = webhook_parts(objs)
        self.assertIn("--self-signed-ca-secret", args)
        self.assertNotIn("--tls-cert", args)
        self.assertIn("emptyDir", volumes["certs"])
        for kind in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"):
            self.assertIn((kind, "gpusched-webhook-certs"), by)
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            self.assertNotIn("cert-manager.io/inject-ca-from",
                             by[(kind, "gpusched-webhook")]["metadata"].get("annotations") or {})

        overlay = tempfile.mkdtemp(dir=self.cp.dir)
        with open(os.path.join(overlay, "kustomization.yaml"), "w") as f:
            rel = os.path.relpath(os.path.join(REPO_ROOT, "deploy"), overlay)
            f.write(f"resources:\n- {rel}/scheduler\ncomponents:\n- {rel}/components/webhook-cert-manager\n")
        text = self.kubectl("kustomize", overlay).stdout
        objs = [d for d in yaml.safe_load_all(text) if d]
        by, args, volumes = webhook_parts(objs)
        self.assertNotIn("--self-signed-ca-secret", args)
        self.assertEqual(args[args.index("--tls-cert") + 1], "/etc/gpusched/tls/tls.crt")
        self.assertEqual(volumes["tls"]["secret"]["secretName"], "gpusched-webhook-tls")
        self.assertNotIn("certs", volumes)
        self.assertEqual(by[("Certificate", "gpusched-webhook")]["spec"]["secretName"], "gpusched-webhook-tls")
        self.assertIn(("Issuer", "gpusched-webhook"), by)
        for kind in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"):
            self.assertNotIn((kind, "gpusched-webhook-certs"), by)
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            self.assertEqual(by[(kind, "gpusched-webhook")]["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                             "kube-system/gpusched-webhook")
        # The rendered variant passes the static least-privilege check too.
        spec = importlib.util.spec_from_file_location("check_rbac", os.path.join(REPO_ROOT, "scripts", "check-rbac.py"))
        check_rbac = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(check_rbac)
        problems, _, _ = check_rbac.check({"rendered": text})
        self.assertEqual(problems, [])

    def test_1c_the_dra_component(self):
        """deploy/components/dra on deploy/agent: the three DeviceClasses, the agent with --dra, and its RBAC for
        resourceslices and resourceclaims. Rendered only where the API server has no resource.k8s.io/v1 (before
        1.34); a dry run where it has."""
        overlay = tempfile.mkdtemp(dir=self.cp.dir)
        with open(os.path.join(overlay, "kustomization.yaml"), "w") as f:
            rel = os.path.relpath(os.path.join(REPO_ROOT, "deploy"), overlay)
            f.write(f"resources:\n- {rel}/agent\ncomponents:\n- {rel}/components/dra\n")
        text = self.kubectl("kustomize", overlay).stdout
        objs = [d for d in yaml.safe_load_all(text) if d]
        by = {(o["kind"], o["metadata"]["name"]): o for o in objs}
        classes = {name: o["spec"] for (kind, name), o in by.items() if kind == "DeviceClass"}
        self.assertEqual(sorted(classes), ["extended.gpu.gpusched.io", "gpu.gpusched.io", "shared.gpu.gpusched.io"])
        self.assertEqual(classes["extended.gpu.gpusched.io"]["extendedResourceName"], "gpusched.io/gpu")
        for spec in classes.values():
            self.assertIn('device.driver == "gpu.gpusched.io"', spec["selectors"][0]["cel"]["expression"])
        self.assertIn("device.allowMultipleAllocations == true",
                      classes["shared.gpu.gpusched.io"]["selectors"][0]["cel"]["expression"])
        args = by[("DaemonSet", "gpusched-agent")]["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertEqual(args.count("--dra"), 1)
        rules = by[("ClusterRole", "gpusched-agent-dra")]["rules"]
        self.assertEqual({(r["resources"][0], tuple(r["verbs"])) for r in rules},
                         {("resourceslices", ("list", "create", "update", "delete")),
                          ("resourceclaims", ("get", "list", "watch"))})
        spec = importlib.util.spec_from_file_location("check_rbac", os.path.join(REPO_ROOT, "scripts", "check-rbac.py"))
        check_rbac = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(check_rbac)
        problems, _, _ = check_rbac.check({"rendered": text})
        self.assertEqual(problems, [])
        if self.cp.version >= (1, 34):
            res = self.kubectl("apply", "-f", "-", "--dry-run=server", stdin=text)
            accepted = [line for line in res.stdout.splitlines() if "(server dry run)" in line]
            self.assertEqual(len(accepted), len(objs), res.stdout + res.stderr)
        else:
            log(f"deploy/components/dra: rendered only (kube-apiserver {self.cp.version} has no resource.k8s.io/v1)")

    def test_2_quickstart_as_a_user_types_it(self):
        # A node as its kubelet registers it (no kubelet here), then the quickstart's commands.
        self.kube.create_ready_node(NODE, {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux"}, {},
                                    {"cpu": "16", "memory": "64Gi", "pods": "110"})
        self.kubectl("label", "node", NODE, "gpusched.io/gpu-node=true")
        self.apply_overlay("quickstart")
        processes = self._run_installed_workloads()
        try:
            self.kubectl("apply", "-f", "examples/shared-pod.yaml")

            def bound():
                out = self.kubectl("get", "pod", "gpu-share-demo", "-o",
                                   "jsonpath={.spec.nodeName} {.metadata.annotations.gpusched\\.io/allocation}",
                                   check=False).stdout
                return out if out.startswith(NODE + " ") else None
            out = wait_until(bound, 60, interval=0.5, what="gpu-share-demo to be bound",
                             alive=[p for p in processes])
            log(f"$ kubectl get pod gpu-share-demo ... -> {out}")
            allocation = json.loads(out.split(" ", 1)[1])
            self.assertEqual(allocation["node"], NODE, allocation)
            shares = [g for c in allocation["containers"] for g in c["gpus"]]
            self.assertEqual([(g["milli"], g["memory_mib"]) for g in shares], [(300, 20000)], allocation)
            # The GPU came from the agent's inventory of the node (4 fake A100 80GB).
            gpus = json.loads(self.kube.get("nodes", NODE)["metadata"]["annotations"][GPUS_ANNOTATION])
            self.assertEqual(len(gpus), 4, gpus)
            self.assertIn(shares[0]["uuid"], [g["uuid"] for g in gpus])
            self.assertEqual({g.get("sharers") for g in gpus}, {10}, gpus)  # the agent's --replicas
            self.kubectl("delete", "pod", "gpu-share-demo", "--wait=false")
        finally:
            for p in processes:
                p.stop()
        for p in processes:
            self.assertEqual(p.proc.returncode, 0, p.tail(20))  # SIGTERM: a clean exit
            with open(p.log_path, errors="replace") as f:
                self.assertNotRegex(f.read(), r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:", p.log_path)
        # Uninstall: every object the overlay created goes away.
        _, objs = self.rendered("quickstart")
        self.kubectl("delete", "-f", "-", "--wait=false", stdin=yaml.safe_dump_all(objs))
        left = [n for n in (d["metadata"]["name"] for d in
                            self._list("/apis/apps/v1/namespaces/kube-system/deployments")) if n.startswith("gpusched")]
        self.assertEqual(left, [])

    # -- helpers ----------------------------------------------------------------------------------------------

    @staticmethod
    def _containers(obj):
        spec = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {})
        return list(spec.get("containers") or []) + list(spec.get("initContainers") or [])

    def _list(self, path):
        return self.kube.call("GET", path).get("items") or []

    def _identity(self, service_account):
        user = f"system:serviceaccount:kube-system:{service_account}"
        crt, key = self.cp.pki.client_cert(service_account, f"/CN={user}")
        return write_kubeconfig(os.path.join(self.cp.dir, f"{service_account}.kubeconfig"), self.cp.server,
                                self.cp.pki.ca_crt, crt, key)

    def _run_installed_workloads(self):
        """Runs the containers of the installed scheduler Deployment and agent DaemonSet as local processes: their
        args and config as the API server holds them, their ServiceAccounts' identities, listen addresses on
        loopback, and the kubelet's directories in the temporary directory (there is no kubelet)."""
        gpusched = os.environ["GPUSCHED_BIN"]
        ds = self.kube.call("GET", "/apis/apps/v1/namespaces/kube-system/daemonsets/gpusched-agent")
        agent_args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertIn("--fake-gpus", agent_args)
        port = free_port()
        agent_args = [("127.0.0.1:%d" % port) if a == "0.0.0.0:9400" else a for a in agent_args]
        plugin_dir = tempfile.mkdtemp(prefix="device-plugins-", dir=self.cp.dir)
        agent = Process("agent", [gpusched, *agent_args, "--kubeconfig", self._identity("gpusched-agent"),
                                  "--device-plugin-dir", plugin_dir,
                                  "--pod-resources-socket", os.path.join(plugin_dir, "pod-resources.sock")],
                        os.path.join(self.cp.dir, "quickstart-agent.log"), env=dict(os.environ, NODE_NAME=NODE))

        cm = self.kube.call("GET", "/api/v1/namespaces/kube-system/configmaps/gpusched-scheduler")
        config = cm["data"]["scheduler.yaml"]
        sched_port = free_port()
        config, n = re.subn(r'(?m)^listen:.*$', f'listen: "127.0.0.1:{sched_port}"', config)
        self.assertEqual(n, 1, config)
        config_path = os.path.join(self.cp.dir, "quickstart-scheduler.yaml")
        with open(config_path, "w") as f:
            f.write(config)
        dep = self.kube.call("GET", "/apis/apps/v1/namespaces/kube-system/deployments/gpusched-scheduler")
        sched_args = [config_path if a == "/etc/gpusched/scheduler.yaml" else a
                      for a in dep["spec"]["template"]["spec"]["containers"][0]["args"]]
        scheduler = Process("scheduler", [gpusched, *sched_args, "--kubeconfig", self._identity("gpusched-scheduler")],
                            os.path.join(self.cp.dir, "quickstart-scheduler.log"),
                            env=dict(os.environ, POD_NAMESPACE="kube-system"))
        return [agent, scheduler]


if __name__ == "__main__":
    unittest.main()

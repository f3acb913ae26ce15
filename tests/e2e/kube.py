"""A tiny Kubernetes API client for the end-to-end tests (stdlib only), plus builders for fake GPU nodes and pods.

Kube speaks HTTPS with a client certificate, one connection per request (simple, thread-safe, fast enough here).
"""

import datetime
import http.client
import json
import re
import ssl
import time
import urllib.parse

ALLOCATION_ANNOTATION = "gpusched.io/allocation"
GPUS_ANNOTATION = "gpusched.io/gpus"
GPU_MODEL = "A100-SXM4-80GB"
GPU_MEMORY_MIB = 81920


class KubeError(RuntimeError):
    def __init__(self, method, path, status, body):
        self.status = status
        self.body = body
        msg = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: HTTP {status}: {msg}")


class Kube:
    def __init__(self, host, port, ca_file, cert_file, key_file, timeout=15):
        self.host, self.port, self.timeout = host, port, timeout
        self.ctx = ssl.create_default_context(cafile=ca_file)
        self.ctx.load_cert_chain(cert_file, key_file)

    # -- transport --------------------------------------------------------------------------------------------

    def raw(self, method, path, body=None, content_type="application/json"):
        """(status, decoded JSON or text); no exception on HTTP errors."""
        conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self.ctx)
        try:
            headers = {"Accept": "application/json"}
            data = None
            if body is not None:
                data = body if isinstance(body, (bytes, str)) else json.dumps(body)
                headers["Content-Type"] = content_type
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            payload = r.read()
        finally:
            conn.close()
        try:
            decoded = json.loads(payload) if payload else None
        except ValueError:
            decoded = payload.decode(errors="replace")
        return r.status, decoded

    def call(self, method, path, body=None, content_type="application/json", ok=(200, 201, 202)):
        status, decoded = self.raw(method, path, body, content_type)
        if status not in ok:
            raise KubeError(method, path, status, decoded)
        return decoded

    # -- objects ----------------------------------------------------------------------------------------------

    @staticmethod
    def _path(kind, name=None, namespace="default", sub=None, query=None):
        if kind in ("nodes",):
            p = "/api/v1/nodes"
        else:
            p = f"/api/v1/namespaces/{namespace}/{kind}"
        if name:
            p += "/" + name
        if sub:
            p += "/" + sub
        if query:
            p += "?" + urllib.parse.urlencode(query)
        return p

    def create(self, kind, obj, namespace="default"):
        return self.call("POST", self._path(kind, namespace=namespace), obj)

    def get(self, kind, name, namespace="default"):
        """The object, or None when it does not exist."""
        status, obj = self.raw("GET", self._path(kind, name, namespace))
        if status == 404:
            return None
        if status != 200:
            raise KubeError("GET", self._path(kind, name, namespace), status, obj)
        return obj

    def list(self, kind, namespace="default", **query):
        return self.call("GET", self._path(kind, namespace=namespace, query=query or None))["items"]

    def delete(self, kind, name, namespace="default", grace=0):
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": grace}
        return self.call("DELETE", self._path(kind, name, namespace), body, ok=(200, 202, 404))

    def patch(self, kind, name, patch, namespace="default", sub=None, patch_type="merge"):
        ct = {"merge": "application/merge-patch+json", "strategic": "application/strategic-merge-patch+json",
              "json": "application/json-patch+json"}[patch_type]
        return self.call("PATCH", self._path(kind, name, namespace, sub), patch, content_type=ct)

    def events_for(self, pod_name, namespace="default", reason=None):
        sel = f"involvedObject.kind=Pod,involvedObject.name={pod_name}"
        items = self.list("events", namespace=namespace, fieldSelector=sel)
        if reason:
            items = [e for e in items if e.get("reason") == reason]
        return items

    # Where objects of a kind are created (for apply_yaml); namespaced kinds have {ns}.
    _COLLECTIONS = {
        "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
        "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
        "Service": "/api/v1/namespaces/{ns}/services",
        "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
        "DaemonSet": "/apis/apps/v1/namespaces/{ns}/daemonsets",
        "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "Namespace": "/api/v1/namespaces",
        "Role": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
        "RoleBinding": "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
        "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        "NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
        "MutatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        "ValidatingWebhookConfiguration": "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    }

    def apply_yaml(self, text, dry_run=False):
        """Creates every document of a YAML manifest. The apiserver parses YAML itself (Content-Type
        application/yaml), so only `kind` and `metadata.namespace` are read here, with regexes. Returns the
        created objects (as JSON)."""
        created = []
        for doc in re.split(r"(?m)^---\s*$", text):
            if not re.search(r"(?m)^kind:", doc):
                continue
            kind = re.search(r"(?m)^kind:\s*(\S+)", doc).group(1)
            ns = re.search(r"(?m)^metadata:\n(?:[ ]+.*\n)*?[ ]+namespace:\s*(\S+)", doc)
            path = self._COLLECTIONS[kind].format(ns=ns.group(1) if ns else "default")
            if dry_run:
                path += "?dryRun=All"
            created.append(self.call("POST", path, doc, content_type="application/yaml"))
        return created

    def ensure_service_account(self, name="default", namespace="default"):
        status, body = self.raw("POST", self._path("serviceaccounts", namespace=namespace),
                                {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
        if status not in (201, 409):
            raise KubeError("POST", "serviceaccounts", status, body)

    def ensure_namespace(self, name, labels=None):
        status, body = self.raw("POST", "/api/v1/namespaces",
                                {"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": name, "labels": dict(labels or {})}})
        if status not in (201, 409):
            raise KubeError("POST", "namespaces", status, body)

    def bind_cluster_role(self, user, cluster_role, namespace):
        """A RoleBinding granting `user` (a client certificate's CN) the ClusterRole in `namespace`."""
        return self.call("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": f"{user.replace(':', '-')}-{cluster_role}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})

    def bind(self, pod, node, namespace="default", annotations=None):
        """POSTs a Binding of `pod` to `node` (pods/binding), with `annotations` in its metadata."""
        metadata = {"name": pod}
        if annotations:
            metadata["annotations"] = annotations
        return self.call("POST", self._path("pods", pod, namespace, "binding"), {
            "apiVersion": "v1", "kind": "Binding", "metadata": metadata,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}})

    # -- fake GPU nodes ---------------------------------------------------------------------------------------

    def create_gpu_node(self, name, gpus=2, labels=None, gpu_memory_mib=GPU_MEMORY_MIB, model=GPU_MODEL,
                        cpu="32", memory="128Gi"):
        """A Node with a GPU inventory annotation, made Ready and without the not-ready taint (no kubelet here)."""
        inventory = [{"uuid": f"GPU-{name}-{i}", "index": i, "model": model, "memory_mib": gpu_memory_mib}
                     for i in range(gpus)]
        all_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                      "nvidia.com/gpu.product": "NVIDIA-" + model, "nvidia.com/gpu.count": str(gpus)}
        all_labels.update(labels or {})
        self.create_ready_node(name, all_labels, {GPUS_ANNOTATION: json.dumps(inventory, separators=(",", ":"))},
                               {"cpu": cpu, "memory": memory, "pods": "110", "nvidia.com/gpu": str(gpus)})
        return inventory

    def create_ready_node(self, name, labels, annotations, resources):
        """A Node as a kubelet would register it, made Ready and without the not-ready taint (no kubelet here)."""
        self.create("nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels), "annotations": dict(annotations)},
            "spec": {}})
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.patch("nodes", name, {"status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "fake node for gpusched e2e", "lastHeartbeatTime": now,
                            "lastTransitionTime": now}],
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
        }}, sub="status", patch_type="strategic")
        # TaintNodesByCondition put node.kubernetes.io/not-ready:NoSchedule on the new node; only the node
        # lifecycle controller would lift it, and there is none.
        node = self.get("nodes", name)
        taints = [t for t in node["spec"].get("taints", []) if t.get("key") != "node.kubernetes.io/not-ready"]
        self.patch("nodes", name, {"spec": {"taints": taints or None}})

    # -- waiting ----------------------------------------------------------------------------------------------

    @staticmethod
    def wait_for(predicate, timeout, interval=0.2, what="condition", on_poll=None):
        """Polls predicate() until truthy; returns its value. Raises TimeoutError with `what`."""
        deadline = time.monotonic() + timeout
        while True:
            if on_poll:
                on_poll()
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(interval)


def gpu_pod(name, limits, labels=None, node_selector=None, annotations=None, priority_class=None):
    """A one-container Pod asking for `limits` (extended resources: requests default to limits)."""
    spec = {
        "automountServiceAccountToken": False,  # no token controller runs here (see real-kubernetes.md)
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "registry.invalid/cuda:12",
                        "resources": {"limits": {k: str(v) for k, v in limits.items()},
                                      "requests": {"cpu": "100m", "memory": "128Mi"}}}],
    }
    if node_selector:
        spec["nodeSelector"] = node_selector
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": dict(labels or {}, app="gpusched-e2e"),
                         "annotations": dict(annotations or {})},
            "spec": spec}


def keti_seed_pod(name, labels=None, node_selector=None):
    """KETI's nbody seed pod, verbatim where it matters: keti.com/mpsgpu 1, cpu 250m, memory 6400Mi, hostIPC and
    the MPS directory /tmp/nvidia-mps from the host."""
    pod = gpu_pod(name, {"keti.com/mpsgpu": 1}, labels=labels, node_selector=node_selector)
    pod["spec"]["hostIPC"] = True
    c = pod["spec"]["containers"][0]
    c["resources"]["requests"] = {"cpu": "250m", "memory": "6400Mi"}
    c["volumeMounts"] = [{"name": "nvidia-mps", "mountPath": "/tmp/nvidia-mps"}]
    pod["spec"]["volumes"] = [{"name": "nvidia-mps", "hostPath": {"path": "/tmp/nvidia-mps"}}]
    return pod

"""Self-test of rbac_audit.py and scripts/check-rbac.py, without a cluster: synthetic audit logs against the roles
of deploy/*.yaml (read with PyYAML, as check-rbac.py reads them), and manifests that break each static rule.

Run: cd tests/e2e && python3 -m unittest -v test_rbac_audit_selftest
"""

import contextlib
import importlib.util
import io
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rbac_audit  # noqa: E402

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _load_check_rbac():
    spec = importlib.util.spec_from_file_location("check_rbac", os.path.join(REPO_ROOT, "scripts", "check-rbac.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_rbac = _load_check_rbac()


# Each component's manifest in deploy/base, by its file name.
DEPLOY_FILES = {"rbac.yaml": "deploy/base/extender/rbac.yaml", "agent.yaml": "deploy/base/agent/agent.yaml",
                "scheduler.yaml": "deploy/base/scheduler/scheduler.yaml", "webhook.yaml": "deploy/base/webhook/webhook.yaml"}


def deploy_docs(name):
    with open(os.path.join(REPO_ROOT, DEPLOY_FILES[name])) as f:
        return [d for d in check_rbac.load_all(f.read()) if isinstance(d, dict)]


def roles_from(docs, component):
    """rbac_audit.resolve_roles over manifest documents (what the e2e suites read back from the API server)."""
    bindings = [(d["kind"], d) for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")]

    def lookup(kind, ns, name):
        for d in docs:
            if d["kind"] == kind and d["metadata"]["name"] == name and \
                    (kind == "ClusterRole" or d["metadata"].get("namespace", "default") == ns):
                return d
        return None
    return rbac_audit.resolve_roles(bindings, lookup, component)


def event(user, verb, resource, code=200, sub=None, group="", ns=None, name=None, uri=None, audit_id=None,
          stage="ResponseComplete", reason=None):
    ref = {"resource": resource, "apiVersion": "v1"}
    if group:
        ref["apiGroup"] = group
    if sub:
        ref["subresource"] = sub
    if ns:
        ref["namespace"] = ns
    if name:
        ref["name"] = name
    if uri is None:
        uri = (f"/api/v1/namespaces/{ns}/{resource}" if ns else f"/api/v1/{resource}") + (f"/{name}" if name else "")
        uri += f"/{sub}" if sub else ""
    e = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "stage": stage,
         "auditID": audit_id or f"id-{user}-{verb}-{resource}-{sub}-{ns}-{name}-{code}-{uri}", "verb": verb,
         "requestURI": uri, "user": {"username": user, "groups": ["system:authenticated"]}, "objectRef": ref}
    if stage != "RequestReceived":
        e["responseStatus"] = {"metadata": {}, "code": code}
    if reason:
        e["annotations"] = {"authorization.k8s.io/decision": "allow" if code != 403 else "forbid",
                            "authorization.k8s.io/reason": reason}
    return e


EXT = rbac_audit.EXTENDER.user
AGENT = rbac_audit.AGENT.user
SCHED = rbac_audit.SCHEDULER.user


def extender_run():
    """What the extender does in a suite: informers on pods and nodes, a bind (one binding), events on the pod (one
    created, one's count patched), its leader-election Lease (get, create, renew), requests of others around it, a watch still open (RequestReceived and ResponseStarted only)."""
    return [
        event(EXT, "list", "pods", uri="/api/v1/pods?limit=500"),
        event(EXT, "list", "nodes", uri="/api/v1/nodes?limit=500"),
        event(EXT, "watch", "pods", uri="/api/v1/pods?allowWatchBookmarks=true&watch=1"),
        event(EXT, "watch", "nodes", uri="/api/v1/nodes?watch=1", stage="RequestReceived", audit_id="w1"),
        event(EXT, "watch", "nodes", uri="/api/v1/nodes?watch=1", stage="ResponseStarted", audit_id="w1"),
        event(EXT, "create", "pods", sub="binding", ns="default", name="p", code=201),
        event(EXT, "create", "events", ns="default", code=201),
        event(EXT, "patch", "events", ns="default", name="p.e1"),
        event(EXT, "get", "leases", group="coordination.k8s.io", ns="kube-system", name="gpusched-extender", code=404),
        event(EXT, "create", "leases", group="coordination.k8s.io", ns="kube-system", code=201),
        event(EXT, "update", "leases", group="coordination.k8s.io", ns="kube-system", name="gpusched-extender"),
        event("system:kube-scheduler", "get", "leases", group="coordination.k8s.io", ns="kube-system", name="x"),
        event("gpusched-e2e-admin", "delete", "pods", ns="default", name="p"),
    ]


WEBHOOK = rbac_audit.WEBHOOK.user


def webhook_run():
    """What `gpusched webhook --self-signed-ca-secret --events --queues` does in its suite: the CA Secret read (404),
    created, read again at the restart; both configurations read and patched; Events; the live pod; GpuQueues."""
    adm = dict(group="admissionregistration.k8s.io", name="gpusched-webhook")
    return [
        event(WEBHOOK, "get", "secrets", ns="kube-system", name="gpusched-webhook-ca", code=404),
        event(WEBHOOK, "create", "secrets", ns="kube-system", code=201),
        event(WEBHOOK, "get", "secrets", ns="kube-system", name="gpusched-webhook-ca"),
        event(WEBHOOK, "get", "mutatingwebhookconfigurations", **adm,
              uri="/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gpusched-webhook"),
        event(WEBHOOK, "patch", "mutatingwebhookconfigurations", **adm,
              uri="/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gpusched-webhook"),
        event(WEBHOOK, "get", "validatingwebhookconfigurations", **adm,
              uri="/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/gpusched-webhook"),
        event(WEBHOOK, "patch", "validatingwebhookconfigurations", **adm,
              uri="/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/gpusched-webhook"),
        event(WEBHOOK, "create", "events", ns="team-a", code=201),
        event(WEBHOOK, "patch", "events", ns="team-a", name="p.e1"),
        event(WEBHOOK, "get", "pods", ns="team-a", name="p"),
        event(WEBHOOK, "list", "gpuqueues", group="gpusched.io", uri="/apis/gpusched.io/v1alpha1/gpuqueues?limit=500"),
    ]


def scheduler_run():
    """What `gpusched scheduler` does in its suite: informers on pods, nodes, namespaces, PodDisruptionBudgets,
    GpuQueues and PodGroups, a bind, the Unschedulable condition on a pod's status, an eviction, a queue's status, events, its
    Lease."""
    lease = dict(group="coordination.k8s.io", ns="kube-system")
    pdbs = "/apis/policy/v1beta1/poddisruptionbudgets"
    return [
        event(SCHED, "list", "poddisruptionbudgets", group="policy", uri=pdbs + "?limit=500"),
        event(SCHED, "watch", "poddisruptionbudgets", group="policy", uri=pdbs + "?watch=1"),
        event(SCHED, "create", "pods", sub="eviction", ns="default", name="v", code=201),
        event(SCHED, "list", "pods", uri="/api/v1/pods?limit=500"),
        event(SCHED, "watch", "pods", uri="/api/v1/pods?watch=1"),
        event(SCHED, "list", "nodes", uri="/api/v1/nodes?limit=500"),
        event(SCHED, "watch", "nodes", uri="/api/v1/nodes?watch=1"),
        event(SCHED, "list", "namespaces", uri="/api/v1/namespaces?limit=500"),
        event(SCHED, "watch", "namespaces", uri="/api/v1/namespaces?watch=1"),
        event(SCHED, "list", "gpuqueues", group="gpusched.io", uri="/apis/gpusched.io/v1alpha1/gpuqueues?limit=500"),
        event(SCHED, "watch", "gpuqueues", group="gpusched.io", uri="/apis/gpusched.io/v1alpha1/gpuqueues?watch=1"),
        event(SCHED, "patch", "gpuqueues", group="gpusched.io", sub="status", name="qa"),
        event(SCHED, "list", "podgroups", group="scheduling.x-k8s.io",
              uri="/apis/scheduling.x-k8s.io/v1alpha1/podgroups?limit=500"),
        event(SCHED, "watch", "podgroups", group="scheduling.x-k8s.io",
              uri="/apis/scheduling.x-k8s.io/v1alpha1/podgroups?watch=1"),
        event(SCHED, "create", "pods", sub="binding", ns="default", name="p", code=201),
        event(SCHED, "patch", "pods", sub="status", ns="default", name="q"),
        event(SCHED, "create", "events", ns="default", code=201),
        event(SCHED, "patch", "events", ns="default", name="q.e1"),
        event(SCHED, "get", "leases", name="gpusched-scheduler", code=404, **lease),
        event(SCHED, "create", "leases", code=201, **lease),
        event(SCHED, "update", "leases", name="gpusched-scheduler", **lease),
    ]


class AuditLogTest(unittest.TestCase):
    def test_reads_rotated_files_and_skips_a_torn_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "audit.log")
            with open(os.path.join(d, "audit-2026-01-01T00-00-00.000.log"), "w") as f:
                f.write(json.dumps(event(EXT, "list", "pods")) + "\n")
            with open(path, "w") as f:
                f.write(json.dumps(event(EXT, "patch", "pods", ns="a", name="b")) + "\n" + '{"kind": "Ev')
            events = rbac_audit.read_audit_log(path)
        self.assertEqual([e["verb"] for e in events], ["list", "patch"])

    def test_stages_merge_and_a_list_with_watch_param_is_a_watch(self):
        events = [
            event(EXT, "list", "pods", uri="/api/v1/pods?watch=true", stage="RequestReceived", audit_id="a"),
            event(EXT, "list", "pods", uri="/api/v1/pods?watch=true", stage="ResponseComplete", audit_id="a",
                  code=403),
            event(EXT, "create", "pods", sub="binding", ns="n", name="p", code=201),
            event(AGENT, "get", "nodes", name="n"),
        ]
        reqs = rbac_audit.requests_of(events, EXT)
        self.assertEqual([(r.verb, r.resource, r.code) for r in reqs],
                         [("watch", "pods", 403), ("create", "pods/binding", 201)])
        self.assertEqual(reqs[1].namespace, "n")

    def test_the_time_a_request_was_received(self):
        e = event(EXT, "create", "pods", sub="binding", ns="n", name="p", stage="RequestReceived", audit_id="b")
        e["requestReceivedTimestamp"] = "2026-11-29T04:34:55.250000Z"
        got = rbac_audit.requests_of([e, event(EXT, "get", "pods", ns="n", name="p")], EXT)
        self.assertEqual(got[0].code, 0)  # no response recorded: the client may have died mid-request
        self.assertAlmostEqual(got[0].received, 1795926895.25, places=3)
        self.assertEqual(got[1].received, 0.0)
        self.assertEqual(got[0].user, EXT)
        everyone = rbac_audit.requests_of([e, event(AGENT, "get", "nodes", name="n")], None)
        self.assertEqual([r.user for r in everyone], [EXT, AGENT])


class CompareTest(unittest.TestCase):
    def compare(self, events, roles, component=rbac_audit.EXTENDER, **kw):
        return rbac_audit.compare(rbac_audit.requests_of(events, component.user), roles, component, **kw)

    def test_deploy_roles_resolve_to_the_components(self):
        ext = roles_from(deploy_docs("rbac.yaml"), rbac_audit.EXTENDER)
        self.assertCountEqual([r["source"] for r in ext],
                              ["ClusterRole gpusched-extender (bound by ClusterRoleBinding gpusched-extender)",
                               "Role gpusched-extender-leader (bound by RoleBinding kube-system/gpusched-extender-leader)"])
        agent = roles_from(deploy_docs("agent.yaml"), rbac_audit.AGENT)
        self.assertEqual(len(agent), 1)
        sched = roles_from(deploy_docs("scheduler.yaml"), rbac_audit.SCHEDULER)
        self.assertCountEqual([r["source"] for r in sched],
                              ["ClusterRole gpusched-scheduler (bound by ClusterRoleBinding gpusched-scheduler)",
                               "Role gpusched-scheduler-leader (bound by RoleBinding "
                               "kube-system/gpusched-scheduler-leader)"])
        self.assertEqual(roles_from(deploy_docs("scheduler.yaml"), rbac_audit.EXTENDER), [])
        self.assertEqual(roles_from(deploy_docs("agent.yaml"), rbac_audit.EXTENDER), [])
        webhook = roles_from(deploy_docs("webhook.yaml"), rbac_audit.WEBHOOK)
        self.assertEqual([r["source"] for r in webhook],
                         ["ClusterRole gpusched-webhook (bound by ClusterRoleBinding gpusched-webhook)",
                          "Role gpusched-webhook-certs (bound by RoleBinding kube-system/gpusched-webhook-certs)",
                          "ClusterRole gpusched-webhook-certs (bound by ClusterRoleBinding gpusched-webhook-certs)"])
        self.assertEqual([(r["resources"], r["verbs"]) for r in webhook[0]["rules"]],
                         [(["events"], ["create", "patch"]), (["pods"], ["get"]), (["gpuqueues"], ["list"])],
                         "the webhook writes Events, reads the pod a denial is about and lists GpuQueues, nothing else")
        # Its own certificate: create Secrets in kube-system, read and update only its CA Secret, read and patch
        # only its two webhook configurations.
        self.assertEqual(webhook[1]["namespace"], "kube-system")
        self.assertEqual([(r["resources"], r.get("resourceNames"), r["verbs"]) for r in webhook[1]["rules"]],
                         [(["secrets"], None, ["create"]), (["secrets"], ["gpusched-webhook-ca"], ["get", "update"])])
        self.assertEqual([(r["apiGroups"], r["resources"], r.get("resourceNames"), r["verbs"])
                          for r in webhook[2]["rules"]],
                         [(["admissionregistration.k8s.io"],
                           ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"], ["gpusched-webhook"],
                           ["get", "patch"])])

    def test_allow_list_names_grants_of_deploy(self):
        grants = {}
        for component in (rbac_audit.EXTENDER, rbac_audit.AGENT, rbac_audit.SCHEDULER, rbac_audit.WEBHOOK):
            docs = deploy_docs(os.path.basename(component.manifest))
            grants[component.name] = {g.key for g in rbac_audit.grants_of(roles_from(docs, component))}
        for (name, *key), why in rbac_audit.ALLOWED_UNUSED.items():
            self.assertIn(tuple(key), grants.get(name, set()), f"stale ALLOWED_UNUSED entry {name} {key}")
            self.assertGreater(len(why), 40, "say why the suite cannot use it")

    def test_the_extender_run_matches_deploy_rbac(self):
        roles = roles_from(deploy_docs("rbac.yaml"), rbac_audit.EXTENDER)
        problems, notes, used = self.compare(extender_run(), roles)
        self.assertEqual(problems, [])
        self.assertEqual(set(used), {("", "pods", "list"), ("", "pods", "watch"),
                                     ("", "pods/binding", "create"), ("", "nodes", "list"), ("", "nodes", "watch"),
                                     ("", "events", "create"), ("", "events", "patch"),
                                     ("coordination.k8s.io", "leases", "get"),
                                     ("coordination.k8s.io", "leases", "create"),
                                     ("coordination.k8s.io", "leases", "update")})
        text = rbac_audit.summary(rbac_audit.EXTENDER, used, notes)
        self.assertIn("pods/binding: create x1", text)

    def test_the_webhook_run_matches_deploy_webhook(self):
        roles = roles_from(deploy_docs("webhook.yaml"), rbac_audit.WEBHOOK)
        problems, notes, used = self.compare(webhook_run(), roles, rbac_audit.WEBHOOK)
        self.assertEqual(problems, [])
        self.assertEqual(len(used), 10)
        self.assertTrue(any("unused, allowed: update secrets" in n for n in notes), notes)
        # Another Secret, another namespace's, another configuration: not its own role's.
        for bad in (event(WEBHOOK, "get", "secrets", ns="kube-system", name="other-secret"),
                    event(WEBHOOK, "create", "secrets", ns="default", code=201),
                    event(WEBHOOK, "patch", "validatingwebhookconfigurations", group="admissionregistration.k8s.io",
                          name="someone-elses",
                          uri="/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/someone-elses")):
            problems, _, _ = self.compare(webhook_run() + [bad], roles, rbac_audit.WEBHOOK)
            self.assertEqual(len(problems), 1, problems)
            self.assertIn("not granted by its own role", problems[0])

    def test_the_scheduler_run_matches_deploy_scheduler(self):
        roles = roles_from(deploy_docs("scheduler.yaml"), rbac_audit.SCHEDULER)
        problems, _, used = self.compare(scheduler_run(), roles, rbac_audit.SCHEDULER)
        self.assertEqual(problems, [])
        self.assertEqual(len(used), 21)
        # Its Lease only; nothing of pods but the status and bindings written; no events of other API groups.
        for bad in (event(SCHED, "update", "leases", group="coordination.k8s.io", ns="kube-system",
                          name="gpusched-extender"),
                    event(SCHED, "patch", "pods", ns="default", name="p"),
                    event(SCHED, "create", "events", group="events.k8s.io", ns="default", code=201,
                          uri="/apis/events.k8s.io/v1/namespaces/default/events")):
            problems, _, _ = self.compare(scheduler_run() + [bad], roles, rbac_audit.SCHEDULER)
            self.assertEqual(len(problems), 1, problems)
            self.assertIn("not granted by its own role", problems[0])

    def test_a_grant_the_code_does_not_use_fails(self):
        roles = roles_from(deploy_docs("rbac.yaml"), rbac_audit.EXTENDER)
        cluster_role = next(r for r in roles if r["source"].startswith("ClusterRole gpusched-extender"))
        cluster_role["rules"] = cluster_role["rules"] + [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list", "delete"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["update"]}]
        problems, _, _ = self.compare(extender_run(), roles)
        self.assertEqual(len(problems), 3, problems)
        self.assertTrue(all(p.startswith("unused: ClusterRole gpusched-extender") for p in problems), problems)
        self.assertTrue(any("update pods" in p for p in problems))
        self.assertTrue(any("delete leases (apiGroup coordination.k8s.io)" in p for p in problems))
        # A partial run reports them and passes.
        problems, notes, _ = self.compare(extender_run(), roles, partial=True)
        self.assertEqual(problems, [])
        self.assertEqual(sum("unused in this partial run" in n for n in notes), 3)

    def test_a_refused_request_fails(self):
        roles = roles_from(deploy_docs("rbac.yaml"), rbac_audit.EXTENDER)
        events = extender_run() + [event(EXT, "get", "pods", ns="default", name="p", code=403)] * 2
        problems, _, _ = self.compare(events, roles)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("refused: get pods: 1 of 1 request(s) answered 403", problems[0])

    def test_a_request_allowed_by_another_binding_fails(self):
        roles = roles_from(deploy_docs("rbac.yaml"), rbac_audit.EXTENDER)
        events = extender_run() + [event(EXT, "delete", "pods", ns="default", name="p",
                                         reason='RBAC: allowed by ClusterRoleBinding "oops" of ClusterRole "edit"')]
        problems, _, _ = self.compare(events, roles)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("not granted by its own role: delete pods", problems[0])
        self.assertIn('ClusterRole "edit"', problems[0])

    def test_allow_listed_grant_is_a_note_and_stale_entries_fail(self):
        roles = roles_from(deploy_docs("agent.yaml"), rbac_audit.AGENT)
        run = [event(AGENT, "get", "nodes", name="n0"), event(AGENT, "patch", "nodes", name="n0"),
               event(AGENT, "list", "pods", uri="/api/v1/pods?limit=500&fieldSelector=spec.nodeName%3Dn0"),
               event(AGENT, "watch", "pods", uri="/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3Dn0")]
        problems, notes, _ = self.compare(run, roles, rbac_audit.AGENT)
        self.assertEqual(problems, [])
        self.assertTrue(any(n.startswith("unused, allowed: get pods") for n in notes), notes)
        roles[0]["rules"] = [r for r in roles[0]["rules"] if r["resources"] != ["pods"]] + [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}]
        problems, _, _ = self.compare(run, roles, rbac_audit.AGENT)
        self.assertEqual(problems, ["stale rbac_audit.ALLOWED_UNUSED entry: get pods is not granted any more"])

    def test_no_request_at_all_fails(self):
        roles = roles_from(deploy_docs("rbac.yaml"), rbac_audit.EXTENDER)
        problems, _, _ = self.compare([event("someone-else", "list", "pods")], roles)
        self.assertIn("did it run as its ServiceAccount?", problems[0])
        self.assertEqual(len(problems), 1 + 10)  # and each of the ten grants is unused

    def test_namespaces_resource_names_and_subresources(self):
        component = rbac_audit.Component("sa", "ns", "x.yaml")
        rb = {"metadata": {"name": "b", "namespace": "team"}, "roleRef": {"kind": "ClusterRole", "name": "cr"},
              "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}
        boot = {"metadata": {"name": "system:basic-user", "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                "roleRef": {"kind": "ClusterRole", "name": "system:basic-user"},
                "subjects": [{"kind": "User", "name": component.user}]}
        rules = {"cr": {"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"],
                                   "resourceNames": ["c1"]},
                                  {"apiGroups": [""], "resources": ["*/status"], "verbs": ["patch"]}]}}
        roles = rbac_audit.resolve_roles([("RoleBinding", rb), ("ClusterRoleBinding", boot)],
                                         lambda kind, ns, name: rules.get(name), component)
        self.assertEqual(len(roles), 1)
        self.assertEqual(roles[0]["namespace"], "team")
        user = component.user
        ok = [event(user, "get", "configmaps", ns="team", name="c1"),
              event(user, "patch", "pods", sub="status", ns="team", name="p")]
        problems, _, _ = self.compare(ok, roles, component)
        self.assertEqual(problems, [])
        for bad in (event(user, "get", "configmaps", ns="other", name="c1"),
                    event(user, "get", "configmaps", ns="team", name="c2"),
                    event(user, "patch", "pods", ns="team", name="p")):
            problems, _, _ = self.compare(ok + [bad], roles, component)
            self.assertEqual(len(problems), 1, problems)
            self.assertIn("not granted by its own role", problems[0])


GOOD = """
apiVersion: v1
kind: ServiceAccount
metadata: {name: app, namespace: ns}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: app
  namespace: ns
rules:
- apiGroups: [""]
  resources: ["configmaps"]   # a comment
  verbs: ["get", "watch",
          "list"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: app, namespace: ns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: app}
subjects:
- kind: ServiceAccount
  name: app
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app, namespace: ns}
spec:
  template:
    spec:
      serviceAccountName: app
      containers: [{name: c, image: x}]
---
# No API calls: no token, no role.
apiVersion: v1
kind: ServiceAccount
metadata: {name: quiet, namespace: ns}
automountServiceAccountToken: false
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: quiet, namespace: ns}
spec:
  template:
    spec:
      serviceAccountName: quiet
      containers:
      - name: c
        image: x
        args: ["a", "b: c"]
"""

BAD = """
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: greedy}
rules:
- apiGroups: ["*"]
  resources: ["pods", "*/scale"]
  verbs: ["*"]
- apiGroups: [""]
  resources: ["pods", "pods/status"]
  verbs: ["get", "update"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["clusterroles"]
  verbs: ["escalate", "bind"]
- apiGroups: [""]
  resources: ["users"]
  verbs: ["impersonate"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
- apiGroups: ["admissionregistration.k8s.io"]
  resources: ["mutatingwebhookconfigurations"]
  verbs: ["get", "update"]
- apiGroups: ["resource.k8s.io"]
  resources: ["deviceclasses", "resourceslices"]
  verbs: ["list", "update", "deletecollection"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: nosy, namespace: ns}
rules:
- apiGroups: [""]
  resources: ["secrets"]
  resourceNames: ["mine"]
  verbs: ["create", "get"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["list", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: lonely, namespace: ns}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: lonely, namespace: ns}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: lonely, namespace: ns}
spec:
  template:
    spec:
      serviceAccountName: lonely
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: anon, namespace: ns}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers: []
"""


class CheckRbacTest(unittest.TestCase):
    def test_deploy_passes(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(check_rbac.main(["--root", REPO_ROOT]), 0, out.getvalue())

    def test_good_manifest_passes(self):
        problems, roles, workloads = check_rbac.check({"deploy/good.yaml": GOOD})
        self.assertEqual(problems, [])
        self.assertEqual((roles, workloads), (1, 2))

    def test_each_violation_is_named(self):
        problems, _, _ = check_rbac.check({"deploy/bad.yaml": BAD})
        text = "\n".join(problems)
        for expected in ("rule 1: wildcard apiGroups entry '*'", "rule 1: wildcard resources entry '*/scale'",
                         "rule 1: wildcard verbs entry '*'", "rule 2: 'update' on pods:",
                         "rule 2: 'update' on pods/status", "rule 3: verb 'bind'", "rule 3: verb 'escalate'",
                         "rule 4: verb 'impersonate'",
                         "ClusterRole greedy: rule 5: secrets in a ClusterRole",
                         "ClusterRole greedy: rule 6: mutatingwebhookconfigurations without resourceNames",
                         "ClusterRole greedy: rule 6: 'update' on mutatingwebhookconfigurations",
                         "ClusterRole greedy: rule 7: 'update' on deviceclasses: the administrator installs",
                         "ClusterRole greedy: rule 7: 'deletecollection' on deviceclasses",
                         "ClusterRole greedy: rule 7: 'deletecollection' on resourceslices removes every node's",
                         "Role nosy: rule 1: 'create' with resourceNames never matches",
                         "Role nosy: rule 2: 'list' on secrets reads or removes every Secret",
                         "Role nosy: rule 2: list, update on secrets without resourceNames",
                         "ClusterRoleBinding admin: binds ClusterRole cluster-admin, which is not defined",
                         "Deployment lonely: ServiceAccount ns/lonely gets an API token but no binding",
                         "CronJob anon: runs as ServiceAccount ns/default, which is not defined"):
            self.assertIn(expected, text)
        self.assertEqual(len(problems), 20, text)
        self.assertTrue(all(p.startswith("deploy/bad.yaml: ") for p in problems))

    def test_unreadable_yaml_is_a_problem(self):
        problems, _, _ = check_rbac.check({"deploy/x.yaml": "kind: Role\nrules: [a, b\n"})
        self.assertEqual(len(problems), 1)
        self.assertIn("deploy/x.yaml: cannot read: line 3:", problems[0])


if __name__ == "__main__":
    unittest.main()

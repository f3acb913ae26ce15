"""Least privilege, checked against what the code really does: the API requests a gpusched component made during a
suite (kube-apiserver's audit log, control_plane.py turns it on) against the rules of the roles bound to its
ServiceAccount (applied from deploy/*.yaml).

check_component() fails, naming each problem, when
  * a request of the component was refused (403): its role grants less than the code uses;
  * a request was allowed, but by some other binding than the component's own roles;
  * a (apiGroup, resource, verb) its roles grant was never used by the suite: the role grants more than the code
    uses, unless ALLOWED_UNUSED names it with the reason (a code path the suite cannot reach);
  * an ALLOWED_UNUSED entry is no longer granted (stale);
  * the component made no request at all (it did not run as its ServiceAccount, or the audit log is off).

Each audit event carries the user, the verb (a watch is verb "watch"; a "list" with watch=1/true in the URI is
treated as one too), objectRef.apiGroup/resource/subresource/namespace/name and, at stage ResponseComplete or
ResponseStarted, responseStatus.code. Stages of one request share its auditID.

Python 3 standard library only.
"""

import dataclasses
import datetime
import glob
import json
import os
import re
import urllib.parse

RBAC_API = "/apis/rbac.authorization.k8s.io/v1"


@dataclasses.dataclass(frozen=True)
class Component:
    name: str  # its ServiceAccount
    namespace: str
    manifest: str  # where its ServiceAccount and role are defined

    @property
    def user(self):
        return f"system:serviceaccount:{self.namespace}:{self.name}"


EXTENDER = Component("gpusched-extender", "kube-system", "deploy/base/extender/rbac.yaml")
AGENT = Component("gpusched-agent", "kube-system", "deploy/base/agent/agent.yaml")
SCHEDULER = Component("gpusched-scheduler", "kube-system", "deploy/base/scheduler/scheduler.yaml")
WEBHOOK = Component("gpusched-webhook", "kube-system", "deploy/base/webhook/webhook.yaml")

# Grants a suite may leave unused: (ServiceAccount, apiGroup, resource, verb) -> why the suite cannot use it.
ALLOWED_UNUSED = {
    ("gpusched-agent", "", "events", "create"):
        "the agent's only Events are refused GPU handoffs (GPUHandoffRefused), which need a kubelet calling Allocate "
        "or PreStartContainer; tests/e2e runs none. tests/integration/device_plugin_test.cc covers them.",
    ("gpusched-agent", "", "events", "patch"):
        "a repeated GPUHandoffRefused raises the first Event's count: as above, it needs a kubelet; the aggregation "
        "itself is tested in tests/integration/k8s_client_test.cc (EventWriter*).",
    ("gpusched-agent", "", "pods", "get"):
        "the device plugin reads one pod alone (NodePods::GetPod) only when the kubelet's PodResources lists a "
        "pod that the agent's pod informer has not delivered yet, a race with a fresh binding; it needs a kubelet "
        "calling Allocate, which tests/e2e does not run. tests/integration/device_plugin_test.cc covers it "
        "(NodePodsTest).",
    ("gpusched-webhook", "", "secrets", "update"):
        "the webhook updates its CA Secret only to rotate the CA, with under a third of its 10-year lifetime left, "
        "which no suite can wait for; src/gpusched/webhook/cert_keeper_test.cc (CertKeeperTest.TheCaRotates*, "
        "ARotationThatLosesTheRace*) covers it against the fake API server, whose update refuses a stale "
        "resourceVersion as the real one does.",
}

# Partial runs (one test of a suite) leave grants unused that the whole suite uses: with this set, they are
# reported but do not fail.
PARTIAL_ENV = "GPUSCHED_E2E_RBAC_PARTIAL"


def apply_rbac(kube, manifest):
    """Creates the ServiceAccounts, roles and bindings of a manifest (a path under the repository), and nothing
    else: the API server parses the YAML (Content-Type application/yaml)."""
    collections = {
        "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
        "Role": RBAC_API + "/namespaces/{ns}/roles",
        "RoleBinding": RBAC_API + "/namespaces/{ns}/rolebindings",
        "ClusterRole": RBAC_API + "/clusterroles",
        "ClusterRoleBinding": RBAC_API + "/clusterrolebindings",
    }
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    with open(os.path.join(root, manifest)) as f:
        text = f.read()
    created = []
    for doc in re.split(r"(?m)^---[ \t]*$", text):
        kind = re.search(r"(?m)^kind:[ \t]*(\S+)", doc)
        if not kind or kind.group(1) not in collections:
            continue
        ns = re.search(r"(?m)^metadata:\n(?:[ ]+.*\n)*?[ ]+namespace:[ \t]*(\S+)", doc)
        path = collections[kind.group(1)].format(ns=ns.group(1) if ns else "default")
        created.append(kube.call("POST", path, doc, content_type="application/yaml"))
    return created


# -- the audit log ----------------------------------------------------------------------------------------------


def read_audit_log(path):
    """Every event of the log at `path` and of its rotated backups (<name>-<time>.log), oldest first. A line that
    is not JSON (the one being written) is skipped."""
    stem, ext = os.path.splitext(path)
    files = sorted(glob.glob(f"{glob.escape(stem)}-*{ext}")) + [path]
    events = []
    for name in files:
        try:
            with open(name, encoding="utf-8", errors="replace") as f:
                for line in f:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(event, dict):
                        events.append(event)
        except FileNotFoundError:
            continue
    return events


@dataclasses.dataclass
class Request:
    """One API request (the stages of one auditID together)."""
    verb: str
    group: str  # "" for the core group
    resource: str  # "pods", "pods/binding"; "" for a non-resource URL
    namespace: str  # "" when cluster-wide or non-resource
    name: str
    path: str  # the request URI without the query
    code: int  # 0 when no response was recorded yet (a watch still open)
    reason: str  # authorization.k8s.io/reason, when the server recorded it
    received: float = 0.0  # requestReceivedTimestamp as seconds since the epoch; 0 when not recorded
    user: str = ""  # who made it

    @property
    def key(self):
        return (self.group, self.resource or self.path, self.verb)


def requests_of(events, user):
    """The requests `user` made (None: everyone's), in log order."""
    by_id = {}
    for e in events:
        if user is not None and (e.get("user") or {}).get("username") != user:
            continue
        audit_id = e.get("auditID") or id(e)
        by_id.setdefault(audit_id, []).append(e)
    out = []
    for stages in by_id.values():
        first = stages[0]
        ref = first.get("objectRef") or {}
        uri = first.get("requestURI", "")
        path, _, query = uri.partition("?")
        verb = first.get("verb", "")
        if verb == "list" and any(v.lower() in ("1", "true") for v in urllib.parse.parse_qs(query).get("watch", [])):
            verb = "watch"
        resource = ref.get("resource", "")
        if resource and ref.get("subresource"):
            resource += "/" + ref["subresource"]
        code, reason, received = 0, "", _epoch(first.get("requestReceivedTimestamp"))
        for s in stages:
            status = s.get("responseStatus") or {}
            if s.get("stage") == "ResponseComplete" or (not code and s.get("stage") == "ResponseStarted"):
                code = status.get("code", code) or code
            reason = (s.get("annotations") or {}).get("authorization.k8s.io/reason", reason)
        out.append(Request(verb=verb, group=ref.get("apiGroup", ""), resource=resource,
                           namespace=ref.get("namespace", ""), name=ref.get("name", ""), path=path, code=code,
                           reason=reason, received=received, user=(first.get("user") or {}).get("username", "")))
    return out


def _epoch(stamp):
    """An RFC 3339 time of the audit log ("2026-11-29T04:34:55.123456Z") as seconds since the epoch; 0 if absent."""
    if not stamp:
        return 0.0
    try:
        return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


# -- roles --------------------------------------------------------------------------------------------------------


def _bootstrap(obj):
    return ((obj.get("metadata") or {}).get("labels") or {}).get("kubernetes.io/bootstrapping") == "rbac-defaults"


def resolve_roles(bindings, lookup, component):
    """The roles bound to the component's ServiceAccount (by kind ServiceAccount, or kind User with its user name).

    bindings: (kind, object) pairs of RoleBindings and ClusterRoleBindings; lookup(kind, namespace, name) returns
    a Role (namespace set) or ClusterRole (namespace None), or None when missing. Kubernetes' built-in bindings
    (label kubernetes.io/bootstrapping=rbac-defaults, granting discovery to every user) are not the component's.
    Returns dicts {source, namespace (None: cluster-wide), rules}."""
    roles = []
    for kind, b in bindings:
        if _bootstrap(b):
            continue
        meta = b.get("metadata") or {}
        ns = meta.get("namespace") if kind == "RoleBinding" else None
        mine = False
        for s in b.get("subjects") or []:
            if s.get("kind") == "ServiceAccount":
                mine |= s.get("name") == component.name and (s.get("namespace") or ns) == component.namespace
            elif s.get("kind") == "User":
                mine |= s.get("name") == component.user
        if not mine:
            continue
        ref = b.get("roleRef") or {}
        role = lookup(ref.get("kind"), ns if ref.get("kind") == "Role" else None, ref.get("name"))
        where = f"{kind} {ns + '/' if ns else ''}{meta.get('name')}"
        roles.append({"source": f"{ref.get('kind')} {ref.get('name')} (bound by {where})", "namespace": ns,
                      "rules": (role or {}).get("rules") or [], "missing": role is None})
    return roles


def roles_in_cluster(kube, component):
    """resolve_roles over the live RBAC objects (what the API server enforces), read as the admin."""
    bindings = [("ClusterRoleBinding", b) for b in kube.call("GET", f"{RBAC_API}/clusterrolebindings")["items"]]
    bindings += [("RoleBinding", b) for b in kube.call("GET", f"{RBAC_API}/rolebindings")["items"]]

    def lookup(kind, ns, name):
        path = f"{RBAC_API}/namespaces/{ns}/roles/{name}" if kind == "Role" else f"{RBAC_API}/clusterroles/{name}"
        status, obj = kube.raw("GET", path)
        return obj if status == 200 else None
    return resolve_roles(bindings, lookup, component)


@dataclasses.dataclass(frozen=True)
class Grant:
    group: str
    resource: str  # or a non-resource URL (starts with "/")
    verb: str
    namespace: object  # None: every namespace
    names: tuple  # resourceNames; empty: any
    source: str

    @property
    def key(self):
        return (self.group, self.resource, self.verb)

    def covers(self, r):
        if self.verb not in ("*", r.verb):
            return False
        if self.resource.startswith("/"):
            return not r.resource and (self.resource == r.path or
                                       (self.resource.endswith("*") and r.path.startswith(self.resource[:-1])))
        if not r.resource or self.group not in ("*", r.group):
            return False
        base, _, sub = r.resource.partition("/")
        if self.resource not in ("*", r.resource) and not (sub and self.resource == "*/" + sub):
            return False
        if self.namespace is not None and self.namespace != r.namespace:
            return False
        return not self.names or r.name in self.names


def grants_of(roles):
    out = []
    for role in roles:
        for rule in role["rules"]:
            names = tuple(rule.get("resourceNames") or ())
            for verb in rule.get("verbs") or []:
                for url in rule.get("nonResourceURLs") or []:
                    out.append(Grant("", url, verb, None, (), role["source"]))
                for group in rule.get("apiGroups") or []:
                    for resource in rule.get("resources") or []:
                        out.append(Grant(group, resource, verb, role["namespace"], names, role["source"]))
    return out


# -- the comparison -----------------------------------------------------------------------------------------------


def _show(key):
    group, resource, verb = key
    return f"{verb} {resource}" + (f" (apiGroup {group})" if group else "")


def compare(requests, roles, component, allowed_unused=None, partial=False):
    """(problems, notes, used): problems fail the check; notes are for the log; used maps each (apiGroup,
    resource, verb) the component used to its request count."""
    allowed_unused = ALLOWED_UNUSED if allowed_unused is None else allowed_unused
    problems, notes = [], []
    for role in roles:
        if role.get("missing"):
            problems.append(f"{role['source']}: the role does not exist")
    if not requests:
        problems.append(f"no request by {component.user} in the audit log: did it run as its ServiceAccount?")
    grants = grants_of(roles)
    used, denied, elsewhere = {}, {}, {}
    for r in requests:
        used[r.key] = used.get(r.key, 0) + 1
        if r.code == 403:
            denied.setdefault(r.key, []).append(r)
        elif r.resource and not any(g.covers(r) for g in grants):
            elsewhere.setdefault(r.key, []).append(r)
    for key, rs in sorted(denied.items()):
        problems.append(f"refused: {_show(key)}: {len(rs)} of {used[key]} request(s) answered 403 "
                        f"(e.g. {rs[0].path}): the role grants less than the code uses")
    for key, rs in sorted(elsewhere.items()):
        problems.append(f"not granted by its own role: {_show(key)} (e.g. {rs[0].path}) was allowed by "
                        f"{rs[0].reason or 'another binding'}")
    keys = {g.key for g in grants}
    for g in sorted(set(grants), key=lambda g: (g.key, g.source, str(g.namespace), g.names)):
        why = allowed_unused.get((component.name,) + g.key)
        if any(g.covers(r) for r in requests):
            if why:
                notes.append(f"used although rbac_audit.ALLOWED_UNUSED says the suite cannot: {_show(g.key)}")
            continue
        if why:
            notes.append(f"unused, allowed: {_show(g.key)}: {why}")
        elif partial:
            notes.append(f"unused in this partial run: {_show(g.key)} ({g.source})")
        else:
            problems.append(f"unused: {g.source} grants {_show(g.key)}, which the suite never used: drop it, make "
                            f"the suite use it, or name it in rbac_audit.ALLOWED_UNUSED with the reason")
    for (name, *key), _ in sorted(allowed_unused.items()):
        if name == component.name and tuple(key) not in keys:
            problems.append(f"stale rbac_audit.ALLOWED_UNUSED entry: {_show(tuple(key))} is not granted any more")
    return problems, notes, used


def summary(component, used, notes):
    """The derived verb sets, one line per (apiGroup, resource)."""
    by_resource = {}
    for (group, resource, verb), n in used.items():
        by_resource.setdefault((group, resource), []).append(f"{verb} x{n}")
    lines = [f"{component.user} used:"]
    for (group, resource), verbs in sorted(by_resource.items()):
        lines.append(f"  {resource}{' (' + group + ')' if group else ''}: {', '.join(sorted(verbs))}")
    lines += ["  " + n for n in notes]
    return "\n".join(lines)


def check_component(kube, audit_log, component, log=print):
    """Compares the component's requests in the audit log with the roles bound to it in the cluster; raises
    AssertionError naming every problem. Call it while the control plane still runs (tearDownClass)."""
    roles = roles_in_cluster(kube, component)
    requests = requests_of(read_audit_log(audit_log), component.user)
    partial = bool(os.environ.get(PARTIAL_ENV))
    problems, notes, used = compare(requests, roles, component, partial=partial)
    log(summary(component, used, notes))
    if problems:
        raise AssertionError(
            f"{component.manifest}: the RBAC of {component.user} does not match the requests its code made "
            f"({audit_log}):\n  " + "\n  ".join(problems) +
            f"\n(if only some tests ran, or an earlier test failed, some grants may go unused: {PARTIAL_ENV}=1 "
            "reports them without failing)")

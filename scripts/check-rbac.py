#!/usr/bin/env python3
"""Static least-privilege check of the RBAC in deploy/**/*.yaml (docs/security.md).

Every Role and ClusterRole defined there must grant:
  * no wildcard ("*") apiGroup, resource, verb or non-resource URL, and no "*/subresource";
  * no `update` on pods or their subresources (gpusched patches the annotations it owns; an update replaces the
    whole object and races every other writer);
  * no `escalate`, `bind` or `impersonate` (each lets the holder exceed its own role);
  * no `create` in a rule with resourceNames (the name of an object being created is not known when the request is
    authorised, so such a rule never matches: the create is refused); `create` goes in a rule of its own;
  * Secrets only in a Role (never cluster-wide), and every verb on them but `create` limited by resourceNames (no
    list or watch: those read every Secret of the namespace);
  * mutating- and validatingwebhookconfigurations only with resourceNames, and only get and patch (a role that may
    change any webhook configuration may intercept every write to the cluster);
  * resource.k8s.io (DRA): no write to deviceclasses (the administrator installs them; a role that may change a
    class changes what every claim naming it gets) and no deletecollection of resourceslices (one request removes
    the slices of every node and driver; the agent deletes its own slices one by one).
Every workload there (Deployment, DaemonSet, StatefulSet, ReplicaSet, Job, CronJob, Pod) whose pods get an API
token must name a ServiceAccount defined there (not `default`) that a RoleBinding or ClusterRoleBinding there binds
to a Role or ClusterRole defined there. A workload with automountServiceAccountToken: false (on its pod spec, or on
its ServiceAccount with the pod spec silent) calls no API and needs no role. Every binding must name a role defined
there (never a built-in one such as cluster-admin), except the built-in roles Kubernetes documents for running a
second kube-scheduler (BUILTIN_SCHEDULER_ROLES), which deploy/extender binds for its kube-scheduler.

What each role grants, verb by verb, is checked against the API requests the code really makes by the end-to-end
suite (tests/e2e/rbac_audit.py). This check needs no cluster: it reads the manifests with PyYAML (Debian's
python3-yaml, installed by scripts/install-deps.sh).

Usage: scripts/check-rbac.py [--root DIR]     (DIR defaults to the repository root)
Prints `deploy/<file>: <kind> <name>: <problem>` per violation and exits 1, or `rbac: N roles, M workloads OK`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

WORKLOAD_KINDS = {"Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob", "Pod"}
FORBIDDEN_VERBS = {"escalate", "bind", "impersonate"}
WEBHOOK_CONFIGURATIONS = {"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}
# Built-in roles a kube-scheduler needs (kube-apiserver keeps their rules in step with its version): what upstream's
# guide to a second scheduler binds. Nothing else built in may be bound.
BUILTIN_SCHEDULER_ROLES = {("ClusterRole", None, "system:kube-scheduler"),
                           ("ClusterRole", None, "system:volume-scheduler"),
                           ("Role", "kube-system", "extension-apiserver-authentication-reader")}


# -- reading the manifests ----------------------------------------------------------------------------------------


class YamlError(ValueError):
    pass


def load_all(text: str) -> list:
    """The documents of a YAML stream (empty documents left out), read with PyYAML's safe loader. Raises YamlError
    naming the line."""
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise YamlError(f"{where}{getattr(e, 'problem', None) or e}") from None


# -- the checks ---------------------------------------------------------------------------------------------------


def _pod_spec(obj: dict) -> dict:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Pod":
        return spec
    if obj.get("kind") == "CronJob":
        spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
    return ((spec.get("template") or {}).get("spec")) or {}


def check_rule(rule: dict) -> list[str]:
    problems = []
    groups, resources = rule.get("apiGroups") or [], rule.get("resources") or []
    verbs, urls = rule.get("verbs") or [], rule.get("nonResourceURLs") or []
    for field, values in (("apiGroups", groups), ("resources", resources), ("verbs", verbs),
                          ("nonResourceURLs", urls)):
        for v in values:
            if not isinstance(v, str):
                problems.append(f"{field} holds {v!r}, not a string")
            elif "*" in v:
                problems.append(f"wildcard {field} entry {v!r}: name each one the code uses")
    if not verbs:
        problems.append("a rule without verbs")
    for v in sorted(set(verbs) & FORBIDDEN_VERBS):
        problems.append(f"verb {v!r} lets the holder exceed its own role")
    names = rule.get("resourceNames") or []
    if names and "create" in verbs:
        problems.append("'create' with resourceNames never matches (a create is authorised before the object has a "
                        "name): grant create in a rule without resourceNames")
    for r in resources:
        if r in WEBHOOK_CONFIGURATIONS:
            if not names:
                problems.append(f"{r} without resourceNames: name the configurations the code patches")
            for v in sorted(set(verbs) - {"get", "patch"}):
                problems.append(f"{v!r} on {r}: only get and patch of the named configurations")
    if "resource.k8s.io" in groups:
        for r in resources:
            if r == "deviceclasses":
                for v in sorted(set(verbs) - {"get", "list", "watch"}):
                    problems.append(f"{v!r} on deviceclasses: the administrator installs the classes; read only")
            if r == "resourceslices" and "deletecollection" in verbs:
                problems.append("'deletecollection' on resourceslices removes every node's slices: delete them "
                                "one by one")
    if "update" in verbs:
        for r in resources:
            if r == "pods" or (isinstance(r, str) and r.startswith("pods/")):
                problems.append(f"'update' on {r}: patch what gpusched owns instead of replacing the whole object")
    return problems


def check_secret_rule(kind: str, rule: dict) -> list[str]:
    """Secrets: in a Role only; every verb but create limited to named Secrets; never list or watch."""
    if "secrets" not in (rule.get("resources") or []) or "" not in (rule.get("apiGroups") or []):
        return []
    if kind != "Role":
        return ["secrets in a ClusterRole: grant them in a Role of the namespace the code uses"]
    problems = []
    verbs = set(rule.get("verbs") or [])
    for v in sorted(verbs & {"list", "watch", "deletecollection"}):
        problems.append(f"{v!r} on secrets reads or removes every Secret of the namespace")
    if not rule.get("resourceNames") and verbs - {"create"}:
        problems.append(f"{', '.join(sorted(verbs - {'create'}))} on secrets without resourceNames: name the "
                        "Secrets the code uses")
    return problems


def check(manifests: dict[str, str]) -> tuple[list[str], int, int]:
    """manifests: file name -> text. Returns (problems, roles checked, workloads checked)."""
    problems: list[str] = []
    objects = []  # (file, object)
    for name, text in sorted(manifests.items()):
        try:
            docs = load_all(text)
        except YamlError as e:
            problems.append(f"{name}: cannot read: {e}")
            continue
        for doc in docs:
            if isinstance(doc, dict) and "kind" in doc:
                objects.append((name, doc))

    def ns_of(obj):
        return (obj.get("metadata") or {}).get("namespace") or "default"

    def name_of(obj):
        return (obj.get("metadata") or {}).get("name") or "?"

    roles, service_accounts, bound = set(), {}, set()
    for file, obj in objects:
        kind = obj["kind"]
        if kind in ("Role", "ClusterRole"):
            roles.add((kind, ns_of(obj) if kind == "Role" else None, name_of(obj)))
            for n, rule in enumerate(obj.get("rules") or [], start=1):
                problems += [f"{file}: {kind} {name_of(obj)}: rule {n}: {p}"
                             for p in check_rule(rule) + check_secret_rule(kind, rule)]
        elif kind == "ServiceAccount":
            service_accounts[(ns_of(obj), name_of(obj))] = obj
    for file, obj in objects:
        kind = obj["kind"]
        if kind not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        ref = obj.get("roleRef") or {}
        ref_key = (ref.get("kind"), ns_of(obj) if ref.get("kind") == "Role" else None, ref.get("name"))
        if ref_key not in roles and ref_key not in BUILTIN_SCHEDULER_ROLES:
            problems.append(f"{file}: {kind} {name_of(obj)}: binds {ref.get('kind')} {ref.get('name')}, which is not "
                            "defined in deploy/ (never bind built-in roles such as cluster-admin)")
            continue
        for s in obj.get("subjects") or []:
            if s.get("kind") == "ServiceAccount":
                sa_ns = s.get("namespace") or (ns_of(obj) if kind == "RoleBinding" else None)
                bound.add((sa_ns, s.get("name")))

    workloads = 0
    for file, obj in objects:
        if obj["kind"] not in WORKLOAD_KINDS:
            continue
        workloads += 1
        spec = _pod_spec(obj)
        sa_name = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        key = (ns_of(obj), sa_name)
        sa = service_accounts.get(key)
        automount = spec.get("automountServiceAccountToken")
        if automount is None and sa is not None:
            automount = sa.get("automountServiceAccountToken")
        where = f"{file}: {obj['kind']} {name_of(obj)}"
        if automount is False:
            continue  # no token in its pods: it cannot call the API, and needs no role
        if sa is None:
            problems.append(f"{where}: runs as ServiceAccount {key[0]}/{sa_name}, which is not defined in deploy/ "
                            "(give it its own ServiceAccount, or automountServiceAccountToken: false)")
        elif key not in bound:
            problems.append(f"{where}: ServiceAccount {key[0]}/{sa_name} gets an API token but no binding in deploy/ "
                            "binds it to a role defined there (or set automountServiceAccountToken: false)")
    return problems, len(roles), workloads


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="repository root (default: the parent of scripts/)")
    args = parser.parse_args(argv)
    deploy = args.root / "deploy"
    # Kustomize's own files and generator inputs are not manifests; everything else under deploy/ is.
    files = sorted(p for p in list(deploy.rglob("*.yaml")) + list(deploy.rglob("*.yml"))
                   if p.name not in ("kustomization.yaml", "kustomization.yml") and "apiVersion:" in p.read_text())
    if not files:
        print(f"rbac: no manifests in {deploy}", file=sys.stderr)
        return 2
    manifests = {str(p.relative_to(args.root)): p.read_text(encoding="utf-8") for p in files}
    problems, roles, workloads = check(manifests)
    for p in problems:
        print(p)
    if problems:
        print(f"rbac: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"rbac: {roles} roles, {workloads} workloads OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

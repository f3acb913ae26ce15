#!/usr/bin/env python3
"""Static checks of deploy/monitoring: each layout's alerts and their promtool tests, the dashboard, the overlays.

deploy/monitoring has one layout per install layout of deploy/ (scheduler, extender, agent: the directories
deploy/monitoring/<layout>), each built from the components of the daemons that layout runs
(deploy/monitoring/components/<daemon>: a PodMonitor, an alert group added to the PrometheusRule kube-system/gpusched,
promtool tests of those alerts). deploy/monitoring itself renders the scheduler layout.

  * components/*/alerts.yaml: every alert has a severity label (critical, warning or info) and summary,
    description and runbook_url annotations. Every runbook_url is absolute (http or https) and ends in the
    anchor of the section of docs/troubleshooting.md named after the alert, which must exist there; in a rendered
    layout it starts with common/prometheusrule.yaml's gpusched.io/runbook-base (components/runbook-urls ran).
  * components/*/alerts_test.yaml: holds for every alert of its component a case where it fires and one where it
    stays quiet, and names no other alert.
  * every layout: its PrometheusRule's spec, written to a plain rules file, passes `promtool check rules`, and
    `promtool test rules` passes for the tests of each component the layout lists and for the layout's own
    healthy_test.yaml. That one feeds the series a healthy install of the layout exports (its `up` series are
    exactly those of the jobs the layout's PodMonitors make) and must assert, for every alert the layout renders,
    that it does not fire (at 3 evaluation times or more), and that the query `ALERTS` finds nothing (no alert
    pending or firing, whatever the layout installs). An alert selects only jobs the layout's PodMonitors make.
  * every layout against its install layout (`kubectl kustomize deploy/<layout>`): each PodMonitor selects pods of
    a workload there by a port they declare, and each workload that declares a container port is scraped.
  * dashboards/gpusched.json: every Prometheus query of a panel or a query variable, Grafana's variables replaced
    by stand-ins ($__rate_interval by 5m, $node by stand_in, ...), parses (as recording rules through
    `promtool check rules`); every panel and query uses the data source variable ${datasource}; it selects jobs
    that some component's PodMonitor makes.
  * every gpusched_* and DCGM_* metric an alert or a query uses is selected by job and exported by that job's
    daemon: the string literals of its sources (src/gpusched/...) name it, or it is one of the HTTP server's
    families (net::RenderStats). Job gpusched-<daemon> is the agent, the scheduler, the webhook or the extender
    (the extender's probe listener, scraped by components/extender/podmonitor.yaml in the extender layout).
  * `kubectl kustomize` renders every layout, and deploy/monitoring the same objects as deploy/monitoring/scheduler:
    the layout's PodMonitors, the PrometheusRule and the ConfigMap kube-system/gpusched-dashboard (label
    grafana_dashboard: "1") holding the dashboard, all in kube-system. Without kubectl, each layout's rules are
    composed from the files of the components its kustomization.yaml lists, in that order (what kustomize does),
    and the checks that need a rendering are skipped.

The PromQL helpers live in tests/e2e/monitoring_check.py, which the end-to-end suites use on real /metrics bodies.
Needs promtool (Debian's `prometheus` package; $PROMTOOL overrides) and PyYAML (python3-yaml); kubectl is optional
($KUBECTL overrides; >= 1.24 for the replacements of components/runbook-urls).

Usage: scripts/check-monitoring.py [--root DIR] [--quiet]
Prints the metrics each alert and query uses (not with --quiet) and one line per layout with promtool's verdict on
each test file, then `<file>: <alert or panel>: <problem>` per problem and exits 1, or
`monitoring: N alerts in L layouts, M tests, K dashboard queries OK`. Exits 2 without promtool.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

SEVERITIES = {"critical", "warning", "info"}
RUNBOOK_DOC = "docs/troubleshooting.md"
MONITORING = "deploy/monitoring"
COMMON_RULE = f"{MONITORING}/common/prometheusrule.yaml"
RUNBOOK_ANNOTATION = "gpusched.io/runbook-base"
# The base the promtool tests' expected annotations are written with (common/prometheusrule.yaml's value as shipped);
# a different value set there is substituted into the copies of the tests that promtool runs.
SHIPPED_RUNBOOK_BASE = "https://github.com/gpusched/gpusched/blob/main/docs/troubleshooting.md"
DASHBOARD = f"{MONITORING}/dashboards/gpusched.json"
DEFAULT_LAYOUT = "scheduler"  # what deploy/monitoring itself renders
NOT_LAYOUTS = {"common", "components", "dashboards"}
RUNBOOK_COMPONENT = "runbook-urls"
RULE_NAME = "gpusched"
RULES_NAME = "alerts.rules.yaml"  # what every test file's rule_files names
HEALTHY_TEST = "healthy_test.yaml"
MIN_HEALTHY_EVALS = 3
# Prometheus's own series, always there.
BUILTIN_METRICS = {"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling",
                   "scrape_series_added", "ALERTS", "ALERTS_FOR_STATE"}
# Where each daemon's metric names are written; its job is gpusched-<daemon>.
DAEMON_SOURCES = {
    "agent": ["src/gpusched/agent", "src/gpusched/cli/agent_command.cc"],
    "scheduler": ["src/gpusched/scheduler", "src/gpusched/cli/scheduler_command.cc"],
    "webhook": ["src/gpusched/webhook", "src/gpusched/cli/webhook_command.cc"],
    "extender": ["src/gpusched/extender", "src/gpusched/cli/extender_command.cc"],
}
HTTP_STATS_SOURCE = "src/gpusched/net/http_server.cc"
WORKLOAD_KINDS = {"Deployment", "DaemonSet", "StatefulSet"}

_CPP_TOKEN = re.compile(r"""//[^\n]*|/\*.*?\*/|'(?:[^'\\\n]|\\.)*'|"((?:[^"\\\n]|\\.)*)\"""", re.S)
_METRIC_IN_LITERAL = re.compile(r"\b(?:gpusched|DCGM)_[A-Za-z0-9_:]*[A-Za-z0-9]")
_SELECTOR = re.compile(r"""([A-Za-z_:][A-Za-z0-9_:]*)\s*\{((?:[^}"]|"(?:[^"\\]|\\.)*")*)\}""")
_JOB_MATCHER = re.compile(r"""\bjob\s*(=~|=)\s*"((?:[^"\\]|\\.)*)\"""")
_RUNBOOK_URL = re.compile(r"^(https?://[^/\s#]+(?:/[^\s#]*)?)#([A-Za-z0-9_-]+)$")


class Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: str, problem: str) -> None:
        self.items.append(f"{where}: {problem}")


# -- helpers ------------------------------------------------------------------------------------------------------


def load_check_module(root: Path):
    sys.path.insert(0, str(root / "tests" / "e2e"))
    import monitoring_check  # noqa: E402  (tests/e2e is not a package)

    return monitoring_check


def run(cmd: list[str], cwd: Path | None = None) -> tuple[int, str]:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def indent(text: str) -> str:
    return "\n".join("    " + line.rstrip() for line in text.splitlines() if line.strip())


def literal_metric_names(paths: list[Path]) -> set[str]:
    """gpusched_* and DCGM_* names inside the C++ string literals of `paths` (files or folders; tests, benchmarks
    and fuzzers left out), comments skipped."""
    names: set[str] = set()
    files: list[Path] = []
    for p in paths:
        files += sorted(p.rglob("*.cc")) + sorted(p.rglob("*.h")) if p.is_dir() else [p]
    for f in files:
        if re.search(r"_(test|benchmark|fuzz)\.cc$|_test_util\.h$", f.name):
            continue
        for m in _CPP_TOKEN.finditer(f.read_text(encoding="utf-8", errors="replace")):
            if m.group(1):
                names.update(_METRIC_IN_LITERAL.findall(m.group(1)))
    return names


def exported_metrics(root: Path, problems: Problems) -> dict[str, set[str]]:
    """daemon -> the metric names its sources write."""
    suffixes: set[str] = set()
    stats = root / HTTP_STATS_SOURCE
    if stats.is_file():
        suffixes = set(re.findall(r"\bp\s*\+\s*\"(_[A-Za-z0-9_:]+)", stats.read_text(encoding="utf-8")))
    if not suffixes:
        problems.add(HTTP_STATS_SOURCE, "cannot find RenderStats' families (p + \"_http_...\")")
    daemons: dict[str, set[str]] = {}
    for daemon, rel in DAEMON_SOURCES.items():
        paths = [root / r for r in rel]
        for p in paths:
            if not p.exists():
                problems.add(str(p.relative_to(root)), f"missing: cannot tell which metrics the {daemon} exports")
        paths = [p for p in paths if p.exists()]
        names = literal_metric_names(paths)
        for p in paths:
            for f in [p] if p.is_file() else sorted(p.rglob("*.cc")):
                text = f.read_text(encoding="utf-8", errors="replace")
                for prefix in re.findall(r"RenderStats\([^;]*?\"([A-Za-z_:][A-Za-z0-9_:]*)\"", text):
                    names |= {prefix + s for s in suffixes}
        daemons[daemon] = names
    return daemons


def markdown_anchors(text: str) -> set[str]:
    """The anchors a Git host's Markdown view gives the headings of `text` (lower case, punctuation dropped,
    spaces as hyphens, -1, -2, ... for repeats), fenced code left out, plus explicit <a id|name="...">."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    fence = ""
    for line in text.splitlines():
        m = re.match(r"^\s*(```+|~~~+)", line)
        if m:
            if not fence:
                fence = m.group(1)
            elif m.group(1).startswith(fence):
                fence = ""
            continue
        if fence:
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1)).replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    anchors |= set(re.findall(r"""<a\s+(?:id|name)=["']([^"']+)["']""", text))
    return anchors


def rule_alerts(spec: dict) -> list[tuple[str, dict]]:
    """(group name, rule) of every alerting rule of a rule spec."""
    return [(g.get("name"), r) for g in spec.get("groups") or [] for r in g.get("rules") or [] if "alert" in r]


def podmonitor_jobs(pm: dict) -> set[str]:
    """The job label a PodMonitor's targets get: a relabeling that sets `job` to a constant wins (it runs after
    prometheus-operator's own), else the value its selector fixes for its jobLabel. Empty if unpredictable."""
    spec = pm.get("spec") or {}
    jobs: set[str] = set()
    by_label = ((spec.get("selector") or {}).get("matchLabels") or {}).get(spec.get("jobLabel") or "")
    for ep in spec.get("podMetricsEndpoints") or []:
        job = by_label
        for r in ep.get("relabelings") or []:
            if r.get("targetLabel") == "job" and (r.get("action") or "replace") == "replace" \
                    and not r.get("sourceLabels") and r.get("replacement"):
                job = r["replacement"]
        if job:
            jobs.add(job)
    return jobs


def expr_jobs(expr: str) -> list[str]:
    out = []
    for op, value in _JOB_MATCHER.findall(expr):
        out += value.split("|") if op == "=~" else [value]
    return out


# -- components -----------------------------------------------------------------------------------------------------


class Component:
    def __init__(self, name: str, rel: str):
        self.name = name
        self.rel = rel                      # deploy/monitoring/components/<name>
        self.groups: list[dict] = []        # what its alerts.yaml adds
        self.monitors: list[dict] = []      # its PodMonitors (the files of its kustomization's resources)
        self.tests: str | None = None       # <rel>/alerts_test.yaml, if there

    @property
    def alerts(self) -> list[str]:
        return [r["alert"] for g in self.groups for r in g.get("rules") or [] if "alert" in r]

    @property
    def jobs(self) -> set[str]:
        return set().union(*(podmonitor_jobs(m) for m in self.monitors)) if self.monitors else set()


def load_components(mc, root: Path, anchors: set[str], problems: Problems) -> dict[str, Component]:
    out: dict[str, Component] = {}
    base = root / MONITORING / "components"
    for d in sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []:
        rel = f"{MONITORING}/components/{d.name}"
        try:
            kust = yaml.safe_load((d / "kustomization.yaml").read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as e:
            problems.add(f"{rel}/kustomization.yaml", f"cannot read: {e}")
            continue
        if kust.get("kind") != "Component" or kust.get("apiVersion") != "kustomize.config.k8s.io/v1alpha1":
            problems.add(f"{rel}/kustomization.yaml", "not a kustomize Component (kustomize.config.k8s.io/v1alpha1)")
        c = Component(d.name, rel)
        out[d.name] = c
        if d.name == RUNBOOK_COMPONENT:
            continue
        for res in kust.get("resources") or []:
            try:
                docs = [x for x in yaml.safe_load_all((d / res).read_text(encoding="utf-8")) if x]
            except (OSError, yaml.YAMLError) as e:
                problems.add(f"{rel}/{res}", f"cannot read: {e}")
                continue
            c.monitors += [x for x in docs if x.get("kind") in ("PodMonitor", "ServiceMonitor")]
        for m in c.monitors:
            if not podmonitor_jobs(m):
                problems.add(f"{rel}: {m['kind']} {m['metadata']['name']}",
                             "no predictable job: set jobLabel to a label its selector's matchLabels fix, or set job "
                             "with a relabeling to a constant")
        if (d / "alerts.yaml").is_file():
            try:
                c.groups = mc.load_alert_groups(d / "alerts.yaml")
            except (OSError, ValueError, yaml.YAMLError) as e:
                problems.add(f"{rel}/alerts.yaml", f"cannot read: {e}")
            check_alert_rules(f"{rel}/alerts.yaml", {"groups": c.groups}, anchors, None, problems)
            patches = [p for p in kust.get("patches") or [] if p.get("path") == "alerts.yaml"]
            if not patches or (patches[0].get("target") or {}).get("name") != RULE_NAME:
                problems.add(f"{rel}/kustomization.yaml", f"does not patch alerts.yaml into the PrometheusRule "
                                                          f"{RULE_NAME}")
        if (d / "alerts_test.yaml").is_file():
            c.tests = f"{rel}/alerts_test.yaml"
            check_test_coverage(root, c.tests, c.alerts, problems)
        elif c.alerts:
            problems.add(rel, "alerts without alerts_test.yaml")
    return out


def check_alert_rules(where_file: str, spec: dict, anchors: set[str], base: str | None, problems: Problems) -> None:
    """Labels and annotations of every alert of `spec` (a component's). With `base` (a rendered layout's), only
    that every runbook_url is absolute and starts with it."""
    for _, r in rule_alerts(spec):
        where = f"{where_file}: alert {r['alert']}"
        if base is not None:
            url = str((r.get("annotations") or {}).get("runbook_url", "")).strip()
            m = _RUNBOOK_URL.match(url)
            if not m or m.group(1) != base:
                problems.add(where, f"runbook_url {url!r} does not start with {base + '#'!r} ({COMMON_RULE}'s "
                                    f"{RUNBOOK_ANNOTATION}: is components/{RUNBOOK_COMPONENT} listed last?)")
            continue
        severity = (r.get("labels") or {}).get("severity")
        if severity not in SEVERITIES:
            problems.add(where, f"severity label {severity!r}, not one of {', '.join(sorted(SEVERITIES))}")
        annotations = r.get("annotations") or {}
        for key in ("summary", "description", "runbook_url"):
            if not str(annotations.get(key, "")).strip():
                problems.add(where, f"no {key} annotation")
        url = str(annotations.get("runbook_url", "")).strip()
        if not url:
            continue
        m = _RUNBOOK_URL.match(url)
        if not m:
            problems.add(where, f"runbook_url {url!r} is not an absolute http(s) URL ending in #<anchor>")
            continue
        if m.group(2) not in anchors:
            problems.add(where, f"runbook_url's anchor #{m.group(2)} is no section of {RUNBOOK_DOC}")
        if m.group(2) != r["alert"].lower():
            problems.add(where, f"runbook_url's anchor #{m.group(2)} is not the section named after the alert "
                                f"(#{r['alert'].lower()})")


def load_tests(root: Path, rel: str, problems: Problems) -> dict:
    try:
        tests = yaml.safe_load((root / rel).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        problems.add(rel, f"cannot read: {e}")
        return {}
    if tests.get("rule_files") != [RULES_NAME]:
        problems.add(rel, f"rule_files must be [{RULES_NAME}] (the spec of the layout's PrometheusRule, written by "
                          "this script)")
    return tests


def check_test_coverage(root: Path, rel: str, alerts: list[str], problems: Problems) -> None:
    tests = load_tests(root, rel, problems)
    firing: set[str] = set()
    quiet: set[str] = set()
    for t in tests.get("tests") or []:
        for case in t.get("alert_rule_test") or []:
            (firing if case.get("exp_alerts") else quiet).add(case.get("alertname"))
    for name in alerts:
        if name not in firing:
            problems.add(f"{rel}: alert {name}", "no test case where it fires")
        if name not in quiet:
            problems.add(f"{rel}: alert {name}", "no test case where it stays quiet")
    for name in sorted((firing | quiet) - set(alerts)):
        problems.add(f"{rel}: alert {name}", "tested, but its component's alerts.yaml has no such alert")


# -- layouts --------------------------------------------------------------------------------------------------------


class Layout:
    def __init__(self, name: str):
        self.name = name
        self.rel = f"{MONITORING}/{name}"
        self.components: list[str] = []
        self.spec: dict = {}
        self.monitors: list[dict] = []
        self.rendered: list[dict] | None = None  # None: kubectl not there
        self.results: list[str] = []

    @property
    def jobs(self) -> set[str]:
        return set().union(*(podmonitor_jobs(m) for m in self.monitors)) if self.monitors else set()


def find_layouts(root: Path) -> list[str]:
    base = root / MONITORING
    return sorted(d.name for d in base.iterdir()
                  if d.is_dir() and d.name not in NOT_LAYOUTS and (d / "kustomization.yaml").is_file())


def layout_components(root: Path, layout: Layout, components: dict[str, Component], problems: Problems) -> None:
    where = f"{layout.rel}/kustomization.yaml"
    try:
        kust = yaml.safe_load((root / where).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        problems.add(where, f"cannot read: {e}")
        return
    for entry in kust.get("components") or []:
        path = (root / layout.rel / entry).resolve()
        if path.parent != (root / MONITORING / "components").resolve() or path.name not in components:
            problems.add(where, f"component {entry} is none of {MONITORING}/components")
            continue
        layout.components.append(path.name)
    if not layout.components or layout.components[-1] != RUNBOOK_COMPONENT:
        problems.add(where, f"must list ../components/{RUNBOOK_COMPONENT} last (it completes the runbook URLs of the "
                            "alerts the components before it add)")
    if not (root / layout.rel / HEALTHY_TEST).is_file():
        problems.add(layout.rel, f"no {HEALTHY_TEST} (the series of a healthy install, and no alert firing)")


def runbook_base(root: Path, problems: Problems) -> str:
    try:
        docs = [d for d in yaml.safe_load_all((root / COMMON_RULE).read_text(encoding="utf-8")) if d]
        base = docs[0]["metadata"]["annotations"][RUNBOOK_ANNOTATION]
    except (OSError, yaml.YAMLError, IndexError, KeyError, TypeError) as e:
        problems.add(COMMON_RULE, f"no annotation {RUNBOOK_ANNOTATION} on the PrometheusRule: {e}")
        return SHIPPED_RUNBOOK_BASE
    if not re.match(r"^https?://[^/\s#]+(?:/[^\s#]*)?$", str(base)):
        problems.add(COMMON_RULE, f"{RUNBOOK_ANNOTATION} {base!r} is not an absolute http(s) URL without an anchor")
    return str(base)


def composed_spec(layout: Layout, components: dict[str, Component], base: str) -> dict:
    """What kustomize renders for the layout's rule, from the component files: their groups in the order the
    layout lists them, each runbook_url's part before `#` replaced by the base."""
    groups = json.loads(json.dumps([g for c in layout.components for g in components[c].groups]))
    for g in groups:
        for r in g.get("rules") or []:
            url = (r.get("annotations") or {}).get("runbook_url")
            if isinstance(url, str) and "#" in url:
                r["annotations"]["runbook_url"] = base + "#" + url.split("#", 1)[1]
    return {"groups": groups}


def kubectl_binary() -> str | None:
    return os.environ.get("KUBECTL") or shutil.which("kubectl")


def render(kubectl: str, path: Path) -> tuple[list[dict] | None, str]:
    rc, out = run([kubectl, "kustomize", str(path)])
    if rc != 0:
        return None, out
    return [d for d in yaml.safe_load_all(out) if d], ""


def check_rendered(root: Path, layout: Layout, components: dict[str, Component], base: str, anchors: set[str],
                   problems: Problems) -> None:
    where = f"{layout.rel}/kustomization.yaml"
    docs = layout.rendered or []
    by_key = {(d.get("kind"), (d.get("metadata") or {}).get("name")): d for d in docs}
    rule = by_key.get(("PrometheusRule", RULE_NAME))
    if rule is None:
        problems.add(where, f"renders no PrometheusRule {RULE_NAME}")
    else:
        layout.spec = rule.get("spec") or {}
        check_alert_rules(f"{layout.rel} (rendered)", layout.spec, anchors, base, problems)
        if layout.spec != composed_spec(layout, components, base):
            problems.add(where, "the rendered rule's spec is not its components' groups, in their order, with the "
                                "runbook base (what this script composes without kubectl)")
    layout.monitors = [d for d in docs if d.get("kind") in ("PodMonitor", "ServiceMonitor")]
    want_monitors = {m["metadata"]["name"] for c in layout.components for m in components[c].monitors}
    have_monitors = {m["metadata"]["name"] for m in layout.monitors}
    if want_monitors != have_monitors:
        problems.add(where, f"renders the PodMonitors {sorted(have_monitors)}, its components have "
                            f"{sorted(want_monitors)}")
    cm = by_key.get(("ConfigMap", "gpusched-dashboard"))
    if cm is None:
        problems.add(where, "renders no ConfigMap gpusched-dashboard (a name suffix? "
                            "generatorOptions.disableNameSuffixHash)")
    else:
        md = cm.get("metadata") or {}
        if (md.get("labels") or {}).get("grafana_dashboard") != "1":
            problems.add(where, 'ConfigMap gpusched-dashboard lacks the label grafana_dashboard: "1"')
        if (cm.get("data") or {}).get(Path(DASHBOARD).name) != (root / DASHBOARD).read_text(encoding="utf-8"):
            problems.add(where, f"ConfigMap gpusched-dashboard does not hold {DASHBOARD} as its key "
                                f"{Path(DASHBOARD).name}")
    for d in docs:
        if (d.get("metadata") or {}).get("namespace") != "kube-system":
            problems.add(where, f"{d.get('kind')} {(d.get('metadata') or {}).get('name')} is not in kube-system")


def check_install_layout(kubectl: str, root: Path, layout: Layout, problems: Problems) -> None:
    """The layout's PodMonitors against the workloads of deploy/<layout>: each selects pods there by a port they
    declare, and each workload that declares a container port is scraped."""
    install = root / "deploy" / layout.name
    where = f"{layout.rel}/kustomization.yaml"
    if not (install / "kustomization.yaml").is_file():
        problems.add(where, f"deploy/{layout.name} is no install layout: a monitoring layout is named after the "
                            "install layout it monitors")
        return
    docs, err = render(kubectl, install)
    if docs is None:
        problems.add(f"deploy/{layout.name}/kustomization.yaml", "kubectl kustomize failed:\n" + indent(err))
        return
    workloads = []
    for d in docs:
        if d.get("kind") not in WORKLOAD_KINDS:
            continue
        template = ((d.get("spec") or {}).get("template") or {})
        labels = (template.get("metadata") or {}).get("labels") or {}
        ports = {p.get("name") for c in (template.get("spec") or {}).get("containers") or []
                 for p in c.get("ports") or [] if p.get("name")}
        workloads.append((f"{d['kind']} {d['metadata']['name']}", d["metadata"].get("namespace"), labels, ports))
    scraped: set[str] = set()
    for m in layout.monitors:
        spec = m.get("spec") or {}
        names = (spec.get("namespaceSelector") or {}).get("matchNames") or []
        match = (spec.get("selector") or {}).get("matchLabels") or {}
        hits = [w for w in workloads if (not names or w[1] in names)
                and match and all(w[2].get(k) == v for k, v in match.items())]
        pm = f"{layout.rel}: {m['kind']} {m['metadata']['name']}"
        if not hits:
            problems.add(pm, f"selects no pods of deploy/{layout.name} ({match}): it would scrape nothing")
            continue
        for ep in spec.get("podMetricsEndpoints") or []:
            for w in hits:
                if ep.get("port") not in w[3]:
                    problems.add(pm, f"port {ep.get('port')!r} is no named container port of {w[0]}")
                else:
                    scraped.add(w[0])
    for w in workloads:
        if w[3] and w[0] not in scraped:
            problems.add(where, f"{w[0]} of deploy/{layout.name} declares ports {sorted(w[3])} but no PodMonitor of "
                                "this layout scrapes it")


def check_healthy_test(root: Path, layout: Layout, problems: Problems) -> None:
    rel = f"{layout.rel}/{HEALTHY_TEST}"
    tests = load_tests(root, rel, problems)
    if not tests:
        return
    up_jobs: set[str] = set()
    quiet: dict[str, set] = {}
    alerts_evals: set = set()
    for t in tests.get("tests") or []:
        for s in t.get("input_series") or []:
            m = re.match(r"\s*up\s*\{(.*)\}\s*$", str(s.get("series", "")))
            if m:
                up_jobs |= set(re.findall(r"""\bjob\s*=\s*"([^"]*)\"""", m.group(1)))
        for case in t.get("alert_rule_test") or []:
            if case.get("exp_alerts"):
                problems.add(f"{rel}: alert {case.get('alertname')}", "expected to fire on a healthy install")
            else:
                quiet.setdefault(case.get("alertname"), set()).add(str(case.get("eval_time")))
        for case in t.get("promql_expr_test") or []:
            if str(case.get("expr", "")).strip() == "ALERTS" and not case.get("exp_samples"):
                alerts_evals.add(str(case.get("eval_time")))
    if up_jobs != layout.jobs:
        problems.add(rel, f"its up series are of the jobs {sorted(up_jobs)}; the layout's PodMonitors make "
                          f"{sorted(layout.jobs)}: a healthy install exports exactly those")
    for _, r in rule_alerts(layout.spec):
        if len(quiet.get(r["alert"], ())) < MIN_HEALTHY_EVALS:
            problems.add(f"{rel}: alert {r['alert']}", f"the layout installs it, but this file does not assert it "
                                                       f"quiet at {MIN_HEALTHY_EVALS} evaluation times or more")
    if len(alerts_evals) < MIN_HEALTHY_EVALS:
        problems.add(rel, f"no promql_expr_test `ALERTS` with exp_samples: [] at {MIN_HEALTHY_EVALS} evaluation "
                          "times or more (no alert pending or firing)")


def promtool_layout(root: Path, layout: Layout, components: dict[str, Component], base: str, tmp: Path,
                    problems: Problems) -> int:
    """promtool check rules on the layout's spec, then test rules on each test file it has; returns the number of
    test groups run."""
    d = tmp / layout.name
    d.mkdir()
    rules_file = d / RULES_NAME
    rules_file.write_text(yaml.safe_dump(layout.spec, sort_keys=False, width=1000), encoding="utf-8")
    rc, out = run([PROMTOOL, "check", "rules", str(rules_file)])
    if rc != 0:
        problems.add(layout.rel, "promtool check rules failed on its rule's spec:\n"
                     + indent(out.replace(str(rules_file), f"<spec of {layout.rel}>")))
        return 0
    files = [components[c].tests for c in layout.components if components[c].tests]
    files.append(f"{layout.rel}/{HEALTHY_TEST}")
    groups = 0
    for rel in files:
        src = root / rel
        if not src.is_file():
            continue
        text = src.read_text(encoding="utf-8")
        if base != SHIPPED_RUNBOOK_BASE:
            text = text.replace(SHIPPED_RUNBOOK_BASE, base)
        name = rel.removeprefix(f"{MONITORING}/").replace("/", "_")
        (d / name).write_text(text, encoding="utf-8")
        groups += len((yaml.safe_load(text) or {}).get("tests") or [])
        rc, out = run([PROMTOOL, "test", "rules", name], cwd=d)
        verdict = "SUCCESS" if rc == 0 else "FAILED"
        layout.results.append(f"{rel.removeprefix(MONITORING + '/')} {verdict}")
        if rc != 0:
            what = "a healthy install fires or pends an alert" if rel.endswith(HEALTHY_TEST) else "failed"
            problems.add(rel, f"promtool test rules in layout {layout.name}: {what}:\n" + indent(out))
    return groups


# -- the dashboard and the metrics ------------------------------------------------------------------------------------


def check_dashboard(mc, root: Path, tmp: Path, problems: Problems) -> list[tuple[str, str]]:
    """Returns (where, expr) of every query, where prefixed with the file."""
    dash_rel = DASHBOARD
    try:
        dash = json.loads((root / dash_rel).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        problems.add(dash_rel, f"cannot read the dashboard: {e}")
        return []
    if not isinstance(dash.get("schemaVersion"), int):
        problems.add(dash_rel, "no schemaVersion")
    if not dash.get("uid"):
        problems.add(dash_rel, "no uid (Grafana would give it a new one at every load)")
    variables = (dash.get("templating") or {}).get("list") or []
    if not any(v.get("name") == "datasource" and v.get("type") == "datasource" and v.get("query") == "prometheus"
               for v in variables):
        problems.add(dash_rel, "no variable `datasource` of type datasource and query prometheus")
    for v in variables:
        if v.get("type") == "query" and (v.get("datasource") or {}).get("uid") != "${datasource}":
            problems.add(f'{dash_rel}: variable "{v.get("name")}"', "its data source is not ${datasource}")
    ids: list = []

    def walk(panels: list[dict]) -> None:
        for p in panels:
            ids.append(p.get("id"))
            where = f'{dash_rel}: panel {p.get("id")} "{p.get("title", "")}"'
            if p.get("type") != "row" and p.get("targets") is not None:
                if (p.get("datasource") or {}).get("uid") != "${datasource}":
                    problems.add(where, "its data source is not ${datasource}")
                for t in p.get("targets"):
                    if "datasource" in t and (t["datasource"] or {}).get("uid") != "${datasource}":
                        problems.add(f"{where} query {t.get('refId')}", "its data source is not ${datasource}")
                    if not str(t.get("expr", "")).strip():
                        problems.add(f"{where} query {t.get('refId')}", "no expr")
            walk(p.get("panels") or [])

    walk(dash.get("panels") or [])
    for i in sorted({i for i in ids if ids.count(i) > 1}, key=str):
        problems.add(dash_rel, f"panel id {i} used more than once")

    queries = [(f"{dash_rel}: {w}", e) for w, e in mc.dashboard_queries(dash)]
    if not queries:
        problems.add(dash_rel, "no Prometheus query")
        return []
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"gpusched_dashboard:q{i}", "expr": e} for i, (_, e) in enumerate(queries)]}]}
    rules_file = tmp / "dashboard.rules.yaml"
    rules_file.write_text(yaml.safe_dump(rules, sort_keys=False, width=1000), encoding="utf-8")
    rc, out = run([PROMTOOL, "check", "rules", str(rules_file)])
    if rc != 0:
        reported = False
        for line in out.splitlines():
            m = re.search(r'"gpusched_dashboard:q(\d+)": (.*)', line)
            if m:
                where, expr = queries[int(m.group(1))]
                problems.add(where, f"{m.group(2)}\n    expr (variables replaced): {expr}")
                reported = True
        if not reported:
            problems.add(dash_rel, "promtool check rules failed on the queries:\n"
                         + indent(out.replace(str(rules_file), "<queries>")))
    return queries


def check_metrics(mc, queries: list[tuple[str, str]], daemons: dict[str, set[str]], problems: Problems,
                  quiet: bool) -> None:
    """Every gpusched_*/DCGM_* metric is selected by a job whose daemon exports it."""
    every = set().union(*daemons.values()) if daemons else set()
    if not quiet:
        print("metrics used:")
    for where, expr in queries:
        names = mc.metric_names(expr)
        if not quiet:
            print(f"  {where}: {', '.join(names) or '(none)'}")
        for name in names:
            fam = mc.family_name(name)
            if name in BUILTIN_METRICS:
                continue
            if name not in every and fam not in every:
                problems.add(where, f"{name}: no daemon exports it (not in the sources of "
                                    f"{', '.join(sorted(daemons))})")
                continue
            exporters = sorted(d for d, n in daemons.items() if name in n or fam in n)
            # Each place it is named: name{..., job="...", ...}.
            for m in re.finditer(r"(?<![A-Za-z0-9_:])" + re.escape(name) + r"(?![A-Za-z0-9_:])", expr):
                sel = _SELECTOR.match(expr, m.start())
                if sel is None or not _JOB_MATCHER.search(sel.group(2)):
                    problems.add(where, f"{name} without a job matcher: select it by the job of the daemon that "
                                        f"exports it ({', '.join('gpusched-' + d for d in exporters)}); other "
                                        "exporters may have series of that name (dcgm-exporter's DCGM_*)")
                    break
        for sel in _SELECTOR.finditer(expr):
            name, matchers = sel.group(1), sel.group(2)
            if name not in every and mc.family_name(name) not in every:
                continue  # built in, or reported above
            for job in expr_jobs(matchers):
                daemon = job.removeprefix("gpusched-")
                if daemon not in daemons:
                    problems.add(where, f'{name}{{job="{job}"}}: job {job} is none of gpusched-'
                                        f'{{{",".join(sorted(daemons))}}}')
                elif name not in daemons[daemon] and mc.family_name(name) not in daemons[daemon]:
                    problems.add(where, f'{name}{{job="{job}"}}: the {daemon} does not export {name}')


def check_jobs(where_prefix: str, queries: list[tuple[str, str]], jobs: set[str], what: str,
               problems: Problems) -> None:
    for where, expr in queries:
        for job in expr_jobs(expr):
            if job not in jobs:
                problems.add(f"{where_prefix}{where}", f'job "{job}" is scraped by none of {what} '
                                                       f'({", ".join(sorted(jobs)) or "none"})')


PROMTOOL = "promtool"


def main() -> int:
    global PROMTOOL
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the repository root (default: the one holding this script)")
    parser.add_argument("--quiet", action="store_true", help="do not list the metrics each query uses")
    args = parser.parse_args()
    root = args.root.resolve()
    PROMTOOL = os.environ.get("PROMTOOL") or shutil.which("promtool") or ""
    if not PROMTOOL:
        print("check-monitoring: promtool not found (Debian package `prometheus`; or set PROMTOOL)", file=sys.stderr)
        return 2
    mc = load_check_module(root)
    problems = Problems()
    try:
        anchors = markdown_anchors((root / RUNBOOK_DOC).read_text(encoding="utf-8"))
    except OSError as e:
        problems.add(RUNBOOK_DOC, f"cannot read: {e}")
        anchors = set()
    base = runbook_base(root, problems)
    components = load_components(mc, root, anchors, problems)
    if RUNBOOK_COMPONENT not in components:
        problems.add(f"{MONITORING}/components", f"no component {RUNBOOK_COMPONENT}")
    seen: dict[str, str] = {}
    for c in components.values():
        for a in c.alerts:
            if a in seen and seen[a] != c.name:
                problems.add(f"{c.rel}/alerts.yaml: alert {a}", f"also in components/{seen[a]}")
            seen.setdefault(a, c.name)
    kubectl = kubectl_binary()
    if not kubectl:
        print("kubectl not found: the layouts are composed from their components' files, not rendered",
              file=sys.stderr)
    layouts = [Layout(n) for n in find_layouts(root)]
    if DEFAULT_LAYOUT not in [lay.name for lay in layouts]:
        problems.add(MONITORING, f"no layout {DEFAULT_LAYOUT}")
    n_tests = 0
    with tempfile.TemporaryDirectory(prefix="check-monitoring-") as tmpdir:
        tmp = Path(tmpdir)
        for layout in layouts:
            layout_components(root, layout, components, problems)
            if kubectl:
                layout.rendered, err = render(kubectl, root / layout.rel)
                if layout.rendered is None:
                    problems.add(f"{layout.rel}/kustomization.yaml", "kubectl kustomize failed:\n" + indent(err))
                    continue
                check_rendered(root, layout, components, base, anchors, problems)
                check_install_layout(kubectl, root, layout, problems)
            else:
                layout.spec = composed_spec(layout, components, base)
                layout.monitors = [m for c in layout.components for m in components[c].monitors]
            names = [r["alert"] for _, r in rule_alerts(layout.spec)]
            for a in sorted({a for a in names if names.count(a) > 1}):
                problems.add(f"{layout.rel}: alert {a}", "defined more than once")
            queries = [(f"alert {r['alert']}", str(r.get("expr", ""))) for _, r in rule_alerts(layout.spec)]
            check_jobs(f"{layout.rel}: ", queries, layout.jobs, f"the PodMonitors of layout {layout.name}",
                       problems)
            check_healthy_test(root, layout, problems)
            n_tests += promtool_layout(root, layout, components, base, tmp, problems)
        dash_queries = check_dashboard(mc, root, tmp, problems)
    listed = {c for lay in layouts for c in lay.components}
    for name, c in components.items():
        if name != RUNBOOK_COMPONENT and name not in listed:
            problems.add(c.rel, "no layout lists it: its alerts and tests are checked nowhere")
    if kubectl:
        default, err = render(kubectl, root / MONITORING)
        scheduler = next((lay for lay in layouts if lay.name == DEFAULT_LAYOUT), None)
        if default is None:
            problems.add(f"{MONITORING}/kustomization.yaml", "kubectl kustomize failed:\n" + indent(err))
        elif scheduler is not None and scheduler.rendered is not None and default != scheduler.rendered:
            problems.add(f"{MONITORING}/kustomization.yaml", f"does not render what {MONITORING}/{DEFAULT_LAYOUT} "
                                                             "renders (the default layout)")
    all_jobs = set().union(*(c.jobs for c in components.values()))
    check_jobs("", dash_queries, all_jobs, "the components' PodMonitors", problems)
    daemons = exported_metrics(root, problems)
    component_queries = [(f"{c.rel}/alerts.yaml: {w}", e) for c in components.values()
                         for w, e in mc.alert_queries({"spec": {"groups": c.groups}})]
    check_metrics(mc, component_queries + dash_queries, daemons, problems, args.quiet)
    for layout in layouts:
        print(f"layout {layout.name}: {len(rule_alerts(layout.spec))} alerts ({', '.join(layout.components[:-1])}); "
              f"promtool test rules: {', '.join(layout.results) or 'not run'}")
    if problems.items:
        for p in problems.items:
            print(p, file=sys.stderr)
        print(f"check-monitoring: {len(problems.items)} problem(s)", file=sys.stderr)
        return 1
    print(f"monitoring: {len(seen)} alerts in {len(layouts)} layouts, {n_tests} tests, {len(dash_queries)} dashboard "
          "queries OK" + ("" if kubectl else " (kustomize not rendered)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

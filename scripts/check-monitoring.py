#!/usr/bin/env python3
"""Static checks of deploy/monitoring: the alerts, their promtool tests, the Grafana dashboard and the overlay.

  * alerts.yaml: its PrometheusRule's spec, written to a plain rules file in a temporary directory, passes
    `promtool check rules`; every alert has a severity label (critical, warning or info) and summary, description
    and runbook_url annotations, the runbook in docs/troubleshooting.md.
  * tests/alerts_test.yaml: `promtool test rules` passes against that rules file, and holds for every alert at
    least one case where it fires and one where it stays quiet.
  * dashboards/gpusched.json: every Prometheus query of a panel or a query variable, Grafana's variables replaced
    by stand-ins ($__rate_interval by 5m, $node by stand_in, ...), parses (as recording rules through
    `promtool check rules`); every panel and query uses the data source variable ${datasource}.
  * every metric an alert or a query uses is exported by the daemon that monitors.yaml scrapes for it: the string
    literals of the agent's, the scheduler's and the webhook's sources (src/gpusched/...) name it, or it is one of
    the HTTP server's families (net::RenderStats). A metric only `gpusched extender` exports is an error: the
    extender listens on 127.0.0.1 and is not scraped. A selector with job="gpusched-<daemon>" must name a metric
    of that daemon.
  * `kubectl kustomize deploy/monitoring` renders the PodMonitors, the PrometheusRule and the ConfigMap
    kube-system/gpusched-dashboard (label grafana_dashboard: "1") holding the dashboard (skipped without kubectl).

The PromQL helpers live in tests/e2e/monitoring_check.py, which the end-to-end suites use on real /metrics bodies.
Needs promtool (Debian's `prometheus` package; $PROMTOOL overrides) and PyYAML (python3-yaml); kubectl is optional
($KUBECTL overrides).

Usage: scripts/check-monitoring.py [--root DIR] [--quiet]
Prints the metrics each alert and query uses (not with --quiet), then `<file>: <alert or panel>: <problem>` per
problem and exits 1, or `monitoring: N alerts, M tests, K dashboard queries OK`. Exits 2 without promtool.
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
RUNBOOK = "docs/troubleshooting.md"
RULES_NAME = "alerts.rules.yaml"  # what tests/alerts_test.yaml's rule_files names
# Prometheus's own series, always there.
BUILTIN_METRICS = {"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling",
                   "scrape_series_added", "ALERTS", "ALERTS_FOR_STATE"}
# Where each scraped daemon's metric names are written (job gpusched-<daemon>), and the unscraped extender's.
DAEMON_SOURCES = {
    "agent": ["src/gpusched/agent", "src/gpusched/cli/agent_command.cc"],
    "scheduler": ["src/gpusched/scheduler", "src/gpusched/cli/scheduler_command.cc"],
    "webhook": ["src/gpusched/webhook", "src/gpusched/cli/webhook_command.cc"],
}
EXTENDER_SOURCES = ["src/gpusched/extender"]
HTTP_STATS_SOURCE = "src/gpusched/net/http_server.cc"

_CPP_TOKEN = re.compile(r"""//[^\n]*|/\*.*?\*/|'(?:[^'\\\n]|\\.)*'|"((?:[^"\\\n]|\\.)*)\"""", re.S)
_METRIC_IN_LITERAL = re.compile(r"\b(?:gpusched|DCGM)_[A-Za-z0-9_:]*[A-Za-z0-9]")
_SELECTOR = re.compile(r"""([A-Za-z_:][A-Za-z0-9_:]*)\s*\{((?:[^}"]|"(?:[^"\\]|\\.)*")*)\}""")
_JOB_MATCHER = re.compile(r"""\bjob\s*(=~|=)\s*"((?:[^"\\]|\\.)*)\"""")


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


def exported_metrics(root: Path, problems: Problems) -> tuple[dict[str, set[str]], set[str]]:
    """daemon -> the metric names its sources write, and the extender's names."""
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
    extender = literal_metric_names([root / r for r in EXTENDER_SOURCES if (root / r).exists()])
    return daemons, extender


# -- the checks ---------------------------------------------------------------------------------------------------


def check_alerts(mc, root: Path, alerts_rel: str, tmp: Path, problems: Problems) -> tuple[dict, list[str], bool]:
    """Writes the rules file into tmp; returns the PrometheusRule, the names of its alerts and whether promtool
    accepts the rules."""
    try:
        rule = mc.load_prometheus_rule(root / alerts_rel)
    except (OSError, ValueError, yaml.YAMLError) as e:
        problems.add(alerts_rel, f"cannot read the PrometheusRule: {e}")
        return {}, [], False
    if rule.get("apiVersion") != "monitoring.coreos.com/v1":
        problems.add(alerts_rel, f"apiVersion {rule.get('apiVersion')!r}, not monitoring.coreos.com/v1")
    spec = rule.get("spec") or {}
    if not spec.get("groups"):
        problems.add(alerts_rel, "spec.groups is empty")
    alerts: list[str] = []
    for group in spec.get("groups") or []:
        for r in group.get("rules") or []:
            if "alert" not in r:
                continue
            where = f"{alerts_rel}: alert {r['alert']}"
            alerts.append(r["alert"])
            severity = (r.get("labels") or {}).get("severity")
            if severity not in SEVERITIES:
                problems.add(where, f"severity label {severity!r}, not one of {', '.join(sorted(SEVERITIES))}")
            annotations = r.get("annotations") or {}
            for key in ("summary", "description", "runbook_url"):
                if not str(annotations.get(key, "")).strip():
                    problems.add(where, f"no {key} annotation")
            if RUNBOOK not in str(annotations.get("runbook_url", "")):
                problems.add(where, f"runbook_url does not point at {RUNBOOK}")
    for name in sorted({a for a in alerts if alerts.count(a) > 1}):
        problems.add(f"{alerts_rel}: alert {name}", "defined more than once")
    rules_file = tmp / RULES_NAME
    rules_file.write_text(yaml.safe_dump(spec, sort_keys=False, width=1000), encoding="utf-8")
    rc, out = run([PROMTOOL, "check", "rules", str(rules_file)])
    if rc != 0:
        problems.add(alerts_rel, "promtool check rules failed (positions are in the extracted spec):\n"
                     + indent(out.replace(str(rules_file), f"<spec of {alerts_rel}>")))
    return rule, alerts, rc == 0


def check_tests(root: Path, tests_rel: str, tmp: Path, alerts: list[str], problems: Problems,
                run_promtool: bool) -> int:
    """Runs promtool test rules (when run_promtool: the rules load); returns the number of test groups."""
    path = root / tests_rel
    try:
        tests = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        problems.add(tests_rel, f"cannot read: {e}")
        return 0
    if tests.get("rule_files") != [RULES_NAME]:
        problems.add(tests_rel, f"rule_files must be [{RULES_NAME}] (the spec of alerts.yaml, written by this script)")
    firing: set[str] = set()
    quiet: set[str] = set()
    for t in tests.get("tests") or []:
        for case in t.get("alert_rule_test") or []:
            (firing if case.get("exp_alerts") else quiet).add(case.get("alertname"))
    for name in alerts:
        if name not in firing:
            problems.add(f"{tests_rel}: alert {name}", "no test case where it fires")
        if name not in quiet:
            problems.add(f"{tests_rel}: alert {name}", "no test case where it stays quiet")
    for name in sorted((firing | quiet) - set(alerts)):
        problems.add(f"{tests_rel}: alert {name}", "tested, but alerts.yaml has no such alert")
    if not run_promtool:
        problems.add(tests_rel, "not run: the rules of alerts.yaml do not load")
        return len(tests.get("tests") or [])
    shutil.copy(path, tmp / path.name)
    rc, out = run([PROMTOOL, "test", "rules", path.name], cwd=tmp)
    if rc != 0:
        problems.add(tests_rel, "promtool test rules failed:\n" + indent(out))
    return len(tests.get("tests") or [])


def check_dashboard(mc, root: Path, dash_rel: str, tmp: Path, problems: Problems) -> list[tuple[str, str]]:
    """Returns (where, expr) of every query, where prefixed with the file."""
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


def check_metrics(mc, queries: list[tuple[str, str]], daemons: dict[str, set[str]], extender: set[str],
                  problems: Problems, quiet: bool) -> None:
    every = set().union(*daemons.values()) if daemons else set()
    if not quiet:
        print("metrics used:")
    for where, expr in queries:
        names = mc.metric_names(expr)
        if not quiet:
            print(f"  {where}: {', '.join(names) or '(none)'}")
        for name in names:
            fam = mc.family_name(name)
            if name in BUILTIN_METRICS or name in every or fam in every:
                continue
            if name in extender or fam in extender:
                problems.add(where, f"{name} is exported by gpusched extender only, which listens on 127.0.0.1 "
                                    "and is not scraped (monitors.yaml)")
            else:
                problems.add(where, f"{name}: no scraped daemon exports it (not in the sources of "
                                    f"{', '.join(sorted(daemons))})")
        for sel in _SELECTOR.finditer(expr):
            name, matchers = sel.group(1), sel.group(2)
            if name not in every and mc.family_name(name) not in every:
                continue  # built in, or reported above
            for op, value in _JOB_MATCHER.findall(matchers):
                jobs = value.split("|") if op == "=~" else [value]
                for job in jobs:
                    daemon = job.removeprefix("gpusched-")
                    if daemon in daemons and name not in daemons[daemon] \
                            and mc.family_name(name) not in daemons[daemon]:
                        problems.add(where, f'{name}{{job="{job}"}}: the {daemon} does not export {name}')


def check_monitor_jobs(root: Path, monitors_rel: str, queries: list[tuple[str, str]], problems: Problems) -> None:
    """Every job="..." the queries select is one that monitors.yaml's PodMonitors produce."""
    jobs: set[str] = set()
    try:
        docs = [d for d in yaml.safe_load_all((root / monitors_rel).read_text(encoding="utf-8")) if d]
    except (OSError, yaml.YAMLError) as e:
        problems.add(monitors_rel, f"cannot read: {e}")
        return
    for d in docs:
        if d.get("kind") not in ("PodMonitor", "ServiceMonitor"):
            continue
        spec = d.get("spec") or {}
        label = spec.get("jobLabel")
        value = ((spec.get("selector") or {}).get("matchLabels") or {}).get(label)
        if not label or not value:
            problems.add(f"{monitors_rel}: {d['kind']} {d['metadata']['name']}",
                         "no jobLabel that its selector's matchLabels fix: the job label would be unpredictable")
            continue
        jobs.add(value)
    for where, expr in queries:
        for op, value in _JOB_MATCHER.findall(expr):
            for job in value.split("|") if op == "=~" else [value]:
                if job not in jobs:
                    problems.add(where, f'job "{job}" is none of the jobs monitors.yaml makes '
                                        f'({", ".join(sorted(jobs))})')


def check_kustomize(root: Path, dash_rel: str, problems: Problems) -> bool:
    kubectl = os.environ.get("KUBECTL") or shutil.which("kubectl")
    if not kubectl:
        print("kubectl not found: `kubectl kustomize deploy/monitoring` not checked", file=sys.stderr)
        return False
    rc, out = run([kubectl, "kustomize", str(root / "deploy" / "monitoring")])
    if rc != 0:
        problems.add("deploy/monitoring/kustomization.yaml", "kubectl kustomize failed:\n" + indent(out))
        return True
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = {(d.get("kind"), (d.get("metadata") or {}).get("name")): d for d in docs}
    for want in [("PodMonitor", "gpusched-agent"), ("PodMonitor", "gpusched-scheduler"),
                 ("PodMonitor", "gpusched-webhook"), ("PrometheusRule", "gpusched")]:
        if want not in kinds:
            problems.add("deploy/monitoring/kustomization.yaml", f"renders no {want[0]} {want[1]}")
    cm = kinds.get(("ConfigMap", "gpusched-dashboard"))
    if cm is None:
        problems.add("deploy/monitoring/kustomization.yaml", "renders no ConfigMap gpusched-dashboard (a name "
                                                             "suffix? generatorOptions.disableNameSuffixHash)")
        return True
    md = cm.get("metadata") or {}
    if md.get("namespace") != "kube-system":
        problems.add("deploy/monitoring/kustomization.yaml", "ConfigMap gpusched-dashboard is not in kube-system")
    if (md.get("labels") or {}).get("grafana_dashboard") != "1":
        problems.add("deploy/monitoring/kustomization.yaml", 'ConfigMap gpusched-dashboard lacks the label '
                                                             'grafana_dashboard: "1"')
    data = (cm.get("data") or {}).get(Path(dash_rel).name)
    if data != (root / dash_rel).read_text(encoding="utf-8"):
        problems.add("deploy/monitoring/kustomization.yaml", f"ConfigMap gpusched-dashboard does not hold "
                                                             f"{dash_rel} as its key {Path(dash_rel).name}")
    for d in docs:
        if (d.get("metadata") or {}).get("namespace") != "kube-system":
            problems.add("deploy/monitoring/kustomization.yaml",
                         f"{d.get('kind')} {(d.get('metadata') or {}).get('name')} is not in kube-system")
    return True


def indent(text: str) -> str:
    return "\n".join("    " + line.rstrip() for line in text.splitlines() if line.strip())


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
    alerts_rel = "deploy/monitoring/alerts.yaml"
    tests_rel = "deploy/monitoring/tests/alerts_test.yaml"
    dash_rel = "deploy/monitoring/dashboards/gpusched.json"
    monitors_rel = "deploy/monitoring/monitors.yaml"
    with tempfile.TemporaryDirectory(prefix="check-monitoring-") as tmpdir:
        tmp = Path(tmpdir)
        rule, alerts, loads = check_alerts(mc, root, alerts_rel, tmp, problems)
        n_tests = check_tests(root, tests_rel, tmp, alerts, problems, run_promtool=loads) if rule else 0
        dash_queries = check_dashboard(mc, root, dash_rel, tmp, problems)
    queries = [(f"{alerts_rel}: {w}", e) for w, e in mc.alert_queries(rule)] + dash_queries if rule else dash_queries
    daemons, extender = exported_metrics(root, problems)
    check_metrics(mc, queries, daemons, extender, problems, args.quiet)
    check_monitor_jobs(root, monitors_rel, queries, problems)
    rendered = check_kustomize(root, dash_rel, problems)
    if problems.items:
        for p in problems.items:
            print(p, file=sys.stderr)
        print(f"check-monitoring: {len(problems.items)} problem(s)", file=sys.stderr)
        return 1
    print(f"monitoring: {len(alerts)} alerts, {n_tests} tests, {len(dash_queries)} dashboard queries OK"
          + ("" if rendered else " (kustomize not rendered)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

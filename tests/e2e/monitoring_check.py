"""What deploy/monitoring asks of the daemons' /metrics, for the end-to-end suites and scripts/check-monitoring.py.

The alerts (deploy/monitoring/components/*/alerts.yaml: each a daemon's alert group, which kustomize adds to the
PrometheusRule kube-system/gpusched) and the Grafana dashboard (deploy/monitoring/dashboards/gpusched.json) name
metrics; a renamed or dropped metric leaves them silent without any error. After a suite has scraped a real daemon
it can check that every metric they name with that daemon's prefix is there:

    problems = monitoring_check.check_exposition(body, ["gpusched_scheduler_"])
    problems += monitoring_check.promtool_check_metrics(body)
    self.assertEqual(problems, [])

  referenced_metrics(prefix)        metric families the alerts and the dashboard use, whose name starts with prefix
  check_exposition(text, prefixes)  those of `prefixes` that the exposition `text` lacks, one string each
  promtool_check_metrics(text)      `promtool check metrics` on text, its complaints as strings

The alerts of every component count, whichever monitoring layout (deploy/monitoring/<layout>) installs them.

The agent serves DCGM_FI_DEV_* only after its first sample, and leaves out a family whose value the GPU does not
report (power on some boards): scrape after the first sample, and check DCGM_ against a GPU that reports them all.

Reading the alerts needs PyYAML (Debian's python3-yaml); the rest is the standard library.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "deploy" / "monitoring"
COMPONENTS = MONITORING / "components"
DASHBOARD = MONITORING / "dashboards" / "gpusched.json"

# -- PromQL: the metric names an expression uses ------------------------------------------------------------------

AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
                "quantile", "limitk", "limit_ratio"}
# Words of the language that are not metric names wherever they stand.
KEYWORDS = {"and", "or", "unless", "atan2", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
            "group_right", "inf", "nan", "start", "end"}
# Followed by a parenthesised list of label names.
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}

_TOKEN = re.compile(r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<comment>\#[^\n]*)
  | (?P<matchers>\{)
  | (?P<range>\[[^\]]*\])
  | (?P<duration>(?:\d+(?:ms|[smhdwy]))+\b)
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<space>\s+)
  | (?P<other>.)
""", re.X | re.S)
_NAME_MATCHER = re.compile(r"""__name__\s*=\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)""")


def _string_end(text: str, i: int) -> int:
    """Index after the string literal whose opening quote is text[i] (escapes inside skipped)."""
    quote = text[i]
    i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            return i + 1
        i += 1
    return i


def _skip_braces(expr: str, i: int) -> int:
    """Index after the `}` that closes the `{` at expr[i - 1], strings inside skipped."""
    while i < len(expr):
        c = expr[i]
        if c in "\"'`":
            i = _string_end(expr, i)
            continue
        if c == "}":
            return i + 1
        i += 1
    return i


def _next_char(expr: str, i: int) -> str:
    while i < len(expr) and expr[i].isspace():
        i += 1
    return expr[i] if i < len(expr) else ""


def metric_names(expr: str) -> list[str]:
    """The metric names `expr` selects, in order of appearance, each once: identifiers that are not followed by
    `(` (functions, aggregations), not keywords and not label names (inside `{...}` or after by, without, on,
    ignoring, group_left, group_right), plus `{__name__="..."}`. A `__name__=~` regex names no metric and is
    left out. Grafana's variables must already be replaced (grafana_stand_ins)."""
    names: list[str] = []
    i = 0
    skip_label_list = False
    while i < len(expr):
        m = _TOKEN.match(expr, i)
        kind, text, i = m.lastgroup, m.group(), m.end()
        if kind == "matchers":
            end = _skip_braces(expr, i)
            for nm in _NAME_MATCHER.finditer(expr[i:end]):
                names.append(nm.group(1)[1:-1])
            i = end
        elif kind == "ident":
            following = _next_char(expr, i)
            low = text.lower()
            if low in GROUPING:
                skip_label_list = True
                continue
            if following == "(" or low in KEYWORDS or low in AGGREGATIONS:
                continue
            names.append(text)
        elif kind == "other" and text == "(" and skip_label_list:
            i = expr.find(")", i) + 1 or len(expr)
        if kind != "space":
            skip_label_list = False
    seen: set[str] = set()
    return [n for n in names if not (n in seen or seen.add(n))]


def family_name(name: str) -> str:
    """foo_bucket, foo_sum, foo_count -> foo: the family a histogram's (or summary's) series belong to."""
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


# -- Grafana ------------------------------------------------------------------------------------------------------

_GRAFANA_VAR = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)")
_BUILTIN_STAND_INS = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h", "__interval_ms": "60000",
                      "__range_ms": "3600000", "__range_s": "3600", "__from": "0", "__to": "0"}


def _variable_stand_in(var: dict) -> str:
    kind = var.get("type")
    if kind == "interval":
        return "5m"
    if kind in ("custom", "constant", "textbox"):
        current = (var.get("current") or {}).get("value")
        if isinstance(current, list):
            current = current[0] if current else None
        if isinstance(current, str) and current and not current.startswith("$"):
            return current
        for option in var.get("options") or []:
            if isinstance(option.get("value"), str) and option["value"]:
                return option["value"]
        if kind in ("constant", "textbox") and isinstance(var.get("query"), str) and var["query"]:
            return var["query"].split(",")[0].strip()
    return "stand_in"


def grafana_stand_ins(expr: str, variables: list[dict] | None = None) -> str:
    """`expr` with Grafana's variables ($x, ${x}, ${x:format}, [[x]]) replaced by values PromQL accepts: a duration
    for $__rate_interval, $__interval and $__range, numbers for the *_ms and *_s ones, a dashboard's interval
    variable 5m, a custom or constant one its current value, any other `stand_in`."""
    by_name = {v.get("name"): v for v in variables or []}

    def repl(m: re.Match) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        if name in _BUILTIN_STAND_INS:
            return _BUILTIN_STAND_INS[name]
        if name.startswith("__"):
            return "stand_in"
        return _variable_stand_in(by_name.get(name, {}))

    return _GRAFANA_VAR.sub(repl, expr)


def _split_top_level(args: str) -> list[str]:
    parts, depth, start, i = [], 0, 0, 0
    while i < len(args):
        c = args[i]
        if c in "\"'`":
            i = _string_end(args, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(args[start:i])
            start = i + 1
        i += 1
    parts.append(args[start:])
    return [p.strip() for p in parts]


def variable_promql(query: str) -> str | None:
    """The PromQL inside a Grafana Prometheus variable query: label_values(expr, label) -> expr,
    query_result(expr) -> expr, label_names(expr) -> expr; None for label_values(label), label_names(),
    metrics(regex) and an empty query."""
    q = (query or "").strip()
    m = re.fullmatch(r"(label_values|query_result|label_names|metrics)\s*\((.*)\)", q, re.S)
    if not m:
        return q or None
    func, args = m.group(1), _split_top_level(m.group(2))
    if func == "query_result":
        return m.group(2).strip() or None
    if func == "label_values":
        return args[0] if len(args) >= 2 and args[0] else None
    if func == "label_names":
        return args[0] or None
    return None


def dashboard_queries(dashboard: dict) -> list[tuple[str, str]]:
    """(where, expr) of every Prometheus query of the dashboard: each panel's targets (rows' nested panels too) and
    each query variable, with the Grafana variables already replaced (grafana_stand_ins). `where` names the panel
    or the variable: 'panel 7 "GPU compute allocated per node" query A', 'variable "node"'."""
    variables = (dashboard.get("templating") or {}).get("list") or []
    out: list[tuple[str, str]] = []

    def walk(panels: list[dict]) -> None:
        for p in panels:
            for t in p.get("targets") or []:
                ds = t.get("datasource") or p.get("datasource") or {}
                if isinstance(ds, dict) and ds.get("type") not in (None, "prometheus", "datasource"):
                    continue
                if isinstance(t.get("expr"), str):
                    where = f'panel {p.get("id")} "{p.get("title", "")}" query {t.get("refId", "?")}'
                    out.append((where, grafana_stand_ins(t["expr"], variables)))
            walk(p.get("panels") or [])

    walk(dashboard.get("panels") or [])
    for v in variables:
        if v.get("type") != "query":
            continue
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query")
        if not isinstance(q, str) or not q:
            q = v.get("definition") or ""
        expr = variable_promql(q)
        if expr:
            out.append((f'variable "{v.get("name")}"', grafana_stand_ins(expr, variables)))
    return out


# -- the alerts ---------------------------------------------------------------------------------------------------


def load_prometheus_rule(path: Path) -> dict:
    """The PrometheusRule object of `path` (the first document of that kind), such as a rendered layout."""
    import yaml  # only here: the rest of this module is the standard library

    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        if isinstance(doc, dict) and doc.get("kind") == "PrometheusRule":
            return doc
    raise ValueError(f"{path}: no PrometheusRule")


def component_alert_files(components: Path = COMPONENTS) -> list[Path]:
    """components/<daemon>/alerts.yaml of every component that adds alerts, sorted by component."""
    return sorted(components.glob("*/alerts.yaml"))


def load_alert_groups(path: Path) -> list[dict]:
    """The rule groups a component's alerts.yaml adds: it is a JSON patch (a list of operations) whose `add`
    operations on /spec/groups/- carry the groups, as kustomize applies it to the PrometheusRule gpusched."""
    import yaml

    ops = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(ops, list):
        raise ValueError(f"{path}: not a JSON patch (a list of operations)")
    groups = []
    for op in ops:
        if not isinstance(op, dict) or op.get("op") != "add" or op.get("path") != "/spec/groups/-":
            raise ValueError(f"{path}: an operation other than `add` to /spec/groups/-: {op!r}")
        if not isinstance(op.get("value"), dict):
            raise ValueError(f"{path}: an `add` without a group as its value")
        groups.append(op["value"])
    return groups


def all_alert_rules(components: Path = COMPONENTS) -> dict:
    """A PrometheusRule-shaped dict ({"spec": {"groups": [...]}}) holding the groups of every component."""
    return {"spec": {"groups": [g for f in component_alert_files(components) for g in load_alert_groups(f)]}}


def alert_queries(rule: dict) -> list[tuple[str, str]]:
    """(where, expr) of every rule of a PrometheusRule: 'alert GpuschedSchedulerDown', 'record foo:bar'."""
    out = []
    for group in (rule.get("spec") or {}).get("groups") or []:
        for r in group.get("rules") or []:
            name = f'alert {r["alert"]}' if "alert" in r else f'record {r.get("record")}'
            out.append((name, str(r.get("expr", ""))))
    return out


# -- what the checks share ----------------------------------------------------------------------------------------


def references(rule: dict | None = None, dashboard: Path = DASHBOARD) -> dict[str, list[str]]:
    """Every metric name the alerts (of `rule`; default: every component's) and the dashboard use (as written:
    foo_bucket stays foo_bucket) -> where."""
    rule = all_alert_rules() if rule is None else rule
    queries = [(f"alerts: {w}", e) for w, e in alert_queries(rule)]
    dash = json.loads(dashboard.read_text(encoding="utf-8"))
    queries += [(f"{dashboard.name}: {w}", e) for w, e in dashboard_queries(dash)]
    out: dict[str, list[str]] = {}
    for where, expr in queries:
        for name in metric_names(expr):
            out.setdefault(name, [])
            if where not in out[name]:
                out[name].append(where)
    return out


def referenced_metrics(prefix: str) -> list[str]:
    """The metric families the alerts and the dashboard use whose name starts with `prefix`, sorted; a histogram's
    foo_bucket, foo_sum and foo_count count as foo."""
    return sorted({family_name(n) for n in references() if family_name(n).startswith(prefix)})


def parse_exposition(text: str) -> tuple[dict[str, str], set[str]]:
    """(family -> type from `# TYPE` lines, names of the samples) of a Prometheus text exposition."""
    types: dict[str, str] = {}
    samples: set[str] = set()
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3]
        elif line:
            m = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line)
            if m:
                samples.add(m.group())
    return types, samples


def check_exposition(text: str, prefixes) -> list[str]:
    """One problem per metric family that the alerts or the dashboard use, whose name starts with one of
    `prefixes` (a string or a list), and that the exposition `text` (a /metrics body) lacks. A family counts as
    present when a `# TYPE` line declares it (samples or none), when it has samples, or, for a histogram, when
    its _bucket, _sum and _count samples are there."""
    if isinstance(prefixes, str):
        prefixes = [prefixes]
    types, samples = parse_exposition(text)
    problems = []
    by_family: dict[str, dict] = {}
    for name, where in references().items():
        fam = family_name(name)
        if any(fam.startswith(p) for p in prefixes):
            entry = by_family.setdefault(fam, {"written": set(), "where": []})
            entry["written"].add(name)
            entry["where"] += [w for w in where if w not in entry["where"]]
    for fam in sorted(by_family):
        entry = by_family[fam]
        present = (fam in types or fam in samples
                   or all(fam + s in samples for s in ("_bucket", "_sum", "_count"))
                   or any(n in types or n in samples for n in entry["written"]))
        if not present:
            problems.append(f"{fam}: absent from the exposition, used by " + "; ".join(entry["where"]))
    return problems


_CAMEL = re.compile(r"[a-z][A-Z]")
_CAMEL_COMPLAINT = re.compile(r"^(\S+) label names should be written in 'snake_case' not 'camelCase'$")
DCGM_LABELS = {"modelName", "UUID", "Hostname"}


def _label_names(text: str, family: str) -> set[str]:
    names: set[str] = set()
    pattern = re.compile(r"^" + re.escape(family) + r"(?:_bucket|_sum|_count)?\{([^}]*)\}")
    for line in text.splitlines():
        m = pattern.match(line)
        if m:
            names.update(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"', m.group(1)))
    return names


def promtool_check_metrics(text: str, promtool: str = "promtool", dcgm_prefixes=("DCGM_",)) -> list[str]:
    """`promtool check metrics` on `text`: its complaints, one string each ([] when it has none). The complaint about
    camelCase label names is left out for families starting with one of `dcgm_prefixes` when their only camelCase
    labels are dcgm-exporter's modelName, UUID and Hostname (gpusched keeps dcgm-exporter's names). The agent's
    gpusched_gpu_* families carry the same labels: pass dcgm_prefixes=("DCGM_", "gpusched_gpu_") to accept them
    there too. Raises FileNotFoundError without promtool."""
    proc = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return []
    complaints = []
    for line in (proc.stdout + "\n" + proc.stderr).splitlines():
        line = line.strip()
        if not line:
            continue
        m = _CAMEL_COMPLAINT.match(line)
        if m and m.group(1).startswith(tuple(dcgm_prefixes)):
            camel = {n for n in _label_names(text, m.group(1)) if _CAMEL.search(n)}
            if camel <= DCGM_LABELS:
                continue
        complaints.append(line)
    if not complaints and proc.returncode not in (0, 3):  # 3: lint complaints only, all of them accepted above
        complaints.append(f"promtool check metrics exited {proc.returncode} without saying why")
    return complaints

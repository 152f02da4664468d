"""The Grafana dashboards are coherent, and every PromQL they or the rules hold runs on real data.

Lint (no Grafana runs here): the committed JSON is what dashboards/build.py writes, panel ids are
unique, every data source reference resolves to a provisioned uid or to a data source variable
that defaults to one, every variable used is defined, and every metric name used exists in the
exporter's real output over the recorded fixtures (recording-rule names count), and every span
attribute a TraceQL query names is one that coding_agent_exporter/semconv.py defines.

Then a real Prometheus scrapes `coding-agent-exporter serve` over all recorded fixtures, with two
live sessions (one waiting at a permission prompt, one running), one session's records moved to
now (so a 5-hour usage window is active, against a --usage-window.token-limit) and the shipped
rule files loaded, and runs every expression of every dashboard (panels, variables, annotations)
and rule file with Grafana's variables substituted: each must parse, and each must return data
unless it is listed as legitimately empty on this data (no parse errors, no alert firing yet, no
sub-agent running). The session picker's options are read from it as Grafana's regex takes them,
and the tables' links find their fields in every row.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import yaml

from coding_agent_exporter.traces import semconv

from .backends import (
    get,
    prometheus_config,
    query,
    run_exporter,
    run_prometheus,
    wait_for,
    write_index,
)
from .conftest import FIXTURES, ROOT, expected, scenarios
from .test_otlp import write_later_turn

DASHBOARDS = ROOT / "dashboards"
JSON_FILES = sorted((DASHBOARDS / "grafana" / "dashboards").glob("*.json"))
RULE_FILES = sorted((DASHBOARDS / "prometheus" / "rules").glob("*.yml"))
PROVISIONED = {
    d["uid"]: d["type"]
    for path in (DASHBOARDS / "grafana" / "provisioning" / "datasources").glob("*.yml")
    for d in yaml.safe_load(path.read_text())["datasources"]
}
SPAN_ATTRIBUTES = {
    value for name, value in vars(semconv).items() if name.isupper() and isinstance(value, str)
}
BUILTIN_METRICS = {"up", "ALERTS", "ALERTS_FOR_STATE"}
# A Grafana variable: $name or ${name} or ${name:format}; not $1, a label_replace group.
VARIABLE = r"\$\{?([A-Za-z_]\w*)(?::\w+)*\}?"
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
PROMQL_WORDS |= {"and", "or", "unless", "bool", "offset", "inf", "nan"}
WAITING = FIXTURES / "claude-code" / "2.1.332" / "subagent-background"
RUNNING = FIXTURES / "claude-code" / "2.1.332" / "print-two-tools"
LIMIT = "1000000"  # --usage-window.token-limit

# Expressions that return nothing on this data, and why.
MAY_BE_EMPTY = {
    "Needs you (annotation)": "the alert needs a minute of waiting before it fires",
    "Parse errors": "the recorded fixtures have no bad line",
    "Sub-agents running by type": "no sub-agent runs in the live sessions",
    "CodingAgentStuck": "the running session wrote just now",
    "CodingAgentTokenBurn": "the fixtures hold far fewer tokens than the threshold",
    "CodingAgentExporterDown": "the exporter is up",
    "CodingAgentReaderDown": "the reader is up",
    "CodingAgentParseErrors": "no parse errors",
    "CodingAgentDailyBudget": "the fixtures cost far less than the budget",
    "CodingAgentWindowLimit": "the active window stays far below the limit",
    "CodingAgentUnpricedTokens": "every recorded Claude Code model has a price",
}


# --- the dashboards as data ------------------------------------------------------------------


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def all_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def promql(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, expression) for every PromQL expression: panels, variables, annotations."""
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            if target["datasource"]["type"] == "prometheus":
                yield panel["title"], target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield f"${variable['name']}", variable_expr(variable["definition"])
    for annotation in dashboard["annotations"]["list"]:
        if "expr" in annotation:
            yield f"{annotation['name']} (annotation)", annotation["expr"]


def variable_expr(definition: str) -> str:
    """The PromQL a Prometheus variable query runs: `label_values(expr, label)` asks for the
    series of `expr` (here: their groups by `label`), `query_result(expr)` runs `expr`."""
    found = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", definition)
    if found:
        return f"group by ({found[2]}) ({found[1]})"
    found = re.fullmatch(r"query_result\((.*)\)", definition, re.DOTALL)
    assert found, definition
    return found[1]


def rule_exprs() -> Iterator[tuple[str, str]]:
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                yield rule.get("alert") or rule["record"], rule["expr"]


def recorded_names() -> set[str]:
    return {name for name, _ in rule_exprs() if ":" in name}


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression (not functions, keywords, labels or numbers)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for found in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        before = text[found.start() - 1] if found.start() else " "
        after = text[found.end() :].lstrip()
        if before.isdigit() or before in ".$" or after.startswith("("):
            continue
        if found[0] not in PROMQL_WORDS:
            names.add(found[0])
    return names


def substitute(expr: str, session_id: str = "none") -> str:
    """Grafana's variables → values a real query can take."""
    for name, value in {
        "__from:date:seconds": str(int(time.time()) - 3600),  # the range's start: 1h ago
        "__rate_interval": "1m",
        "__interval": "15s",
        "__range": "1h",
        "session": session_id,
    }.items():
        expr = expr.replace("${" + name + "}", value).replace("$" + name, value)
    return re.sub(VARIABLE, ".*", expr)


def variables_in(text: str) -> set[str]:
    return set(re.findall(VARIABLE, text))


def test_json_is_what_build_py_writes() -> None:
    result = subprocess.run(
        [sys.executable, str(DASHBOARDS / "build.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert {p.name for p in JSON_FILES} == {"overview.json", "session.json", "traces.json"}


@pytest.mark.parametrize("path", JSON_FILES, ids=lambda p: p.stem)
def test_dashboard_model(path: Path) -> None:
    dashboard = load(path)
    assert dashboard["uid"] and dashboard["title"] and dashboard["schemaVersion"] >= 36
    panels = list(all_panels(dashboard))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels:
        grid = panel["gridPos"]
        assert panel["title"], panel
        assert grid["x"] >= 0 and grid["w"] > 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["targets"], panel["title"]
            assert panel["description"], panel["title"]
        for target in panel.get("targets", []):
            key = "expr" if target["datasource"]["type"] == "prometheus" else "query"
            assert target[key].strip(), panel["title"]
            assert target["datasource"]["type"] == panel["datasource"]["type"], panel["title"]
        refs = [t["refId"] for t in panel.get("targets", [])]
        assert len(refs) == len(set(refs)), panel["title"]


def test_dashboard_uids_are_unique_and_links_resolve() -> None:
    dashboards = [load(p) for p in JSON_FILES]
    uids = {d["uid"] for d in dashboards}
    assert len(uids) == len(dashboards)
    for dashboard in dashboards:
        for text in strings(dashboard["panels"]):
            for uid in re.findall(r"/d/([\w-]+)", text):
                assert uid in uids, text


@pytest.mark.parametrize("path", JSON_FILES, ids=lambda p: p.stem)
def test_datasources_resolve_to_provisioned_uids(path: Path) -> None:
    assert set(PROVISIONED.values()) >= {"prometheus", "tempo"}
    dashboard = load(path)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    refs = [p["datasource"] for p in all_panels(dashboard) if "datasource" in p]
    refs += [t["datasource"] for p in all_panels(dashboard) for t in p.get("targets", [])]
    refs += [v["datasource"] for v in variables.values() if "datasource" in v]
    refs += [a["datasource"] for a in dashboard["annotations"]["list"]]
    assert refs
    for ref in refs:
        uid, kind = ref["uid"], ref["type"]
        variable = re.fullmatch(r"\$\{(\w+)\}", uid)
        if variable:
            defined = variables[variable[1]]
            assert defined["type"] == "datasource" and defined["query"] == kind, ref
            uid = defined["current"]["value"]
        assert PROVISIONED.get(uid) == kind, ref


@pytest.mark.parametrize("path", JSON_FILES, ids=lambda p: p.stem)
def test_every_variable_used_is_defined(path: Path) -> None:
    dashboard = load(path)
    defined = {v["name"] for v in dashboard["templating"]["list"]}
    used = set()
    for text in strings({k: v for k, v in dashboard.items() if k != "templating"}):
        used |= variables_in(text)
    for variable in dashboard["templating"]["list"]:
        for text in strings(variable.get("query", "")):
            used |= variables_in(text)
    used = {name for name in used if not name.startswith("__")}
    assert used <= defined, f"undefined: {used - defined}"
    unused = defined - used
    assert not unused, f"defined but never used: {unused}"


def test_traceql_is_well_formed() -> None:
    queries = [
        target["query"]
        for path in JSON_FILES
        for panel in all_panels(load(path))
        for target in panel.get("targets", [])
        if target["datasource"]["type"] == "tempo"
    ]
    assert len(queries) >= 8
    assert semconv.CONVERSATION_ID in SPAN_ATTRIBUTES  # the session's turns are found by it
    for text in queries:
        assert text == "$trace" or text.startswith("{"), text
        assert text.count("{") == text.count("}") and text.count("(") == text.count(")"), text
        assert text.count('"') % 2 == 0, text
        for attribute in re.findall(r"\bspan\.([\w.]+)", text):
            assert attribute in SPAN_ATTRIBUTES, (
                f"{attribute} is not in coding_agent_exporter/semconv.py"
            )
        for operation in re.findall(r'gen_ai\.operation\.name = "(\w+)"', text):
            assert operation in {semconv.OP_INVOKE_AGENT, semconv.OP_EXECUTE_TOOL}, text


# --- the exporter's real output --------------------------------------------------------------


@pytest.fixture(scope="module")
def merged_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every recorded scenario's projects in one home (session ids are unique across them)."""
    home = tmp_path_factory.mktemp("claude") / "home"
    for path in scenarios():
        shutil.copytree(path / "home" / "projects", home / "projects", dirs_exist_ok=True)
    (home / "sessions").mkdir()
    write_later_turn(home)  # one session's records moved to now: a 5-hour window is active
    return home


@pytest.fixture(scope="module")
def exported_names(merged_home: Path) -> set[str]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "coding_agent_exporter",
            "metrics",
            "--claude.home",
            str(merged_home),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    names = set()
    for line in result.stdout.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    assert "coding_agent_tokens_total" in names
    return names


def test_every_metric_used_exists(exported_names: set[str]) -> None:
    known = exported_names | recorded_names() | BUILTIN_METRICS
    exprs = [e for path in JSON_FILES for e in promql(load(path))]
    exprs += list(rule_exprs())
    assert len(exprs) > 40
    for where, expr in exprs:
        names = metric_names(substitute(expr))
        assert names, (where, expr)
        assert names <= known, f"{where}: unknown {names - known} in {expr}"


def test_metric_names_parser() -> None:
    expr = (
        'histogram_quantile(0.9, sum by (le, tool) (rate(a_bucket{agent=~"x|y"}[5m])))'
        " / on (instance) group_left (reason) (b == 1) > 2e6 or vector(0)"
    )
    assert metric_names(expr) == {"a_bucket", "b"}


# --- a real Prometheus -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def live_sessions(merged_home: Path) -> Iterator[dict[str, str]]:
    processes = [subprocess.Popen(["sleep", "300"]) for _ in range(2)]
    waiting = expected(WAITING)["sessions"][0]["session_id"]
    running = expected(RUNNING)["sessions"][0]["session_id"]
    write_index(
        merged_home, processes[0], waiting, status="waiting", waitingFor="permission prompt"
    )
    write_index(merged_home, processes[1], running, status="busy")
    yield {"waiting": waiting, "running": running}
    for process in processes:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def prometheus(
    merged_home: Path, live_sessions: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("backends")
    with run_exporter(merged_home, workdir, "--usage-window.token-limit", LIMIT) as exporter:
        config = prometheus_config(
            exporter.removeprefix("http://"), job="coding-agents", rule_files=RULE_FILES
        )
        with run_prometheus(workdir, config) as url:
            wait_for(
                "three scrapes",
                lambda: query(url, 'count_over_time(up{job="coding-agents"}[1m]) >= 3'),
            )
            for name in sorted(recorded_names()):
                wait_for(f"recording rule {name}", lambda name=name: query(url, name))
            yield url


def test_every_expression_parses_and_shows_data(
    prometheus: str, live_sessions: dict[str, str]
) -> None:
    exprs = [e for path in JSON_FILES for e in promql(load(path))] + list(rule_exprs())
    assert set(MAY_BE_EMPTY) <= {where for where, _ in exprs}, "MAY_BE_EMPTY names a stale entry"
    empty = []
    for where, expr in exprs:
        text = substitute(expr, live_sessions["waiting"])
        status, body = get(f"{prometheus}/api/v1/query?" + urlencode({"query": text}))
        assert status == 200, f"{where}: {text}: {body}"
        if not json.loads(body)["data"]["result"]:
            empty.append(where)
    assert set(empty) <= set(MAY_BE_EMPTY), f"no data: {set(empty) - set(MAY_BE_EMPTY)}"
    assert "CodingAgentNeedsYou" not in empty


def test_needs_you_table_and_totals_show_the_fixtures(
    prometheus: str, live_sessions: dict[str, str]
) -> None:
    (row,) = query(
        prometheus, substitute("agent_session:coding_agent_needs_user:seconds{agent=~'$agent'}")
    )
    assert row["metric"]["session_id"] == live_sessions["waiting"]
    assert row["metric"]["reason"] == "permission prompt"
    assert row["metric"]["project"] == "/home/user/work/shop-api"
    assert float(row["value"][1]) >= 0
    states = {
        r["metric"]["session_id"]: r["metric"]["state"]
        for r in query(prometheus, "agent_session:coding_agent_inactive:seconds")
    }
    assert states == {live_sessions["waiting"]: "needs_user", live_sessions["running"]: "running"}
    rates = query(prometheus, "agent_tool_outcome:coding_agent_tool_calls:rate5m")
    tools = {r["metric"]["tool"] for r in rates}
    assert {"Bash", "Agent"} <= tools
    for expr in (
        "sum(coding_agent_tokens_total)",
        "sum(coding_agent_turns_total)",
        "sum(coding_agent_tool_calls_total)",
        "sum(coding_agent_sessions_total)",
    ):
        assert float(query(prometheus, expr)[0]["value"][1]) > 0, expr


def grafana_text(row: dict[str, Any]) -> str:
    """A query_result row as Grafana's Prometheus data source writes it for a variable's regex:
    name{label="value",...} value timestamp_ms."""
    labels = dict(row["metric"])
    name = labels.pop("__name__", "")
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {row['value'][1]} {int(row['value'][0] * 1000)}"


def pick(regex: str, text: str) -> tuple[str, str]:
    """(text, value) as Grafana takes them from a /regex/'s named groups (JavaScript's (?<name>)
    is Python's (?P<name>)); either one stands for the other when alone."""
    found = re.search(regex.strip("/").replace("(?<", "(?P<"), text)
    assert found, (regex, text)
    groups = found.groupdict()
    return groups.get("text") or groups["value"], groups.get("value") or groups["text"]


def options(prometheus: str, variable: dict[str, Any], session_id: str = "none") -> list[Any]:
    rows = query(prometheus, substitute(variable_expr(variable["definition"]), session_id))
    return [pick(variable["regex"], grafana_text(row)) for row in rows]


def test_session_picker_reads_agent_project_and_short_id(
    prometheus: str, live_sessions: dict[str, str]
) -> None:
    variables = {v["name"]: v for v in load(JSON_FILES[1])["templating"]["list"]}
    assert JSON_FILES[1].name == "session.json"
    offered = options(prometheus, variables["session"])
    waiting, running = live_sessions["waiting"], live_sessions["running"]
    assert (f"claude-code · shop-api · {waiting[:8]}", waiting) in offered
    since = time.time() - 3600  # the range `substitute` gives
    recent = query(prometheus, f"coding_agent_session_activity_timestamp_seconds >= {since}")
    history = {r["metric"]["session_id"] for r in recent} - {waiting, running}
    assert history, "the e2e data has a session with a record in the range that is not live"
    assert {value for _, value in offered} == {waiting, running} | history  # history included
    latest = query(
        prometheus,
        "max by (session_id) (coding_agent_session_last_activity_timestamp_seconds"
        f" or coding_agent_session_activity_timestamp_seconds >= {since})",
    )
    by_activity = sorted(latest, key=lambda r: -float(r["value"][1]))
    assert [value for _, value in offered] == [r["metric"]["session_id"] for r in by_activity]
    assert options(prometheus, variables["agent"], waiting) == [("claude-code", "claude-code")]


def test_table_links_find_their_fields(prometheus: str, live_sessions: dict[str, str]) -> None:
    """Each ${__data.fields.X} of a Prometheus table's links is a label of every row."""
    from .test_dashboard_links import all_links

    checked = set()
    for _, panel, _, spec in all_links():
        fields = re.findall(r"\$\{__data\.fields\.(\w+)\}", spec.get("url", ""))
        if panel is None or panel["datasource"]["type"] != "prometheus" or not fields:
            continue
        for target in panel["targets"]:
            rows = query(prometheus, substitute(target["expr"], live_sessions["waiting"]))
            assert rows, panel["title"]
            for row in rows:
                assert all(row["metric"].get(f) for f in fields), (panel["title"], row)
        checked.add(panel["title"])
    assert checked == {"Needs you", "Live sessions"}

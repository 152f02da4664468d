"""From a duration panel to the turn's trace, and a session's Tempo panels, on real output.

`serve` sends two recorded sessions to an OTLP receiver (tests/otlp_sink.py): a turn that
started a sub-agent, and a turn that failed (an API error). A real Prometheus with exemplar storage
scrapes it (OpenMetrics). Then:

- every exemplar query of the dashboards' duration panels, asked the way Grafana asks
  (/api/v1/query_exemplars), returns exemplars whose trace-id label is the one the Prometheus
  data source's exemplarTraceIdDestinations reads (datasources.yml) and whose value is a trace
  the exporter sent: the exemplar's link opens that turn in Tempo;
- the Session and Traces dashboards' TraceQL queries, evaluated on the spans the exporter sent
  (`{ span.a = "x" && span.b != nil ... }` filters, `>>` descendants and `>` children: the part
  of TraceQL they use), find that session's turn, its tool calls and its sub-agent, the turn
  with a sub-agent, the slow tool calls and the failed turn: the attributes they filter on are
  where the exporter puts them. ("Failed tool calls", an `||` of a status and an attribute,
  is parsed but not evaluated here.)
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
import yaml

from .backends import get, prometheus_config, run_exporter, run_prometheus, wait_for
from .conftest import FIXTURES, expected
from .otlp_sink import HttpSink, ReceivedSpan
from .test_dashboards import DASHBOARDS, JSON_FILES, all_panels, load, substitute
from .test_otlp import SCENARIO, SCENARIO_SESSION

FAILED = FIXTURES / "claude-code" / "2.1.197" / "api-error"  # one turn, failed (an HTTP 400)
DATASOURCES = DASHBOARDS / "grafana" / "provisioning" / "datasources" / "datasources.yml"


def exemplar_label() -> str:
    (prometheus,) = [
        d
        for d in yaml.safe_load(DATASOURCES.read_text())["datasources"]
        if d["type"] == "prometheus"
    ]
    (destination,) = prometheus["jsonData"]["exemplarTraceIdDestinations"]
    assert destination["datasourceUid"] == "tempo"
    name: str = destination["name"]
    return name


def exemplar_targets() -> list[tuple[str, str]]:
    found = [
        (panel["title"], target["expr"])
        for path in JSON_FILES
        for panel in all_panels(load(path))
        for target in panel.get("targets", [])
        if target.get("exemplar")
    ]
    assert {title for title, _ in found} == {"Turn duration", "Tool call duration (p90) by tool"}
    return found


@pytest.fixture(scope="module")
def sent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, HttpSink]]:
    """(Prometheus URL, the receiver) once the exporter has sent the session and been scraped.
    Its own state folder: one that remembers the turns as sent would send nothing."""
    workdir = tmp_path_factory.mktemp("exemplars")
    home = workdir / "claude"
    shutil.copytree(SCENARIO / "home", home)
    shutil.copytree(FAILED / "home" / "projects", home / "projects", dirs_exist_ok=True)
    receiver = HttpSink()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        env.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
        try:
            with (
                run_exporter(
                    home, workdir, "--traces.backfill", "all", "--state.dir", str(workdir / "state")
                ) as exporter,
                run_prometheus(
                    workdir,
                    prometheus_config(exporter.removeprefix("http://")),
                    "--enable-feature=exemplar-storage",
                ) as prometheus,
            ):
                wait_for("spans", lambda: len(receiver.spans) >= 8)
                first = exemplar_targets()[0][1]
                wait_for("exemplars", lambda: exemplars(prometheus, first))
                yield prometheus, receiver
        finally:
            receiver.close()


def exemplars(prometheus: str, expr: str) -> list[dict[str, Any]]:
    params = {"query": substitute(expr), "start": "0", "end": str(time.time() + 60)}
    status, body = get(f"{prometheus}/api/v1/query_exemplars?" + urlencode(params))
    assert status == 200, body
    return [e for series in json.loads(body)["data"] for e in series["exemplars"]]


def test_duration_exemplars_link_to_traces_the_exporter_sent(
    sent: tuple[str, HttpSink],
) -> None:
    prometheus, receiver = sent
    label = exemplar_label()
    traces = {span.trace_id for span in receiver.spans}
    for title, expr in exemplar_targets():
        found = exemplars(prometheus, expr)
        assert found, title
        for exemplar in found:
            assert exemplar["labels"][label] in traces, (title, exemplar)


# --- the part of TraceQL the dashboards use ---------------------------------------------------

TERM = re.compile(r'span\.([\w.]+) (=|=~) "([^"]*)"|span\.([\w.]+) != nil|duration > (\d+)s')


def holds(span: ReceivedSpan, term: str) -> bool:
    """`span.a = "x"`, `span.a =~ "x|y"` (anchored, as in Tempo), `span.a != nil` (the span has
    it), `duration > 30s`."""
    found = TERM.fullmatch(term.strip())
    assert found, f"a term this evaluator does not know: {term}"
    name, op, value, present, seconds = found.groups()
    if present:
        return present in span.attributes
    if seconds:
        return span.end - span.start > int(seconds) * 10**9
    actual = span.attributes.get(name)
    if op == "=~":
        return isinstance(actual, str) and re.fullmatch(value, actual) is not None
    return bool(actual == value)


def matches(span: ReceivedSpan, condition: str) -> bool:
    return all(holds(span, term) for term in condition.split("&&"))


def evaluate(query: str, spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    """`{ A }`, `{ A } >> { B }` (B spans with an A ancestor) or `{ A } > { B }` (with an A
    parent), before any `| select(...)`."""
    filters = re.findall(r"\{([^}]*)\}", query.split(" | ")[0])
    parents = {s.span_id: s for s in spans}

    def ancestors(span: ReceivedSpan) -> Iterator[ReceivedSpan]:
        while span.parent_id in parents:
            span = parents[span.parent_id]
            yield span

    if len(filters) == 1:
        return [s for s in spans if matches(s, filters[0])]
    (operator,) = re.findall(r"\}\s*(>>|>)\s*\{", query)
    assert len(filters) == 2, query

    def related(span: ReceivedSpan) -> Iterator[ReceivedSpan]:
        if operator == ">>":
            yield from ancestors(span)
        elif span.parent_id in parents:
            yield parents[span.parent_id]

    return [
        s
        for s in spans
        if matches(s, filters[1]) and any(matches(a, filters[0]) for a in related(s))
    ]


def tables(name: str, **values: str) -> dict[str, str]:
    """The TraceQL of dashboard `name`'s tables by title, its variables filled in."""
    out = {}
    for panel in all_panels(load(DASHBOARDS / "grafana" / "dashboards" / name)):
        if panel["type"] == "table" and panel["datasource"]["type"] == "tempo":
            query = panel["targets"][0]["query"]
            for variable, value in values.items():
                query = query.replace(f"${variable}", value)
            out[panel["title"]] = query
    return out


def test_session_panels_find_the_sessions_turn_tools_and_sub_agent(
    sent: tuple[str, HttpSink],
) -> None:
    spans = sent[1].spans
    queries = tables("session.json", session=SCENARIO_SESSION)
    (turn,) = evaluate(queries["Turns"], spans)
    assert turn.parent_id == "" and turn.name == "invoke_agent claude-code"
    tools = {s.name for s in evaluate(queries["Tool calls"], spans)}
    assert tools == {s.name for s in spans if s.name.startswith("execute_tool")}
    assert {"execute_tool Agent", "execute_tool Bash"} <= tools
    (sub,) = evaluate(queries["Sub-agents"], spans)
    assert sub.name == "invoke_agent general-purpose"
    other = tables("session.json", session="another-session")
    assert all(evaluate(query, spans) == [] for query in other.values())


def test_traces_panels_find_the_sub_agent_turn_and_slow_tools(
    sent: tuple[str, HttpSink],
) -> None:
    spans = sent[1].spans
    queries = tables("traces.json", min_duration="0s")
    (sub,) = evaluate(queries["Turns with sub-agents"], spans)
    assert sub.name == "invoke_agent general-purpose"
    slow = evaluate(queries["Slowest tool calls"], spans)
    assert {s.name for s in slow} == {s.name for s in spans if s.name.startswith("execute_tool")}
    assert evaluate(tables("traces.json", min_duration="86400s")["Slowest tool calls"], spans) == []
    (failed,) = evaluate(queries["Interrupted or failed turns"], spans)
    assert (
        failed.attributes["gen_ai.conversation.id"] == expected(FAILED)["sessions"][0]["session_id"]
    )
    assert failed.attributes["coding_agent.turn.outcome"] == "failed"

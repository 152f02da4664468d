"""From a duration panel to the turn's trace, and a session's Tempo panels, on real output.

`serve` sends a recorded session's turn tree to an OTLP receiver (tests/otlp_sink.py) while a
real Prometheus with exemplar storage scrapes it (OpenMetrics). Then:

- every exemplar query of the dashboards' duration panels, asked the way Grafana asks
  (/api/v1/query_exemplars), returns exemplars whose trace-id label is the one the Prometheus
  data source's exemplarTraceIdDestinations reads (datasources.yml) and whose value is a trace
  the exporter sent: the exemplar's link opens that turn in Tempo;
- the Session dashboard's TraceQL queries, evaluated on the spans the exporter sent (their
  `{ span.a = "x" && ... }` filters and `>>` descendants, the part of TraceQL they use), find
  that session's turn, its tool calls and its sub-agent: the attributes they filter on are
  where the exporter puts them.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
import yaml

from .backends import get, prometheus_config, run_exporter, run_prometheus, wait_for
from .otlp_sink import HttpSink, ReceivedSpan
from .test_dashboards import DASHBOARDS, JSON_FILES, all_panels, load, substitute
from .test_otlp import SCENARIO, SCENARIO_SESSION

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
    import json

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


# --- the part of TraceQL the Session dashboard uses ------------------------------------------


def holds(span: ReceivedSpan, term: str) -> bool:
    """`span.a = "x"` (the attribute has that value) or `span.a != nil` (the span has it)."""
    found = re.fullmatch(r'span\.([\w.]+) (?:= "([^"]*)"|(!= nil))', term.strip())
    assert found, f"not an equality or != nil: {term}"
    name, value, present = found.groups()
    return name in span.attributes if present else span.attributes.get(name) == value


def matches(span: ReceivedSpan, condition: str) -> bool:
    return all(holds(span, term) for term in condition.split("&&"))


def evaluate(query: str, spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    """`{ A }` or `{ A } >> { B }` (B spans with an A ancestor), before any `| select(...)`."""
    filters = re.findall(r"\{([^}]*)\}", query.split("|")[0])
    parents = {s.span_id: s for s in spans}

    def ancestors(span: ReceivedSpan) -> Iterator[ReceivedSpan]:
        while span.parent_id in parents:
            span = parents[span.parent_id]
            yield span

    if len(filters) == 1:
        return [s for s in spans if matches(s, filters[0])]
    assert len(filters) == 2 and "} >> {" in query, query
    return [
        s
        for s in spans
        if matches(s, filters[1]) and any(matches(a, filters[0]) for a in ancestors(s))
    ]


def test_session_panels_find_the_sessions_turn_tools_and_sub_agent(
    sent: tuple[str, HttpSink],
) -> None:
    _, receiver = sent
    spans = receiver.spans
    session = load(DASHBOARDS / "grafana" / "dashboards" / "session.json")
    queries = {
        p["title"]: p["targets"][0]["query"].replace("$session", SCENARIO_SESSION)
        for p in all_panels(session)
        if p["type"] == "table"
    }
    (turn,) = evaluate(queries["Turns"], spans)
    assert turn.parent_id == "" and turn.name == "invoke_agent claude-code"
    tools = {s.name for s in evaluate(queries["Tool calls"], spans)}
    assert tools == {s.name for s in spans if s.name.startswith("execute_tool")}
    assert {"execute_tool Agent", "execute_tool Bash"} <= tools
    (sub,) = evaluate(queries["Sub-agents"], spans)
    assert sub.name == "invoke_agent general-purpose"
    other = queries["Turns"].replace(SCENARIO_SESSION, "another-session")
    assert evaluate(other, spans) == []

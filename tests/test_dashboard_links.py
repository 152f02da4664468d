"""Where the dashboards lead: every link opens a dashboard that exists, with variables it has,
from fields its panel's query has; the trace links land on a trace view; every stat says over
what it counts. (No Grafana runs here: this reads the JSON as Grafana would.)

The Prometheus tables' fields are checked against real query results in test_dashboards.py;
a Tempo table's fields are the ones Grafana's Tempo data source names (pinned below, from
public/app/plugins/datasource/tempo/resultTransformer.ts) plus the attributes its TraceQL
selects.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from .test_dashboards import JSON_FILES, VARIABLE, all_panels, load

DASHBOARDS = {d["uid"]: d for d in map(load, JSON_FILES)}
TEMPO_FIELDS = {
    "traces": {"traceID", "startTime", "traceService", "traceName", "traceDuration", "nested"},
    "spans": {"traceIdHidden", "traceService", "traceName", "spanID", "time", "name", "duration"},
}
CONSOLE_PREFIX = "${console}/"

Link = tuple[dict[str, Any], dict[str, Any] | None, str | None, dict[str, Any]]
"""(dashboard, panel or None, field the link is on or None, the link)"""


def links(dashboard: dict[str, Any]) -> Iterator[Link]:
    for link in dashboard["links"]:
        yield dashboard, None, None, link
    for panel in all_panels(dashboard):
        for link in panel.get("links", []):
            yield dashboard, panel, None, link
        config = panel.get("fieldConfig", {})
        for link in config.get("defaults", {}).get("links", []):
            yield dashboard, panel, None, link
        for override in config.get("overrides", []):
            for prop in override["properties"]:
                if prop["id"] == "links":
                    for link in prop["value"]:
                        yield dashboard, panel, override["matcher"]["options"], link


def all_links() -> list[Link]:
    return [link for dashboard in DASHBOARDS.values() for link in links(dashboard)]


def variables(dashboard: dict[str, Any]) -> set[str]:
    return {v["name"] for v in dashboard["templating"]["list"]}


def tempo_fields(panel: dict[str, Any]) -> set[str]:
    """The columns of a Tempo search table: Grafana's own and the attributes it selects."""
    (target,) = panel["targets"]
    selected = re.search(r"\| select\((.*)\)\s*$", target["query"])
    attributes = (
        {a.strip().removeprefix("span.") for a in selected[1].split(",")} if selected else set()
    )
    return TEMPO_FIELDS[target["tableType"]] | attributes


def query_params(url: str) -> list[str]:
    return url.partition("?")[2].split("&") if "?" in url else []


def test_there_are_links_to_check() -> None:
    found = all_links()
    assert len(found) >= 12
    assert {panel["title"] for _, panel, _, _ in found if panel} >= {
        "Needs you",
        "Live sessions",
        "Turns",
        "Tool calls",
        "Sub-agents",
        "Slowest tool calls",
    }


def link_id(link: Link) -> str:
    dashboard, panel, field, spec = link
    return f"{dashboard['uid']}:{panel['title'] if panel else '-'}:{field or '-'}:{spec['title']}"


def check_dashboard_url(url: str) -> None:
    """/d/<uid>/<slug>?var-x=...&${y:queryparam}&${__url_time_range}: the uid exists, and
    every variable set is one the target dashboard has."""
    uid = url.removeprefix("/d/").split("/")[0]
    assert uid in DASHBOARDS, url
    for param in query_params(url):
        if param == "${__url_time_range}":
            continue
        named = re.fullmatch(r"var-(\w+)=.+", param) or re.fullmatch(
            r"\$\{(\w+):queryparam\}", param
        )
        assert named, f"{param} in {url}"
        assert named[1] in variables(DASHBOARDS[uid]), f"{uid} has no variable {named[1]}"


@pytest.mark.parametrize("link", all_links(), ids=link_id)
def test_link_leads_somewhere_that_exists(link: Link) -> None:
    dashboard, panel, field, spec = link
    if spec.get("type") == "dashboards":  # the list of the dashboards with these tags
        assert spec["tags"] and all(spec["tags"][0] in d["tags"] for d in DASHBOARDS.values())
        return
    url: str = spec["url"]
    assert url.startswith(("/d/", CONSOLE_PREFIX)), url
    used = {name for name in re.findall(VARIABLE, url) if not name.startswith("__")}
    assert used <= variables(dashboard), f"undefined {used - variables(dashboard)} in {url}"
    if url.startswith("/d/"):
        check_dashboard_url(url)
    fields = set(re.findall(r"\$\{__data\.fields\.([\w.]+)\}", url))
    if fields or "__value" in url:
        assert panel is not None and field is not None, url
    if panel is not None and panel["datasource"]["type"] == "tempo":
        known = tempo_fields(panel)
        assert fields <= known, f"{panel['title']}: {fields - known} is not a column"
        assert field in known, f"{panel['title']}: the link is on {field}, not a column"


def test_every_trace_link_opens_a_trace_view() -> None:
    """var-trace=<id> lands on a dashboard with a trace panel (and a node graph) fed by it."""
    targets = set()
    for _, _, _, spec in all_links():
        if "var-trace=" in spec.get("url", ""):
            targets.add(spec["url"].removeprefix("/d/").split("/")[0])
    assert targets == {"coding-agent-session", "coding-agent-traces"}
    for uid in targets:
        views = [p for p in all_panels(DASHBOARDS[uid]) if p["type"] in ("traces", "nodeGraph")]
        assert views and all(p["targets"][0]["query"] == "$trace" for p in views), uid
        assert any(p["type"] == "traces" for p in views), uid


def test_every_tempo_table_row_opens_its_trace() -> None:
    tables = [
        (d["uid"], p)
        for d in DASHBOARDS.values()
        for p in all_panels(d)
        if p["type"] == "table" and p["datasource"]["type"] == "tempo"
    ]
    assert len(tables) >= 7
    opened = {
        (d["uid"], p["title"])
        for d, p, _, spec in all_links()
        if p is not None and "var-trace=${__data.fields.trace" in spec.get("url", "")
    }
    assert {(uid, p["title"]) for uid, p in tables} == opened


def test_session_links_hold_the_bare_session_id() -> None:
    """The web console links to ?var-session=<id>; so do the dashboards' own links."""
    values = set()
    for _, _, _, spec in all_links():
        for param in query_params(spec.get("url", "")):
            if param.startswith("var-session="):
                values.add(param.removeprefix("var-session="))
    assert values == {"${__data.fields.session_id}", "${__value.raw}"}
    picker = next(
        v
        for v in DASHBOARDS["coding-agent-session"]["templating"]["list"]
        if v["name"] == "session"
    )
    assert 'session_id="(?<value>' in picker["regex"] and picker["allowCustomValue"]


def stat_exprs(panel: dict[str, Any]) -> str:
    return " ".join(t["expr"] for t in panel["targets"])


@pytest.mark.parametrize(
    "stat",
    [p for d in DASHBOARDS.values() for p in all_panels(d) if p["type"] == "stat"],
    ids=lambda p: p["title"],
)
def test_every_stat_says_over_what_it_counts(stat: dict[str, Any]) -> None:
    """A stat over the range says so (or, with a time override, names it: "Tokens today" over
    now/d); one at an instant says "now"."""
    words = f"{stat['title']} {stat['description']}".lower()
    expr = stat_exprs(stat)
    if "[$__range]" in expr and stat.get("timeFrom") == "now/d":
        assert "today" in words, stat["title"]
    elif "[$__range]" in expr:
        assert "the dashboard's range" in words, stat["title"]
    else:
        assert not re.search(r"\[\w+\]", expr), f"{stat['title']}: say over what window"
        assert re.search(r"\bnow\b", words), f"{stat['title']}: say that it counts now"

"""The pieces of the Grafana dashboards (dashboards/build.py writes them): plain dicts, no
dependency, one helper per panel type, the links between dashboards, the variables, and a layout
that places panels left to right on Grafana's 24 columns.

Every Prometheus panel uses the `${datasource}` variable and every Tempo panel `${tempo}`; both
default to the uids provisioned in grafana/provisioning/datasources/ (`prometheus`, `tempo`), and
fall back to the default data source of their type when a dashboard is imported elsewhere.
"""

from __future__ import annotations

from typing import Any

PROMETHEUS = {"type": "prometheus", "uid": "${datasource}"}
TEMPO = {"type": "tempo", "uid": "${tempo}"}
TAGS = ["coding-agents"]
SESSION_UID = "coding-agent-session"
CONSOLE = "http://127.0.0.1:10464"  # the exporter's default --web.listen-address

Json = dict[str, Any]

FLEET = 'host=~"$host",user=~"$user"'  # pushed series' machine and user (docs/fleet.md)
AGENT = f'agent=~"$agent",{FLEET}'
SCOPE = f'agent=~"$agent",project=~"$project",{FLEET}'
TOOL_CALLS = f"coding_agent_tool_calls_total{{{AGENT}}}"


# --- targets ---------------------------------------------------------------------------------


def prom(expr: str, legend: str = "", *, instant: bool = False, table: bool = False) -> Json:
    target: Json = {"datasource": PROMETHEUS, "expr": expr, "legendFormat": legend or "__auto"}
    if instant or table:
        target.update(instant=True, range=False)
    if table:
        target["format"] = "table"
    return target


def traceql(query: str, *, spans: bool = False, limit: int = 50) -> Json:
    return {
        "datasource": TEMPO,
        "queryType": "traceql",
        "query": query,
        "limit": limit,
        "spss": 10,
        "tableType": "spans" if spans else "traces",
    }


# --- panels ----------------------------------------------------------------------------------


def panel(kind: str, title: str, description: str, targets: list[Json], **extra: Any) -> Json:
    refs = "ABCDEFGH"
    for i, target in enumerate(targets):
        target["refId"] = refs[i]
    datasource = targets[0]["datasource"] if targets else PROMETHEUS
    out: Json = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": datasource,
        "targets": targets,
    }
    out.update(extra)
    return out


def defaults(unit: str = "short", **custom: Any) -> Json:
    field: Json = {"unit": unit}
    if custom:
        field["custom"] = custom
    return {"defaults": field, "overrides": []}


def stat(title: str, description: str, expr: str, *, unit: str = "short", **extra: Any) -> Json:
    fields = defaults(unit)
    colored = "thresholds" in extra
    fields["defaults"]["thresholds"] = extra.pop(
        "thresholds", {"mode": "absolute", "steps": [{"color": "text", "value": None}]}
    )
    if "no_value" in extra:
        fields["defaults"]["noValue"] = extra.pop("no_value")
    if "mappings" in extra:
        fields["defaults"]["mappings"] = extra.pop("mappings")
    text_mode = extra.pop("text_mode", "value")
    legend = extra.pop("legend", "")
    return panel(
        "stat",
        title,
        description,
        [prom(expr, legend, instant=True)],
        fieldConfig=fields,
        options={
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "colorMode": "background" if colored else "value",
            "graphMode": "none",
            "textMode": text_mode,
            "justifyMode": "center",
        },
        **extra,
    )


def timeseries(
    title: str,
    description: str,
    targets: list[Json],
    *,
    unit: str = "short",
    stack: bool = False,
    threshold: float | None = None,
    overrides: tuple[Json, ...] = (),
    **extra: Any,
) -> Json:
    custom: Json = {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never"}
    if stack:
        custom.update(stacking={"mode": "normal", "group": "A"}, fillOpacity=60)
    fields = defaults(unit, **custom)
    fields["overrides"] = list(overrides)
    if threshold is not None:
        custom["thresholdsStyle"] = {"mode": "line"}
        fields["defaults"]["thresholds"] = {
            "mode": "absolute",
            "steps": [
                {"color": "transparent", "value": None},
                {"color": "red", "value": threshold},
            ],
        }
    return panel(
        "timeseries",
        title,
        description,
        targets,
        fieldConfig=fields,
        options={
            "legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull"]},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        **extra,
    )


def table(title: str, description: str, targets: list[Json], **extra: Any) -> Json:
    return panel("table", title, description, targets, options={"showHeader": True}, **extra)


def organize(rename: dict[str, str], hide: tuple[str, ...] = ()) -> Json:
    hidden = ("Time", "__name__", "job", "instance", *hide)
    return {
        "id": "organize",
        "options": {
            "excludeByName": dict.fromkeys(hidden, True),
            "indexByName": {name: i for i, name in enumerate(rename)},
            "renameByName": rename,
        },
    }


def override(field: str, *properties: tuple[str, Any], matcher: str = "byName") -> Json:
    return {
        "matcher": {"id": matcher, "options": field},
        "properties": [{"id": key, "value": value} for key, value in properties],
    }


def session_url(session: str, agent: str = "") -> str:
    """The Session dashboard of one session; `var-session` stays the bare session id (the web
    console links to `/d/coding-agent-session/?var-session=<id>` too)."""
    known = f"&var-agent={agent}" if agent else ""
    return (
        f"/d/{SESSION_UID}/coding-agent-session?var-session={session}{known}"
        "&${datasource:queryparam}&${tempo:queryparam}&${__url_time_range}"
    )


def console_url(session: str, agent: str) -> str:
    """The exporter's web console view of one session (`--web.external-url`)."""
    return f"${{console}}/#/session/{agent}/{session}"


def session_links(field: str) -> tuple[str, Any]:
    """A table's session cell opens the Session dashboard, or the session in the web console."""
    session, agent = f"${{__data.fields.{field}}}", "${__data.fields.agent}"
    return (
        "links",
        [
            {
                "title": "Session ${__value.raw}: state, turns, tool calls and traces",
                "url": session_url(session, agent),
            },
            {
                "title": "Session ${__value.raw} in the web console (title, cost, turns)",
                "url": console_url(session, agent),
                "targetBlank": True,
            },
        ],
    )


def trace_links(uid: str, slug: str, field: str, keep: str = "") -> tuple[str, Any]:
    """A trace or span id cell opens its trace in the Trace panel of dashboard `uid`."""
    return (
        "links",
        [
            {
                "title": f"Open trace ${{__data.fields.{field}}} in the Trace panel",
                "url": f"/d/{uid}/{slug}?var-trace=${{__data.fields.{field}}}{keep}"
                "&${datasource:queryparam}&${tempo:queryparam}&${__url_time_range}",
            }
        ],
    )


RED_WHEN_ANY = {
    "mode": "absolute",
    "steps": [{"color": "green", "value": None}, {"color": "red", "value": 1}],
}


# --- variables and dashboards ----------------------------------------------------------------


def datasource_variable(name: str, kind: str, label: str) -> Json:
    return {
        "type": "datasource",
        "name": name,
        "label": label,
        "query": kind,
        "current": {"text": label, "value": kind},
        "hide": 0,
        "refresh": 1,
        "regex": "",
        "options": [],
    }


def query_variable(name: str, label: str, query: str, *, multi: bool = True) -> Json:
    variable: Json = {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": PROMETHEUS,
        "definition": query,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "refresh": 2,
        "sort": 1,
        "hide": 0,
        "regex": "",
        "options": [],
        "multi": multi,
        "includeAll": multi,
    }
    if multi:
        variable["allValue"] = ".*"
        variable["current"] = {"text": ["All"], "value": ["$__all"]}
    else:
        variable["current"] = {"text": "", "value": ""}
    return variable


def picker_variable(name: str, label: str, query: str, regex: str) -> Json:
    """One value from a `query_result(...)`: `regex`'s named groups `text` and `value` pick what
    the picker shows and what the variable holds. A value given in the URL that the query does
    not offer (a session from before the range) is kept: allowCustomValue."""
    variable = query_variable(name, label, f"query_result({query})", multi=False)
    variable.update(regex=regex, sort=0, allowCustomValue=True)
    return variable


def textbox_variable(name: str, label: str, default: str = "", *, hide: int = 0) -> Json:
    return {
        "type": "textbox",
        "name": name,
        "label": label,
        "query": default,
        "current": {"text": default, "value": default},
        "hide": hide,
    }


def console_variable() -> Json:
    """Where the exporter's web console is (`--web.external-url`), hidden; set it with
    `build.py --console-url URL` or `?var-console=URL`."""
    return textbox_variable("console", "Web console", CONSOLE, hide=2)


def custom_variable(name: str, label: str, values: list[str], default: str) -> Json:
    return {
        "type": "custom",
        "name": name,
        "label": label,
        "query": ",".join(values),
        "current": {"text": default, "value": default},
        "options": [{"text": v, "value": v, "selected": v == default} for v in values],
        "hide": 0,
        "multi": False,
        "includeAll": False,
    }


def row(title: str) -> Json:
    return {"type": "row", "title": title, "collapsed": False, "panels": []}


def layout(items: list[tuple[Json, int, int]]) -> list[Json]:
    """Place (panel, width, height) left to right, wrapping at 24 columns; rows span them all."""
    panels: list[Json] = []
    x = y = line = 0
    for i, (item, width, height) in enumerate(items, start=1):
        if item["type"] == "row":
            width, height = 24, 1
        if x + width > 24 or item["type"] == "row":
            x, y, line = 0, y + line, 0
        item["id"] = i
        item["gridPos"] = {"x": x, "y": y, "w": width, "h": height}
        panels.append(item)
        x, line = x + width, max(line, height)
        if item["type"] == "row":
            x, y, line = 0, y + 1, 0
    return panels


def link(title: str, kind: str, **fields: Any) -> Json:
    """A dashboard link, with the fields Grafana's schema requires."""
    out: Json = {"title": title, "type": kind, "icon": "external link", "tooltip": "", "url": ""}
    out.update(tags=[], asDropdown=False, targetBlank=kind == "link", includeVars=False)
    out.update(keepTime=kind == "dashboards", **fields)
    return out


def dashboard(
    uid: str,
    title: str,
    description: str,
    variables: list[Json],
    panels: list[Json],
    *,
    console: str = "${console}/",
) -> Json:
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": TAGS,
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "refresh": "30s",
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "links": [
            link("Coding agents", "dashboards", tags=TAGS, asDropdown=False),
            link("Web console", "link", url=console, tooltip="The exporter's web console"),
        ],
        "annotations": {
            "list": [
                {
                    "name": "Needs you",
                    "datasource": PROMETHEUS,
                    "enable": True,
                    "hide": False,
                    "iconColor": "red",
                    "expr": 'ALERTS{alertname="CodingAgentNeedsYou",alertstate="firing"}',
                    "step": "30s",
                    "titleFormat": "needs you",
                    "textFormat": "{{agent}} in {{project}}: {{reason}} ({{session_id}})",
                    "useValueForTime": False,
                }
            ]
        },
        "templating": {"list": [*variables, console_variable()]},
        "panels": panels,
    }


# --- Tempo tables and trace views -------------------------------------------------------------


def trace_table(
    title: str, description: str, query: str, *, spans: bool, to: tuple[str, str], keep: str
) -> Json:
    """A Tempo search as a table whose trace (or span) ids open the trace in dashboard `to`'s
    Trace panel. Grafana names the columns: traceID for traces, spanID and the hidden
    traceIdHidden for spans (tests/test_dashboards.py pins them)."""
    field, trace = ("spanID", "traceIdHidden") if spans else ("traceID", "traceID")
    return table(
        title,
        description,
        [traceql(query, spans=spans)],
        fieldConfig={
            "defaults": {},
            "overrides": [override(field, trace_links(*to, trace, keep))],
        },
    )


def trace_view(title: str, description: str) -> Json:
    return panel("traces", title, description, [traceql("$trace")])

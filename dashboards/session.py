"""The Session dashboard: one session's state over time, its turns, tool calls and sub-agents as
traces. Its `session` variable holds the bare session id (`?var-session=<id>`, as the web
console links to it)."""

from __future__ import annotations

from typing import Any

from grafana_json import (
    SESSION_UID,
    Json,
    console_url,
    dashboard,
    datasource_variable,
    layout,
    override,
    panel,
    picker_variable,
    prom,
    stat,
    textbox_variable,
    trace_table,
    trace_view,
)

# The session picker: sessions live at some time in the range, and those (live or not) with a
# record in it (`coding_agent_session_activity_timestamp_seconds`: the 200 latest of the last 7
# days), the latest first, shown as "agent · project · short id" (label_join of the last path
# part of the project and the id's first 8 characters), holding the bare session id.
PICKER = (
    "sort_desc(label_join(label_replace(label_replace("
    "max by (agent, project, session_id) "
    "(max_over_time(coding_agent_session_last_activity_timestamp_seconds[$__range]))"
    " or max by (agent, project, session_id) "
    "(max_over_time(coding_agent_session_activity_timestamp_seconds[$__range])"
    " >= ${__from:date:seconds})"
    " or max by (agent, project, session_id) "
    "(max_over_time(coding_agent_session_state[$__range])),"
    ' "short", "$1", "session_id", "(.{1,8}).*"),'
    ' "where", "$2", "project", "(.*/)?([^/]+)/?"),'
    ' "picker", " · ", "agent", "where", "short"))'
)
PICKER_REGEX = '/picker="(?<text>[^"]*)".*session_id="(?<value>[^"]*)"/'
SESSION_AGENT = (
    'max by (agent) (max_over_time(coding_agent_session_state{session_id="$session"}[$__range]))'
    " or max by (agent) (max_over_time("
    'coding_agent_session_activity_timestamp_seconds{session_id="$session"}[$__range]))'
)
SESSION_KEEP = "&${session:queryparam}&${agent:queryparam}"


def session_stats(one: str) -> list[tuple[Json, int, int]]:
    def item(title: str, description: str, expr: str, **extra: Any) -> tuple[Json, int, int]:
        width = 8 if title == "Agent and project" else 4
        return (stat(title, description, expr, no_value="not live", **extra), width, 4)

    return [
        item(
            "State",
            "The session's state now (not live: its agent does not run now).",
            f"max by (state) (coding_agent_session_state{{{one}}})",
            legend="{{state}}",
            text_mode="name",
        ),
        item(
            "Agent and project",
            "Which agent runs the session now, and where.",
            f"max by (agent, project) (coding_agent_session_state{{{one}}})",
            legend="{{agent}} in {{project}}",
            text_mode="name",
        ),
        item(
            "Waiting for you",
            "How long the session has waited for you until now, and why.",
            f"agent_session:coding_agent_needs_user:seconds{{{one}}}",
            unit="s",
            legend="{{reason}}",
            text_mode="value_and_name",
        ),
        item(
            "Quiet for",
            "Time from the session's last record or state change until now.",
            f"agent_session:coding_agent_inactive:seconds{{{one}}}",
            unit="s",
        ),
        item(
            "Cost so far",
            "Estimated USD of the session from its start until now, sub-agents included, at "
            "list prices (while it is live; the web console has it for every session).",
            f"coding_agent_session_cost_usd{{{one}}}",
            unit="currencyUSD",
        ),
    ]


def state_timeline(one: str) -> Json:
    return panel(
        "state-timeline",
        "State timeline",
        "The session's state while it was live, over the dashboard's range.",
        [prom(f"max by (state) (coding_agent_session_state{{{one}}}) == 1", "{{state}}")],
        fieldConfig={
            "defaults": {
                "color": {"mode": "palette-classic"},
                "mappings": [{"type": "value", "options": {"1": {"text": "yes", "index": 0}}}],
            },
            "overrides": [
                override("needs_user", ("color", {"mode": "fixed", "fixedColor": "red"})),
                override("running", ("color", {"mode": "fixed", "fixedColor": "green"})),
                override("background", ("color", {"mode": "fixed", "fixedColor": "blue"})),
                override("idle", ("color", {"mode": "fixed", "fixedColor": "text"})),
            ],
        },
        options={"showValue": "never", "mergeValues": True, "rowHeight": 0.8},
    )


def session() -> Json:
    one = 'session_id="$session"'
    conversation = 'span.gen_ai.conversation.id = "$session"'
    here = (SESSION_UID, "coding-agent-session")
    items: list[tuple[Json, int, int]] = [
        *session_stats(one),
        (state_timeline(one), 24, 6),
        (
            trace_table(
                "Turns",
                "The session's turns in Tempo over the dashboard's range, one trace each, the "
                "latest first: click a trace id to open the turn in Turn trace below.",
                f'{{ {conversation} && span.gen_ai.operation.name = "invoke_agent"'
                " && span.coding_agent.turn.trigger != nil }"  # the turn, not its sub-agents
                " | select(span.gen_ai.request.model, span.gen_ai.usage.input_tokens,"
                " span.gen_ai.usage.output_tokens, span.coding_agent.turn.outcome)",
                spans=False,
                to=here,
                keep=SESSION_KEEP,
            ),
            24,
            9,
        ),
        (
            trace_view(
                "Turn trace",
                "The turn picked in Turns, Tool calls or Sub-agents (click its id), as a "
                "waterfall: the agent, its model calls, tools and the sub-agents they started.",
            ),
            24,
            14,
        ),
        (
            trace_table(
                "Tool calls",
                "Every tool call of the session over the dashboard's range, with its outcome: "
                "click a span id for its turn in Turn trace.",
                f'{{ {conversation} }} >> {{ span.gen_ai.operation.name = "execute_tool" }}'
                " | select(span.gen_ai.tool.name, span.coding_agent.tool.outcome,"
                " span.error.type)",
                spans=True,
                to=here,
                keep=SESSION_KEEP,
            ),
            12,
            9,
        ),
        (
            trace_table(
                "Sub-agents",
                "Sub-agents the session started over the dashboard's range, nested ones "
                "included: click a span id for its turn in Turn trace.",
                f'{{ {conversation} }} >> {{ span.gen_ai.operation.name = "invoke_agent" }}'
                " | select(span.gen_ai.agent.name, span.coding_agent.subagent.outcome,"
                " span.coding_agent.subagent.background)",
                spans=True,
                to=here,
                keep=SESSION_KEEP,
            ),
            12,
            9,
        ),
    ]
    return dashboard(
        SESSION_UID,
        "Coding agents: session",
        "One session: its state over time, its turns, tool calls and sub-agents as traces.",
        [
            datasource_variable("datasource", "prometheus", "Prometheus"),
            datasource_variable("tempo", "tempo", "Tempo"),
            picker_variable("session", "Session", PICKER, PICKER_REGEX),
            picker_variable("agent", "Agent", SESSION_AGENT, '/agent="(?<value>[^"]*)"/')
            | {"hide": 2},
            textbox_variable("trace", "Trace"),
        ],
        layout(items),
        console=console_url("${session}", "${agent}"),
    )

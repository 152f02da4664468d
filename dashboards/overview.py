"""The Overview dashboard: who needs you, what runs, what it costs, where the time goes."""

from __future__ import annotations

from grafana_json import (
    AGENT,
    RED_WHEN_ANY,
    SCOPE,
    TOOL_CALLS,
    Json,
    dashboard,
    datasource_variable,
    layout,
    organize,
    override,
    prom,
    query_variable,
    row,
    session_links,
    stat,
    table,
    timeseries,
)
from overview_cost import cost_row

Items = list[tuple[Json, int, int]]


def now_row() -> Items:
    """How many sessions are live, need you, run; tokens today; the live sessions' tables."""
    tokens = f"coding_agent_tokens_total{{{SCOPE}}}"
    return [
        (row("Now"), 24, 1),
        (
            stat(
                "Live sessions",
                "Sessions whose agent process runs now, in any state.",
                f"sum(coding_agent_sessions{{{AGENT}}})",
            ),
            4,
            4,
        ),
        (
            stat(
                "Needs you",
                "Live sessions waiting for you now: a permission prompt, a question, a plan.",
                f'sum(coding_agent_sessions{{{AGENT},state="needs_user"}})',
                thresholds=RED_WHEN_ANY,
            ),
            4,
            4,
        ),
        (
            stat(
                "Running",
                "Live sessions working on a turn now (a background shell alone is not counted).",
                f'sum(coding_agent_sessions{{{AGENT},state="running"}})',
            ),
            4,
            4,
        ),
        (
            stat(
                "Tokens today",
                "All token types (input, output, cache reads and writes) since midnight, "
                "counted while Prometheus scraped the exporter.",
                f"sum(increase({tokens}[$__range]))",
                timeFrom="now/d",
                hideTimeOverride=False,
            ),
            4,
            4,
        ),
        (
            stat(
                "Cache hit ratio",
                "Share of prompt tokens read from the prompt cache over the dashboard's range.",
                f'sum(increase(coding_agent_tokens_total{{{SCOPE},type="cache_read"}}[$__range]))'
                f" / sum(increase(coding_agent_tokens_total{{{SCOPE},"
                f'type=~"input|cache_read|cache_write"}}[$__range]))',
                unit="percentunit",
            ),
            4,
            4,
        ),
        (
            stat(
                "Sub-agents running",
                "Sub-agents running now in live sessions.",
                f"sum(coding_agent_subagents_running{{{AGENT}}}) or vector(0)",
            ),
            4,
            4,
        ),
        (
            _sessions_table(
                "Needs you",
                "Sessions waiting for you, longest first. Click a session for its state "
                "timeline and its turns as traces.",
                "agent_session:coding_agent_needs_user:seconds",
                ("reason", "waiting for", "nobody waits for you"),
            ),
            12,
            7,
        ),
        (
            _sessions_table(
                "Live sessions",
                "Every live session, its state and how long since it last wrote anything.",
                "agent_session:coding_agent_inactive:seconds",
                ("state", "quiet for", "no live session"),
            ),
            12,
            7,
        ),
    ]


def over_time_row() -> Items:
    """Sessions, tokens and turns over the dashboard's range."""
    return [
        (row("Over time"), 24, 1),
        (
            timeseries(
                "Sessions by state",
                "Live sessions per state.",
                [prom(f"sum by (state) (coding_agent_sessions{{{AGENT}}})", "{{state}}")],
                stack=True,
            ),
            12,
            8,
        ),
        (
            timeseries(
                "Tokens by model and type",
                "Tokens per second (5-minute rate), cache reads included.",
                [
                    prom(
                        "sum by (model, type) "
                        f"(agent_model_type:coding_agent_tokens:rate5m{{{AGENT}}})",
                        "{{model}} {{type}}",
                    )
                ],
                unit="short",
                stack=True,
            ),
            12,
            8,
        ),
        (
            timeseries(
                "Full-price tokens per hour by project",
                "Input, output and cache-write tokens of the last hour. The red line is the "
                "CodingAgentTokenBurn threshold.",
                [
                    prom(
                        f"agent_project:coding_agent_tokens_uncached:increase1h{{{SCOPE}}}",
                        "{{agent}} {{project}}",
                    )
                ],
                threshold=2e6,
            ),
            12,
            8,
        ),
        (
            timeseries(
                "Turns by outcome",
                "Turns that ended per minute: completed, interrupted, failed.",
                [
                    prom(
                        "sum by (outcome) "
                        f"(increase(coding_agent_turns_total{{{SCOPE}}}[$__rate_interval]))",
                        "{{outcome}}",
                    )
                ],
                stack=True,
                interval="1m",
            ),
            12,
            8,
        ),
    ]


def tools_row() -> Items:
    """Tool calls and their errors, the duration percentiles, sub-agents."""
    return [
        (row("Tools and sub-agents"), 24, 1),
        (
            timeseries(
                "Tool calls by tool",
                "Tool calls per second (5-minute rate).",
                [
                    prom(
                        "sum by (tool) "
                        f"(agent_tool_outcome:coding_agent_tool_calls:rate5m{{{AGENT}}})",
                        "{{tool}}",
                    )
                ],
                stack=True,
            ),
            12,
            8,
        ),
        (
            table(
                "Tool calls and error ratio",
                "Calls per tool over the dashboard's range, and the share that ended in an "
                "error (rejected and cancelled calls are not errors).",
                [
                    prom(f"sum by (tool) (increase({TOOL_CALLS}[$__range]))", table=True),
                    prom(
                        "(sum by (tool) (increase(coding_agent_tool_calls_total"
                        f'{{{AGENT},outcome="error"}}[$__range]))'
                        f" or sum by (tool) (increase({TOOL_CALLS}[$__range])) * 0)"
                        f" / sum by (tool) (increase({TOOL_CALLS}[$__range]))",
                        table=True,
                    ),
                ],
                transformations=[
                    {"id": "merge", "options": {}},
                    organize({"tool": "tool", "Value #A": "calls", "Value #B": "error ratio"}),
                ],
                fieldConfig={
                    "defaults": {"unit": "short"},
                    "overrides": [
                        override("calls", ("decimals", 0)),
                        override(
                            "error ratio",
                            ("unit", "percentunit"),
                            ("custom.cellOptions", {"type": "color-text"}),
                            (
                                "thresholds",
                                {
                                    "mode": "absolute",
                                    "steps": [
                                        {"color": "green", "value": None},
                                        {"color": "orange", "value": 0.05},
                                        {"color": "red", "value": 0.2},
                                    ],
                                },
                            ),
                        ),
                    ],
                },
            ),
            12,
            8,
        ),
        (
            timeseries(
                "Turn duration",
                "Median, 90th and 99th percentile time from a prompt to the end of its turn. "
                "Exemplars link to the turn's trace once traces are on.",
                [
                    prom(
                        f"histogram_quantile({q}, sum by (le) (rate("
                        f"coding_agent_turn_duration_seconds_bucket{{{AGENT}}}[$__rate_interval])))",
                        f"p{round(q * 100)}",
                    )
                    | {"exemplar": True}
                    for q in (0.5, 0.9, 0.99)
                ],
                unit="s",
            ),
            12,
            8,
        ),
        (
            timeseries(
                "Tool call duration (p90) by tool",
                "90th percentile time from a tool call to its result.",
                [
                    prom(
                        "histogram_quantile(0.9, sum by (le, tool) (rate("
                        "coding_agent_tool_call_duration_seconds_bucket"
                        f"{{{AGENT}}}[$__rate_interval])))",
                        "{{tool}}",
                    )
                    | {"exemplar": True}
                ],
                unit="s",
            ),
            12,
            8,
        ),
        (
            timeseries(
                "Sub-agents by type and outcome",
                "Sub-agents that ended, per minute.",
                [
                    prom(
                        "sum by (subagent_type, outcome) (increase(coding_agent_subagents_total"
                        f"{{{AGENT}}}[$__rate_interval]))",
                        "{{subagent_type}} {{outcome}}",
                    )
                ],
                stack=True,
                interval="1m",
            ),
            12,
            8,
        ),
        (
            timeseries(
                "Sub-agents running by type",
                "Sub-agents still running in live sessions.",
                [
                    prom(
                        f"sum by (subagent_type) (coding_agent_subagents_running{{{AGENT}}})",
                        "{{subagent_type}}",
                    )
                ],
                stack=True,
            ),
            12,
            8,
        ),
    ]


def health_row() -> Items:
    """The exporter's own health."""
    return [
        (row("Exporter health"), 24, 1),
        (
            stat(
                "Readers up",
                "Whether the exporter can read each agent's home now (at its last look).",
                "min by (agent) (coding_agent_exporter_reader_up)",
                legend="{{agent}}",
                text_mode="value_and_name",
                thresholds={
                    "mode": "absolute",
                    "steps": [{"color": "red", "value": None}, {"color": "green", "value": 1}],
                },
                mappings=[
                    {
                        "type": "value",
                        "options": {
                            "0": {"text": "down", "index": 0},
                            "1": {"text": "up", "index": 1},
                        },
                    }
                ],
            ),
            6,
            5,
        ),
        (
            stat(
                "Files watched",
                "Agent files the exporter follows now.",
                "sum by (agent) (coding_agent_exporter_files_watched)",
                legend="{{agent}}",
                text_mode="value_and_name",
            ),
            6,
            5,
        ),
        (
            timeseries(
                "Parse errors",
                "Records or files that could not be used, per minute, by reason.",
                [
                    prom(
                        "sum by (agent, reason) "
                        "(increase(coding_agent_exporter_parse_errors_total[$__rate_interval]))",
                        "{{agent}} {{reason}}",
                    )
                ],
                interval="1m",
            ),
            6,
            5,
        ),
        (
            timeseries(
                "Records read",
                "Records read from agent files per second, and the exporter version.",
                [
                    prom(
                        "sum by (agent) (rate(coding_agent_exporter_records_total"
                        "[$__rate_interval]))",
                        "{{agent}}",
                    ),
                    prom("max by (version) (coding_agent_exporter_build_info)", "v{{version}}"),
                ],
                unit="short",
            ),
            6,
            5,
        ),
    ]


def overview() -> Json:
    items = [*now_row(), *over_time_row(), *cost_row(), *tools_row(), *health_row()]
    return dashboard(
        "coding-agent-overview",
        "Coding agents: overview",
        "Which agent needs you, what is running, what it costs, where the time goes.",
        [
            datasource_variable("datasource", "prometheus", "Prometheus"),
            datasource_variable("tempo", "tempo", "Tempo"),
            query_variable("agent", "Agent", "label_values(coding_agent_sessions, agent)"),
            query_variable("host", "Host", "label_values(coding_agent_exporter_build_info, host)"),
            query_variable("user", "User", "label_values(coding_agent_exporter_build_info, user)"),
            query_variable(
                "project",
                "Project",
                'label_values(coding_agent_sessions_total{agent=~"$agent"}, project)',
            ),
        ],
        layout(items),
    )


def _sessions_table(title: str, description: str, rule: str, columns: tuple[str, str, str]) -> Json:
    """A table of live sessions from a per-session recording rule, longest first: its label
    column, its value (seconds) and what it says when there is no row; each session links to
    its Session dashboard and the console."""
    label, value, empty = columns
    return table(
        title,
        description,
        [prom(f"sort_desc({rule}{{{SCOPE}}})", table=True)],
        transformations=[
            organize(
                {
                    "agent": "agent",
                    "project": "project",
                    "session_id": "session",
                    label: label,
                    "Value": value,
                }
            )
        ],
        fieldConfig={
            "defaults": {"unit": "short", "noValue": empty},
            "overrides": [
                override(value, ("unit", "s")),
                override("session", session_links("session_id")),
            ],
        },
    )

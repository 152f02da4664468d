"""The Traces dashboard: turns as traces (TraceQL on the GenAI semantic conventions), slow and
failed tool calls, sub-agents, and one turn as a waterfall and as a graph."""

from __future__ import annotations

from grafana_json import (
    Json,
    custom_variable,
    dashboard,
    datasource_variable,
    layout,
    override,
    panel,
    session_url,
    textbox_variable,
    trace_table,
    trace_view,
    traceql,
)


def traces() -> Json:
    tool = 'span.gen_ai.operation.name = "execute_tool"'
    agent = 'span.gen_ai.operation.name = "invoke_agent"'
    here = ("coding-agent-traces", "coding-agent-traces")
    keep = "&${min_duration:queryparam}"
    slowest = trace_table(
        "Slowest tool calls",
        "Tool calls over the dashboard's range that took longer than the Min duration "
        "variable: click a span id for its turn in Trace, a conversation id for its session.",
        f"{{ {tool} && duration > $min_duration }}"
        " | select(span.gen_ai.tool.name, span.gen_ai.conversation.id,"
        " span.coding_agent.tool.outcome)",
        spans=True,
        to=here,
        keep=keep,
    )
    slowest["fieldConfig"]["overrides"].append(
        override(
            "gen_ai.conversation.id",
            (
                "links",
                [
                    {
                        "title": "Session ${__value.raw}",
                        "url": session_url("${__value.raw}"),
                    }
                ],
            ),
        )
    )
    items: list[tuple[Json, int, int]] = [
        (slowest, 12, 10),
        (
            trace_table(
                "Failed tool calls",
                "Tool calls over the dashboard's range that ended in an error, were rejected or "
                "were cancelled: click a span id for its turn in Trace.",
                f"{{ {tool} && (status = error || span.error.type != nil) }}"
                " | select(span.gen_ai.tool.name, span.error.type,"
                " span.coding_agent.tool.outcome)",
                spans=True,
                to=here,
                keep=keep,
            ),
            12,
            10,
        ),
        (
            trace_table(
                "Turns with sub-agents",
                "Turns over the dashboard's range in which a tool call started a sub-agent: "
                "click a trace id to open it in Trace.",
                f"{{ {tool} }} > {{ {agent} }}"
                " | select(span.gen_ai.agent.name, span.coding_agent.subagent.outcome)",
                spans=False,
                to=here,
                keep=keep,
            ),
            12,
            10,
        ),
        (
            trace_table(
                "Interrupted or failed turns",
                "Turns over the dashboard's range that the user interrupted or that ended in an "
                "API error: click a trace id to open it in Trace.",
                f'{{ {agent} && span.coding_agent.turn.outcome =~ "interrupted|failed" }}'
                " | select(span.gen_ai.conversation.id, span.coding_agent.project)",
                spans=False,
                to=here,
                keep=keep,
            ),
            12,
            10,
        ),
        (
            panel(
                "nodeGraph",
                "Agent, sub-agents and tools of one turn",
                "The span tree of the trace in the Trace variable as a graph: the agent, the "
                "sub-agents it started and the tools each called.",
                [traceql("$trace")],
            ),
            12,
            14,
        ),
        (
            trace_view(
                "Trace",
                "The trace picked in the tables above (click its id), or pasted into the Trace "
                "variable, as a waterfall.",
            ),
            12,
            14,
        ),
    ]
    return dashboard(
        "coding-agent-traces",
        "Coding agents: traces",
        "Turns as traces (TraceQL on the GenAI semantic conventions): slow and failed tool "
        "calls, sub-agents, and one turn as a graph.",
        [
            datasource_variable("datasource", "prometheus", "Prometheus"),
            datasource_variable("tempo", "tempo", "Tempo"),
            custom_variable("min_duration", "Min duration", ["10s", "30s", "1m", "5m"], "30s"),
            textbox_variable("trace", "Trace"),
        ],
        layout(items),
    )

"""The Overview's cost row: what the agents cost (estimated at list prices) and the active
5-hour usage window against its limit."""

from __future__ import annotations

from grafana_json import AGENT, SCOPE, Json, override, prom, row, stat, timeseries

Items = list[tuple[Json, int, int]]


def cost_row() -> Items:
    """What the agents cost (estimated at list prices) and the 5-hour usage window."""
    cost = f'coding_agent_cost_usd_total{{{SCOPE},source="estimated"}}'
    window = f'coding_agent_usage_window_tokens{{{AGENT},type!="reasoning"}}'
    return [
        (row("Cost and the 5-hour window"), 24, 1),
        (
            timeseries(
                "Estimated cost per hour by agent and model",
                "USD of the model calls of each hour at list prices (genai-prices' data or "
                "--pricing.file): a subscription bills differently.",
                [prom(f"sum by (agent, model) (increase({cost}[1h]))", "{{agent}} {{model}}")],
                unit="currencyUSD",
                stack=True,
                interval="1h",
            ),
            12,
            8,
        ),
        (
            timeseries(
                "Estimated cost of the last 24 hours by project",
                "The red line is the CodingAgentDailyBudget threshold.",
                [
                    prom(
                        f"agent_project:coding_agent_cost_usd:increase1d{{{SCOPE}}}",
                        "{{agent}} {{project}}",
                    )
                ],
                unit="currencyUSD",
                threshold=50,
            ),
            12,
            8,
        ),
        (
            stat(
                "Window: tokens used",
                "Tokens of the 5-hour usage window active now (ccusage's blocks), all types, "
                "from its start until now.",
                f"sum by (agent) ({window})",
                legend="{{agent}}",
                no_value="no active window",
            ),
            6,
            4,
        ),
        (
            stat(
                "Window: projected at its end",
                "Tokens the window active now will have used by its end at the pace of the "
                "last 30 minutes.",
                f"agent:coding_agent_usage_window_tokens:projected{{{AGENT}}}",
                legend="{{agent}}",
                no_value="no active window",
            ),
            6,
            4,
        ),
        (
            stat(
                "Window: limit",
                "The limit in force now: --usage-window.token-limit (max: the largest past "
                "window's tokens).",
                f"coding_agent_usage_window_limit_tokens{{{AGENT}}}",
                legend="{{agent}}",
                no_value="no limit set",
            ),
            6,
            4,
        ),
        (
            stat(
                "Window: ends in",
                "Time from now to the end of the active 5-hour usage window.",
                f"coding_agent_usage_window_end_timestamp_seconds{{{AGENT}}} - time()",
                unit="s",
                legend="{{agent}}",
                no_value="no active window",
            ),
            6,
            4,
        ),
        (
            timeseries(
                "Window: tokens against the limit",
                "The active 5-hour window's tokens over the dashboard's range (they start again "
                "at 0 with each window), its projection at its end, and the limit as a line.",
                [
                    prom(f"sum by (agent) ({window})", "{{agent}} used"),
                    prom(
                        f"agent:coding_agent_usage_window_tokens:projected{{{AGENT}}}",
                        "{{agent}} projected at its end",
                    ),
                    prom(
                        f"coding_agent_usage_window_limit_tokens{{{AGENT}}}",
                        "{{agent}} limit",
                    ),
                ],
                overrides=(
                    override(
                        ".* limit",
                        ("custom.lineStyle", {"fill": "dash", "dash": [10, 10]}),
                        ("color", {"mode": "fixed", "fixedColor": "red"}),
                        matcher="byRegexp",
                    ),
                ),
            ),
            24,
            7,
        ),
    ]

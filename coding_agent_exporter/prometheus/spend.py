"""The cost and usage-window series, built from a copy of the state's `Spend` at each scrape.

coding_agent_cost_usd_total{agent,model,project,source}
coding_agent_tokens_unpriced_total{agent,model}            once a model had no price
coding_agent_usage_window_tokens{agent,type}               the active 5-hour window's
coding_agent_usage_window_cost_usd{agent}
coding_agent_usage_window_{start,end}_timestamp_seconds{agent}
coding_agent_usage_window_burn_rate_tokens_per_second{agent}   input and output (ccusage)
coding_agent_usage_window_burn_rate_usd_per_second{agent}
coding_agent_usage_window_limit_tokens{agent}              with --usage-window.token-limit
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from ..state.spend import Spend
from ..state.windows import Window, all_tokens

Limit = int | str | None
"""--usage-window.token-limit: a number of tokens, "max" (the largest past window's), or none."""


@dataclass(frozen=True, slots=True)
class Shown:
    """What a scrape shows of `Spend`, taken under the state's lock: the tallies copied, each
    agent's active window and its largest past window's tokens."""

    cost: dict[tuple[str, ...], float]
    unpriced: dict[tuple[str, ...], int]
    windows: dict[str, tuple[Window | None, int | None]]


def shown(spend: Spend, now: float) -> Shown:
    windows = {}
    for agent, found in spend.windows.items():
        current, largest = found.current(now), found.largest(now)
        most = None if largest is None else all_tokens(largest.tokens)
        windows[agent] = (None if current is None else replace(current), most)
    return Shown(dict(spend.cost), dict(spend.unpriced), windows)


def families(
    spend: Shown, project: Callable[[str | None], str], now: float, limit: Limit
) -> Iterator[Metric]:
    cost = CounterMetricFamily(
        "coding_agent_cost_usd",
        "Estimated cost of model responses in USD, from the price list (genai-prices' data, "
        "or --pricing.file) at each response's time.",
        labels=["agent", "model", "project", "source"],
    )
    by_project: dict[tuple[str, ...], float] = {}
    for (agent, model, cwd, source), value in spend.cost.items():
        key = (agent, model, project(cwd), source)
        by_project[key] = by_project.get(key, 0.0) + value
    for labels, value in sorted(by_project.items()):
        cost.add_metric(list(labels), value)
    yield cost
    unpriced = CounterMetricFamily(
        "coding_agent_tokens_unpriced",
        "Tokens of models the price list has no price for (not in the cost).",
        labels=["agent", "model"],
    )
    for labels, count in sorted(spend.unpriced.items()):
        unpriced.add_metric(list(labels), count)
    yield unpriced
    yield from _windows(spend, now, limit)


def _windows(spend: Shown, now: float, limit: Limit) -> Iterator[Metric]:
    names = ("tokens", "cost_usd", "start_timestamp_seconds", "end_timestamp_seconds")
    helps = (
        "Tokens of the active 5-hour usage window (ccusage's blocks), by type.",
        "Estimated cost of the active 5-hour usage window in USD.",
        "When the active 5-hour usage window started (the hour of its first response).",
        "When the active 5-hour usage window ends.",
    )
    made = {
        name: GaugeMetricFamily(
            f"coding_agent_usage_window_{name}",
            text,
            labels=["agent", "type"] if name == "tokens" else ["agent"],
        )
        for name, text in zip(names, helps, strict=True)
    }
    tokens_rate = GaugeMetricFamily(
        "coding_agent_usage_window_burn_rate_tokens_per_second",
        "Input and output tokens per second of the active window, from its first response to "
        "its last (ccusage's burn rate, per second).",
        labels=["agent"],
    )
    usd_rate = GaugeMetricFamily(
        "coding_agent_usage_window_burn_rate_usd_per_second",
        "Estimated USD per second of the active window, from its first response to its last.",
        labels=["agent"],
    )
    limits = GaugeMetricFamily(
        "coding_agent_usage_window_limit_tokens",
        "The window's token limit (--usage-window.token-limit; max: the largest past window's "
        "tokens, all types).",
        labels=["agent"],
    )
    for agent, (current, largest) in sorted(spend.windows.items()):
        if current is not None:
            _window(made, tokens_rate, usd_rate, agent, current)
        bound = _limit(limit, largest)
        if bound is not None:
            limits.add_metric([agent], bound)
    yield from (*made.values(), tokens_rate, usd_rate, limits)


def _window(
    made: dict[str, GaugeMetricFamily],
    tokens_rate: GaugeMetricFamily,
    usd_rate: GaugeMetricFamily,
    agent: str,
    window: Window,
) -> None:
    for kind, count in window.tokens.as_dict().items():
        made["tokens"].add_metric([agent, kind], count)
    made["cost_usd"].add_metric([agent], window.cost)
    made["start_timestamp_seconds"].add_metric([agent], window.start)
    made["end_timestamp_seconds"].add_metric([agent], window.end)
    rate = window.burn_rate()
    if rate is not None:
        tokens_rate.add_metric([agent], rate[0] / 60)
        usd_rate.add_metric([agent], rate[1] / 60)


def _limit(limit: Limit, largest: int | None) -> float | None:
    if limit == "max":
        return None if largest is None else float(largest)
    return None if limit is None else float(limit)

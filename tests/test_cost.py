"""What the responses cost: every recorded scenario's cost is its tokens at genai-prices' own
price (its `calc_price`, which finds the provider itself), models without a price are counted
apart, a pricing file of the user's changes the cost and the catch-up cache's key, and the
active 5-hour window is published with its limit."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import genai_prices
import pytest
from genai_prices import types
from prometheus_client import CollectorRegistry

from coding_agent_exporter.events import ModelResponded, SessionSeen, Usage
from coding_agent_exporter.harnesses.claude_code.journal import JournalReader
from coding_agent_exporter.prometheus.collectors import StateCollector
from coding_agent_exporter.runtime.cache import Cache
from coding_agent_exporter.state.labels import ProjectLabel
from coding_agent_exporter.state.state import State
from coding_agent_exporter.web.views import session_rows

from .conftest import FIXTURES, agent_home, agent_of, app_for

ANSWER = FIXTURES / "claude-code" / "2.1.332" / "print-answer" / "home"
HOUR = 3600.0
EST = "estimated"
T0 = datetime(2026, 11, 30, 10, 20, tzinfo=UTC).timestamp()


def genai_cost(model: str, tokens: Counter[str], at: float) -> float | None:
    usage = types.Usage(
        input_tokens=tokens["input"] + tokens["cache_read"] + tokens["cache_write"],
        output_tokens=tokens["output"],
        cache_read_tokens=tokens["cache_read"],
        cache_write_tokens=tokens["cache_write"],
    )
    try:
        found = genai_prices.calc_price(
            usage, model, genai_request_timestamp=datetime.fromtimestamp(at, UTC)
        )
    except LookupError:
        return None
    return float(found.total_price)


def test_a_scenario_costs_its_tokens_at_genai_prices_price(scenario: Path) -> None:
    app = app_for(scenario / "home")
    spend, totals = app.state.spend, app.state.totals
    agent = agent_of(scenario)
    tokens: dict[str, Counter[str]] = {}
    for (who, model, _, kind), count in totals.tokens.items():
        tokens.setdefault(model, Counter())[kind] += count if who == agent else 0
    windows = spend.windows.get(agent)
    at = windows.windows()[0].first if windows is not None and windows.windows() else T0
    for model, counts in tokens.items():
        want = genai_cost(model, counts, at)
        got = sum(v for k, v in spend.cost.items() if k[:2] == (agent, model) and k[3] == EST)
        if want is None:
            counted = sum(counts[k] for k in ("input", "output", "cache_read", "cache_write"))
            assert got == 0 and spend.unpriced[(agent, model)] == counted  # reasoning: output
        else:
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12), model
            assert (agent, model) not in spend.unpriced
    rows = session_rows(app.state, app.config.project, history=True)
    sessions = sum(r["cost_usd"] for r in rows)
    total = sum(v for k, v in spend.cost.items() if k[3] == EST)
    if app.state.reviews:  # an automatic review's responses count for no session
        assert sessions <= total + 1e-9
    else:
        assert sessions == pytest.approx(total, abs=1e-5)


def priced(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    return path


def test_a_pricing_file_prices_a_model_the_list_lacks(tmp_path: Path) -> None:
    home = ANSWER
    before = app_for(home).state.spend
    assert before.cost and not before.unpriced
    text = "models: [{provider: anthropic, model: claude-opus-5-5, input: 1000000, output: 0}]"
    after = app_for(home, "--pricing.file", str(priced(tmp_path, text))).state
    inputs = sum(v for (_, _, _, kind), v in after.totals.tokens.items() if kind == "input")
    cache = sum(v for (_, _, _, k), v in after.totals.tokens.items() if k.startswith("cache"))
    estimated = sum(v for k, v in after.spend.cost.items() if k[3] == EST)
    assert estimated == pytest.approx(inputs + cache)  # $1 a token


def test_a_changed_pricing_file_makes_the_cache_of_the_old_prices_unusable(tmp_path: Path) -> None:
    path = priced(tmp_path, "models: [{provider: a, model: m, input: 1}]")
    homes = [("claude-code", agent_home(tmp_path))]
    first = Cache(tmp_path, homes, priced_by=str(path))
    assert first.header == Cache(tmp_path, homes, priced_by=str(path)).header
    path.write_text("models: [{provider: a, model: m, input: 2}]")
    assert first.header != Cache(tmp_path, homes, priced_by=str(path)).header
    assert first.header != Cache(tmp_path, homes).header


def test_a_wrong_pricing_file_stops_the_start_naming_the_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = ANSWER
    path = priced(tmp_path, "models: [{provider: anthropic, model: m}]")
    with pytest.raises(SystemExit):
        app_for(home, "--pricing.file", str(path))
    assert "model 1 (anthropic m): give at least `input` or `output`" in capsys.readouterr().err


def responses(state: State, times: list[float]) -> None:
    state.apply("claude-code", SessionSeen(session_id="s", at=times[0], cwd="/w"))
    for i, at in enumerate(times):
        usage = Usage(input=100, output=50, cache_read=1000, cache_write=10)
        event = ModelResponded(
            session_id="s", at=at, message_id=f"m{i}", model="claude-opus-4-8", usage=usage
        )
        state.apply("claude-code", event)


def scraped(state: State, now: float, *argv: str) -> CollectorRegistry:
    registry = CollectorRegistry()
    limit: int | str | None = None
    if argv:
        limit = int(argv[0]) if argv[0].isdigit() else argv[0]
    project = ProjectLabel("path", "")
    clock, probe = (lambda: now), (lambda _: None)
    collector = StateCollector(
        state, ["claude-code"], project, clock=clock, probe=probe, limit=limit
    )
    registry.register(collector)
    return registry


def test_a_response_whose_usage_grows_costs_its_final_usage_priced_once() -> None:
    """A response's copies report more tokens as it streams (Codex and OpenCode write a growing
    usage; Claude Code's first copy may hold only the prompt's): it costs what its final usage
    costs at the list's price, never its copies added up."""
    state = State()
    state.apply("claude-code", SessionSeen(session_id="s", at=T0, cwd="/w"))
    for output in (1, 20, 50, 50):
        usage = Usage(input=100, output=output, cache_read=1000, cache_write=10)
        event = ModelResponded(
            session_id="s", at=T0, message_id="m0", model="claude-opus-4-8", usage=usage
        )
        state.apply("claude-code", event)
    final = (100 * 5 + 50 * 25 + 1000 * 0.5 + 10 * 6.25) / 1e6  # claude-opus-4-8, $ a million
    agent = {"agent": "claude-code"}
    sample = scraped(state, T0 + 60).get_sample_value
    labels = {**agent, "model": "claude-opus-4-8", "project": "/w", "source": EST}
    assert sample("coding_agent_cost_usd_total", labels) == pytest.approx(final)
    assert sample("coding_agent_usage_window_cost_usd", agent) == pytest.approx(final)
    assert state.sessions[("claude-code", "s")].cost == pytest.approx(final)


def test_the_active_window_its_burn_rate_and_its_limit() -> None:
    state = State()
    responses(state, [T0 - 10 * HOUR, T0 - 9 * HOUR, T0, T0 + 0.5 * HOUR])  # two windows
    registry = scraped(state, T0 + HOUR, "max")
    sample = registry.get_sample_value
    agent = {"agent": "claude-code"}
    start = datetime(2026, 11, 30, 10, tzinfo=UTC).timestamp()
    assert sample("coding_agent_usage_window_start_timestamp_seconds", agent) == start
    assert sample("coding_agent_usage_window_end_timestamp_seconds", agent) == start + 5 * HOUR
    assert sample("coding_agent_usage_window_tokens", {**agent, "type": "input"}) == 200
    per_response = (100 * 5 + 50 * 25 + 1000 * 0.5 + 10 * 6.25) / 1e6  # claude-opus-4-8
    assert sample("coding_agent_usage_window_cost_usd", agent) == pytest.approx(2 * per_response)
    rate = sample("coding_agent_usage_window_burn_rate_tokens_per_second", agent)
    assert rate == pytest.approx(300 / (0.5 * HOUR))  # input and output, first to last
    assert sample("coding_agent_usage_window_limit_tokens", agent) == 2 * 1160  # the past one
    assert (
        scraped(state, T0 + 6 * HOUR).get_sample_value(
            "coding_agent_usage_window_tokens", {**agent, "type": "input"}
        )
        is None
    )  # over: no active window
    fixed = scraped(state, T0 + HOUR, "50000").get_sample_value
    assert fixed("coding_agent_usage_window_limit_tokens", agent) == 50000


def test_a_live_session_shows_its_cost() -> None:
    state = State()
    responses(state, [T0])
    assert state.sessions[("claude-code", "s")].cost == pytest.approx(
        (100 * 5 + 50 * 25 + 1000 * 0.5 + 10 * 6.25) / 1e6
    )


def test_cache_writes_kept_an_hour_cost_the_hour_s_price() -> None:
    """A recorded assistant record with its `cache_creation` split set to an hour: the reader
    says so, and the writes cost claude-opus-5-5's hour-long price ($8, not $5, a million)."""
    journal = next(ANSWER.rglob("*.jsonl"))
    records = [json.loads(line) for line in journal.read_text().splitlines() if line]
    record = next(r for r in records if r.get("type") == "assistant")
    usage = record["message"]["usage"]
    assert "ephemeral_1h_input_tokens" in usage["cache_creation"]  # the split as recorded
    usage["cache_creation"]["ephemeral_1h_input_tokens"] = usage["cache_creation_input_tokens"]
    reader = JournalReader(record["sessionId"])
    (event,) = [e for e in reader.feed(record) if isinstance(e, ModelResponded)]
    assert event.cache_write_1h == usage["cache_creation_input_tokens"] > 0
    state = State()
    state.apply("claude-code", event)
    plain = State()
    plain.apply("claude-code", replace(event, cache_write_1h=0))
    extra = (8 - 5) * event.usage.cache_write / 1e6
    got = state.sessions[("claude-code", event.session_id)].cost
    assert got == pytest.approx(plain.sessions[("claude-code", event.session_id)].cost + extra)


def claude_figures(home: Path) -> dict[str, float]:
    """Per session, what its lead journal's `cost-state` records say it cost: each model's
    largest running total, summed (read from the files, not by our reader)."""
    found: dict[str, float] = {}
    for journal in (home / "projects").glob("*/*.jsonl"):
        largest: dict[str, float] = {}
        for line in journal.read_text().splitlines():
            record = json.loads(line) if line.strip() else {}
            for model, usage in (record.get("modelUsage") or {}).items():
                if record.get("type") == "cost-state" and usage.get("costUSD"):
                    largest[model] = max(largest.get(model, 0.0), usage["costUSD"])
        if largest:
            found[journal.stem] = sum(largest.values())
    return found


@pytest.mark.parametrize(
    "name",
    sorted(
        p.name
        for p in (FIXTURES / "claude-code" / "2.1.332").iterdir()
        if (p / "home").is_dir() and p.name != "resume-fork"
    ),
)
def test_claude_code_reports_what_its_cost_state_records_say(name: str) -> None:
    home = FIXTURES / "claude-code" / "2.1.332" / name / "home"
    app = app_for(home)
    rows = {r["session_id"]: r for r in session_rows(app.state, app.config.project, history=True)}
    figures = claude_figures(home)
    for session_id, row in rows.items():
        want = figures.get(session_id)
        got = row["reported_cost_usd"]
        assert (got is None) == (want is None), session_id
        if want is not None:
            assert got == pytest.approx(want, abs=1e-6), session_id
    reported = sum(v for k, v in app.state.spend.cost.items() if k[3] == "reported")
    assert reported == pytest.approx(sum(figures.values()), abs=1e-6)


def test_a_fork_reports_nothing_its_parent_reported_once() -> None:
    """Claude Code's running total of a fork includes the cost of its parent: the parent's
    figure counts once, the fork's not at all (no record of the fork tells the two apart)."""
    home = FIXTURES / "claude-code" / "2.1.332" / "resume-fork" / "home"
    app = app_for(home)
    figures = claude_figures(home)
    rows = {r["session_id"]: r for r in session_rows(app.state, app.config.project, history=True)}
    parent, fork = sorted(figures, key=figures.__getitem__)  # the fork's total is the larger
    assert figures[fork] > figures[parent]
    assert rows[parent]["reported_cost_usd"] == pytest.approx(figures[parent])
    assert rows[fork]["reported_cost_usd"] is None
    assert rows[fork]["cost_usd"] > 0  # its own response is estimated


def test_pi_reports_each_response_s_cost_even_for_a_model_without_a_price() -> None:
    home = FIXTURES / "pi" / "0.73.1" / "print-tool" / "home"
    app = app_for(home)
    said = 0.0
    for line in next(home.rglob("*.jsonl")).read_text().splitlines():
        message = json.loads(line).get("message") or {}
        if message.get("role") == "assistant" and message.get("responseId"):
            said += message["usage"]["cost"]["total"]
    spend = app.state.spend
    assert said > 0
    assert sum(v for k, v in spend.cost.items() if k[3] == "reported") == pytest.approx(said)
    assert sum(v for k, v in spend.cost.items() if k[3] == "estimated") == 0
    assert spend.unpriced[("pi", "stub-model")] > 0  # our list has no price for pi's own model


def test_a_zero_opencode_writes_for_a_model_it_cannot_price_is_no_report() -> None:
    for home in sorted((FIXTURES / "opencode" / "1.18.33").glob("*/home")):
        app = app_for(home)
        rows = session_rows(app.state, app.config.project, history=True)
        assert all(r["reported_cost_usd"] is None for r in rows), home

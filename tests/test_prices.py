"""The price snapshot is genai-prices' data, and a response costs what genai-prices says.

`UPDATE_GOLDEN=1 pytest tests/test_prices.py` writes `coding_agent_exporter/state/prices.json`
again from the installed genai-prices (a test dependency, pinned in pyproject.toml: bump it to
take new prices).
"""

from __future__ import annotations

import json
import os
import random
import zlib
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any

import genai_prices
import pytest
from genai_prices import data, types

from coding_agent_exporter.events import Usage
from coding_agent_exporter.state.prices import KINDS, SNAPSHOT, Prices

KEYS = {
    "input_mtok": "input",
    "output_mtok": "output",
    "cache_read_mtok": "cache_read",
    "cache_write_mtok": "cache_write",
    "cache_write_1h_mtok": "cache_write_1h",
    "requests_kcount": "requests",
}
MOMENTS = [
    datetime(2024, 6, 1, 3, 0, tzinfo=UTC),
    datetime(2025, 9, 15, 17, 0, tzinfo=UTC),
    datetime(2026, 11, 30, 12, 0, tzinfo=UTC),
]
"""When responses are priced in the comparison (the snapshot's history has changes between)."""


def snapshot() -> dict[str, Any]:
    """The token prices of every model of the installed genai-prices, as `prices.json` holds
    them."""
    providers = []
    for provider in data.providers:
        models = [_model(m) for m in provider.models]
        entry: dict[str, Any] = {"id": provider.id, "models": [m for m in models if m]}
        if provider.model_match is not None:
            entry["match"] = _clause(provider.model_match)
        if provider.fallback_model_providers:
            entry["fallback"] = list(provider.fallback_model_providers)
        providers.append(entry)
    return {"source": f"genai-prices {genai_prices.__version__}", "providers": providers}


def _model(model: types.ModelInfo) -> dict[str, Any] | None:
    raw = model.prices if isinstance(model.prices, list) else [model.prices]
    periods = [_period(p) for p in raw]
    if not any(len(p) > 1 for p in periods):
        return None  # no token price (e.g. priced by the second of audio)
    return {"id": model.id, "match": _clause(model.match), "prices": periods}


def _period(price: types.ModelPrice | types.ConditionalPrice) -> dict[str, Any]:
    period: dict[str, Any] = {}
    prices = price
    if isinstance(price, types.ConditionalPrice):
        prices, constraint = price.prices, price.constraint
        if isinstance(constraint, types.StartDateConstraint):
            period["since"] = constraint.start_date.isoformat()
        elif isinstance(constraint, types.TimeOfDateConstraint):
            span = (constraint.start_time, constraint.end_time)
            period["hours"] = [_utc(t).isoformat() for t in span]
    for key, kind in KEYS.items():
        value = getattr(prices, key)
        if isinstance(value, types.TieredPrices):
            tiers = [[t.start, _number(t.price)] for t in value.tiers]
            period[kind] = {"base": _number(value.base), "tiers": tiers}
        elif value is not None:
            period[kind] = _number(value)
    return period


def _utc(moment: time) -> time:
    if moment.tzinfo is None:
        return moment
    return datetime.combine(date(2026, 1, 1), moment).astimezone(UTC).time()


def _number(value: Decimal) -> float | int:
    return int(value) if value == value.to_integral_value() else float(value)


def _clause(clause: Any) -> dict[str, Any]:
    if isinstance(clause, types.ClauseOr):
        return {"or": [_clause(c) for c in clause.or_]}
    if isinstance(clause, types.ClauseAnd):
        return {"and": [_clause(c) for c in clause.and_]}
    ((name, value),) = vars(clause).items()
    return {name: value}


def test_the_snapshot_is_the_installed_genai_prices_data() -> None:
    made = json.dumps(snapshot(), indent=None, separators=(",", ":"), sort_keys=True) + "\n"
    if os.environ.get("UPDATE_GOLDEN"):
        SNAPSHOT.write_text(made)
    assert SNAPSHOT.read_text() == made, "prices.json is out of date: run with UPDATE_GOLDEN=1"


def usages(seed: int) -> list[tuple[Usage, int]]:
    """Responses small and large (over every tier's start), some with an hour's cache writes."""
    pick = random.Random(seed)
    found = [(Usage(input=1000, output=300, cache_read=5000, cache_write=200), 0)]
    for _ in range(6):
        tokens = [pick.choice([0, pick.randint(1, 3000), pick.randint(100_000, 900_000)])]
        tokens += [pick.randint(0, 4000), pick.randint(0, 400_000), pick.randint(0, 50_000)]
        usage = Usage(
            input=tokens[0], output=tokens[1], cache_read=tokens[2], cache_write=tokens[3]
        )
        found.append((usage, pick.randint(0, usage.cache_write)))
    return found


def theirs(model: types.ModelInfo, usage: Usage, hour: int, at: datetime) -> float:
    counts = {
        "input_tokens": usage.input + usage.cache_read + usage.cache_write,
        "output_tokens": usage.output,
        "cache_read_tokens": usage.cache_read,
        "cache_write_tokens": usage.cache_write,
    }
    if hour:
        counts["cache_write_1h_tokens"] = hour
    return float(model.get_prices(at).calc_price(types.Usage(**counts))["total_price"])


@pytest.mark.parametrize("provider", [p.id for p in data.providers])
def test_every_model_costs_what_genai_prices_says(provider: str) -> None:
    ids = {m.id: m for m in Prices.load().models(provider)}
    (source,) = [p for p in data.providers if p.id == provider]
    checked = 0
    for model in source.models:
        ours = ids.get(model.id)
        if ours is None:
            assert _model(model) is None, f"{provider} {model.id} not in the snapshot"
            continue
        for at in MOMENTS:
            rates = ours.rates(at.timestamp())
            for usage, hour in usages(zlib.crc32(model.id.encode())):
                want = theirs(model, usage, hour, at)
                got = rates.cost(usage, hour)
                assert got == pytest.approx(want, rel=1e-9, abs=1e-12), (model.id, at, usage)
                checked += 1
    assert checked or all(_model(m) is None for m in source.models)


def samples(clause: dict[str, Any]) -> list[str]:
    """Names a match rule takes (none for a pattern)."""
    ((kind, value),) = clause.items()
    if kind in ("or", "and"):
        found = [name for c in value for name in samples(c)]
        return found[:1] if kind == "and" else found
    return [] if kind == "regex" else [value, value.upper()] if kind == "equals" else [value]


@pytest.mark.parametrize("provider", [p.id for p in data.providers])
def test_a_name_finds_the_model_genai_prices_finds(provider: str) -> None:
    """For every name a model's rule names, the model genai-prices finds (the first whose rule
    matches, else one of a fallback provider), if it has token prices."""
    prices = Prices.load()
    (source,) = [p for p in data.providers if p.id == provider]
    for model in prices.models(provider):
        for name in samples(model.match):
            theirs_found = source.find_model(name, all_providers=data.providers)
            ours = prices.model(provider, name)
            if theirs_found is not None and _model(theirs_found) is not None:
                assert ours is not None and ours.id == theirs_found.id, (provider, name)


@pytest.mark.parametrize(
    ("provider", "name"),
    [
        ("anthropic", "claude-opus-4-8"),
        ("anthropic", "claude-opus-5-5"),
        ("openai", "gpt-5.5"),
        ("google", "gemini-3.1-pro-preview"),
        ("mistral", "mistral-medium-latest"),
        ("x-ai", "grok-4"),
        ("anthropic", "Claude-Opus-4-8-20261001"),  # as a record may spell it
    ],
)
def test_recorded_models_are_found_as_genai_prices_finds_them(provider: str, name: str) -> None:
    (source,) = [p for p in data.providers if p.id == provider]
    theirs_found = source.find_model(name, all_providers=data.providers)
    ours = Prices.load().model(provider, name)
    assert theirs_found is not None and ours is not None and ours.id == theirs_found.id


@pytest.mark.parametrize(
    "name",
    ["claude-opus-4-8", "gpt-5.5", "gemini-3.1-pro-preview", "mistral-medium-latest", "grok-4"],
)
def test_a_model_of_no_named_provider_is_found_by_the_provider_s_rule(name: str) -> None:
    """As genai-prices' `calc_price` without a provider: the first provider whose rule takes
    the name."""
    provider = next(p for p in data.providers if p.model_match and p.model_match.is_match(name))
    want = provider.find_model(name, all_providers=data.providers)
    ours = Prices.load().model(None, name)
    assert want is not None and ours is not None and ours.id == want.id


def test_a_model_without_prices_has_none() -> None:
    prices = Prices.load()
    assert prices.rates("x-ai", "grok-build", 0.0) is None  # Grok Build's own model name
    assert prices.rates("no-such-provider", "claude-opus-4-8", 0.0) is None


def test_the_price_in_force_at_the_response_s_time() -> None:
    """A model whose price changed: each response at the price of its own day."""
    prices = Prices.load()
    changed = [
        (p.id, m)
        for p in data.providers
        for m in p.models
        if isinstance(m.prices, list)
        and any(isinstance(c.constraint, types.StartDateConstraint) for c in m.prices)
    ]
    assert changed
    provider, model = changed[0]
    start = next(
        c.constraint.start_date
        for c in model.prices
        if isinstance(c, types.ConditionalPrice)
        and isinstance(c.constraint, types.StartDateConstraint)
    )
    before = datetime.combine(start, time(0), UTC).timestamp() - 1
    after = before + 2
    ours = prices.model(provider, model.id)
    assert ours is not None
    assert ours.rates(before) != ours.rates(after)
    usage = Usage(input=1_000_000, output=1_000_000)
    for at in (before, after):
        moment = datetime.fromtimestamp(at, UTC)
        assert ours.rates(at).cost(usage) == pytest.approx(theirs(model, usage, 0, moment))


def test_kinds_are_the_snapshot_s() -> None:
    assert set(KINDS) == set(KEYS.values())


@pytest.mark.parametrize("at", [253402300800.0, 1e300, -1e300, float("inf"), float("nan")])
def test_a_time_no_date_has_is_priced_at_the_nearest_date(at: float) -> None:
    """A damaged record's time (the year 10000, found by tests/test_fuzz_readers.py) prices its
    response at the nearest date there is, never raising out of the state."""
    prices = Prices.load()
    model = prices.model(None, "claude-opus-4-1")
    assert model is not None and model.rates(at) is not None

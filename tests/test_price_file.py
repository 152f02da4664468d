"""`--pricing.file`: the documented example is read and used before the snapshot; a mistake
names the file, the entry and what to write instead."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from coding_agent_exporter.events import Usage
from coding_agent_exporter.state import price_file
from coding_agent_exporter.state.price_file import PriceFileError, overrides
from coding_agent_exporter.state.prices import Prices

EXAMPLE = re.search(r"```yaml\n(.*?)```", price_file.__doc__ or "", re.S)
JUNE = datetime(2026, 6, 2, tzinfo=UTC).timestamp()
MAY = datetime(2026, 5, 30, tzinfo=UTC).timestamp()
MILLION = Usage(input=1_000_000, output=1_000_000)


def example() -> Prices:
    assert EXAMPLE is not None
    return Prices.load().overridden(overrides(EXAMPLE.group(1), "prices.yaml"))


def test_the_documented_example_prices_a_model_the_snapshot_lacks() -> None:
    assert Prices.load().rates("x-ai", "grok-build", JUNE) is None
    rates = example().rates("x-ai", "Grok-Build-0.2", JUNE)  # its rule: starts_with
    assert rates is not None
    small = Usage(input=100_000, output=1_000_000)
    assert rates.cost(small) == pytest.approx(0.2 + 10)
    big = Usage(input=300_000, output=1_000_000)  # over the tier's start: all at 15
    assert rates.cost(big) == pytest.approx(0.6 + 15)
    assert example().rates("x-ai", "grok-build", MAY) == rates  # before its one date: that price


def test_a_listed_model_is_found_before_the_snapshot_s() -> None:
    rates = example().rates("anthropic", "CLAUDE-OPUS-4-8", JUNE)
    assert rates is not None and rates.cost(MILLION) == pytest.approx(5 + 25)
    cheaper = overrides(
        "models: [{provider: anthropic, model: claude-opus-4-8, input: 1, output: 2}]", "p.yaml"
    )
    mine = Prices.load().overridden(cheaper).rates("anthropic", "claude-opus-4-8", JUNE)
    assert mine is not None and mine.cost(MILLION) == pytest.approx(3)
    usage = Usage(cache_read=1_000_000)  # no cache price given: priced as input
    assert mine.cost(usage) == pytest.approx(1)


def test_a_model_listed_again_changes_its_price_from_the_later_date() -> None:
    text = """models:
      - {provider: acme, model: m1, since: 2026-06-01, input: 2}
      - {provider: acme, model: m1, since: 2026-01-01, input: 1}
    """
    prices = Prices.load().overridden(overrides(text, "p.yaml"))
    for at, want in ((MAY, 1), (JUNE, 2)):
        rates = prices.rates("acme", "m1", at)
        assert rates is not None and rates.cost(Usage(input=1_000_000)) == pytest.approx(want)


def test_json_is_read_too() -> None:
    text = '{"models": [{"provider": "acme", "model": "m1", "input": 1, "output": 1}]}'
    rates = Prices.load().overridden(overrides(text, "p.json")).rates("acme", "m1", JUNE)
    assert rates is not None and rates.cost(MILLION) == pytest.approx(2)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models: [", "p.yaml: not YAML or JSON"),
        ("prices: []", "p.yaml: expected a list under `models:`"),
        ("models: [{model: m, input: 1}]", "p.yaml: model 1: `provider` is missing"),
        ("models: [{provider: a, model: m}]", "model 1 (a m): give at least `input` or `output`"),
        ("models: [{provider: a, model: m, input: -1}]", "model 1 (a m): input: expected USD"),
        ("models: [{provider: a, model: m, input: 1, cost: 2}]", "unknown field cost"),
        ("models: [{provider: a, model: m, input: 1, since: soon}]", "since: expected a date"),
        ("models: [{provider: a, model: m, input: 1, match: {like: m}}]", "match: expected one"),
    ],
)
def test_a_mistake_names_the_file_the_entry_and_the_fix(text: str, message: str) -> None:
    with pytest.raises(PriceFileError, match=re.escape(message)):
        overrides(text, "p.yaml")

"""What model calls cost: the token prices of `prices.json`, a snapshot of genai-prices' data.

Pydantic's genai-prices keeps the prices of ~2,300 models of ~50 providers, with their history
(a price in force from a date, or at some hours of the day) and their tiers (above 200k input
tokens, say, every token costs more). Importing it costs a start a quarter of a second and ~30
MB (pydantic), and pricing one response through it ~140 µs (a history holds hundreds of
thousands), so the exporter reads only the token prices of its data, written to `prices.json`
by `tests/test_prices.py` (`UPDATE_GOLDEN=1`, from the installed genai-prices, whose version it
names), and prices a response itself as genai-prices does (that test compares the two on every
model): uncached input, cache reads, cache writes (those that live an hour at their own price
where the model has one), output (reasoning included) at their prices per million tokens; a
tiered price takes the highest tier whose start the request's whole input (cache included)
exceeds, for all its tokens.

A model is found as genai-prices finds it: by the provider's models' match rules, in order, on
the lower-cased name, then in the provider's fallback providers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from ..events import Usage
from .times import utc

SNAPSHOT = Path(__file__).with_name("prices.json")
Price = float | tuple[float, tuple[tuple[int, float], ...]]
"""USD per million tokens, or (base, ((start, price), ...)): the tiers, by start."""
KINDS = ("input", "output", "cache_read", "cache_write", "cache_write_1h", "requests")


@dataclass(frozen=True, slots=True)
class Rates:
    """The token prices of one model at one time (None: the model has none of that kind)."""

    input: Price | None = None
    output: Price | None = None
    cache_read: Price | None = None
    cache_write: Price | None = None
    cache_write_1h: Price | None = None
    requests: float | None = None
    """USD per thousand requests (a few search models charge each call too)."""

    def cost(self, usage: Usage, cache_write_1h: int = 0) -> float:
        """USD for `usage` (`input` uncached, as every harness counts it), `cache_write_1h` of
        its cache writes kept an hour. Tokens of a kind without a price of its own are priced as
        the kind they are part of (a cache read as input, an hour's cache write as a write)."""
        whole = usage.input + usage.cache_read + usage.cache_write
        read = usage.cache_read if self.cache_read is not None else 0
        write = usage.cache_write if self.cache_write is not None else 0
        hour = min(cache_write_1h, write) if self.cache_write_1h is not None else 0
        total = _at(self.input, whole - read - write, whole)
        total += _at(self.cache_read, read, whole) + _at(self.cache_write, write - hour, whole)
        total += _at(self.cache_write_1h, hour, whole) + _at(self.output, usage.output, whole)
        return total / 1_000_000 + (self.requests or 0.0) / 1000


def _at(price: Price | None, tokens: int, whole: int) -> float:
    if price is None or not tokens:
        return 0.0
    if isinstance(price, float):
        return price * tokens
    base, tiers = price
    return next((p for start, p in reversed(tiers) if whole > start), base) * tokens


@dataclass(frozen=True, slots=True)
class Period:
    """Prices in force from `since` (a UTC date; None: always), within `hours` of each day
    (UTC start and end; None: all day)."""

    rates: Rates
    since: date | None = None
    hours: tuple[time, time] | None = None

    def active(self, at: datetime) -> bool:
        if self.since is not None and at.date() < self.since:
            return False
        if self.hours is None:
            return True
        start, end, now = self.hours[0], self.hours[1], at.time()
        return (now >= start or now < end) if end < start else start <= now < end


@dataclass(frozen=True, slots=True)
class Model:
    id: str
    match: Any
    periods: tuple[Period, ...]

    def rates(self, at: float) -> Rates:
        """The prices in force at `at` (seconds since the epoch): the last period active then,
        else the first."""
        when = utc(at)
        found = next((p for p in reversed(self.periods) if p.active(when)), self.periods[0])
        return found.rates


class Prices:
    """The snapshot's models, by provider; `rates` finds a model's prices at a time."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.source: str = document["source"]
        self._document = document
        self._raw: dict[str, list[Any] | msgspec.Raw] = {
            p["id"]: p["models"] for p in document["providers"]
        }
        self._models: dict[str, list[Model]] = {}  # made when a provider is first asked for
        self._fallbacks = {p["id"]: p.get("fallback", []) for p in document["providers"]}
        self._rules = [(p["id"], p["match"]) for p in document["providers"] if "match" in p]
        self._found: dict[tuple[str | None, str], Model | None] = {}

    @classmethod
    def load(cls, path: Path = SNAPSHOT) -> Prices:
        """The snapshot, each provider's models left as JSON until one is asked for (decoded
        whole, the ~2,300 models took 2.6 MB; a history asks for a few providers)."""
        found = msgspec.json.decode(path.read_bytes(), type=_Snapshot)
        providers = [
            {k: v if k == "models" else msgspec.json.decode(v) for k, v in p.items()}
            for p in found.providers
        ]
        return cls({"source": found.source, "providers": providers})

    def overridden(self, models: list[tuple[str, dict[str, Any]]]) -> Prices:
        """These prices with `models` (provider, model in the snapshot's form: `price_file`)
        found before the snapshot's, in their order."""
        providers = [dict(p) for p in self._document["providers"]]
        known = {p["id"]: p for p in providers}
        for provider, _ in models:
            known.setdefault(provider, {"id": provider, "models": []})
        for provider, entry in known.items():
            entry["models"] = [m for p, m in models if p == provider] + _decoded(entry["models"])
        return Prices({"source": self.source, "providers": list(known.values())})

    def model(self, provider: str | None, name: str) -> Model | None:
        """Model `name` of `provider`; of no named provider, of the first whose rule takes the
        name (genai-prices' `model_match`: `claude` is Anthropic's)."""
        key = (provider, name)
        if key not in self._found:
            lower = name.lower()
            if provider is None:
                provider = next((p for p, rule in self._rules if matches(rule, lower)), "")
            found = self._match(provider, lower)
            for fallback in self._fallbacks.get(provider, []) if found is None else []:
                found = found or self._match(fallback, lower)
            self._found[key] = found
        return self._found[key]
        if provider is None:
            lower = name.lower()
            provider = next((p for p, rule in self._rules if matches(rule, lower)), "")
        if key not in self._found:
            found = self._match(provider, name.lower())
            for fallback in self._fallbacks.get(provider, []) if found is None else []:
                found = found or self._match(fallback, name.lower())
            self._found[key] = found
        return self._found[key]

    def models(self, provider: str) -> list[Model]:
        """The models of `provider`, in the order they are matched."""
        if provider not in self._models:
            self._models[provider] = [_model(m) for m in _decoded(self._raw.get(provider, []))]
        return self._models[provider]

    def rates(self, provider: str | None, name: str, at: float) -> Rates | None:
        """The prices of model `name` of `provider` at `at`; None when it has none."""
        model = self.model(provider, name)
        return None if model is None else model.rates(at)

    def _match(self, provider: str, name: str) -> Model | None:
        return next((m for m in self.models(provider) if matches(m.match, name)), None)


class _Snapshot(msgspec.Struct):
    source: str
    providers: list[dict[str, msgspec.Raw]]


def _decoded(models: list[Any] | msgspec.Raw) -> list[Any]:
    """A provider's models, decoded if they were left as JSON (`Prices.load`)."""
    if isinstance(models, msgspec.Raw):
        found: list[Any] = msgspec.json.decode(models)
        return found
    return models


def matches(clause: dict[str, Any], name: str) -> bool:
    """genai-prices' match rules: `{"equals"|"starts_with"|"ends_with"|"contains": text}`,
    `{"regex": pattern}`, `{"or"|"and": [rules]}`; `name` is lower-cased."""
    ((kind, value),) = clause.items()
    if kind in ("or", "and"):
        found = (matches(c, name) for c in value)
        return any(found) if kind == "or" else all(found)
    text: str = value
    if kind == "regex":
        return _regex(text).search(name) is not None
    if kind == "equals":
        return name == text.lower()
    if kind == "starts_with":
        return name.startswith(text.lower())
    if kind == "ends_with":
        return name.endswith(text.lower())
    return text.lower() in name


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _model(raw: dict[str, Any]) -> Model:
    return Model(raw["id"], raw["match"], tuple(_period(p) for p in raw["prices"]))


def _period(raw: dict[str, Any]) -> Period:
    rates = Rates(**{kind: _price(raw[kind]) for kind in KINDS if kind in raw})
    since = date.fromisoformat(raw["since"]) if raw.get("since") else None
    hours = raw.get("hours")
    span = (time.fromisoformat(hours[0]), time.fromisoformat(hours[1])) if hours else None
    return Period(rates, since, span)


def _price(raw: Any) -> Any:
    if isinstance(raw, dict):
        return float(raw["base"]), tuple((int(s), float(p)) for s, p in raw["tiers"])
    return float(raw)

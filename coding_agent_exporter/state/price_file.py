"""`--pricing.file`: prices of the user's own, for models the snapshot lacks or prices
otherwise (a negotiated rate, a local model at zero). YAML or JSON (JSON is YAML):

```yaml
models:
  - provider: anthropic          # genai-prices' provider id (anthropic, openai, google, ...)
    model: claude-opus-4-8       # the model's name in the session files (any case)
    input: 5                     # USD per million tokens, uncached input
    output: 25                   # output, reasoning included
    cache_read: 0.5              # optional: else priced as input
    cache_write: 6.25            # optional: else priced as input
    cache_write_1h: 10           # optional: else priced as a cache write
  - provider: x-ai
    model: grok-build
    match: {starts_with: grok-build}   # optional: a genai-prices match rule instead of the name
    since: 2026-06-01            # optional: in force from this UTC date (list the model again
    input: 2                     #   with another date for a price change; before the first
                                 #   date, the first price)
    output: {base: 10, tiers: [[200000, 15]]}   # above 200k input tokens, all at 15
```

A model listed here is found before the snapshot's. Pure: the runtime reads the file.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from .prices import KINDS

PRICES = tuple(kind for kind in KINDS if kind != "requests")
FIELDS = frozenset({"provider", "model", "match", "since", *PRICES})
RULES = frozenset({"equals", "starts_with", "ends_with", "contains", "regex", "or", "and"})


class PriceFileError(ValueError):
    """What is wrong with a pricing file, and where."""


def overrides(text: str, name: str) -> list[tuple[str, dict[str, Any]]]:
    """The models of pricing file `name` (its `text`), as (provider, model in the snapshot's
    form); `PriceFileError` names the file, the entry and what to change."""
    import yaml  # only with a pricing file: PyYAML costs every start ~30 ms to import

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise PriceFileError(f"{name}: not YAML or JSON: {error}") from None
    entries = document.get("models") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise PriceFileError(f"{name}: expected a list under `models:` (see --help)")
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for i, entry in enumerate(entries, 1):
        provider, model = _entry(entry, f"{name}: model {i}")
        same = found.setdefault((provider, model["id"]), {**model, "prices": []})
        same["prices"] += model["prices"]  # a model listed again: its prices at other dates
    for model in found.values():
        model["prices"].sort(key=lambda period: period.get("since", ""))
    return [(provider, model) for (provider, _), model in found.items()]


def _entry(entry: object, where: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(entry, dict):
        raise PriceFileError(f"{where}: expected a mapping (provider, model, prices)")
    unknown = sorted(set(map(str, entry)) - FIELDS)
    if unknown:
        raise PriceFileError(f"{where}: unknown field {', '.join(unknown)}")
    provider, model = entry.get("provider"), entry.get("model")
    if not isinstance(provider, str) or not provider:
        raise PriceFileError(f"{where}: `provider` is missing (e.g. anthropic, openai)")
    if not isinstance(model, str) or not model:
        raise PriceFileError(f"{where}: `model` is missing")
    where = f"{where} ({provider} {model})"
    period: dict[str, Any] = {
        kind: _price(entry[kind], f"{where}: {kind}") for kind in PRICES if kind in entry
    }
    if "input" not in period and "output" not in period:
        raise PriceFileError(f"{where}: give at least `input` or `output` (USD per million tokens)")
    if "since" in entry:
        period["since"] = _since(entry["since"], where)
    match = entry.get("match", {"equals": model})
    _check_rule(match, f"{where}: match")
    return provider, {"id": model, "match": match, "prices": [period]}


def _price(value: object, where: str) -> float | dict[str, Any]:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    if isinstance(value, dict) and set(value) == {"base", "tiers"}:
        base, tiers = value["base"], value["tiers"]
        ok = (
            isinstance(base, int | float)
            and isinstance(tiers, list)
            and all(
                isinstance(t, list) and len(t) == 2 and all(isinstance(x, int | float) for x in t)
                for t in tiers
            )
        )
        if ok:
            return {"base": float(base), "tiers": sorted([int(s), float(p)] for s, p in tiers)}
    raise PriceFileError(
        f"{where}: expected USD per million tokens (a number >= 0) or "
        "{base: N, tiers: [[input tokens, N], ...]}"
    )


def _since(value: object, where: str) -> str:
    if isinstance(value, date):
        return value.isoformat()
    try:
        return date.fromisoformat(str(value)).isoformat()
    except ValueError:
        raise PriceFileError(f"{where}: since: expected a date, YYYY-MM-DD") from None


def _check_rule(rule: object, where: str) -> None:
    if not isinstance(rule, dict) or len(rule) != 1 or next(iter(rule)) not in RULES:
        raise PriceFileError(f"{where}: expected one of {', '.join(sorted(RULES))}: value")
    ((kind, value),) = rule.items()
    if kind in ("or", "and"):
        if not isinstance(value, list) or not value:
            raise PriceFileError(f"{where}: `{kind}` takes a list of rules")
        for inner in value:
            _check_rule(inner, where)
    elif not isinstance(value, str):
        raise PriceFileError(f"{where}: `{kind}` takes a text")

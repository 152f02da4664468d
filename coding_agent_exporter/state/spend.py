"""What the responses cost, and how they fill each agent's 5-hour usage windows.

The state tells `Spend` each growth of a response's usage (a response's copies may report more
tokens as they come: `state` keeps the largest); `Spend` prices the response's whole usage so far
at the prices in force when the response first came (`prices`, found by the model's name under
the first provider whose rule takes it) and counts what that adds to its cost, so a response
costs what its final usage costs, tiers included. Tokens of a model with no price are counted
apart (`unpriced`), never as a silent zero. Costs are estimates (`source="estimated"`): what
the price list says those tokens cost, not what a subscription bills. What an agent says a call
cost (pi and OpenCode per response, Claude Code a session's running total per model) is counted
apart (`source="reported"`): the two are never added.

The prices are not kept with the state (the catch-up cache holds the state): `pricing` names
them (the snapshot, or with the user's pricing file), and `Prices` are loaded once per name.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path

from ..events import CostReported, Usage
from .price_file import overrides
from .prices import Prices, Rates
from .windows import Windows, all_tokens

ESTIMATED = "estimated"
REPORTED = "reported"
Grown = tuple[Usage, Usage, int, float]
"""A response's usage before and now, its cache writes kept an hour (of its largest report)
and its cost before."""


@dataclass(slots=True)
class Spend:
    pricing: str | None = None
    """The user's pricing file (`--pricing.file`), read over the snapshot; None: the snapshot."""
    cost: defaultdict[tuple[str, ...], float] = field(default_factory=lambda: defaultdict(float))
    """USD by (agent, model, cwd, source)."""
    unpriced: Counter[tuple[str, ...]] = field(default_factory=Counter)
    """Tokens of models without a price, by (agent, model)."""
    windows: dict[str, Windows] = field(default_factory=dict)
    running: dict[tuple[str, str, str], float] = field(default_factory=dict)
    """The largest running total an agent reported, by (agent, session id, model)."""

    def _windows(self, agent: str) -> Windows:
        found = self.windows.get(agent)  # not setdefault: it would make a Windows every call
        if found is None:
            found = self.windows[agent] = Windows()
        return found

    def found(self) -> None:
        """Every agent's usage windows found now, from what is known (before a catch-up cache
        is written: written before any scrape asked for them, they were found again at each
        start)."""
        for windows in self.windows.values():
            windows.windows()

    def reported(self, agent: str, model: str, cwd: str, usd: float) -> None:
        """The agent says a response cost `usd` more than it said before."""
        self.cost[(agent, model, cwd, REPORTED)] += usd

    def reported_total(self, agent: str, event: CostReported, cwd: str) -> float:
        """The agent's running total of a session's calls of a model: what it adds (USD)."""
        key = (agent, event.session_id, event.model)
        before = self.running.get(key, 0.0)
        if event.usd <= before:
            return 0.0
        self.running[key] = event.usd
        self.reported(agent, event.model, cwd, event.usd - before)
        return event.usd - before

    def responded(self, agent: str, model: str, cwd: str, at: float, grown: Grown) -> float:
        """A response first seen at `at` grew (`grown`): what it costs now (what it cost before
        when its model has no price); the difference counts for the agent and its window."""
        old, new, hour, before = grown
        delta = new.minus(old)
        rates = rates_at(self.pricing, model, int(at // 60))
        if rates is None:
            self.unpriced[(agent, model)] += all_tokens(delta)
            self._windows(agent).add(at, delta, 0.0)
            return before
        cost = rates.cost(new, hour)
        self.cost[(agent, model, cwd, ESTIMATED)] += cost - before
        self._windows(agent).add(at, delta, cost - before)
        return cost


@lru_cache(maxsize=4096)
def rates_at(pricing: str | None, model: str, minute: int) -> Rates | None:
    """The prices of `model` in minute `minute` since the epoch (every price of the list
    changes at a whole minute: a date, or a time of day such as 16:30)."""
    return loaded(pricing).rates(None, model, minute * 60.0)


@cache
def loaded(pricing: str | None) -> Prices:
    """The prices named `pricing` (see `Spend.pricing`); `PriceFileError` when that file is
    wrong (the configuration reads it first, so a start fails at once and says why)."""
    prices = Prices.load()
    if pricing is None:
        return prices
    return prices.overridden(overrides(Path(pricing).read_text(), pricing))

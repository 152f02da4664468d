"""History counters: what every finished turn, tool call, message and session adds to.

Kept apart from the sessions, which are forgotten: a counter only grows. Keys are tuples of raw
label values (the cwd, not the rendered project label), rendered at each scrape.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

Exemplar = tuple[int, int, float, float]  # trace id, span id, value, when


@dataclass(slots=True)
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0
    exemplars: dict[int, Exemplar] = field(default_factory=dict)  # bucket (len = +Inf) → latest

    def observe(self, value: float, exemplar: tuple[int, int, float] | None = None) -> None:
        if not self.counts:
            self.counts = [0] * len(self.buckets)
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
        self.total += value
        self.count += 1
        if exemplar is not None:
            first = next((i for i, b in enumerate(self.buckets) if value <= b), len(self.buckets))
            self.exemplars[first] = (exemplar[0], exemplar[1], value, exemplar[2])


@dataclass(slots=True)
class Totals:
    """History counters; keys are tuples of raw label values (cwd, not the rendered project)."""

    tokens: Counter[tuple[str, ...]] = field(default_factory=Counter)
    messages: Counter[tuple[str, ...]] = field(default_factory=Counter)
    turns: Counter[tuple[str, ...]] = field(default_factory=Counter)
    tool_calls: Counter[tuple[str, ...]] = field(default_factory=Counter)
    subagents: Counter[tuple[str, ...]] = field(default_factory=Counter)
    sessions: Counter[tuple[str, ...]] = field(default_factory=Counter)
    reviews: Counter[tuple[str, ...]] = field(default_factory=Counter)
    compactions: Counter[tuple[str, ...]] = field(default_factory=Counter)
    compaction_tokens: Counter[tuple[str, ...]] = field(default_factory=Counter)
    turn_durations: dict[str, Histogram] = field(default_factory=dict)
    tool_durations: dict[tuple[str, ...], Histogram] = field(default_factory=dict)

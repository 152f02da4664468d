"""The exporter's own health per agent: what the reading loop counted as it read.

The engine adds to it as it reads; the Prometheus view shows it as `coding_agent_exporter_*`
metrics. It lives with the state, not with the engine, so that what is published imports nothing
from the runtime.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(slots=True)
class Stats:
    """Exporter health per agent, shown as `coding_agent_exporter_*` metrics."""

    bytes_read: Counter[str] = field(default_factory=Counter)
    records: Counter[str] = field(default_factory=Counter)
    parse_errors: Counter[tuple[str, str]] = field(default_factory=Counter)
    files: Counter[str] = field(default_factory=Counter)
    up: dict[str, bool] = field(default_factory=dict)
    rescanning: bool = False  # file events cannot be had: the loop rescans instead
    rescanned: Counter[str] = field(default_factory=Counter)  # agent → folders rescanned (WSL)
    state_errors: Counter[str] = field(default_factory=Counter)
    """Failures with the exporter's own state folder, by reason (`cache_refused`: a catch-up
    cache that names code it may not run; `cache_damaged`: one that cannot be read back)."""

    def went_on(self, again: Stats) -> None:
        """Counters after every file was read again into `again`: bytes and records read add
        up (they were read again), errors stay the most ever seen (the same bad record is not
        two), the files followed and readers up are today's."""
        self.bytes_read.update(again.bytes_read)
        self.records.update(again.records)
        for key, value in again.parse_errors.items():
            self.parse_errors[key] = max(self.parse_errors[key], value)
        self.files = again.files
        self.up = {**self.up, **again.up}

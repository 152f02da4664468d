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

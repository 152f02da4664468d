"""/metrics bodies in prometheus_client's own formats, a family re-rendered only when it changed.

Each scrape builds every family afresh from the state (the collectors), but writing them out is
most of a scrape's time: prometheus_client escapes, checks and formats every label of every
sample, ~15-25 µs a sample, 20-40 ms for the ~1,400 series of 200 live sessions. Between two
scrapes most families are the same sample for sample (a history's totals, an idle session's
state), so `FamilyRenders` keeps the bytes the library wrote for each family with the samples
they were written from, and has the library write a family again only when its samples (names,
labels, values, timestamps, exemplars), type, help or unit differ. The body is byte for byte
the library's own (`tests/test_exposition.py`); one family's bytes are kept per name and type,
so what is kept is bounded by the families, never by the scrapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = ["FamilyRenders"]

Encoder = Callable[[Any], bytes]
_EOF = b"# EOF\n"  # OpenMetrics ends the whole body with it, once


class FamilyRenders:
    """A callable returning `registry` rendered by `encoder` (one of prometheus_client's
    `choose_encoder` results), reusing the bytes of every family unchanged since last time."""

    def __init__(self, registry: Collector, encoder: Encoder, content_type: str) -> None:
        self._registry, self._encoder = registry, encoder
        self._eof = content_type.startswith("application/openmetrics-text")
        self._kept: dict[tuple[str, str], tuple[tuple[Any, ...], bytes]] = {}
        self.rendered = 0  # families written by the library so far (tests look)

    def __call__(self) -> bytes:
        kept: dict[tuple[str, str], tuple[tuple[Any, ...], bytes]] = {}
        parts: list[bytes] = []
        for family in self._registry.collect():
            name, key = (family.name, family.type), _key(family)  # a gauge and a counter
            known = self._kept.get(name)  # may share a name: `sessions`, `sessions_total`
            if known is None or known[0] != key or name in kept:
                known = (key, self._render(family))
            kept.setdefault(name, known)
            parts.append(known[1])
        self._kept = kept  # families no longer collected are let go
        if self._eof:
            parts.append(_EOF)
        return b"".join(parts)

    @property
    def kept(self) -> int:
        """Families whose bytes are kept."""
        return len(self._kept)

    def _render(self, family: Metric) -> bytes:
        self.rendered += 1
        body = self._encoder(_One(family))
        return body.removesuffix(_EOF) if self._eof else body


class _One:
    """A collector of one family, to have the library write just that family."""

    def __init__(self, family: Metric) -> None:
        self._family = family

    def collect(self) -> Iterator[Metric]:
        yield self._family


def _key(family: Metric) -> tuple[Any, ...]:
    """What a family's bytes are made of, compared with `==`: labels are dicts (the library
    sorts them as it writes), values compare as floats, as it writes them, but for the sign of
    a zero, which it spells (`-0.0`)."""
    zeros = tuple(math.copysign(1.0, s.value) for s in family.samples if s.value == 0)
    return (family.type, family.documentation, family.unit, tuple(family.samples), zeros)

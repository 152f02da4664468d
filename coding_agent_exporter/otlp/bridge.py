"""The /metrics families as OTLP metrics, read from the registry's `collect()` at each export:
what is pushed is what a scrape at that moment returns, with no instruments of its own.

Names: an OTLP metric is named exactly like the Prometheus series it comes from (a counter with
its `_total`, a histogram without `_bucket`), with a unit that the OTLP → Prometheus translation
(Prometheus' OTLP receiver, the Collector's prometheus and prometheusremotewrite exporters: the
`otlptranslator` rules, with or without suffixes) turns into no further suffix: `s` where the
name says seconds, `By` where it says bytes, an annotation (`{token}`, `{USD}`) that adds
nothing, and none for a rate (`_per_second`: a `/s` unit would add a second `_per_second`).
`tests/test_otlp_metrics.py` translates every pushed metric back to the scraped name.

Temporality: cumulative by default, each point since `started` (this process's start: the
history counters are rebuilt from the files, so a restart sends the same values with a later
start time). Delta on request (`Delta`): each point the increase since the last export the
endpoint accepted, kept in the state folder so that a restart sends only what is new.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from ..sources import statedir

log = logging.getLogger(__name__)
Labels = tuple[tuple[str, str], ...]
Kind = Literal["sum", "gauge", "histogram"]
DELTA_FILE = "otlp-metrics-sent.json"


@dataclass(frozen=True, slots=True)
class Hist:
    """One histogram series: the finite bounds, the count in each bucket (one more than the
    bounds: the last is above them all) and the sum."""

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    total: float


Value = float | Hist


@dataclass(frozen=True, slots=True)
class Series:
    """One family as OTLP sees it: its kind, help, unit and a value per label set."""

    name: str
    kind: Kind
    description: str
    unit: str
    points: dict[Labels, Value]


def unit_of(name: str) -> str:
    """The OTLP unit of a Prometheus series name (see the module's docstring)."""
    words = name.split("_")
    if "per" in words:
        return ""
    for word, unit in (("seconds", "s"), ("bytes", "By"), ("tokens", "{token}"), ("usd", "{USD}")):
        if word in words:
            return unit
    return ""


def read(registry: Collector) -> list[Series]:
    """Every family of `registry` now (counters, gauges, info, histograms; the exporter has no
    summaries or state sets: such a family would be left out)."""
    found = []
    for family in registry.collect():
        kind, name = family.type, family.name
        if kind == "histogram":
            points: dict[Labels, Value] = dict(_histograms(family.samples, name))
            found.append(Series(name, "histogram", family.documentation, unit_of(name), points))
            continue
        if kind not in ("counter", "gauge", "info", "unknown"):
            continue
        sample_name = {"counter": name + "_total", "info": name + "_info"}.get(kind, name)
        samples = (s for s in family.samples if s.name == sample_name)
        points = {_labels(s.labels): float(s.value) for s in samples}
        shown: Kind = "sum" if kind == "counter" else "gauge"
        found.append(Series(sample_name, shown, family.documentation, unit_of(sample_name), points))
    return found


def _labels(labels: dict[str, str], drop: str = "") -> Labels:
    return tuple(sorted((k, v) for k, v in labels.items() if k != drop))


def _histograms(samples: Iterable[Sample], name: str) -> Iterable[tuple[Labels, Hist]]:
    buckets: dict[Labels, list[tuple[float, float]]] = {}
    sums: dict[Labels, float] = {}
    for sample in samples:
        sample_name, labels, value = sample.name, sample.labels, sample.value
        key = _labels(labels, drop="le")
        if sample_name == name + "_bucket":
            buckets.setdefault(key, []).append((float(labels["le"]), float(value)))
        elif sample_name == name + "_sum":
            sums[key] = float(value)
    for key, found in buckets.items():
        found.sort()
        cumulative = [count for _, count in found]
        counts = [b - a for a, b in zip([0.0, *cumulative], cumulative, strict=False)]
        bounds = tuple(bound for bound, _ in found if bound != float("inf"))
        yield key, Hist(bounds, tuple(counts), sums.get(key, 0.0))


class Delta:
    """What was last accepted, per series, and when: the next export sends the increase since.
    A value lower than the one sent (an agent's files deleted: the history counters shrink)
    sends 0 and becomes the base, so nothing is counted twice. Kept in `folder` after each
    accepted export (written atomically), read back at start; without it a start counts from 0."""

    def __init__(self, folder: Path | None, started: int) -> None:
        self.path = folder / DELTA_FILE if folder is not None else None
        self.sent: dict[str, Value] = {}
        self.at = started  # when the values in `sent` were taken (ns)
        self._load()

    def _load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
            self.at = int(data["at"])
            self.sent = {k: _value(v) for k, v in data["sent"].items()}
        except (OSError, ValueError, KeyError, TypeError) as error:
            self.sent = {}
            log.warning("OTLP delta state %s unreadable (%s): counting from 0", self.path, error)

    def since(self, series: list[Series]) -> tuple[list[Series], dict[str, Value]]:
        """The increases since the last accepted export, and the values to `commit` once
        the endpoint accepted them."""
        out, now = [], {}
        for found in series:
            if found.kind == "gauge":
                out.append(found)
                continue
            points = {}
            for labels, value in found.points.items():
                key = json.dumps([found.name, labels])
                now[key] = value
                points[labels] = _increase(value, self.sent.get(key))
            out.append(Series(found.name, found.kind, found.description, found.unit, points))
        return out, now

    def commit(self, values: dict[str, Value], at: int) -> None:
        self.sent, self.at = values, at
        if self.path is None:
            return
        data = {"at": at, "sent": {k: _plain(v) for k, v in values.items()}}
        try:
            statedir.write(self.path, json.dumps(data))
        except OSError as error:
            log.warning("cannot write OTLP delta state %s: %s", self.path, error)


def _increase(value: Value, before: Value | None) -> Value:
    if isinstance(value, Hist):
        if not isinstance(before, Hist) or before.bounds != value.bounds:
            return value
        counts = tuple(max(0.0, a - b) for a, b in zip(value.counts, before.counts, strict=True))
        return Hist(value.bounds, counts, max(0.0, value.total - before.total))
    if not isinstance(before, float):
        return value
    return max(0.0, value - before)


def _plain(value: Value) -> object:
    if isinstance(value, Hist):
        return {"bounds": list(value.bounds), "counts": list(value.counts), "sum": value.total}
    return value


def _value(data: object) -> Value:
    if isinstance(data, dict):
        return Hist(tuple(data["bounds"]), tuple(data["counts"]), float(data["sum"]))
    if isinstance(data, int | float):
        return float(data)
    raise TypeError(f"not a value: {data!r}")

"""OTLP metrics push, wired from the standard OTEL_* environment (beside `traces.sdk`, which
wires the spans'): the registry's families (`bridge`) as one export every interval.

OTEL_EXPORTER_OTLP_METRICS_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT   where metrics go
OTEL_EXPORTER_OTLP_METRICS_PROTOCOL / ..._PROTOCOL   http/protobuf (default) or grpc
OTEL_EXPORTER_OTLP_METRICS_HEADERS, ..._TIMEOUT, ..._COMPRESSION, TLS  read by the exporters
OTEL_METRIC_EXPORT_INTERVAL (ms, default 60000), OTEL_METRIC_EXPORT_TIMEOUT (ms, default 30000)
OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE   cumulative (default), delta or lowmemory

Nothing is queued: an export that fails is not kept, the next one reads the registry again.
Cumulative values lose nothing by that (the next export carries the whole count) and delta
ones neither (the base moves only when the endpoint accepted an export), so an outage costs
the gauges' points in between and no memory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricExporter,
    MetricExportResult,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from prometheus_client.registry import Collector

from .. import __version__
from .bridge import Delta, Hist, Labels, Series, Value, read

log = logging.getLogger("coding_agent_exporter")
CUMULATIVE, DELTA = AggregationTemporality.CUMULATIVE, AggregationTemporality.DELTA
SCOPE = InstrumentationScope("coding-agent-exporter", __version__)


def metrics_endpoint_configured(environ: Mapping[str, str]) -> bool:
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def temporalities(environ: Mapping[str, str]) -> tuple[AggregationTemporality, ...]:
    """(counters, histograms) by OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE. The
    counters are observed (read from the state at each export), so `lowmemory` keeps them
    cumulative as the specification says of asynchronous counters."""
    name = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
    text = (environ.get(name) or "cumulative").lower()
    table = {
        "cumulative": (CUMULATIVE, CUMULATIVE),
        "delta": (DELTA, DELTA),
        "lowmemory": (CUMULATIVE, DELTA),
    }
    if text not in table:
        raise ValueError(f"{name}={text!r}: use cumulative, delta or lowmemory")
    return table[text]


def metric_exporter(environ: Mapping[str, str]) -> MetricExporter:
    from ..traces.sdk import KeepsItsCA, otlp_protocol

    if otlp_protocol(environ, "METRICS") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter()
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HTTPMetricExporter,
    )

    return HTTPMetricExporter(session=KeepsItsCA())


def _millis(environ: Mapping[str, str], name: str, default: int) -> float:
    text = environ.get(name) or str(default)
    if not text.isdigit() or int(text) <= 0:
        raise ValueError(f"{name}={text!r}: a number of milliseconds above 0")
    return int(text) / 1000


class Pusher:
    """Reads the registry and sends it: `push` once, or every interval from a thread."""

    def __init__(
        self,
        registry: Collector,
        exporter: MetricExporter,
        resource: Resource,
        environ: Mapping[str, str],
        *,
        started: float,
        state_dir: Path | None,
    ) -> None:
        self.registry, self.exporter, self.resource = registry, exporter, resource
        self.interval = _millis(environ, "OTEL_METRIC_EXPORT_INTERVAL", 60_000)
        self.timeout = _millis(environ, "OTEL_METRIC_EXPORT_TIMEOUT", 30_000)
        self.counters, self.histograms = temporalities(environ)
        self.started = int(started * 1e9)
        wants_delta = DELTA in (self.counters, self.histograms)
        self.delta = Delta(state_dir, self.started) if wants_delta else None
        self.counts: Counter[str] = Counter()  # exports accepted, failed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def push(self) -> bool:
        """One export of every family as it is now; True if the endpoint accepted it."""
        now = time.time_ns()
        series, values = read(self.registry), None
        delta_series = series
        if self.delta is not None:
            delta_series, values = self.delta.since(series)
        pairs = zip(series, delta_series, strict=True)
        metrics = [self._metric(s, d, now) for s, d in pairs if s.points]  # none: not sent
        data = MetricsData([ResourceMetrics(self.resource, [ScopeMetrics(SCOPE, metrics, "")], "")])
        try:
            result = self.exporter.export(data, timeout_millis=self.timeout * 1000)
        except Exception as error:  # an exporter bug must not stop the pushes
            log.warning("OTLP metrics export failed: %s", error)
            result = MetricExportResult.FAILURE
        accepted = result == MetricExportResult.SUCCESS
        self.counts["accepted" if accepted else "failed"] += 1
        if accepted and self.delta is not None and values is not None:
            self.delta.commit(values, now)
        return accepted

    def _metric(self, cumulative: Series, delta: Series, now: int) -> Metric:
        if cumulative.kind == "gauge":
            points = [_number(labels, v, 0, now) for labels, v in cumulative.points.items()]
            return Metric(cumulative.name, cumulative.description, cumulative.unit, Gauge(points))
        temporality = self.counters if cumulative.kind == "sum" else self.histograms
        chosen = delta if temporality == DELTA else cumulative
        start = self.started
        if temporality == DELTA and self.delta is not None:
            start = self.delta.at
        if cumulative.kind == "sum":
            numbers = [_number(labels, v, start, now) for labels, v in chosen.points.items()]
            data: Sum | Histogram = Sum(numbers, temporality, True)
        else:
            hists = [_histogram(labels, v, start, now) for labels, v in chosen.points.items()]
            data = Histogram(hists, temporality)
        return Metric(cumulative.name, cumulative.description, cumulative.unit, data)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="otlp-metrics", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        failing = False
        while not self._stop.wait(self.interval):
            accepted = self.push()
            if accepted == failing:  # log the changes only, not every failed export
                failing = not accepted
                what = "failing: each next export sends every count again" if failing else "ok"
                log.log(logging.WARNING if failing else logging.INFO, "OTLP metrics %s", what)

    def shutdown(self, *, final: bool = True) -> None:
        """Stop the thread; with `final`, one last export of what was read until now."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout + 5)
        if final:
            self.push()
        self.exporter.shutdown()


def _number(labels: Labels, value: Value, start: int, now: int) -> NumberDataPoint:
    assert not isinstance(value, Hist)
    number: int | float = int(value) if value.is_integer() else value
    return NumberDataPoint(dict(labels), start, now, number)


def _histogram(labels: Labels, value: Value, start: int, now: int) -> HistogramDataPoint:
    assert isinstance(value, Hist)
    counts = [int(c) for c in value.counts]
    none: float = None  # type: ignore[assignment]  # min and max: not known, so not sent
    return HistogramDataPoint(
        dict(labels), start, now, sum(counts), value.total, counts, list(value.bounds), none, none
    )


def pusher(
    registry: Collector,
    environ: Mapping[str, str],
    *,
    user: str | None,
    state_dir: Path | None,
    started: float,
) -> Pusher:
    """A `Pusher` of `registry` to the endpoint OTEL_* names; `ValueError` for a bad variable."""
    from .resource import resource

    found = resource(environ, user, state_dir)
    temporalities(environ)  # a bad variable stops before anything else is built
    return Pusher(
        registry, metric_exporter(environ), found, environ, started=started, state_dir=state_dir
    )

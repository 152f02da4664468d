"""The OpenTelemetry SDK, wired in this one place from the standard OTEL_* environment.

OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT   where spans go
OTEL_EXPORTER_OTLP_PROTOCOL / ..._TRACES_PROTOCOL   http/protobuf (default) or grpc
OTEL_EXPORTER_OTLP_HEADERS, ..._TIMEOUT, ..._COMPRESSION  read by the OTLP exporters
OTEL_SERVICE_NAME (default coding-agent-exporter), OTEL_RESOURCE_ATTRIBUTES
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

from . import __version__
from .semconv import SCHEMA_URL
from .traces import NEXT_IDS

SERVICE_NAME = "coding-agent-exporter"


def endpoint_configured(environ: Mapping[str, str]) -> bool:
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


class DeterministicIds(IdGenerator):
    """Hands out the ids `traces.SpanWriter` derived from record ids; random ones otherwise."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_span_id(self) -> int:
        ids = NEXT_IDS.get()
        return ids[1] if ids else self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        ids = NEXT_IDS.get()
        return ids[0] if ids else self._random.generate_trace_id()


class CountingExporter(SpanExporter):
    """Counts what the wrapped exporter sent and what it failed to send."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter bug must not kill the export thread
            result = SpanExportResult.FAILURE
        with self._lock:
            self.counts["exported" if result == SpanExportResult.SUCCESS else "failed"] += len(
                spans
            )
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def otlp_exporter(environ: Mapping[str, str]) -> SpanExporter:
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    if protocol != "http/protobuf":
        raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: use grpc or http/protobuf")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HTTPSpanExporter,
    )

    return HTTPSpanExporter()


def tracer_provider(
    environ: Mapping[str, str], exporter: SpanExporter, *, batch: bool = True
) -> TracerProvider:
    attributes = {"service.name": environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME}
    attributes["service.version"] = __version__
    resource = Resource.create(attributes)
    provider = TracerProvider(resource=resource, id_generator=DeterministicIds())
    if batch:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    else:
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def tracer(provider: TracerProvider) -> trace.Tracer:
    return provider.get_tracer("coding-agent-exporter", __version__, schema_url=SCHEMA_URL)

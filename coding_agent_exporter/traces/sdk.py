"""The OpenTelemetry SDK, wired in this one place from the standard OTEL_* environment.

OTEL_EXPORTER_OTLP_ENDPOINT / OTEL_EXPORTER_OTLP_TRACES_ENDPOINT   where spans go
OTEL_EXPORTER_OTLP_PROTOCOL / ..._TRACES_PROTOCOL   http/protobuf (default) or grpc
OTEL_EXPORTER_OTLP_HEADERS, ..._TIMEOUT, ..._COMPRESSION  read by the OTLP exporters
OTEL_EXPORTER_OTLP_CERTIFICATE, ..._CLIENT_CERTIFICATE, ..._CLIENT_KEY  TLS, ditto
OTEL_SERVICE_NAME (default coding-agent-exporter), OTEL_RESOURCE_ATTRIBUTES
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import requests
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

from .. import __version__
from .semconv import CONVERSATION_ID, SCHEMA_URL
from .spool import Spool
from .turns import NEXT_IDS

SERVICE_NAME = "coding-agent-exporter"


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


class Ledger(Protocol):
    def admit(self, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]: ...


class CountingExporter(SpanExporter):
    """Counts what the wrapped exporter sent and what it failed to send; with a `ledger`
    (`checkpoint.Checkpoint`), spans it says were sent before are not sent again; with a
    `spool`, a batch is kept until the endpoint accepted it and sent again by `retry`."""

    def __init__(
        self, inner: SpanExporter, ledger: Ledger | None = None, spool: Spool | None = None
    ) -> None:
        self.inner, self.ledger, self.spool = inner, ledger, spool
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._waiting()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.ledger is not None:
            spans = self.ledger.admit(spans)
            if not spans:
                return SpanExportResult.SUCCESS
        kept = self.spool.put(spans) if self.spool is not None else None
        result = self._send(spans)
        if self.spool is not None and kept is not None and result == SpanExportResult.SUCCESS:
            self.spool.done(kept, len(spans))
        self._waiting()
        return result

    def retry(self) -> None:
        """Send again, oldest first, what the endpoint refused before, until it refuses one."""
        spool = self.spool
        if spool is None:
            return
        for path in spool.pending():
            spans = spool.load(path)
            if spans is None:
                continue
            if self._send(spans) != SpanExportResult.SUCCESS:
                break
            spool.done(path, len(spans))
        self._waiting()

    def _send(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter bug must not kill the export thread
            result = SpanExportResult.FAILURE
        accepted = result == SpanExportResult.SUCCESS
        self.count("exported" if accepted else "failed", len(spans))
        if self.spool is not None:
            self.spool.accepted() if accepted else self.spool.failed()
        return result

    def _waiting(self) -> None:
        if self.spool is not None:
            with self._lock:
                self.counts["waiting"] = self.spool.waiting
                self.counts["dropped_spooled"] = self.spool.dropped

    def count(self, what: str, n: int) -> None:
        with self._lock:
            self.counts[what] += n

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class JsonLinesExporter(SpanExporter):
    """OTLP/JSON to a file: one ExportTraceServiceRequest per line, ids in hex as OTLP/JSON
    wants them (the format of the OpenTelemetry Collector's file exporter)."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("w", encoding="utf-8")

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        request = MessageToDict(encode_spans(spans))
        self.file.write(json.dumps(_hex_ids(request), separators=(",", ":")) + "\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.file.close()


def _hex_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: base64.b64decode(v).hex() if k in _ID_KEYS and isinstance(v, str) else _hex_ids(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})


def otlp_protocol(environ: Mapping[str, str], signal: str) -> str:
    """`grpc` or `http/protobuf` (the default), from OTEL_EXPORTER_OTLP_<SIGNAL>_PROTOCOL or else
    OTEL_EXPORTER_OTLP_PROTOCOL; `ValueError` naming the variable for any other value."""
    for name in (f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = environ.get(name)
        if protocol:
            if protocol not in ("grpc", "http/protobuf"):
                raise ValueError(f"{name}={protocol!r}: use grpc or http/protobuf")
            return protocol
    return "http/protobuf"


def otlp_exporter(environ: Mapping[str, str]) -> SpanExporter:
    if otlp_protocol(environ, "TRACES") == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HTTPSpanExporter,
    )

    return HTTPSpanExporter(session=KeepsItsCA())


class KeepsItsCA(requests.Session):
    """A session whose own CA file (OTEL_EXPORTER_OTLP_CERTIFICATE) wins: plain requests lets
    REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE replace it (psf/requests#3829), so on a machine that
    sets either, the endpoint's certificate would be checked against the wrong authorities."""

    def merge_environment_settings(
        self,
        url: str,
        proxies: Any,
        stream: Any,
        verify: Any,
        cert: Any,
    ) -> dict[str, Any]:
        settings: dict[str, Any] = super().merge_environment_settings(
            url, proxies, stream, verify, cert
        )
        if verify is None and isinstance(self.verify, str):
            settings["verify"] = self.verify
        return settings


class QueueProcessor(SpanProcessor):
    """Ended spans go into a bounded queue that one thread sends in batches.

    Reading files and serving /metrics never wait for the endpoint: when the queue is full
    (the endpoint is down or slow), new spans are dropped and counted. The OTLP exporters
    retry with backoff themselves; a batch they give up on is counted as failed and, with a
    spool (`spool`), sent again from it once its pause is over, by this same thread.
    """

    def __init__(self, exporter: CountingExporter, environ: Mapping[str, str]) -> None:
        self.exporter = exporter
        self.max_queue = int(environ.get("OTEL_BSP_MAX_QUEUE_SIZE") or 10_000)
        self.batch = int(environ.get("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") or 512)
        self.delay = int(environ.get("OTEL_BSP_SCHEDULE_DELAY") or 1000) / 1000
        self._queue: deque[ReadableSpan] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="otlp-export", daemon=True)
        self._thread.start()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            if len(self._queue) >= self.max_queue:
                self.exporter.count("dropped", 1)
                return
            self._queue.append(span)
            if len(self._queue) >= self.batch:
                self._wake.set()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self.delay)
            self._wake.clear()
            self._drain()
            spool = self.exporter.spool
            if spool is not None and spool.waiting > 0 and time.monotonic() >= spool.retry_at:
                self.exporter.retry()

    def _drain(self) -> None:
        while True:
            with self._lock:
                batch = [self._queue.popleft() for _ in range(min(self.batch, len(self._queue)))]
            if not batch:
                return
            self.exporter.export(batch)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self._drain()
        return True

    def shutdown(self) -> None:
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=30)
        self._drain()
        self.exporter.shutdown()


def tracer_provider(
    environ: Mapping[str, str],
    exporter: SpanExporter,
    *,
    batch: bool = True,
    resource: Resource | None = None,
) -> TracerProvider:
    """With no `resource`, the service's alone (`otlp.resource` adds the machine and user)."""
    if resource is None:
        attributes = {"service.name": environ.get("OTEL_SERVICE_NAME") or SERVICE_NAME}
        attributes["service.version"] = __version__
        resource = Resource.create(attributes)
    provider = TracerProvider(resource=resource, id_generator=DeterministicIds())
    if batch:
        counting = (
            exporter if isinstance(exporter, CountingExporter) else CountingExporter(exporter)
        )
        provider.add_span_processor(QueueProcessor(counting, environ))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def tracer(provider: TracerProvider) -> trace.Tracer:
    return provider.get_tracer("coding-agent-exporter", __version__, schema_url=SCHEMA_URL)


class Recent(SpanExporter):
    """Keeps the spans of the last `traces` traces to end (whole), in memory; counts the turns
    (root spans) by session. What a replay for the console records (`runtime.replay`)."""

    def __init__(self, traces: int) -> None:
        self.traces = traces
        self.kept: OrderedDict[int, list[ReadableSpan]] = OrderedDict()
        self.turns: Counter[str] = Counter()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            trace_id = span.context.trace_id
            self.kept.setdefault(trace_id, []).append(span)
            self.kept.move_to_end(trace_id)
            if span.parent is None:
                self.turns[str((span.attributes or {}).get(CONVERSATION_ID, ""))] += 1
        while len(self.kept) > self.traces:
            self.kept.popitem(last=False)
        return SpanExportResult.SUCCESS


def recording(traces: int) -> tuple[trace.Tracer, Recent]:
    """A tracer whose spans stay in memory as they end (those of the last `traces` traces):
    the console's replay of a session (`runtime.replay`). Nothing is sent anywhere."""
    kept = Recent(traces)
    return tracer(tracer_provider({}, kept, batch=False)), kept

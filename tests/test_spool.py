"""The spool of spans the endpoint has not accepted (`traces.spool`): kept as they were,
bounded, read back after a restart, a damaged batch set aside."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from coding_agent_exporter.traces import spool as spool_module
from coding_agent_exporter.traces.sdk import CountingExporter
from coding_agent_exporter.traces.spool import Spool

from .conftest import FIXTURES
from .test_traces import spans_for

HANDBACK = FIXTURES / "claude-code/2.1.332/handback-auto/home"  # links, sub-agents, statuses


@pytest.fixture(scope="module")
def spans() -> list[ReadableSpan]:
    return spans_for(HANDBACK)


def test_a_batch_reads_back_as_the_same_otlp_request(
    spans: list[ReadableSpan], tmp_path: Path
) -> None:
    spool = Spool(tmp_path)
    kept = spool.put(spans)
    assert kept is not None and spool.waiting == len(spans)
    loaded = Spool(tmp_path).load(kept)  # as a restart finds it
    assert loaded is not None
    assert encode_spans(loaded) == encode_spans(spans)


def test_a_restart_counts_what_waits_and_numbers_on(
    spans: list[ReadableSpan], tmp_path: Path
) -> None:
    first = Spool(tmp_path)
    a, b = first.put(spans[:2]), first.put(spans[2:3])
    again = Spool(tmp_path)
    assert again.waiting == 3 and again.pending() == [a, b]
    c = again.put(spans[:1])
    assert again.pending() == [a, b, c]
    assert a is not None
    again.done(a, 2)
    assert again.waiting == 2


def test_the_oldest_batches_go_when_the_bound_is_reached(
    spans: list[ReadableSpan], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool_module, "MAX_BATCHES", 2)
    spool = Spool(tmp_path)
    paths = [spool.put(spans[:1]), spool.put(spans[:2]), spool.put(spans[:3])]
    assert spool.pending() == paths[1:]
    assert (spool.dropped, spool.waiting) == (1, 5)


def test_a_damaged_batch_is_set_aside(tmp_path: Path, spans: list[ReadableSpan]) -> None:
    spool = Spool(tmp_path)
    kept = spool.put(spans)
    assert kept is not None
    kept.write_text('{"spans": [{"name": 1}]}')
    assert spool.load(kept) is None
    assert spool.pending() == [] and kept.with_suffix(".bad").exists()


class _Down(SpanExporter):
    """An endpoint that refuses until told it is up."""

    def __init__(self) -> None:
        self.up = False
        self.memory = InMemorySpanExporter()

    def export(self, spans: object) -> SpanExportResult:
        if not self.up:
            return SpanExportResult.FAILURE
        return self.memory.export(spans)  # type: ignore[arg-type]


def test_what_was_refused_is_sent_again_once_the_endpoint_is_up(
    spans: list[ReadableSpan], tmp_path: Path
) -> None:
    endpoint = _Down()
    exporter = CountingExporter(endpoint, spool=Spool(tmp_path))
    assert exporter.export(spans[:3]) == SpanExportResult.FAILURE
    assert exporter.export(spans[3:]) == SpanExportResult.FAILURE
    exporter.retry()  # still down: the first refuses, the rest waits
    assert exporter.counts["waiting"] == len(spans)
    assert exporter.spool is not None and exporter.spool.pause == 4.0  # 1, 2, 4: doubling
    endpoint.up = True
    exporter.retry()
    sent = endpoint.memory.get_finished_spans()
    assert [s.context.span_id for s in sent] == [s.context.span_id for s in spans]
    assert exporter.counts["waiting"] == 0 and exporter.counts["exported"] == len(spans)
    assert exporter.spool.pending() == [] and exporter.spool.pause == 0.0

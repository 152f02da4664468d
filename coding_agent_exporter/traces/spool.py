"""Spans the endpoint has not accepted yet, kept in the exporter's state folder until it does.

A batch taken for sending is first written here (one file per batch, `<sequence>.json`, written
atomically), then sent, and deleted once the endpoint accepted it. A batch the endpoint refused
(down, unreachable, an error status) stays, and is sent again, oldest first, after a pause that
doubles with each failure (`RETRY_FIRST` to `RETRY_MAX`), while serving and after a restart,
which finds it first. At most `MAX_BATCHES` wait: beyond, the oldest is deleted and its spans
counted as dropped. Nothing taken for sending is lost; a kill after a send and before its file
is deleted sends that batch once more (the same trace and span ids). Never in an agent's folder.

A batch is kept as plain JSON (names, ids in hex, times, attributes, status, links, events,
the resource and scope): the SDK's spans are rebuilt from it as they were.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from ..sources import statedir

log = logging.getLogger(__name__)
FOLDER = "traces-spool"
MAX_BATCHES = 2_000
"""Batches kept at most (512 spans each by default: about a million spans)."""
RETRY_FIRST = 1.0
RETRY_MAX = 300.0


class Spool:
    """The batches of one state folder that the endpoint has not accepted."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder / FOLDER
        self.dropped = 0  # spans of batches deleted at the bound, since start
        self._lock = threading.Lock()
        files = self._files()
        self._next = 1 + max((_sequence(p) for p in files), default=0)
        self.waiting = sum(_count(p) for p in files)  # spans in it (read once, at start)
        self.pause = 0.0  # between tries, doubled by each failure
        self.retry_at = 0.0  # monotonic time of the next try (a start tries at once)

    def put(self, spans: Sequence[ReadableSpan]) -> Path | None:
        """Keep `spans` until `done`; None (logged) when the folder cannot be written."""
        with self._lock:
            path = self.folder / f"{self._next:016d}.json"
            self._next += 1
        try:
            statedir.write(path, json.dumps(_batch(spans), separators=(",", ":")))
        except OSError as error:
            log.warning("traces spool %s not written (%s): spans sent without a copy", path, error)
            return None
        with self._lock:
            self.waiting += len(spans)
        self._bound()
        return path

    def done(self, path: Path, spans: int) -> None:
        """The endpoint accepted the batch of `spans` spans."""
        try:
            path.unlink()
        except FileNotFoundError:
            return
        except OSError as error:
            log.warning("traces spool %s not removed: %s", path, error)
            return
        with self._lock:
            self.waiting -= spans

    def pending(self) -> list[Path]:
        """The batches waiting, oldest first."""
        return sorted(self._files(), key=_sequence)

    def load(self, path: Path) -> list[ReadableSpan] | None:
        """The spans of a batch as they were; None (logged, the file set aside) when it is
        damaged."""
        try:
            return _spans(_read(path))
        except (OSError, ValueError, KeyError, TypeError, IndexError) as error:
            log.warning("traces spool %s damaged (%r): set aside as .bad", path, error)
            with suppress(OSError):
                os.replace(path, path.with_suffix(".bad"))
            return None

    def failed(self) -> None:
        self.pause = min(RETRY_MAX, max(RETRY_FIRST, 2 * self.pause))
        self.retry_at = time.monotonic() + self.pause

    def accepted(self) -> None:
        self.pause = self.retry_at = 0.0

    def _files(self) -> list[Path]:
        try:
            return [p for p in self.folder.iterdir() if p.suffix == ".json" and p.stem.isdigit()]
        except OSError:
            return []

    def _bound(self) -> None:
        waiting = self.pending()
        for path in waiting[: max(0, len(waiting) - MAX_BATCHES)]:
            count = _count(path)
            try:
                path.unlink()
            except OSError:
                continue
            with self._lock:
                self.dropped += count
                self.waiting -= count
            log.warning("traces spool full (%d batches): dropped %s", MAX_BATCHES, path.name)


def _sequence(path: Path) -> int:
    return int(path.stem)


def _count(path: Path) -> int:
    try:
        return len(_read(path).get("spans", ()))
    except (OSError, ValueError):
        return 0


def _read(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError("not a batch")
    return data


def _batch(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    first = spans[0] if spans else None
    scope = first.instrumentation_scope if first is not None else None
    return {
        "resource": dict(first.resource.attributes) if first is not None else {},
        "scope": [scope.name, scope.version, scope.schema_url] if scope is not None else None,
        "spans": [_record(span) for span in spans],
    }


def _record(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None  # every span the SDK ends has one
    return {
        "name": span.name,
        "trace": f"{context.trace_id:032x}",
        "span": f"{context.span_id:016x}",
        "parent": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "kind": span.kind.value,
        "start": span.start_time,
        "end": span.end_time,
        "attributes": dict(span.attributes or {}),
        "status": [span.status.status_code.value, span.status.description],
        "links": [
            [f"{link.context.trace_id:032x}", f"{link.context.span_id:016x}", _plain(link)]
            for link in span.links
        ],
        "events": [[e.name, e.timestamp, dict(e.attributes or {})] for e in span.events],
    }


def _plain(link: Link) -> dict[str, Any]:
    return dict(link.attributes or {})


def _spans(data: dict[str, Any]) -> list[ReadableSpan]:
    resource = Resource(data["resource"])
    scope = InstrumentationScope(*data["scope"]) if data.get("scope") else None
    return [_span(record, resource, scope) for record in data["spans"]]


def _span(
    record: dict[str, Any], resource: Resource, scope: InstrumentationScope | None
) -> ReadableSpan:
    trace_id = int(record["trace"], 16)
    parent = record["parent"]
    code, description = record["status"]
    return ReadableSpan(
        name=record["name"],
        context=_context(trace_id, int(record["span"], 16)),
        parent=_context(trace_id, int(parent, 16)) if parent else None,
        resource=resource,
        attributes=_attributes(record["attributes"]),
        events=[Event(n, _attributes(a), timestamp=t) for n, t, a in record["events"]],
        links=[
            Link(_context(int(t, 16), int(s, 16)), _attributes(a)) for t, s, a in record["links"]
        ],
        kind=SpanKind(record["kind"]),
        status=Status(StatusCode(code), description),
        start_time=record["start"],
        end_time=record["end"],
        instrumentation_scope=scope,
    )


def _context(trace_id: int, span_id: int) -> SpanContext:
    return SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1))


def _attributes(values: dict[str, Any]) -> dict[str, Any]:
    """JSON gave lists where the SDK held tuples (sequences of one type)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}

"""A session's turns for the console: the spans `traces` makes, one tree per turn, as JSON.

Each turn is a trace whose root is the `invoke_agent` span of the turn (no parent); every span
of the trace is listed with its parent, so a page draws the tree as a waterfall. Times are epoch
milliseconds, ids lowercase hex as in OTLP/JSON, attributes those of the span (content only when
`--traces.capture-content` put it there).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

from . import semconv as sc

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

TOKENS = {
    "input": sc.USAGE_INPUT_TOKENS,
    "output": sc.USAGE_OUTPUT_TOKENS,
    "cache_read": sc.USAGE_CACHE_READ_INPUT_TOKENS,
    "cache_write": sc.USAGE_CACHE_CREATION_INPUT_TOKENS,
    "reasoning": sc.USAGE_REASONING_OUTPUT_TOKENS,
}


def turns(
    traces: Iterable[list[ReadableSpan]], session_id: str, running: Collection[int]
) -> list[dict[str, Any]]:
    """The turns of `session_id` among `traces` (each the spans of one trace), oldest first;
    those whose trace id is in `running` had not ended."""
    found = []
    for spans in traces:
        root = next((s for s in spans if s.parent is None), None)
        if root is None or _attrs(root).get(sc.CONVERSATION_ID) != session_id:
            continue
        found.append(_turn(root, spans, root.context.trace_id in running))
    found.sort(key=lambda t: (t["start_ms"], t["trace_id"]))
    return found


def _turn(root: ReadableSpan, spans: list[ReadableSpan], running: bool) -> dict[str, Any]:
    attrs = _attrs(root)
    rest = sorted((s for s in spans if s is not root), key=lambda s: (s.start_time or 0, s.name))
    return {
        "trace_id": f"{root.context.trace_id:032x}",
        "span_id": f"{root.context.span_id:016x}",
        "start_ms": _ms(root.start_time),
        "end_ms": _ms(root.end_time),
        "outcome": "running" if running else attrs.get(sc.TURN_OUTCOME, "completed"),
        "trigger": attrs.get(sc.TURN_TRIGGER, "prompt"),
        "model": attrs.get(sc.REQUEST_MODEL),
        "tokens": _tokens(attrs),
        "spans": [_span(s) for s in (root, *rest)],
    }


def _span(span: ReadableSpan) -> dict[str, Any]:
    attrs = _attrs(span)
    operation = attrs.get(sc.OPERATION_NAME) or span.name.split(" ", 1)[0]
    return {
        "span_id": f"{span.context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "name": span.name,
        "operation": operation,
        "start_ms": _ms(span.start_time),
        "end_ms": _ms(span.end_time),
        "error": span.status.status_code.name == "ERROR",
        "tokens": _tokens(attrs) if operation in (sc.OP_CHAT, sc.OP_INVOKE_AGENT) else None,
        "attributes": attrs,
    }


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in (span.attributes or {}).items()}


def _tokens(attrs: dict[str, Any]) -> dict[str, int]:
    return {name: int(attrs.get(key, 0)) for name, key in TOKENS.items()}


def _ms(ns: int | None) -> float | None:
    return None if ns is None else ns / 1e6

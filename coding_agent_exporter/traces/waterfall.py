"""A session's turns for the console: the spans `traces` makes, one tree per turn, as JSON.

Each turn is a trace whose root is the `invoke_agent` span of the turn (no parent); every span
of the trace is listed with its parent, so a page draws the tree as a waterfall. A turn is
either sent (its spans ended: `finished`) or under way (its spans as they stand, none ended:
`under_way`, from `turns.Tree.parts`; a wait for the user under way is one more span, `waiting`).
Times are epoch milliseconds, ids lowercase hex as in OTLP/JSON, attributes those of the span
(content only when `--traces.capture-content` put it there).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, cast

from ..events import Usage
from . import semconv as sc
from .turns import ns

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import Span, SpanContext

TOKENS = {
    "input": sc.USAGE_INPUT_TOKENS,
    "output": sc.USAGE_OUTPUT_TOKENS,
    "cache_read": sc.USAGE_CACHE_READ_INPUT_TOKENS,
    "cache_write": sc.USAGE_CACHE_CREATION_INPUT_TOKENS,
    "reasoning": sc.USAGE_REASONING_OUTPUT_TOKENS,
}


@dataclass(frozen=True, slots=True)
class Shown:
    """A span as the console draws it (times in ns)."""

    trace_id: int
    span_id: int
    parent_id: int | None
    name: str
    start: int
    end: int
    error: bool
    attributes: dict[str, Any]
    usage: Usage | None = None  # of a span under way (a sent one has it in its attributes)


@dataclass(frozen=True, slots=True)
class UnderWay:
    """A turn not sent yet: its spans as they stand, and its outcome (`running` while open)."""

    outcome: str
    model: str | None
    spans: list[Shown]


def finished(span: ReadableSpan) -> Shown:
    parent = span.parent.span_id if span.parent is not None else None
    return Shown(
        span.context.trace_id,
        span.context.span_id,
        parent,
        span.name,
        span.start_time or 0,
        span.end_time or span.start_time or 0,
        span.status.status_code.name == "ERROR",
        _attrs(span.attributes),
    )


def under_way(parts: Iterable[tuple[Span, float, Usage | None]]) -> list[Shown]:
    """`Tree.parts`: spans started and not ended (SDK spans: readable while open)."""
    found = []
    for span, end, usage in parts:
        shown = finished(cast("ReadableSpan", span))
        found.append(replace(shown, end=max(shown.start, ns(end)), usage=usage))
    return found


def waiting(where: tuple[SpanContext, int, str, dict[str, str]], start: float, now: float) -> Shown:
    """A wait for the user under way (`SpanWriter.wait_under_way`), ending `now`."""
    parent, span_id, name, attributes = where
    return Shown(
        parent.trace_id, span_id, parent.span_id, name, ns(start), ns(now), False, attributes
    )


def turns(
    sent: Iterable[list[ReadableSpan]],
    open_turns: Iterable[UnderWay],
    session_id: str,
    more: Iterable[Shown] = (),
) -> list[dict[str, Any]]:
    """The turns of `session_id` among the traces `sent` and those under way, oldest first,
    with `more` spans in the traces they name (a wait under way)."""
    extra: dict[int, list[Shown]] = {}
    for span in more:
        extra.setdefault(span.trace_id, []).append(span)
    found = []
    for spans in sent:
        shown = [finished(s) for s in spans]
        root = next((s for s in shown if s.parent_id is None), None)
        if root is not None and root.attributes.get(sc.CONVERSATION_ID) == session_id:
            outcome = root.attributes.get(sc.TURN_OUTCOME, "completed")
            shown += extra.get(root.trace_id, [])
            found.append(_turn(root, shown, outcome, root.attributes.get(sc.REQUEST_MODEL)))
    for turn in open_turns:
        root = turn.spans[0]
        if root.attributes.get(sc.CONVERSATION_ID) == session_id:
            parts = turn.spans + extra.get(root.trace_id, [])
            found.append(_turn(root, parts, turn.outcome, turn.model))
    found.sort(key=lambda t: (t["start_ms"], t["trace_id"]))
    return found


def _turn(root: Shown, spans: list[Shown], outcome: str, model: str | None) -> dict[str, Any]:
    rest = sorted((s for s in spans if s is not root), key=lambda s: (s.start, s.name))
    return {
        "trace_id": f"{root.trace_id:032x}",
        "span_id": f"{root.span_id:016x}",
        "start_ms": root.start / 1e6,
        "end_ms": root.end / 1e6,
        "outcome": outcome,
        "trigger": root.attributes.get(sc.TURN_TRIGGER, "prompt"),
        "model": model,
        "tokens": _tokens(root),
        "spans": [_span(s) for s in (root, *rest)],
    }


def _span(span: Shown) -> dict[str, Any]:
    operation = span.attributes.get(sc.OPERATION_NAME) or span.name.split(" ", 1)[0]
    counted = operation in (sc.OP_CHAT, sc.OP_INVOKE_AGENT)
    return {
        "span_id": f"{span.span_id:016x}",
        "parent_id": f"{span.parent_id:016x}" if span.parent_id is not None else None,
        "name": span.name,
        "operation": operation,
        "start_ms": span.start / 1e6,
        "end_ms": span.end / 1e6,
        "error": span.error,
        "tokens": _tokens(span) if counted else None,
        "attributes": span.attributes,
    }


def _attrs(attributes: Any) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in (attributes or {}).items()}


def _tokens(span: Shown) -> dict[str, int]:
    if span.usage is not None:
        usage = span.usage
        values = (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.reasoning)
        return dict(zip(TOKENS, values, strict=True))
    return {name: int(span.attributes.get(key, 0)) for name, key in TOKENS.items()}

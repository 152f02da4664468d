"""A turn's spans while it is read: started as its work comes, ended together once complete.

`SpanWriter` (`spans`) starts each span as the records tell the work and keeps it in its turn's
`Tree`; `Tree.send` ends them all once the turn is complete (see `spans`), each chat with the
largest usage its records gave and each `invoke_agent` span with the sum of the usage of the
chats beneath it; `Starter` starts a span under the ids derived for it (`NEXT_IDS`, which the
SDK's id generator reads) and ends one with its turn. Only the OpenTelemetry API: the SDK is
wired in `sdk`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
)

from ..events import Usage
from ..state.session import ZERO, Session
from . import semconv as sc
from .redact import redact

__all__ = [
    "MAX_HELD",
    "NEXT_IDS",
    "Chat",
    "Held",
    "Key",
    "Starter",
    "Sub",
    "Tree",
    "messages",
    "ns",
    "usage_attributes",
]

MAX_HELD = 10_000
"""Tool-call contexts, held sub-agent work and held lead work kept at most (oldest dropped)."""
Key = tuple[str, str]  # (agent, session id)


def ns(at: float) -> int:
    return round(at * 1_000_000_000)


def messages(role: str, text: str) -> str:
    """A GenAI semconv message list with one text part, as the JSON string attribute."""
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": redact(text)}]}])


def usage_attributes(usage: Usage) -> dict[str, int]:
    return {
        sc.USAGE_INPUT_TOKENS: usage.input,
        sc.USAGE_OUTPUT_TOKENS: usage.output,
        sc.USAGE_CACHE_READ_INPUT_TOKENS: usage.cache_read,
        sc.USAGE_CACHE_CREATION_INPUT_TOKENS: usage.cache_write,
        sc.USAGE_REASONING_OUTPUT_TOKENS: usage.reasoning,
    }


@dataclass(slots=True)
class Chat:
    span: Span
    owner: int  # the span id of the invoke_agent it is beneath
    usage: Usage
    end: float
    text: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Tree:
    """A turn's spans, started, ended together when the turn is complete."""

    root: Span
    context: SpanContext
    start: float
    ended_at: float | None = None  # when the turn ended
    outcome: str = ""
    model: str | None = None
    open_subs: int = 0  # sub-agent spans begun in it and not ended
    chats: dict[str, Chat] = field(default_factory=dict)  # by response id
    ends: dict[int, tuple[Span, float, float | None]] = field(default_factory=dict)
    """Its spans but the root and the chats, by span id: (span, start, end if known)."""
    invokes: dict[int, int | None] = field(default_factory=dict)  # sub-agent span → its owner
    members: list[int | str] = field(default_factory=list)  # its sub-agents (id) and tool calls
    subs: dict[int, Sub] = field(default_factory=dict)  # its sub-agents' spans, by span id

    @property
    def trace_id(self) -> int:
        return self.context.trace_id

    @property
    def complete(self) -> bool:
        return self.ended_at is not None and self.open_subs == 0

    def send(self, capture: bool) -> list[str]:
        """End every span (the root last), the invoke_agent ones with the usage of the chats
        beneath them; the response ids of its chats."""
        sums = self.sums()
        for chat in self.chats.values():
            if capture and chat.text:
                chat.span.set_attribute(
                    sc.OUTPUT_MESSAGES, messages("assistant", "\n".join(chat.text))
                )
            chat.span.set_attributes(usage_attributes(chat.usage))
            chat.span.end(ns(chat.end))
        end = self.ended_at if self.ended_at is not None else self.start
        for span_id, (span, at) in self._ends(end).items():
            if span_id in self.invokes:
                span.set_attributes(usage_attributes(sums.get(span_id, ZERO)))
            span.end(ns(at))
        root = self.root
        if self.model:
            root.set_attribute(sc.REQUEST_MODEL, self.model)
        root.set_attributes(usage_attributes(sums.get(self.context.span_id, ZERO)))
        root.set_attribute(sc.TURN_OUTCOME, self.outcome or "interrupted")
        if self.outcome == "failed":
            root.set_status(Status(StatusCode.ERROR, "the turn ended in an API error"))
        root.end(ns(end))  # the checkpoint notes the turn when this span is sent
        return list(self.chats)

    def sums(self) -> dict[int, Usage]:
        """Each invoke_agent span's usage (the root's too): the sum of the chats beneath it."""
        sums: dict[int, Usage] = {}
        for chat in self.chats.values():
            owner: int | None = chat.owner
            while owner is not None:
                sums[owner] = sums.get(owner, ZERO).plus(chat.usage)
                owner = self.invokes.get(owner)
        return sums

    def _ends(self, end: float) -> dict[int, tuple[Span, float]]:
        """Its spans but the root and the chats, each with its end: still open, the turn's."""
        return {
            span_id: (span, at if at is not None else max(end, start))
            for span_id, (span, start, at) in self.ends.items()
        }

    def parts(self, now: float) -> list[tuple[Span, float, Usage | None]]:
        """Its spans as they stand, none ended (a view of a turn under way): each with its end
        (work still open: `now`, or the turn's end) and, for a chat or an invoke_agent span,
        its usage; the root first."""
        sums = self.sums()
        end = self.ended_at if self.ended_at is not None else now
        found: list[tuple[Span, float, Usage | None]] = [
            (self.root, end, sums.get(self.context.span_id, ZERO))
        ]
        found += [(c.span, c.end, c.usage) for c in self.chats.values()]
        for span_id, (span, at) in self._ends(end).items():
            found.append((span, at, sums.get(span_id, ZERO) if span_id in self.invokes else None))
        return found


@dataclass(slots=True)
class Held:
    """Lead work read while no turn was open: when, a stable id, and how to do it again."""

    session: Session
    at: float
    key: str
    replay: Callable[[], None]


@dataclass(slots=True)
class Sub:
    span: Span
    span_id: int
    tree: int  # its turn's trace id
    subagent: object  # the state's record of it, kept so its id is not reused meanwhile
    ended: bool = False


NEXT_IDS: ContextVar[tuple[int, int] | None] = ContextVar("coding_agent_next_ids", default=None)
"""(trace id, span id) the SDK's id generator should hand out for the span being started."""


@contextmanager
def _ids(trace_id: int, span_id: int) -> Iterator[None]:
    token = NEXT_IDS.set((trace_id, span_id))
    try:
        yield
    finally:
        NEXT_IDS.reset(token)


class Starter:
    """How `SpanWriter` and its sub-agent part start a span (with the ids derived for it) and
    end one with its turn."""

    tracer: trace.Tracer

    def _start(
        self,
        name: str,
        parent: SpanContext | None,
        trace_id: int,
        span_id: int,
        at: float,
        attributes: Mapping[str, str | int | bool | list[str]],
        kind: SpanKind = SpanKind.INTERNAL,
        links: list[Link] | None = None,
    ) -> Span:
        context = None
        if parent is not None:
            context = trace.set_span_in_context(NonRecordingSpan(parent))
        with _ids(trace_id, span_id):
            return self.tracer.start_span(
                name,
                context=context,
                kind=kind,
                attributes=attributes,
                start_time=ns(at),
                links=links,
            )

    def _end(self, tree: Tree | None, span: Span, at: float, start: float | None = None) -> None:
        """End `span` at `at` with its turn, or now if its turn was sent already."""
        span_id = span.get_span_context().span_id
        if tree is None:
            span.end(ns(at))
        elif span_id in tree.ends:
            tree.ends[span_id] = (tree.ends[span_id][0], tree.ends[span_id][1], at)
        else:
            tree.ends[span_id] = (span, at if start is None else start, at)

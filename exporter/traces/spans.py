"""Spans from the work `State` counted: one trace per turn, with the OpenTelemetry API only.

    invoke_agent claude-code                  the turn, from the prompt to its end
    ├── chat claude-opus-4-8                  one model response: request sent → response written
    ├── execute_tool Bash                     a tool call: call → result
    │   └── wait permission prompt            the live index said the session waited for the user
    └── execute_tool Agent
        └── invoke_agent general-purpose      a sub-agent, with its own chat / tool spans

Every start and end time is a record's timestamp. Span and trace ids are derived from stable
record ids (session, prompt record, message, tool call), and a child finds its parent by
computing the parent's id, so the same turn always yields the same ids and the order in which
files are read does not change the tree. Work of a sub-agent whose launching call is not known
yet is held until it is. Turns that started before `since` are not sent (no history by default).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, Status, StatusCode

from ..events import ModelFailed, ModelResponded, ToolCallEnded, ToolCallStarted, Usage
from ..state import ids
from ..state.labels import ProjectLabel
from ..state.session import Session, Subagent
from . import semconv as sc
from .checkpoint import Checkpoint
from .redact import redact

NEXT_IDS: ContextVar[tuple[int, int] | None] = ContextVar("coding_agent_next_ids", default=None)
"""(trace id, span id) the SDK's id generator should hand out for the span being started."""
MAX_HELD = 10_000
"""Tool-call contexts and held sub-agent calls kept at most (oldest dropped first)."""


def _ns(at: float) -> int:
    return round(at * 1_000_000_000)


@contextmanager
def _ids(trace_id: int, span_id: int) -> Iterator[None]:
    token = NEXT_IDS.set((trace_id, span_id))
    try:
        yield
    finally:
        NEXT_IDS.reset(token)


@dataclass(slots=True)
class _Turn:
    context: SpanContext
    span: Span | None  # None once ended: later stray work still joins this trace
    tokens: Usage


@dataclass(slots=True)
class _Chat:
    span: Span
    message_id: str
    end: float
    text: list[str] = field(default_factory=list)


def _messages(role: str, text: str) -> str:
    """A GenAI semconv message list with one text part, as the JSON string attribute."""
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": redact(text)}]}])


def _usage_attributes(usage: Usage) -> dict[str, int]:
    return {
        sc.USAGE_INPUT_TOKENS: usage.input,
        sc.USAGE_OUTPUT_TOKENS: usage.output,
        sc.USAGE_CACHE_READ_INPUT_TOKENS: usage.cache_read,
        sc.USAGE_CACHE_CREATION_INPUT_TOKENS: usage.cache_write,
        sc.USAGE_REASONING_OUTPUT_TOKENS: usage.reasoning,
    }


class SpanWriter:
    """An `observer.Observer` that writes spans through `tracer`."""

    def __init__(
        self,
        tracer: trace.Tracer,
        project: ProjectLabel,
        *,
        since: float = 0.0,
        checkpoint: Checkpoint | None = None,
        capture: bool = False,
    ) -> None:
        self.tracer, self.project, self.since, self.capture = tracer, project, since, capture
        self.checkpoint = checkpoint or Checkpoint(None)
        self._turns: dict[tuple[str, str], _Turn | None] = {}
        self._tools: dict[str, Span] = {}
        self._tool_contexts: OrderedDict[str, SpanContext] = OrderedDict()
        self._subagents: dict[int, Span] = {}
        self._sub_contexts: OrderedDict[int, SpanContext] = OrderedDict()
        self._chats: dict[tuple[str, str, str], _Chat] = {}
        self._held: dict[int, list[Callable[[], None]]] = {}
        self._held_calls: dict[str, int] = {}  # tool call → the sub-agent whose work is held

    # -- turns ---------------------------------------------------------------------------------

    def turn_started(self, session: Session, at: float, record_id: str, prompt: str | None) -> None:
        key = (session.agent, session.session_id)
        trace_id = ids.turn_trace(*key, record_id)
        if at < self.since or trace_id in self.checkpoint:
            self._turns[key] = None
            return
        attributes = {
            sc.OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.AGENT_NAME: session.agent,
            sc.PROVIDER_NAME: sc.PROVIDERS.get(session.agent, session.agent),
            sc.CONVERSATION_ID: session.session_id,
            sc.PROJECT: self.project(session.cwd),
            sc.SESSION_KIND: session.kind or "interactive",
        }
        if self.capture and prompt:
            attributes[sc.INPUT_MESSAGES] = _messages("user", prompt)
        span = self._start(
            f"invoke_agent {session.agent}",
            None,
            trace_id,
            ids.turn_span(*key, record_id),
            at,
            attributes,
        )
        self._turns[key] = _Turn(span.get_span_context(), span, session.tokens)

    def turn_ended(self, session: Session, at: float, outcome: str) -> None:
        turn = self._turns.get((session.agent, session.session_id))
        self._close_lane(session, None)
        if turn is None or turn.span is None:
            return
        span, turn.span = turn.span, None
        if session.model:
            span.set_attribute(sc.REQUEST_MODEL, session.model)
        span.set_attributes(_usage_attributes(session.tokens.minus(turn.tokens)))
        span.set_attribute(sc.TURN_OUTCOME, outcome)
        if outcome == "failed":
            span.set_status(Status(StatusCode.ERROR, "the turn ended in an API error"))
        span.end(_ns(at))  # the checkpoint notes the turn when this span is sent

    # -- model calls ---------------------------------------------------------------------------

    def responded(
        self, session: Session, sub: Subagent | None, event: ModelResponded, usage: Usage
    ) -> None:
        if event.carried:
            return  # usage of responses whose records are gone: no call to show
        lane = self._lane(session, sub)
        chat = self._chats.get(lane)
        if chat is not None and chat.message_id == event.message_id:
            chat.span.set_attributes(_usage_attributes(usage))
            chat.end = max(chat.end, event.at)
            self._reply(chat, event.text)
            return
        parent = self._parent(session, sub, lambda: self.responded(session, sub, event, usage))
        self._close_lane(session, sub)
        if parent is None:
            return
        attributes: dict[str, str | int | list[str]] = {
            sc.OPERATION_NAME: sc.OP_CHAT,
            sc.PROVIDER_NAME: sc.PROVIDERS.get(session.agent, session.agent),
            sc.REQUEST_MODEL: event.model,
            sc.RESPONSE_MODEL: event.model,
            sc.RESPONSE_ID: event.message_id,
            **_usage_attributes(usage),
        }
        if event.finish_reason:
            attributes[sc.RESPONSE_FINISH_REASONS] = [event.finish_reason]
        start = min(event.requested_at or event.at, event.at)
        span = self._start(
            f"chat {event.model}",
            parent,
            parent.trace_id,
            ids.derive(8, "chat", event.message_id),
            start,
            attributes,
            kind=SpanKind.CLIENT,
        )
        self._chats[lane] = chat = _Chat(span, event.message_id, event.at)
        self._reply(chat, event.text)
        if sub is not None and sub.state != "running":
            self._close_lane(session, sub)  # read after its sub-agent ended: nothing follows

    def failed(self, session: Session, sub: Subagent | None, event: ModelFailed) -> None:
        parent = self._parent(session, sub, lambda: self.failed(session, sub, event))
        self._close_lane(session, sub)
        if parent is None:
            return
        model = event.model or session.model or "unknown"
        span = self._start(
            f"chat {model}",
            parent,
            parent.trace_id,
            ids.derive(8, "failed", session.session_id, str(event.at)),
            min(event.requested_at or event.at, event.at),
            {sc.OPERATION_NAME: sc.OP_CHAT, sc.REQUEST_MODEL: model, sc.ERROR_TYPE: event.error},
            kind=SpanKind.CLIENT,
        )
        span.set_status(Status(StatusCode.ERROR, f"API error {event.error}"))
        span.end(_ns(event.at))

    # -- tool calls ----------------------------------------------------------------------------

    def tool_started(self, session: Session, sub: Subagent | None, event: ToolCallStarted) -> None:
        call_id, tool, at = event.call_id, event.tool, event.at
        parent = self._parent(session, sub, lambda: self.tool_started(session, sub, event))
        self._close_lane(session, sub)
        if parent is None:
            if sub is not None and id(sub) in self._held:
                self._held_calls[call_id] = id(sub)
            return
        attributes = {
            sc.OPERATION_NAME: sc.OP_EXECUTE_TOOL,
            sc.TOOL_NAME: tool,
            sc.TOOL_CALL_ID: call_id,
        }
        if self.capture and event.arguments is not None:
            arguments = event.arguments
            text = arguments if isinstance(arguments, str) else json.dumps(arguments)
            attributes[sc.TOOL_CALL_ARGUMENTS] = redact(text)
        span = self._start(
            f"execute_tool {tool}",
            parent,
            parent.trace_id,
            ids.tool_span(call_id),
            at,
            attributes,
        )
        self._tools[call_id] = span
        self._remember(call_id, span.get_span_context())

    def tool_ended(self, session: Session, event: ToolCallEnded) -> None:
        call_id, outcome, at = event.call_id, event.outcome, event.at
        held = self._held.get(self._held_calls.pop(call_id, -1))
        if held is not None:
            held.append(lambda: self.tool_ended(session, event))
            return
        span = self._tools.pop(call_id, None)
        if span is None:
            return
        if self.capture and event.result:
            span.set_attribute(sc.TOOL_CALL_RESULT, redact(event.result))
        span.set_attribute(sc.TOOL_OUTCOME, outcome)
        if outcome != "ok":
            span.set_attribute(sc.ERROR_TYPE, outcome)
            span.set_status(Status(StatusCode.ERROR, f"tool call {outcome}"))
        span.end(_ns(at))

    def waited(self, session: Session, reason: str, start: float, end: float) -> None:
        open_tools = [c for c, t in session.open_tools.items() if t.subagent is None]
        context = self._tool_contexts.get(open_tools[-1]) if open_tools else None
        turn = self._turns.get((session.agent, session.session_id))
        parent = context or (turn.context if turn is not None else None)
        if parent is None:
            return
        span = self._start(
            f"wait {reason}",
            parent,
            parent.trace_id,
            ids.derive(8, "wait", session.session_id, str(start)),
            start,
            {sc.WAIT_REASON: reason},
        )
        span.end(_ns(end))

    # -- sub-agents ----------------------------------------------------------------------------

    def subagent_started(self, session: Session, sub: Subagent) -> None:
        for replay in self._held.pop(id(sub), []) if self._sub_parent(sub) else []:
            replay()

    def subagent_ended(self, session: Session, sub: Subagent, outcome: str, at: float) -> None:
        self._close_lane(session, sub)
        if id(sub) in self._sub_contexts and id(sub) not in self._subagents:
            return  # its span ended already
        span = self._subagent_span(session, sub)
        if span is None:
            if id(sub) in self._held:
                self._held[id(sub)].append(lambda: self.subagent_ended(session, sub, outcome, at))
            return
        span.set_attribute(sc.SUBAGENT_OUTCOME, outcome)
        if outcome == "failed":
            span.set_status(Status(StatusCode.ERROR, "sub-agent failed"))
        span.set_attributes(_usage_attributes(sub.tokens))
        span.end(_ns(max(at, sub.started_at or at)))
        del self._subagents[id(sub)]

    def _subagent_span(self, session: Session, sub: Subagent) -> Span | None:
        found = self._subagents.get(id(sub))
        if found is not None or id(sub) in self._sub_contexts:
            return found
        parent = self._sub_parent(sub)
        if parent is None:
            return None
        kind = sub.subagent_type or "unknown"
        attributes: dict[str, str | bool] = {
            sc.OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.AGENT_NAME: kind,
            sc.AGENT_ID: sub.id,
            sc.CONVERSATION_ID: session.session_id,
            sc.SUBAGENT_BACKGROUND: sub.background,
        }
        if sub.title:
            attributes[sc.AGENT_DESCRIPTION] = sub.title
        span = self._start(
            f"invoke_agent {kind}",
            parent,
            parent.trace_id,
            ids.derive(8, "subagent", sub.id),
            sub.started_at or 0.0,
            attributes,
        )
        self._subagents[id(sub)] = span
        self._sub_contexts[id(sub)] = span.get_span_context()
        if len(self._sub_contexts) > MAX_HELD:
            self._sub_contexts.popitem(last=False)
        return span

    def _sub_parent(self, sub: Subagent) -> SpanContext | None:
        return self._tool_contexts.get(sub.call_id) if sub.call_id else None

    # -- plumbing ------------------------------------------------------------------------------

    def _parent(
        self, session: Session, sub: Subagent | None, retry: Callable[[], None]
    ) -> SpanContext | None:
        """Where work of the lead agent or of `sub` goes; None to skip (or hold) it."""
        if sub is None:
            turn = self._turns.get((session.agent, session.session_id))
            return turn.context if turn is not None else None
        span = self._subagent_span(session, sub)
        if span is not None:
            return span.get_span_context()
        if id(sub) in self._sub_contexts:  # ended before this work was read (catching up)
            return self._sub_contexts[id(sub)]
        if sum(map(len, self._held.values())) < MAX_HELD:
            self._held.setdefault(id(sub), []).append(retry)
        return None

    def _reply(self, chat: _Chat, text: str | None) -> None:
        """With capture-content: the response's text so far (one record per content block)."""
        if self.capture and text:
            chat.text.append(text)
            chat.span.set_attribute(
                sc.OUTPUT_MESSAGES, _messages("assistant", "\n".join(chat.text))
            )

    def _lane(self, session: Session, sub: Subagent | None) -> tuple[str, str, str]:
        return (session.agent, session.session_id, sub.id if sub is not None else "")

    def _close_lane(self, session: Session, sub: Subagent | None) -> None:
        chat = self._chats.pop(self._lane(session, sub), None)
        if chat is not None:
            chat.span.end(_ns(chat.end))

    def _remember(self, call_id: str, context: SpanContext) -> None:
        self._tool_contexts[call_id] = context
        if len(self._tool_contexts) > MAX_HELD:
            self._tool_contexts.popitem(last=False)

    def _start(
        self,
        name: str,
        parent: SpanContext | None,
        trace_id: int,
        span_id: int,
        at: float,
        attributes: Mapping[str, str | int | bool | list[str]],
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Span:
        context = None
        if parent is not None:
            context = trace.set_span_in_context(NonRecordingSpan(parent))
        with _ids(trace_id, span_id):
            return self.tracer.start_span(
                name, context=context, kind=kind, attributes=attributes, start_time=_ns(at)
            )

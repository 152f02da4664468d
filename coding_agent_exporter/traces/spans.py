"""Spans from the work `State` counted: one trace per turn, with the OpenTelemetry API only.

    invoke_agent claude-code                  the turn, from the prompt to its end
    ├── chat claude-opus-4-8                  one model response: request sent → last record of it
    ├── execute_tool Bash                     a tool call: call → result
    │   └── wait permission prompt            the live index said the session waited for the user
    └── execute_tool Agent
        └── invoke_agent general-purpose      a sub-agent, with its own chat / tool spans

Every start and end time is a record's timestamp. Span and trace ids are derived from stable
record ids (session, prompt record, message, tool call), and a child finds its parent by
computing the parent's id, so the same turn always yields the same ids and the order in which
files are read does not change the tree. Work of a sub-agent whose launching call is not known
yet is held until it is. Turns that ended before `since` are not sent (no history by default); a
turn in progress at `since` is sent when it ends, its earlier work included.

A turn's spans are started as its work is read and ended together, once the turn is complete
(`Tree`): the turn ended, every sub-agent in it ended, and the reading settled (`settled`,
after a catch-up and after each batch of changes), so work read later than its parent (a
sub-agent's file read after the lead's, which already told the sub-agent's end) still joins it.
Then each model response is one `chat` span, whatever number of records (one per content block,
in the lead's and sub-agent files) told it, with the largest usage they gave, as the metrics
count it; each `invoke_agent` span (the turn's, each sub-agent's) carries the sum of the usage
of the chats beneath it. At most `MAX_TREES` turns wait to be complete; beyond, the oldest is
sent as it is.

Lead-agent work read while no turn is open is held: a turn started next takes it (Claude Code
writes an interactive session's first prompt after the records of its first response); a turn
that just ended takes what is no later than its end; otherwise, once the agent says the turn is
over (or it waited `HELD_FOR` with nothing to take it), it is a turn of its own
(`coding_agent.turn.trigger` = `continuation`: the agent went on without a prompt, after a
sub-agent handed back or a background task finished), in a trace of its own linked
(`follows_from`) to the session's turn before it.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable

from opentelemetry import trace
from opentelemetry.trace import (
    Link,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
)

from ..events import ModelFailed, ModelResponded, ToolCallEnded, ToolCallStarted, Usage
from ..state import ids
from ..state.labels import ProjectLabel
from ..state.session import Session, Subagent
from . import semconv as sc
from .checkpoint import Checkpoint
from .redact import redact
from .subagent_spans import SubagentSpans
from .turns import MAX_HELD, Chat, Held, Key, Tree, messages, ns, usage_attributes

MAX_TREES = 2_000
"""Turns waiting to be complete at most (the oldest is sent as it is)."""
SENT_CHATS = 10_000
"""Responses whose span was sent, remembered so a late record of one makes no second span."""
HELD_FOR = 600.0
"""Lead work read while no turn is open waits this long (by its records' time) for the turn
that takes it: Claude Code writes an interactive prompt after its response's first records, and
a live response may stream for minutes before it."""
IN_PROGRESS = 6 * 3600.0
"""A turn begun this long before `since` may still be running then: it is built as it is read
and sent if it ends after `since` (a turn in progress when the exporter started)."""


class SpanWriter(SubagentSpans):
    """An `observer.Observer` that writes spans through `tracer` (its sub-agent part:
    `subagent_spans`)."""

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
        self._turns: dict[Key, Tree | None] = {}  # the session's last turn (None: not traced)
        self._trees: OrderedDict[int, Tree] = OrderedDict()  # by trace id, not sent yet
        self._previous: dict[Key, SpanContext] = {}  # the root of the session's last turn
        self._lead_held: dict[Key, list[Held]] = {}
        self._tools: dict[str, tuple[Span, int]] = {}  # open call → its span and owner
        self._tool_contexts: OrderedDict[str, tuple[SpanContext, int]] = OrderedDict()
        self._chats: dict[str, Chat] = {}  # by response id, while its turn is not sent
        self._sent_chats: OrderedDict[str, None] = OrderedDict()
        self._begin_subagents()

    # -- turns ---------------------------------------------------------------------------------

    def turn_started(self, session: Session, at: float, record_id: str, prompt: str | None) -> None:
        key = (session.agent, session.session_id)
        held = self._lead_held.pop(key, [])
        tree = self._begin(session, record_id, min([at, *(h.at for h in held)]), "prompt")
        if tree is None:
            return
        if self.capture and prompt:
            tree.root.set_attribute(sc.INPUT_MESSAGES, messages("user", prompt))
        for work in held:
            work.replay()

    def turn_ended(self, session: Session, at: float, outcome: str) -> None:
        key = (session.agent, session.session_id)
        tree = self._turns.get(key)
        if tree is None or tree.ended_at is not None:  # no turn open: work of its own, if any
            if not self._continued(session, at, outcome):
                return
            tree = self._turns.get(key)
            if tree is None:
                return
        tree.ended_at, tree.outcome = max(at, tree.start), outcome
        tree.model = session.model

    def settled(self, now: float) -> None:
        """The reading settled: lead work held for `HELD_FOR` with no turn to take it becomes a
        turn of its own (history, or an agent that stopped before saying its turn was over),
        complete turns are sent."""
        for held in list(self._lead_held.values()):
            if max(h.at for h in held) < now - HELD_FOR:
                self._continued(held[0].session, None, "completed")
        for sub_id, (session, sub) in list(self._held_subs.items()):
            self._adopted(session, sub, sub_id)
        for trace_id in [t for t, tree in self._trees.items() if tree.complete]:
            self._send(self._trees.pop(trace_id))

    def _begin(self, session: Session, record_id: str, at: float, trigger: str) -> Tree | None:
        key = (session.agent, session.session_id)
        trace_id = ids.turn_trace(*key, record_id)
        if at < self.since - IN_PROGRESS or trace_id in self.checkpoint:
            self._turns[key] = None
            return None
        attributes = {
            sc.OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.AGENT_NAME: session.agent,
            sc.PROVIDER_NAME: sc.PROVIDERS.get(session.agent, session.agent),
            sc.CONVERSATION_ID: session.session_id,
            sc.PROJECT: self.project(session.cwd),
            sc.SESSION_KIND: session.kind or "interactive",
            sc.TURN_TRIGGER: trigger,
        }
        before = self._previous.get(key)
        links = [Link(before)] if trigger != "prompt" and before is not None else None
        span_id = ids.turn_span(*key, record_id)
        root = self._start(
            f"invoke_agent {session.agent}", None, trace_id, span_id, at, attributes, links=links
        )
        tree = Tree(root, root.get_span_context(), at)
        tree.invokes[span_id] = None
        self._turns[key] = tree
        self._previous[key] = tree.context
        self._trees[trace_id] = tree
        while len(self._trees) > MAX_TREES:
            self._send(self._trees.popitem(last=False)[1])
        return tree

    def _continued(self, session: Session, at: float | None, outcome: str) -> bool:
        """Held lead work as a turn of its own, ended at `at` (None: its last work)."""
        held = self._lead_held.pop((session.agent, session.session_id), [])
        if not held:
            return False
        first = min(held, key=lambda h: h.at)
        tree = self._begin(session, f"continued:{first.key}", first.at, "continuation")
        if tree is None:
            return True
        for work in held:
            work.replay()
        tree.ended_at = max(at if at is not None else max(h.at for h in held), tree.start)
        tree.outcome, tree.model = outcome, session.model
        return True

    def _send(self, tree: Tree) -> None:
        """Send the turn, unless it ended before `since` (it began before too: history)."""
        history = tree.ended_at is not None and tree.ended_at < self.since
        responses = list(tree.chats) if history else tree.send(self.capture)
        for response_id in responses:
            self._chats.pop(response_id, None)
            self._sent_chats[response_id] = None
        while len(self._sent_chats) > SENT_CHATS:
            self._sent_chats.popitem(last=False)
        for member in tree.members:
            if isinstance(member, str):
                self._tools.pop(member, None)
            else:
                self._subagents.pop(member, None)

    # -- model calls ---------------------------------------------------------------------------

    def responded(
        self, session: Session, sub: Subagent | None, event: ModelResponded, usage: Usage
    ) -> None:
        if event.carried:
            return  # usage of responses whose records are gone: no call to show
        found = self._chats.get(event.message_id)
        if found is not None:  # another record of the same response
            found.usage, found.end = usage, max(found.end, event.at)
            if event.finish_reason:
                found.span.set_attribute(sc.RESPONSE_FINISH_REASONS, [event.finish_reason])
            self._reply(found, event.text)
            return
        if event.message_id in self._sent_chats:
            return  # a late record of a response already sent
        start = min(event.requested_at or event.at, event.at)
        retry = lambda: self.responded(session, sub, event, usage)  # noqa: E731
        where = self._parent(session, sub, start, event.message_id, retry)
        if where is None:
            return
        parent, owner, tree = where
        attributes: dict[str, str | int | list[str]] = {
            sc.OPERATION_NAME: sc.OP_CHAT,
            sc.PROVIDER_NAME: sc.PROVIDERS.get(session.agent, session.agent),
            sc.REQUEST_MODEL: event.model,
            sc.RESPONSE_MODEL: event.model,
            sc.RESPONSE_ID: event.message_id,
        }
        if event.finish_reason:
            attributes[sc.RESPONSE_FINISH_REASONS] = [event.finish_reason]
        span = self._start(
            f"chat {event.model}",
            parent,
            parent.trace_id,
            ids.derive(8, "chat", event.message_id),
            start,
            attributes,
            kind=SpanKind.CLIENT,
        )
        chat = Chat(span, owner, usage, event.at)
        if tree is None:  # its turn was sent already
            span.set_attributes(usage_attributes(usage))
            span.end(ns(event.at))
            return
        tree.chats[event.message_id] = self._chats[event.message_id] = chat
        self._reply(chat, event.text)

    def failed(self, session: Session, sub: Subagent | None, event: ModelFailed) -> None:
        start, stable = min(event.requested_at or event.at, event.at), f"failed:{event.at}"
        where = self._parent(session, sub, start, stable, lambda: self.failed(session, sub, event))
        if where is None:
            return
        parent, _, tree = where
        model = event.model or session.model or "unknown"
        span = self._start(
            f"chat {model}",
            parent,
            parent.trace_id,
            ids.derive(8, "failed", session.session_id, str(event.at)),
            start,
            {sc.OPERATION_NAME: sc.OP_CHAT, sc.REQUEST_MODEL: model, sc.ERROR_TYPE: event.error},
            kind=SpanKind.CLIENT,
        )
        span.set_status(Status(StatusCode.ERROR, f"API error {event.error}"))
        self._end(tree, span, event.at, start)

    # -- tool calls ----------------------------------------------------------------------------

    def tool_started(self, session: Session, sub: Subagent | None, event: ToolCallStarted) -> None:
        call_id, tool, at = event.call_id, event.tool, event.at
        retry = lambda: self.tool_started(session, sub, event)  # noqa: E731
        where = self._parent(session, sub, at, call_id, retry)
        if where is None:
            if sub is not None and id(sub) in self._held:
                self._held_calls[call_id] = sub
            return
        parent, owner, tree = where
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
        self._tools[call_id] = (span, owner)
        if tree is not None:
            tree.ends[span.get_span_context().span_id] = (span, at, None)
            tree.members.append(call_id)
        self._remember(call_id, span.get_span_context(), owner)

    def tool_ended(self, session: Session, event: ToolCallEnded) -> None:
        call_id, outcome, at = event.call_id, event.outcome, event.at
        waiting = self._held_calls.pop(call_id, None)
        held = self._held.get(id(waiting)) if waiting is not None else None
        if held is not None:
            held.append(lambda: self.tool_ended(session, event))
            return
        if call_id not in self._tools:
            held_calls = self._lead_held.get((session.agent, session.session_id), [])
            if any(h.key == call_id for h in held_calls):  # its call waits for a turn
                self._lead_work(session, at, call_id, lambda: self.tool_ended(session, event))
            return
        span, _ = self._tools.pop(call_id)
        if self.capture and event.result:
            span.set_attribute(sc.TOOL_CALL_RESULT, redact(event.result))
        span.set_attribute(sc.TOOL_OUTCOME, outcome)
        if outcome != "ok":
            span.set_attribute(sc.ERROR_TYPE, outcome)
            span.set_status(Status(StatusCode.ERROR, f"tool call {outcome}"))
        self._end(self._trees.get(span.get_span_context().trace_id), span, at)

    def waited(self, session: Session, reason: str, start: float, end: float) -> None:
        found = self.wait_under_way(session, reason, start)
        if found is None:
            return
        parent, span_id, name, attributes = found
        span = self._start(name, parent, parent.trace_id, span_id, start, attributes)
        self._end(self._trees.get(parent.trace_id), span, end, start)

    def wait_under_way(
        self, session: Session, reason: str, start: float
    ) -> tuple[SpanContext, int, str, dict[str, str]] | None:
        """Where the span of a wait for the user that began at `start` goes (its parent: the
        lead's open tool call, else its turn), its id, name and attributes; None: nowhere."""
        open_tools = [c for c, t in session.open_tools.items() if t.subagent is None]
        known = self._tool_contexts.get(open_tools[-1]) if open_tools else None
        turn = self._turns.get((session.agent, session.session_id))
        parent = known[0] if known else (turn.context if turn is not None else None)
        if parent is None:
            return None
        span_id = ids.derive(8, "wait", session.session_id, str(start))
        return parent, span_id, f"wait {reason}", {sc.WAIT_REASON: reason}

    def unsent(self) -> list[Tree]:
        """The turns read and not sent yet: under way, or waiting for their sub-agents."""
        return list(self._trees.values())

    # -- plumbing ------------------------------------------------------------------------------

    def _parent(
        self,
        session: Session,
        sub: Subagent | None,
        at: float,
        stable: str,
        retry: Callable[[], None],
    ) -> tuple[SpanContext, int, Tree | None] | None:
        """Where work of the lead agent or of `sub` goes (its parent's context, the span id of
        the invoke_agent it is beneath, its turn's tree if not sent); None to skip or hold it."""
        if sub is None:
            tree = self._turns.get((session.agent, session.session_id), False)
            if tree is None:
                return None  # a turn not traced (history, or sent before)
            if isinstance(tree, Tree) and self._takes(tree, at):
                return tree.context, tree.context.span_id, tree
            self._lead_work(session, at, stable, retry)
            return None
        return self._beneath(session, sub, retry)

    def _takes(self, tree: Tree, at: float) -> bool:
        """Lead work at `at` joins the turn: not sent yet, and open or ended no earlier."""
        return tree.trace_id in self._trees and (tree.ended_at is None or at <= tree.ended_at)

    def _lead_work(
        self, session: Session, at: float, stable: str, retry: Callable[[], None]
    ) -> None:
        if at < self.since - IN_PROGRESS:
            return
        held = self._lead_held.setdefault((session.agent, session.session_id), [])
        if len(held) < MAX_HELD:
            held.append(Held(session, at, stable, retry))

    def _reply(self, chat: Chat, text: str | None) -> None:
        """With capture-content: the response's text so far (one record per content block)."""
        if self.capture and text:
            chat.text.append(text)

    def _remember(self, call_id: str, context: SpanContext, owner: int) -> None:
        self._tool_contexts[call_id] = (context, owner)
        if len(self._tool_contexts) > MAX_HELD:
            self._tool_contexts.popitem(last=False)

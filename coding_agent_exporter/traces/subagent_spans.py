"""The sub-agent part of `spans.SpanWriter`: each sub-agent's `invoke_agent` span, begun once
the tool call that launched it is known (its work is held until then), ended with its turn.

A sub-agent whose launching call no record names (Vibe) is put beneath its turn once the reading
settled (`_adopted`). Its usage is the sum of the chats beneath it (`turns.Tree.send`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from opentelemetry.trace import SpanContext, Status, StatusCode

from ..state import ids
from ..state.session import Session, Subagent
from . import semconv as sc
from .turns import MAX_HELD, Key, Starter, Sub, Tree


class SubagentSpans(Starter):
    """A mixin of `SpanWriter`, which holds the turns."""

    _trees: OrderedDict[int, Tree]
    _turns: dict[Key, Tree | None]
    _tool_contexts: OrderedDict[str, tuple[SpanContext, int]]

    def _begin_subagents(self) -> None:
        self._subagents: dict[int, Sub] = {}  # id(sub) → its span, while its turn is not sent
        # Keyed by id(sub); each value holds the sub-agent itself, so that its id is not
        # reused by another object while the entry lasts (a rebuilt state makes new ones).
        self._sub_contexts: OrderedDict[int, tuple[SpanContext, int, Subagent]] = OrderedDict()
        self._held: dict[int, list[Callable[[], None]]] = {}
        self._held_subs: dict[int, tuple[Session, Subagent]] = {}  # whose work is held
        self._beneath_turn: OrderedDict[int, tuple[SpanContext, int, Subagent]] = OrderedDict()
        self._held_calls: dict[str, Subagent] = {}  # tool call → the sub-agent whose work waits

    def subagent_started(self, session: Session, sub: Subagent) -> None:
        found = self._subagents.get(id(sub))  # its span, while its turn is not sent
        if found is not None:  # its kind may be told after its span began (a workflow's agent)
            found.span.update_name(f"invoke_agent {sub.subagent_type or 'unknown'}")
            found.span.set_attributes(_described(sub))
        for replay in self._held.pop(id(sub), []) if self._sub_parent(sub) else []:
            replay()

    def subagent_ended(self, session: Session, sub: Subagent, outcome: str, at: float) -> None:
        found = self._subagent_span(session, sub)
        if found is None:
            if id(sub) in self._held:
                self._held[id(sub)].append(lambda: self.subagent_ended(session, sub, outcome, at))
            return
        if found.ended:
            return  # told already
        found.ended, span = True, found.span
        span.set_attribute(sc.SUBAGENT_OUTCOME, outcome)
        if outcome == "failed":
            span.set_status(Status(StatusCode.ERROR, "sub-agent failed"))
        tree = self._trees.get(span.get_span_context().trace_id)
        if tree is not None:
            tree.open_subs -= 1
        self._end(tree, span, max(at, sub.started_at or at))

    def _subagent_span(self, session: Session, sub: Subagent) -> Sub | None:
        """Its span while its turn is not sent; None when sent, or its launching call is not
        known yet."""
        found = self._subagents.get(id(sub))
        if found is not None or id(sub) in self._sub_contexts:
            return found
        parent = self._sub_parent(sub)
        if parent is None:
            return None
        context, owner = parent
        kind = sub.subagent_type or "unknown"
        attributes: dict[str, str | bool] = {
            sc.OPERATION_NAME: sc.OP_INVOKE_AGENT,
            sc.AGENT_ID: sub.id,
            sc.CONVERSATION_ID: session.session_id,
            **_described(sub),
        }
        span_id = ids.derive(8, "subagent", sub.id)
        tree = self._trees.get(context.trace_id)
        twin = tree.subs.get(span_id) if tree is not None else None
        if twin is not None and tree is not None:  # the same sub-agent, told by a state read
            self._subagents[id(sub)] = twin  # again since (a rewrite): its span already
            tree.members.append(id(sub))
            return twin
        start = sub.started_at or (tree.start if tree is not None else 0.0)  # none told: its turn's
        span = self._start(
            f"invoke_agent {kind}", context, context.trace_id, span_id, start, attributes
        )
        found = self._subagents[id(sub)] = Sub(span, span_id, context.trace_id, sub)
        if tree is not None:
            tree.subs[span_id] = found
            tree.invokes[span_id] = owner
            tree.ends[span_id] = (span, start, None)
            tree.open_subs += 1
            tree.members.append(id(sub))
        self._sub_contexts[id(sub)] = (span.get_span_context(), span_id, sub)
        if len(self._sub_contexts) > MAX_HELD:
            self._sub_contexts.popitem(last=False)
        return found

    def _sub_parent(self, sub: Subagent) -> tuple[SpanContext, int] | None:
        found = self._tool_contexts.get(sub.call_id) if sub.call_id else None
        if found is None and id(sub) in self._beneath_turn:
            context, span_id, _ = self._beneath_turn[id(sub)]
            return context, span_id
        return found

    def _adopted(self, session: Session, sub: Subagent, sub_id: int) -> None:
        """A sub-agent whose launching call is still not known once the reading settled
        (Vibe names none): beneath the turn of its session that is not sent yet, if any."""
        tree = self._turns.get((session.agent, session.session_id))
        if tree is None or tree.trace_id not in self._trees:
            return
        self._held_subs.pop(sub_id)
        if len(self._beneath_turn) >= MAX_HELD:
            self._beneath_turn.popitem(last=False)
        self._beneath_turn[sub_id] = (tree.context, tree.context.span_id, sub)
        for replay in self._held.pop(sub_id, []):
            replay()

    def _beneath(
        self, session: Session, sub: Subagent, retry: Callable[[], None]
    ) -> tuple[SpanContext, int, Tree | None] | None:
        """Where work of `sub` goes (as `SpanWriter._parent` says); None: held until the call
        that launched it is known."""
        found = self._subagent_span(session, sub)
        if found is None and id(sub) in self._sub_contexts:  # its turn was sent already
            context, span_id, _ = self._sub_contexts[id(sub)]
            return context, span_id, self._trees.get(context.trace_id)
        if found is not None:
            return found.span.get_span_context(), found.span_id, self._trees.get(found.tree)
        if sum(map(len, self._held.values())) < MAX_HELD:
            self._held.setdefault(id(sub), []).append(retry)
            self._held_subs[id(sub)] = (session, sub)
        return None


def _described(sub: Subagent) -> dict[str, str | bool]:
    """What a sub-agent's span says of its kind: its type, its title, whether it runs in the
    background."""
    described: dict[str, str | bool] = {
        sc.AGENT_NAME: sub.subagent_type or "unknown",
        sc.SUBAGENT_BACKGROUND: sub.background,
    }
    if sub.title:
        described[sc.AGENT_DESCRIPTION] = sub.title
    return described

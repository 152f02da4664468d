"""A session's `wire.jsonl`: Kimi CLI's own log of everything its UI was sent (Kimi CLI 1.51.0,
`fixtures/kimi/`), the lead's and, wrapped in `SubagentEvent`s, its sub-agents'.

Records: `{"type": "metadata", "protocol_version": …}` first, then `{"timestamp", "message":
{"type", "payload"}}` with `TurnBegin` (a prompt), `StepBegin {n}` (a model request),
`StepRetry` (that request failed and is tried again: `error_type`, `status_code`),
`StepInterrupted` (the step ended without an answer: the last attempt failed, or the user
cancelled), `StatusUpdate` (a response's usage, by `message_id`), `ContentPart`, `ToolCall`,
`ToolResult`, `ApprovalRequest` / `ApprovalResponse`, `TurnEnd` (may be missing after an
interruption), and `SubagentEvent {parent_tool_call_id, agent_id, subagent_type, event}`.

Tokens: each response once, from its `StatusUpdate`. `context.jsonl` is not read: its
`_usage` lines are the context's size (`token_count`), not a response's usage, and the
sub-agent's own `subagents/<id>/wire.jsonl` repeats the `SubagentEvent`s of this file.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...events import (
    Event,
    ModelFailed,
    ModelResponded,
    SubagentEnded,
    SubagentStarted,
    TitleSet,
    ToolCallEnded,
    ToolCallStarted,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
)
from ..fields import nonempty, timestamp, title_of
from .messages import call_of, prompt_of, response_of, result_of

AGENT_TOOL = "Agent"
LEAD = {
    "TurnBegin": "turn_begin",
    "TurnEnd": "turn_end",
    "StepBegin": "step_begin",
    "StepRetry": "step_retry",
    "StepInterrupted": "interrupted",
    "StatusUpdate": "status",
    "ToolCall": "tool_call",
    "ToolResult": "tool_result",
}
"""The lead's message types read, and the method that reads each."""
Handler = Callable[[float, Mapping[str, Any]], list[Event]]


class Steps:
    """One agent's model requests (the lead's or a sub-agent's): when the pending one went out
    and whether it failed since (a `StepRetry` with no response after it)."""

    def __init__(self) -> None:
        self.requested_at: float | None = None
        self.failed: str | None = None  # the error of the last failed attempt

    def begin(self, at: float) -> None:
        self.requested_at, self.failed = at, None

    def retry(self, at: float, payload: Mapping[str, Any]) -> str:
        """A failed attempt (another follows at `at`): its error text."""
        said = (payload.get("error_type"), payload.get("status_code"))
        error = " ".join(str(v) for v in said if v)
        self.failed = error or "error"
        return self.failed


class WireReader:
    """The lead session's wire; `folder` is its sessions folder's name (the md5 of its work
    dir), `shared` what the home's other files told (`harness.Shared`)."""

    def __init__(self, session_id: str, folder: str, shared: Any) -> None:
        self.session_id = session_id
        self.folder = folder
        self.shared = shared
        self.seen = False
        self.titled = False
        self.turn_open = False
        self.answered = False  # the lead's current step got its response
        self.refused = False  # a call of the lead's last step was rejected by the user
        self.lead = Steps()
        self.subs: dict[str, Steps] = {}
        self.agent_calls: dict[str, dict[str, Any]] = {}  # Agent call id -> its arguments
        self.sub_of_call: dict[str, str] = {}

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        at = timestamp(record.get("timestamp"))
        message = record.get("message")
        if at is None or not isinstance(message, dict):
            return []
        events: list[Event] = []
        if not self.seen:
            self.seen = True
            events.append(self.shared.seen(self.session_id, self.folder, at))
        payload = message.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        kind = message.get("type")
        if kind == "SubagentEvent":
            return events + self.subagent(at, payload)
        method = LEAD.get(str(kind))
        if method is None:
            return events
        handle: Handler = getattr(self, method)
        return events + handle(at, payload)

    # -- the lead ------------------------------------------------------------------------------
    def turn_begin(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        prompt = prompt_of(payload)
        self.turn_open, self.answered, self.refused = True, False, False
        self.lead.begin(at)
        events: list[Event] = [
            TurnStarted(session_id=self.session_id, at=at, record_id=repr(at), prompt=prompt)
        ]
        if not self.titled and prompt and prompt.strip():
            self.titled = True
            title = title_of(prompt)
            events.append(TitleSet(session_id=self.session_id, title=title, source="prompt"))
        return events

    def turn_end(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        """Completed, unless its last step got no response (Esc while it streamed: Kimi writes
        the text so far and `TurnEnd`, no `StepInterrupted`) or the user rejected a call of it
        (Kimi then asks the model nothing more): interrupted."""
        if not self.turn_open:
            return []  # already ended by its `StepInterrupted`
        self.turn_open = False
        done = self.answered and not self.refused
        outcome: TurnOutcome = "completed" if done else "interrupted"
        return [TurnEnded(session_id=self.session_id, at=at, outcome=outcome)]

    def interrupted(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        """The step got no answer: after failed attempts the last one failed too (the turn
        failed); else the user stopped it. `TurnEnd` may follow, or not."""
        events = self.step_interrupted(at, self.lead, None)
        if self.turn_open:
            self.turn_open = False
            outcome: TurnOutcome = "failed" if events else "interrupted"
            events.append(TurnEnded(session_id=self.session_id, at=at, outcome=outcome))
        return events

    def step_begin(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        self.lead.begin(at)
        self.answered = self.refused = False
        return []

    def step_retry(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        return self.failed(at, self.lead, payload, None)

    def status(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        events = self.responded(at, payload, self.lead, None)
        self.answered = self.answered or bool(events)
        return events

    def tool_call(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        call = call_of(payload)
        if call is None:
            return []
        call_id, name, arguments = call
        if name == AGENT_TOOL:
            self.agent_calls[call_id] = arguments if isinstance(arguments, dict) else {}
        return [self.started(at, call, None)]

    def tool_result(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        result = result_of(payload)
        if result is None:
            return []
        call_id, outcome, output = result
        self.refused = self.refused or outcome == "rejected"
        events: list[Event] = [
            ToolCallEnded(
                session_id=self.session_id, at=at, call_id=call_id, outcome=outcome, result=output
            )
        ]
        if call_id in self.agent_calls:
            events.append(
                SubagentEnded(
                    session_id=self.session_id,
                    at=at,
                    outcome="completed" if outcome == "ok" else "failed",
                    call_id=call_id,
                    subagent_id=self.sub_of_call.get(call_id),
                )
            )
        return events

    # -- its sub-agents ------------------------------------------------------------------------
    def subagent(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        agent_id = nonempty(payload.get("agent_id"))
        inner = payload.get("event")
        if agent_id is None or not isinstance(inner, dict):
            return []
        events: list[Event] = []
        steps = self.subs.get(agent_id)
        if steps is None:
            steps = self.subs[agent_id] = Steps()
            events.append(self.sub_started(at, agent_id, payload))
        body = inner.get("payload")
        body = body if isinstance(body, dict) else {}
        kind = inner.get("type")
        if kind in ("StepBegin", "TurnBegin"):
            steps.begin(at)
        elif kind == "StepRetry":
            events += self.failed(at, steps, body, agent_id)
        elif kind == "StepInterrupted":
            events += self.step_interrupted(at, steps, agent_id)
        elif kind == "StatusUpdate":
            events += self.responded(at, body, steps, agent_id)
        elif kind == "ToolCall":
            call = call_of(body)
            events += [self.started(at, call, agent_id)] if call else []
        elif kind == "ToolResult":
            result = result_of(body)
            if result is not None:
                call_id, outcome, output = result
                events.append(
                    ToolCallEnded(
                        session_id=self.session_id,
                        at=at,
                        call_id=call_id,
                        outcome=outcome,
                        result=output,
                    )
                )
        return events

    def sub_started(self, at: float, agent_id: str, payload: Mapping[str, Any]) -> SubagentStarted:
        call_id = nonempty(payload.get("parent_tool_call_id"))
        arguments = self.agent_calls.get(call_id or "")
        if call_id is not None:
            self.sub_of_call[call_id] = agent_id
        # the call's `run_in_background` (false when left out); unknown without the call
        background = None if arguments is None else arguments.get("run_in_background") is True
        arguments = arguments or {}
        return SubagentStarted(
            session_id=self.session_id,
            at=at,
            call_id=call_id,
            subagent_id=agent_id,
            subagent_type=nonempty(payload.get("subagent_type")),
            title=nonempty(arguments.get("description")),
            background=background,
        )

    # -- shared by both ------------------------------------------------------------------------
    def started(
        self, at: float, call: tuple[str, str, object], agent_id: str | None
    ) -> ToolCallStarted:
        call_id, name, arguments = call
        return ToolCallStarted(
            session_id=self.session_id,
            at=at,
            call_id=call_id,
            tool=name,
            subagent_id=agent_id,
            arguments=arguments,
        )

    def responded(
        self, at: float, payload: Mapping[str, Any], steps: Steps, agent_id: str | None
    ) -> list[Event]:
        response = response_of(payload)
        if response is None:
            return []
        message_id, usage = response
        requested, steps.failed = steps.requested_at, None
        return [
            ModelResponded(
                session_id=self.session_id,
                at=at,
                message_id=message_id,
                model=self.shared.model(self.session_id),
                usage=usage,
                subagent_id=agent_id,
                main=agent_id is None,
                requested_at=requested,
            )
        ]

    def failed(
        self, at: float, steps: Steps, payload: Mapping[str, Any], agent_id: str | None
    ) -> list[Event]:
        requested = steps.requested_at
        error = steps.retry(at, payload)
        steps.requested_at = at
        return [self.model_failed(at, error, requested, agent_id)]

    def step_interrupted(self, at: float, steps: Steps, agent_id: str | None) -> list[Event]:
        """The last attempt of a step that had failed ones failed too: one more API error."""
        if steps.failed is None:
            return []
        error, steps.failed = steps.failed, None
        return [self.model_failed(at, error, steps.requested_at, agent_id)]

    def model_failed(
        self, at: float, error: str, requested: float | None, agent_id: str | None
    ) -> ModelFailed:
        return ModelFailed(
            session_id=self.session_id,
            at=at,
            error=error,
            model=self.shared.model(self.session_id),
            subagent_id=agent_id,
            requested_at=requested,
        )

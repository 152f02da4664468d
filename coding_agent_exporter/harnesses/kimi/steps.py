"""One agent's model requests and tool calls in a Kimi CLI wire, the lead's or a sub-agent's
(the same message types in both: `StepBegin`, `StepRetry`, `StepInterrupted`, `StatusUpdate`,
`ToolCall`, `ToolResult`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ...events import Event, ModelFailed, ModelResponded, ToolCallEnded, ToolCallStarted
from .messages import call_of, response_of, result_of


class Models(Protocol):
    def model(self, session_id: str) -> str: ...


class Steps:
    """The requests and calls of the lead (`agent_id` None) or of one sub-agent of a session:
    when the pending request went out, and the error of its last failed attempt (a
    `StepRetry` with no response after it)."""

    def __init__(self, session_id: str, agent_id: str | None, models: Models) -> None:
        self.session_id = session_id
        self.agent_id = agent_id
        self.models = models
        self.requested_at: float | None = None
        self.failed: str | None = None

    def begin(self, at: float) -> None:
        """A request went out (`StepBegin`, or the `TurnBegin` before it)."""
        self.requested_at, self.failed = at, None

    def retry(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        """A failed attempt: an API error; the next attempt goes out now."""
        said = (payload.get("error_type"), payload.get("status_code"))
        self.failed = " ".join(str(v) for v in said if v) or "error"
        requested, self.requested_at = self.requested_at, at
        return [self.model_failed(at, self.failed, requested)]

    def interrupted(self, at: float) -> list[Event]:
        """`StepInterrupted`: after failed attempts the last one failed too (one more API
        error, returned); else the user stopped the step (nothing)."""
        if self.failed is None:
            return []
        error, self.failed = self.failed, None
        return [self.model_failed(at, error, self.requested_at)]

    def responded(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        """A `StatusUpdate`: a response when it carries a message id and usage."""
        response = response_of(payload)
        if response is None:
            return []
        message_id, usage = response
        requested, self.failed = self.requested_at, None
        return [
            ModelResponded(
                session_id=self.session_id,
                at=at,
                message_id=message_id,
                model=self.models.model(self.session_id),
                usage=usage,
                subagent_id=self.agent_id,
                main=self.agent_id is None,
                requested_at=requested,
            )
        ]

    def call(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        call = call_of(payload)
        if call is None:
            return []
        call_id, name, arguments = call
        return [
            ToolCallStarted(
                session_id=self.session_id,
                at=at,
                call_id=call_id,
                tool=name,
                subagent_id=self.agent_id,
                arguments=arguments,
            )
        ]

    def result(self, at: float, payload: Mapping[str, Any]) -> list[ToolCallEnded]:
        result = result_of(payload)
        if result is None:
            return []
        call_id, outcome, output = result
        return [
            ToolCallEnded(
                session_id=self.session_id, at=at, call_id=call_id, outcome=outcome, result=output
            )
        ]

    def model_failed(self, at: float, error: str, requested: float | None) -> ModelFailed:
        return ModelFailed(
            session_id=self.session_id,
            at=at,
            error=error,
            model=self.models.model(self.session_id),
            subagent_id=self.agent_id,
            requested_at=requested,
        )


def feed_step(steps: Steps, at: float, kind: object, payload: Mapping[str, Any]) -> list[Event]:
    """What a message of the types both wires share says (others: nothing)."""
    if kind == "StepBegin":
        steps.begin(at)
        return []
    if kind == "StepRetry":
        return steps.retry(at, payload)
    if kind == "StepInterrupted":
        return steps.interrupted(at)
    if kind == "StatusUpdate":
        return steps.responded(at, payload)
    if kind == "ToolCall":
        return steps.call(at, payload)
    if kind == "ToolResult":
        return list(steps.result(at, payload))
    return []

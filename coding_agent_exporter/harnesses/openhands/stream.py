"""`events/event-NNNNN-<uuid>.json` of a conversation, one file per event, read in name order
as one stream (`sources.docfolder`): prompts, responses, tool calls and their results, errors.

Events (`kind`): `SystemPromptEvent` (nothing counted); `MessageEvent` from the `user` (a
prompt: a turn starts; in a sub-agent's folder, the task it was given) or from the `agent` (an
answer without tool calls: the turn is done); `ActionEvent` (a tool call; every action of one
model call carries its `llm_response_id`); `ObservationEvent` (its result: `is_error`, a
command's `exit_code`, a task's `status`), `AgentErrorEvent` (a call that could not run),
`UserRejectObservation` (refused by the user); `ConversationErrorEvent` (the model call failed
after LiteLLM's retries: the turn failed); `Condensation` (the condenser summarized the history:
a compaction, and the condenser's own model call, `llm_response_id`). A `finish` call ends the
turn once it is observed. Times are the machine's local time with no offset (read as local
time here too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...events import (
    ContextCompacted,
    Event,
    ModelFailed,
    ModelResponded,
    SessionSeen,
    SubagentEnded,
    SubagentOutcome,
    SubagentStarted,
    TitleSet,
    ToolCallEnded,
    ToolCallStarted,
    ToolOutcome,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
    Usage,
)
from ..fields import nonempty, timestamp, title_of
from .shared import Response, Shared, Task

FINISH, TASK = "finish", "task"


class EventsReader:
    def __init__(self, shared: Shared, conversation: str, session_id: str, sub: str | None):
        self.shared = shared
        self.conversation = conversation
        self.session_id = session_id
        self.subagent_id = sub
        self.started = False  # the first event was read
        self.titled = False
        self.asked: float | None = None  # when the latest request went out
        self.response = ""  # the latest response told
        self.finishing = ""  # the call id of an open `finish`
        self.model = "unknown"

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        at = timestamp(record.get("timestamp"))
        if at is None:
            return []
        self.shared.last[self.conversation] = at
        events = self._first(at) if not self.started else []
        kind = record.get("kind")
        if kind == "MessageEvent":
            events += self._message(at, record)
        elif kind == "ActionEvent":
            events += self._action(at, record)
        elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            events += self._result(at, record, kind)
        elif kind == "ConversationErrorEvent":
            events += self._failed(at, record)
        elif kind == "Condensation":
            events += self._condensed(at, record)
        return events

    def _first(self, at: float) -> list[Event]:
        self.started = True
        if self.subagent_id is None:
            return [SessionSeen(session_id=self.session_id, at=at)]
        return []  # a sub-agent starts with the task it is given (`_task`)

    def _task(self, at: float, prompt: str) -> list[Event]:
        """A sub-agent's first prompt: it started, for the lead's `task` call of that prompt."""
        self.titled = True  # (for a sub-agent: its task was told)
        waiting = self.shared.tasks.get(self.session_id, [])
        task = next((t for t in waiting if t.prompt == prompt), None)
        if task is not None:
            waiting.remove(task)
            if not waiting:
                del self.shared.tasks[self.session_id]
        return [
            SubagentStarted(
                session_id=self.session_id,
                at=at,
                call_id=task.call_id if task else None,
                subagent_id=self.subagent_id,
                subagent_type=task.subagent_type if task else None,
                title=task.description if task else None,
            )
        ]

    def _message(self, at: float, record: Mapping[str, Any]) -> list[Event]:
        text = _text(record.get("llm_message"))
        if record.get("source") == "user":
            self.asked = at
            if self.subagent_id is not None:
                return [] if self.titled else self._task(at, text)
            events: list[Event] = [
                TurnStarted(
                    session_id=self.session_id, at=at, record_id=str(record.get("id")), prompt=text
                )
            ]
            if not self.titled and text.strip():
                self.titled = True
                events.append(
                    TitleSet(session_id=self.session_id, title=title_of(text), source="prompt")
                )
            return events
        if record.get("source") != "agent":
            return []
        events = self._responded(at, record, "stop", text)
        return events + self._done(at, "completed")

    def _action(self, at: float, record: Mapping[str, Any]) -> list[Event]:
        events = self._responded(at, record, "tool_calls", None)
        call_id, tool = nonempty(record.get("tool_call_id")), nonempty(record.get("tool_name"))
        if call_id is None or tool is None:
            return events
        if tool == FINISH:
            self.finishing = call_id
        action = record.get("action")
        if tool == TASK and isinstance(action, dict) and self.subagent_id is None:
            self._launched(call_id, action)
        return [
            *events,
            ToolCallStarted(
                session_id=self.session_id,
                at=at,
                call_id=call_id,
                tool=tool,
                subagent_id=self.subagent_id,
                arguments=record.get("action"),
            ),
        ]

    def _launched(self, call_id: str, action: Mapping[str, Any]) -> None:
        prompt = action.get("prompt")
        if isinstance(prompt, str):
            task = Task(
                prompt,
                call_id,
                nonempty(action.get("subagent_type")),
                nonempty(action.get("description")),
            )
            self.shared.tasks.setdefault(self.session_id, []).append(task)

    def _responded(
        self, at: float, record: Mapping[str, Any], finish: str, text: str | None
    ) -> list[Event]:
        """A model call's answer, once per `llm_response_id`, with its tokens if the state
        document gave them already (`Shared`), else none until it does."""
        response = nonempty(record.get("llm_response_id"))
        if response is None or response == self.response:
            return []
        self.response = response
        key = (self.conversation, response)
        model, usage = self.shared.usage.pop(key, (self.model, Usage()))
        if usage == Usage():
            self.shared.seen[key] = Response(at, self.asked, finish, self.subagent_id)
        event = ModelResponded(
            session_id=self.session_id,
            at=at,
            message_id=response,
            model=self.shared.model.get(self.conversation, model),
            usage=usage,
            subagent_id=self.subagent_id,
            main=self.subagent_id is None,
            requested_at=self.asked,
            finish_reason=finish,
            text=text or None,
        )
        self.asked = at
        return [event]

    def _result(self, at: float, record: Mapping[str, Any], kind: str) -> list[Event]:
        self.asked = at
        call_id = nonempty(record.get("tool_call_id"))
        if call_id is None:
            return []
        observation = record.get("observation")
        outcome: ToolOutcome = "rejected" if kind == "UserRejectObservation" else "error"
        if kind == "ObservationEvent":
            outcome = _outcome(observation if isinstance(observation, dict) else {})
        text = _text(observation) if isinstance(observation, dict) else None
        events: list[Event] = [
            ToolCallEnded(
                session_id=self.session_id, at=at, call_id=call_id, outcome=outcome, result=text
            )
        ]
        if call_id == self.finishing:
            self.finishing = ""
            events += self._done(at, "completed")
        return events

    def _condensed(self, at: float, record: Mapping[str, Any]) -> list[Event]:
        """The condenser summarized the history (its own model call: `llm_response_id`)."""
        events = self._responded(at, record, "stop", None)
        compacted = ContextCompacted(
            session_id=self.session_id,
            at=at,
            compaction_id=str(record.get("id")),
            subagent_id=self.subagent_id,
        )
        return [*events, compacted]

    def _failed(self, at: float, record: Mapping[str, Any]) -> list[Event]:
        error = nonempty(record.get("code")) or "error"
        failed = ModelFailed(
            session_id=self.session_id,
            at=at,
            error=error,
            model=self.shared.model.get(self.conversation),
            subagent_id=self.subagent_id,
            requested_at=self.asked,
        )
        return [failed, *self._done(at, "failed")]

    def _done(self, at: float, outcome: TurnOutcome) -> list[Event]:
        """The end of the lead's turn, or of the sub-agent's work (its folder is its run)."""
        if self.subagent_id is None:
            return [TurnEnded(session_id=self.session_id, at=at, outcome=outcome)]
        ended: SubagentOutcome = "completed" if outcome == "completed" else "failed"
        return [
            SubagentEnded(
                session_id=self.session_id, at=at, outcome=ended, subagent_id=self.subagent_id
            )
        ]


def _outcome(observation: Mapping[str, Any]) -> ToolOutcome:
    """`is_error`, else a command's `exit_code` (-1: it did not finish in time), else a task's
    `status` (`completed` or not)."""
    if observation.get("is_error") is True:
        return "error"
    code = observation.get("exit_code")
    if isinstance(code, int) and code != 0:
        return "error"
    status = observation.get("status")
    if isinstance(status, str) and status != "completed":
        return "error"
    return "ok"


def _text(message: object) -> str:
    """The text parts of a message or an observation (`content`: a list of `{type, text}`)."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))

"""`sessions/<cwd slug>/<session id>.jsonl`: a Droid session's journal, appended as it goes.

Records (0.215.0): `session_start` {id, title, cwd, isSessionTitleManuallySet} first (no time);
`message` {id, parentId, timestamp, message: {role, content}} where content is a list of
Anthropic-style blocks (`text`, `thinking`, `tool_use`, `tool_result` with `is_error`) and an
assistant message names its `modelId`; `agent_turn_outcome` {turnId: the prompt's message id,
reason} when a turn ends (no time: the latest message's counts).

A user message whose id starts with `context-` or whose `visibility` is `llm_only` is context
Droid adds (system reminders), not a prompt; one whose `visibility` is `user_only` is a notice
shown to the user and never sent to the model: an API error is one (`BYOK Error: 400 …`,
followed by the turn's `agent_turn_outcome` with reason `model_request_rejected`). A user
message of only `tool_result` blocks ends tool calls. A sub-agent's journal (its
`session_start` names `callingSessionId` and `callingToolUseId`) tells its lead's session: its
prompt starts it (`SubagentStarted`, its type from `Subagent type: <type>`), its responses and
calls are the sub-agent's, its turn's outcome ends it. No message carries token usage: the
session's totals are in its settings file (`settings`); a response here is counted with no
tokens.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...events import (
    Event,
    ModelFailed,
    ModelResponded,
    SessionSeen,
    SubagentEnded,
    SubagentOutcome,
    SubagentStarted,
    TitleSet,
    TitleSource,
    ToolCallEnded,
    ToolCallStarted,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
    Usage,
)
from ..fields import nonempty, timestamp, title_of
from .shared import Shared

NO_TOKENS = Usage()
SUBAGENT_OUTCOMES: dict[TurnOutcome, SubagentOutcome] = {
    "completed": "completed",
    "interrupted": "cancelled",
    "failed": "failed",
}
_TYPE = re.compile(r"^Subagent type: (\S+)", re.MULTILINE)
_ERROR = re.compile(r"^(?:\w+ )?Error:\s*(?:(\d{3})\b)?")
"""The first line of an error notice: `BYOK Error: 400 …` (a custom model's provider)."""
OUTCOMES: dict[str, TurnOutcome] = {
    # Droid's own mapping of a turn's reason to its result: completed and spec_handoff are
    # completed, cancelled and process_exit cancelled, every other reason failed
    "completed": "completed",
    "spec_handoff": "completed",
    "cancelled": "interrupted",
    "process_exit": "interrupted",
}


class JournalReader:
    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.start: Mapping[str, Any] | None = None  # the session_start record, until a time
        self.seen = False
        self.launched = False  # a sub-agent's start was told

    @property
    def session_id(self) -> str:
        """The session the work counts for: this one, or a sub-agent's lead."""
        return self.shared.lead()

    @property
    def sub(self) -> str | None:
        return self.shared.subagent_id

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        kind = record.get("type")
        if kind == "session_start":
            return self._started(record)
        if kind == "agent_turn_outcome":
            return self._outcome(record)
        if kind != "message":
            return []
        at = timestamp(record.get("timestamp"))
        message = record.get("message")
        record_id = nonempty(record.get("id"))
        if at is None or record_id is None or not isinstance(message, dict):
            return []
        before = self.shared.at  # the record before this one: a response's request went out then
        events = self._seen(at) + self.shared.timed(at)
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        if message.get("role") == "assistant":
            return events + self._responded(record_id, (before, at), message, blocks)
        if message.get("role") == "user":
            return events + self._user(record_id, at, message, blocks)
        return events

    def _started(self, record: Mapping[str, Any]) -> list[Event]:
        self.start = record
        self.shared.called(record.get("callingSessionId"), record.get("callingToolUseId"))
        if self.shared.at is None:
            return []  # SessionSeen needs a time: the first message's
        return self._seen(self.shared.at)

    def _seen(self, at: float) -> list[Event]:
        if self.seen or self.start is None:
            return []
        self.seen = True
        start = self.start
        cwd = nonempty(start.get("cwd"))
        if self.sub is not None:  # fills in the lead's cwd if its files come later
            return [SessionSeen(session_id=self.session_id, at=at, cwd=cwd, main=False)]
        events: list[Event] = [
            SessionSeen(session_id=self.session_id, at=at, cwd=cwd, kind=self.shared.kind)
        ]
        title = nonempty(start.get("title"))
        if title:
            manual = start.get("isSessionTitleManuallySet") is True
            source: TitleSource = "user" if manual else "harness"
            events.append(
                TitleSet(session_id=self.session_id, title=title_of(title), source=source)
            )
        return events

    def _responded(
        self,
        record_id: str,
        when: tuple[float | None, float],
        message: Mapping[str, Any],
        blocks: Sequence[Mapping[str, Any]],
    ) -> list[Event]:
        """One response (`when`: the record before it, its own time)."""
        requested, at = when
        model = nonempty(message.get("modelId")) or self.shared.model
        if model is None:
            return []
        self.shared.model = model
        text = "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
        events: list[Event] = [
            ModelResponded(
                session_id=self.session_id,
                at=at,
                message_id=record_id,
                model=model,
                usage=NO_TOKENS,
                subagent_id=self.sub,
                main=self.sub is None,
                requested_at=requested,
                text=text or None,
            )
        ]
        for block in blocks:
            call_id = nonempty(block.get("id"))
            if block.get("type") == "tool_use" and call_id:
                events.append(
                    ToolCallStarted(
                        session_id=self.session_id,
                        at=at,
                        call_id=call_id,
                        subagent_id=self.sub,
                        tool=nonempty(block.get("name")) or "unknown",
                        arguments=block.get("input"),
                    )
                )
        return events

    def _user(
        self,
        record_id: str,
        at: float,
        message: Mapping[str, Any],
        blocks: Sequence[Mapping[str, Any]],
    ) -> list[Event]:
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if results:
            return [self._result(at, b) for b in results if nonempty(b.get("tool_use_id"))]
        prompt = "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
        if message.get("visibility") == "user_only":
            return self._notice(at, prompt)
        if record_id.startswith("context-") or message.get("visibility") == "llm_only":
            return []
        if self.sub is not None:
            return self._launched(at, prompt)
        return [
            TurnStarted(
                session_id=self.session_id, at=at, record_id=record_id, prompt=prompt or None
            )
        ]

    def _launched(self, at: float, prompt: str) -> list[Event]:
        """A sub-agent's prompt (`# Task Tool Invocation`, `Subagent type: <type>`): it started,
        under the call that launched it; its title is its session's (`Worker: <description>`)."""
        if self.launched:
            return []
        self.launched = True
        found = _TYPE.search(prompt)
        title = nonempty((self.start or {}).get("title"))
        started = SubagentStarted(
            session_id=self.session_id,
            at=at,
            call_id=self.shared.call_id,
            subagent_id=self.sub,
            subagent_type=found.group(1) if found else None,
            title=title_of(title) if title else None,
            parent_id=self.shared.parent_id(),
        )
        return [started]

    def _notice(self, at: float, text: str) -> list[Event]:
        """A message Droid shows the user but never sends the model: an API error is one
        (`BYOK Error: 400 <the provider's message>`; its status is the error's type)."""
        found = _ERROR.match(text)
        if found is None:
            return []
        error = found.group(1) or "error"
        failed = ModelFailed(
            session_id=self.session_id,
            at=at,
            error=error,
            model=self.shared.model,
            subagent_id=self.sub,
        )
        return [failed]

    def _result(self, at: float, block: Mapping[str, Any]) -> Event:
        content = block.get("content")
        return ToolCallEnded(
            session_id=self.session_id,
            at=at,
            call_id=str(block.get("tool_use_id")),
            outcome="error" if block.get("is_error") is True else "ok",
            result=content if isinstance(content, str) else None,
        )

    def _outcome(self, record: Mapping[str, Any]) -> list[Event]:
        at = self.shared.at
        if at is None:
            return []
        outcome = OUTCOMES.get(str(record.get("reason")), "failed")
        if self.sub is not None:
            ended = SUBAGENT_OUTCOMES[outcome]
            return [
                SubagentEnded(
                    session_id=self.session_id,
                    at=at,
                    outcome=ended,
                    call_id=self.shared.call_id,
                    subagent_id=self.sub,
                )
            ]
        return [TurnEnded(session_id=self.session_id, at=at, outcome=outcome)]

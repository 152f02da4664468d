"""A sub-agent's own files, `projects/<cwd slug>/subagents/<lead session id>/`:

- `agent-<agent id>.jsonl`: its transcript (records as the lead's, each with `agentId` and
  `isSidechain: true`; `sessionId` is the lead's). Its responses and tool calls are counted
  here, under the sub-agent; the lead's chat holds only telemetry of them (not counted twice).
- `agent-<agent id>.meta.json`: `{agentId, agentType, description, parentSessionId,
  toolUseId, createdAt, status, isBackgrounded, lastUpdatedAt}`, rewritten as it runs: links
  the sub-agent to the `agent` call that launched it, and says how it ended.

The agent id is `<type>-<call id>` (`general-purpose-call_…`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...events import Event, ModelResponded, SubagentEnded, SubagentStarted
from ..fields import nonempty, timestamp
from .chat import SUBAGENT_OUTCOMES, Shared
from .records import calls, ended, started, text_of, usage_of


class TranscriptReader:
    """A sub-agent's transcript. Its records name no model: the model is the one the lead's
    telemetry names for this agent's calls, else the lead's."""

    def __init__(self, session_id: str, agent_id: str, shared: Shared) -> None:
        self.session_id = session_id
        self.agent_id = agent_id
        self.shared = shared
        self.requested_at: float | None = None

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        at = timestamp(record.get("timestamp"))
        if at is None:
            return []
        kind = record.get("type")
        if kind == "assistant":
            return self.response(at, record)
        self.requested_at = at
        if kind == "tool_result":
            return list(ended(self.session_id, at, record))
        return []

    def response(self, at: float, record: Mapping[str, Any]) -> list[Event]:
        events: list[Event] = []
        metadata = record.get("usageMetadata")
        if isinstance(metadata, dict):
            events.append(
                ModelResponded(
                    session_id=self.session_id,
                    at=at,
                    message_id=nonempty(record.get("uuid")) or f"{self.agent_id}@{at}",
                    model=nonempty(record.get("model")) or self.shared.model_of(self.agent_id),
                    usage=usage_of(metadata),
                    subagent_id=self.agent_id,
                    main=False,
                    requested_at=self.requested_at,
                    finish_reason="tool_calls" if calls(record) else "stop",
                    text=text_of(record) or None,
                )
            )
            self.requested_at = at
        return events + started(self.session_id, at, record, self.agent_id)


class MetaReader:
    """`agent-<agent id>.meta.json`, read whole on every rewrite."""

    def __init__(self, session_id: str, agent_id: str) -> None:
        self.session_id = session_id
        self.agent_id = agent_id
        self.ended = False

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        at = timestamp(record.get("createdAt"))
        events: list[Event] = [
            SubagentStarted(
                session_id=nonempty(record.get("parentSessionId")) or self.session_id,
                at=at,
                call_id=nonempty(record.get("toolUseId")),
                subagent_id=self.agent_id,
                subagent_type=nonempty(record.get("agentType")),
                title=nonempty(record.get("description")),
                background=record.get("isBackgrounded") is True,
            )
        ]
        outcome = SUBAGENT_OUTCOMES.get(str(record.get("status")))
        if outcome is not None and not self.ended:
            self.ended = True
            end = timestamp(record.get("lastUpdatedAt")) or at or 0.0
            events.append(
                SubagentEnded(
                    session_id=self.session_id,
                    at=end,
                    outcome=outcome,
                    subagent_id=self.agent_id,
                    call_id=nonempty(record.get("toolUseId")),
                )
            )
        return events

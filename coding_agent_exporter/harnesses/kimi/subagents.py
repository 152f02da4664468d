"""A sub-agent's own wire, `sessions/<md5>/<session id>/subagents/<agent id>/wire.jsonl`
(Kimi CLI 1.51.0, `fixtures/kimi/`): the same message types as the lead's (`steps.py`), its
responses and tool calls. It is read for every sub-agent: a background one's events are only
here (the lead's wire names it only in its `Agent` call's result), a foreground one's are
repeated in the lead's wire as `SubagentEvent`s, of which only the link is read there.

A sub-agent's turns (its prompt, and the "too brief" follow-up Kimi may send it) are not the
user's turns: only their requests are read. Its type and title come from the lead's call."""

from __future__ import annotations

from typing import Any

from ...events import Event, SubagentStarted
from ..fields import timestamp
from .steps import Steps, feed_step


class SubagentWireReader:
    def __init__(self, session_id: str, agent_id: str, shared: Any) -> None:
        self.session_id = session_id
        self.agent_id = agent_id
        self.steps = Steps(session_id, agent_id, shared)
        self.seen = False

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
            events.append(
                SubagentStarted(session_id=self.session_id, at=at, subagent_id=self.agent_id)
            )
        payload = message.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        kind = message.get("type")
        if kind == "TurnBegin":
            self.steps.begin(at)
            return events
        return events + feed_step(self.steps, at, kind, payload)

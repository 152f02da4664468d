"""Grok Build's sub-agents, as 0.2.111 writes them: the lead's `spawn_subagent` call
(`tool_call`, with `_meta.subagentBackground`), then its `subagent_spawned` row
(`child_session_id`: the sub-agent's own session folder, a sibling of the lead's), and the
lead's `subagents/<id>/meta.json` (type, description, status).

A foreground sub-agent runs inside the lead's turn, whose `turn_completed` usage counts its
tokens; a background one (`background: true`, the tool's default) runs on after it, so its own
`turn_completed` usage is its own and is read from its folder, as the sub-agent's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...events import Event, SubagentEnded, SubagentOutcome, SubagentStarted
from ..fields import nonempty, timestamp

SPAWN = "spawn_subagent"
_SUBAGENT_OUTCOME: dict[str, SubagentOutcome] = {
    "completed": "completed",
    "failed": "failed",
    "error": "failed",
    "cancelled": "cancelled",
    "killed": "cancelled",
    "interrupted": "cancelled",
}
Marker = Callable[[str, str | None, bool | None], None]
"""Marks a session id as a sub-agent's own folder: of the lead given (if known), run in the
background or not (if known) (`Grok.mark_child`)."""


class Spawns:
    """A lead's `spawn_subagent` calls that wait for their `subagent_spawned` row, in order."""

    def __init__(self) -> None:
        self.pending: list[tuple[str, bool]] = []  # call id, background

    def called(self, call_id: str, update: Mapping[str, Any]) -> None:
        meta, given = update.get("_meta"), update.get("rawInput")
        flag = meta.get("subagentBackground") if isinstance(meta, dict) else None
        if not isinstance(flag, bool):
            flag = given.get("background") if isinstance(given, dict) else None
        self.pending.append((call_id, flag if isinstance(flag, bool) else True))

    def spawned(
        self, session_id: str, update: Mapping[str, Any], at: float, mark: Marker
    ) -> list[Event]:
        """`subagent_spawned`: the sub-agent, linked to the oldest call waiting for one."""
        child = nonempty(update.get("child_session_id"))
        if child is None:
            return []
        call_id, background = self.pending.pop(0) if self.pending else (None, None)
        mark(child, session_id, background)
        return [
            SubagentStarted(
                session_id=session_id,
                at=at,
                call_id=call_id,
                subagent_id=child,
                subagent_type=nonempty(update.get("subagent_type")),
                title=nonempty(update.get("description")),
                background=background,
            )
        ]


class MetaReader:
    """`subagents/<id>/meta.json`: rewritten as the sub-agent runs and when it ends."""

    def __init__(self, session_id: str, subagent_id: str, mark_child: Marker) -> None:
        self.session_id = session_id
        self.subagent_id = subagent_id
        self.mark_child = mark_child

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        child = nonempty(record.get("child_session_id")) or self.subagent_id
        self.mark_child(child, self.session_id, None)
        started = timestamp(record.get("started_at"))
        events: list[Event] = [
            SubagentStarted(
                session_id=self.session_id,
                at=started,
                subagent_id=self.subagent_id,
                subagent_type=nonempty(record.get("subagent_type")) or "general-purpose",
                title=nonempty(record.get("description")),
            )
        ]
        ended = timestamp(record.get("completed_at"))
        status = record.get("status")
        outcome = _SUBAGENT_OUTCOME.get(status if isinstance(status, str) else "")
        if ended is not None and outcome is not None:
            events.append(
                SubagentEnded(
                    session_id=self.session_id,
                    at=ended,
                    subagent_id=self.subagent_id,
                    outcome=outcome,
                )
            )
        return events

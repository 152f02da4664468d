"""Grok Build's session folders: `sessions/<encoded cwd>/<session id>/`, one reader per file
(`grok.Grok` says which file is which), and `Shared`, what the readers of one session know
together.

- `events.jsonl`: the phase log: turns, tool calls, status.
- `updates.jsonl`: background tasks and the usage of each completed turn.
- `summary.json`: cwd, kind, title, model. `chat_history.jsonl`: the first prompt (a title), the
  model of each reply.
- `subagents/<id>/meta.json`: a sub-agent, its type, title and how it ended.

The live status is made of two files, the index (which process holds the session) and the
phase log (what it is doing), read by different readers in any order. Both write into one
`Shared` record per session kept by the harness, and whichever learns something new emits the
session's whole `LiveIndexRead` again under the same `source`, so `state` keeps exactly one
entry per session, with the latest status. The usage of a turn waits there for its model too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..events import (
    Event,
    Kind,
    LiveIndexRead,
    ModelResponded,
    SessionSeen,
    SubagentEnded,
    SubagentOutcome,
    SubagentStarted,
    TitleSet,
    TitleSource,
    ToolCallEnded,
    ToolCallStarted,
    ToolOutcome,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
    Usage,
)
from .fields import count, nonempty, timestamp, title_of

_RUNNING = frozenset({"waiting_for_model", "streaming_text", "streaming_reasoning"})
_TURN_OUTCOME: dict[str, TurnOutcome] = {
    "completed": "completed",
    "error": "failed",
    "cancelled": "interrupted",
}
_TOOL_OUTCOME: dict[str, ToolOutcome] = {
    "success": "ok",
    "error": "error",
    "cancelled": "cancelled",
}
_SUBAGENT_OUTCOME: dict[str, SubagentOutcome] = {
    "completed": "completed",
    "failed": "failed",
    "error": "failed",
    "cancelled": "cancelled",
    "killed": "cancelled",
    "interrupted": "cancelled",
}
_CHILD_KINDS = frozenset({"subagent", "subagent_fork"})
_QUERY = re.compile(r"<user_query>\s*(.*?)\s*</user_query>", re.DOTALL)
UPDATE_METHOD = "_x.ai/session/update"


@dataclass
class Shared:
    """What the readers of one session know together (see the module docstring)."""

    entry: LiveIndexRead | None = None  # from the index, status left out
    turn_open: bool = False
    phase: str | None = None
    waiting_for: str | None = None
    phase_at: float | None = None
    tasks: dict[str, bool] = field(default_factory=dict)  # task id → running
    tasks_at: float | None = None
    model: str | None = None
    usage: list[tuple[str, float, Usage]] = field(default_factory=list)  # waiting for a model

    def status(self) -> tuple[str | None, str | None, float | None]:
        """The session's status word (as `labels.live_state` reads it), reason and since when."""
        if self.turn_open:
            if self.phase == "permission_prompt":
                return "waiting", self.waiting_for, self.phase_at
            if self.phase in _RUNNING or self.phase == "tool_execution":
                return "busy", None, self.phase_at
            return None, None, self.phase_at  # no phase yet, or a word we do not know
        if any(self.tasks.values()):
            return "shell", None, max(self.tasks_at or 0.0, self.phase_at or 0.0) or None
        return "idle", None, self.phase_at

    def live(self) -> list[Event]:
        """The session's index entry with its current status, if a process lists it."""
        if self.entry is None:
            return []
        status, reason, since = self.status()
        return [
            LiveIndexRead(
                pid=self.entry.pid,
                session_id=self.entry.session_id,
                started_at=self.entry.started_at,
                status=status,
                reason=reason,
                status_at=since or self.entry.started_at,
                updated_at=since,
                cwd=self.entry.cwd,
                source=self.entry.source,
                opened_after_start=True,
            )
        ]

    def responses(self, session_id: str) -> list[Event]:
        """The usage read before the session's model was known, now that it is."""
        if self.model is None:
            return []
        waiting, self.usage = self.usage, []
        return [
            ModelResponded(session_id=session_id, at=at, message_id=mid, model=self.model, usage=u)
            for mid, at, u in waiting
        ]

    def set_model(self, session_id: str, model: object) -> list[Event]:
        if isinstance(model, str) and model:
            self.model = model
        return self.responses(session_id)


class EventsReader:
    """`events.jsonl`: turns, tool calls (named, no call id until they end) and the phase."""

    def __init__(self, session_id: str, cwd: str | None, shared: Shared) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.shared = shared
        self.seen = False
        self.at = 0.0
        self.count = 0
        self.open: dict[
            str, list[tuple[str, bool]]
        ] = {}  # tool name → (call id, denied), oldest first

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        at = timestamp(record.get("ts"))
        if at is None:
            return []
        self.at = max(self.at, at)
        kind = nonempty(record.get("type"))
        before = self.shared.status()
        events: list[Event] = []
        if kind == "turn_started":
            events += self._turn_started(record)
        elif kind == "phase_changed":
            phase = record.get("phase")
            self.shared.phase = phase if isinstance(phase, str) else None
            self.shared.phase_at = self.at
        elif kind == "tool_started":
            events += self._tool_started(record)
        elif kind == "permission_requested":
            self.shared.waiting_for = nonempty(record.get("tool_name")) or self.shared.waiting_for
        elif kind == "permission_resolved":
            self._resolved(record)
        elif kind == "tool_completed":
            events += self._tool_completed(record)
        elif kind == "turn_ended":
            outcome = record.get("outcome")
            self.shared.turn_open, self.shared.phase, self.shared.phase_at = False, None, self.at
            events.append(
                TurnEnded(
                    session_id=self.session_id,
                    at=self.at,
                    outcome=_TURN_OUTCOME.get(
                        outcome if isinstance(outcome, str) else "", "completed"
                    ),
                )
            )
        if self.shared.status() != before:
            events += self.shared.live()
        return events

    def _turn_started(self, record: Mapping[str, Any]) -> list[Event]:
        events: list[Event] = []
        model = nonempty(record.get("model_id"))
        if not self.seen:
            self.seen = True
            events.append(
                SessionSeen(session_id=self.session_id, at=self.at, cwd=self.cwd, model=model)
            )
        events += self.shared.set_model(self.session_id, model)
        self.shared.turn_open, self.shared.phase, self.shared.phase_at = True, None, self.at
        self.shared.waiting_for = None
        self.open.clear()
        turn = record.get("turn_number")
        events.append(
            TurnStarted(
                session_id=self.session_id,
                at=self.at,
                record_id=f"{self.session_id}/turn/{turn}@{record.get('ts')}",
            )
        )
        return events

    def _tool_started(self, record: Mapping[str, Any]) -> list[Event]:
        tool = nonempty(record.get("tool_name"))
        if tool is None:
            return []
        self.count += 1
        call_id = f"{self.session_id}/tool/{self.count}@{record.get('ts')}"
        self.open.setdefault(tool, []).append((call_id, False))
        self.shared.waiting_for = tool
        return [ToolCallStarted(session_id=self.session_id, at=self.at, call_id=call_id, tool=tool)]

    def _resolved(self, record: Mapping[str, Any]) -> None:
        decision, tool = record.get("decision"), nonempty(record.get("tool_name"))
        waiting = self.open.get(tool or "")
        if waiting and not (isinstance(decision, str) and decision.startswith("allow")):
            waiting[-1] = (waiting[-1][0], True)  # assumed: any other decision denies the tool
        if self.shared.phase == "permission_prompt":
            self.shared.phase, self.shared.phase_at = "tool_execution", self.at

    def _tool_completed(self, record: Mapping[str, Any]) -> list[Event]:
        waiting = self.open.get(nonempty(record.get("tool_name")) or "")
        if not waiting:
            return []
        call_id, denied = waiting.pop(0)
        raw = record.get("outcome")
        outcome = _TOOL_OUTCOME.get(raw if isinstance(raw, str) else "", "error")
        return [
            ToolCallEnded(
                session_id=self.session_id,
                at=self.at,
                call_id=call_id,
                outcome="rejected" if denied else outcome,
            )
        ]


class UpdatesReader:
    """`updates.jsonl`: only its `_x.ai/session/update` rows: background tasks, turn usage."""

    def __init__(self, session_id: str, shared: Shared) -> None:
        self.session_id = session_id
        self.shared = shared

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict) or record.get("method") != UPDATE_METHOD:
            return []
        params = record.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict):
            return []
        at = timestamp(record.get("timestamp"))
        kind = nonempty(update.get("sessionUpdate"))
        if kind == "turn_completed":
            return self._usage(update, at)
        before = self.shared.status()
        if kind == "background_tasks" and isinstance(update.get("tasks"), list):
            self.shared.tasks = {
                task["task_id"]: task.get("status") == "running"
                for task in update["tasks"]
                if isinstance(task, dict) and isinstance(task.get("task_id"), str)
            }
            self.shared.tasks_at = at
        elif kind == "task_completed":
            snapshot = update.get("task_snapshot")
            task_id = snapshot.get("task_id") if isinstance(snapshot, dict) else None
            if isinstance(task_id, str):
                self.shared.tasks[task_id] = False
                self.shared.tasks_at = at
        return self.shared.live() if self.shared.status() != before else []

    def _usage(self, update: Mapping[str, Any], at: float | None) -> list[Event]:
        usage, prompt = update.get("usage"), update.get("prompt_id")
        if not isinstance(usage, dict) or not isinstance(prompt, str) or at is None:
            return []
        counted = Usage(
            input=count(usage.get("inputTokens")), output=count(usage.get("outputTokens"))
        )
        self.shared.usage.append((f"{self.session_id}/{prompt}", at, counted))
        return self.shared.responses(self.session_id)


class SummaryReader:
    """`summary.json`, rewritten as the session goes: cwd, kind, model, title."""

    def __init__(self, session_id: str, shared: Shared) -> None:
        self.session_id = session_id
        self.shared = shared

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict) or record.get("session_kind") in _CHILD_KINDS:
            return []
        info = record.get("info")
        cwd = info.get("cwd") if isinstance(info, dict) else None
        kind: Kind = "headless" if record.get("session_kind") == "headless" else "interactive"
        model = nonempty(record.get("current_model_id"))
        events: list[Event] = []
        at = timestamp(record.get("created_at"))
        if at is not None:
            events.append(
                SessionSeen(
                    session_id=self.session_id, at=at, cwd=nonempty(cwd), kind=kind, model=model
                )
            )
        title = nonempty(record.get("generated_title"))
        if title is not None:
            source: TitleSource = "user" if record.get("title_is_manual") is True else "harness"
            events.append(TitleSet(session_id=self.session_id, title=title, source=source))
        return events + self.shared.set_model(self.session_id, model)


class ChatHistoryReader:
    """`chat_history.jsonl` (no timestamps): the first real prompt titles the session."""

    def __init__(self, session_id: str, shared: Shared) -> None:
        self.session_id = session_id
        self.shared = shared
        self.titled = False

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        if record.get("type") == "assistant":
            return self.shared.set_model(self.session_id, record.get("model_id"))
        if record.get("type") != "user" or self.titled:
            return []
        prompt = _prompt(record)
        if prompt is None:
            return []
        self.titled = True
        title = title_of(prompt)
        return [TitleSet(session_id=self.session_id, title=title, source="prompt")]


def _prompt(record: Mapping[str, Any]) -> str | None:
    index, synthetic = record.get("prompt_index"), record.get("synthetic_reason")
    if not isinstance(index, int) or isinstance(index, bool) or synthetic not in (None, "human"):
        return None
    content = record.get("content")
    parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
    text = "\n".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )
    found = _QUERY.search(text)
    text = found.group(1) if found else text
    if not text.strip() or text.lstrip().startswith("<system-reminder>"):
        return None
    return text


class MetaReader:
    """`subagents/<id>/meta.json`: rewritten as the sub-agent runs and when it ends."""

    def __init__(self, session_id: str, subagent_id: str) -> None:
        self.session_id = session_id
        self.subagent_id = subagent_id

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
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

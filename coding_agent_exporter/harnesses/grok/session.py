"""Grok Build's session folders: `sessions/<encoded cwd>/<session id>/`, one reader per file
(`grok.Grok` says which file is which), and `Shared`, what the readers of one session know
together. Shapes as Grok Build 0.2.111 writes them (`fixtures/grok/0.2.111/`):

- `events.jsonl`: the phase log: whether a turn runs and its phase (the live status), and
  the ends of its turns (`grok_turns`).
- `updates.jsonl` and `subagents/<id>/meta.json`: `grok_updates`'s readers.
- `summary.json`: cwd, model, title; `session_kind: "subagent"` marks a sub-agent's own folder.
- `prompt_context.json`: print mode or not. `chat_history.jsonl`: the first prompt.

Of a sub-agent's own session folder (a sibling of its lead's) only the tool calls are read, as
the sub-agent's, once the lead's files named it (`subagent_spawned`, `meta.json`), and for a
background one its usage too (`grok_subagents` says why). `Shared.child` says the folder is
one, set by those or by the folder's own `summary.json`; `Shared.parent` is its lead.

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

from ...events import (
    Event,
    Kind,
    LiveIndexRead,
    ModelResponded,
    SessionSeen,
    TitleSet,
    TurnOutcome,
    Usage,
)
from ..fields import nonempty, timestamp, title_of
from .subagents import Marker
from .turns import KEPT, PromptTurns

_RUNNING = frozenset({"waiting_for_model", "streaming_text", "streaming_reasoning"})
_PHASE_OUTCOME: dict[str, TurnOutcome] = {
    "completed": "completed",
    "error": "failed",
    "cancelled": "interrupted",
}
_QUERY = re.compile(r"<user_query>\s*(.*?)\s*</user_query>", re.DOTALL)


@dataclass
class Shared:
    """What the readers of one session know together (see the module docstring)."""

    entry: LiveIndexRead | None = None  # from the index, status left out
    child: bool = False  # a sub-agent's own folder: only its tool calls are read
    parent: str | None = None  # its lead session, when a lead's file named it
    background: bool = False  # a background sub-agent's: its own usage is read too
    turn_open: bool = False
    phase: str | None = None
    waiting_for: str | None = None
    phase_at: float | None = None
    tasks: dict[str, bool] = field(default_factory=dict)  # task id → running
    tasks_at: float | None = None
    model: str | None = None
    first_prompt: str | None = None
    turns: PromptTurns = field(default_factory=PromptTurns)
    usage: list[tuple[str, float, float | None, Usage]] = field(default_factory=list)
    """Turn usage waiting for a model: message id, time, request time, usage."""
    lead: Shared | None = None  # a sub-agent's folder: its lead session's
    counted: list[tuple[float, float]] = field(default_factory=list)
    """The spans of the last turns whose usage this (lead) session wrote: from the prompt to the
    `turn_completed`. A background sub-agent that finished inside one was counted in it."""

    def counts(self, at: float) -> bool:
        """A sub-agent's turn that ended at `at` was counted in one of this lead's turns: one
        that ended after it began before it, or one still under way that began before it (a
        lead waiting for a background sub-agent, `get_command_or_subagent_output`, writes the
        sub-agent's calls into its own turn's usage, as it does a foreground one's)."""
        if self.turns.open_at is not None and self.turns.open_at <= at:
            return True
        return any(start <= at <= end for start, end in self.counted)

    def turn_counted(self, at: float) -> None:
        """This (lead) session wrote the usage of its turn at `at`."""
        start = self.turns.started_at if self.turns.started_at is not None else at
        self.counted = [*self.counted[-KEPT + 1 :], (min(start, at), at)]

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
            ModelResponded(
                session_id=session_id,
                at=at,
                message_id=mid,
                model=self.model,
                usage=u,
                requested_at=asked,
            )
            for mid, at, asked, u in waiting
        ]

    def turn_usage(self, message_id: str, at: float, usage: Usage) -> list[Event]:
        """A turn's usage (all its model calls), written at its end: it spans the turn."""
        self.usage.append((message_id, self.turns.usage_at(at), self.turns.started_at, usage))
        return self.responses(message_id.split("/", 1)[0])

    def set_model(self, session_id: str, model: object) -> list[Event]:
        if isinstance(model, str) and model:
            self.model = model
        return self.responses(session_id)


class EventsReader:
    """`events.jsonl`: whether a turn runs and its phase, for the live status. Turns, tool calls
    and usage are `updates.jsonl`'s: read whole before it, the phase log's turns would take
    every tool call of the session into its last turn (and its tool records have no call id)."""

    def __init__(self, session_id: str, cwd: str | None, shared: Shared) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.shared = shared
        self.seen = False
        self.at = 0.0

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict) or self.shared.child:
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
        elif kind in ("tool_started", "permission_requested"):
            self.shared.waiting_for = nonempty(record.get("tool_name")) or self.shared.waiting_for
        elif kind == "turn_ended":
            self.shared.turn_open, self.shared.phase, self.shared.phase_at = False, None, self.at
            outcome = _PHASE_OUTCOME.get(str(record.get("outcome")), "completed")
            events += self.shared.turns.phase_ended(self.session_id, self.at, outcome)
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
        self.shared.turns.phase_start = self.at
        return events


class SummaryReader:
    """`summary.json`, rewritten as the session goes: cwd, model, title."""

    def __init__(self, session_id: str, shared: Shared, mark_child: Marker) -> None:
        self.session_id = session_id
        self.shared = shared
        self.mark_child = mark_child

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        if record.get("session_kind") in ("subagent", "subagent_fork"):
            self.mark_child(self.session_id, None, None)
        if self.shared.child:
            return []
        info = record.get("info")
        cwd = info.get("cwd") if isinstance(info, dict) else None
        model = nonempty(record.get("current_model_id"))
        events: list[Event] = []
        at = timestamp(record.get("created_at"))
        if at is not None:
            events.append(
                SessionSeen(session_id=self.session_id, at=at, cwd=nonempty(cwd), model=model)
            )
        title = nonempty(record.get("generated_title"))
        if title is not None and title != self.shared.first_prompt:  # else the prompt's title
            events.append(TitleSet(session_id=self.session_id, title=title, source="harness"))
        return events + self.shared.set_model(self.session_id, model)


class PromptContextReader:
    """`prompt_context.json`: whether the session runs in print mode (`is_non_interactive`)."""

    def __init__(self, session_id: str, shared: Shared) -> None:
        self.session_id = session_id
        self.shared = shared

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict) or self.shared.child:
            return []
        at, headless = (
            timestamp(record.get("build_timestamp_utc")),
            record.get("is_non_interactive"),
        )
        if at is None or not isinstance(headless, bool):
            return []
        kind: Kind = "headless" if headless else "interactive"
        return [SessionSeen(session_id=self.session_id, at=at, kind=kind)]


class ChatHistoryReader:
    """`chat_history.jsonl` (no timestamps): the first real prompt titles the session."""

    def __init__(self, session_id: str, shared: Shared) -> None:
        self.session_id = session_id
        self.shared = shared
        self.titled = False

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict) or self.shared.child:
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
        self.shared.first_prompt = prompt
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

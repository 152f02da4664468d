"""Grok Build: `~/.grok` (or `$GROK_HOME`).

Built from the documented layout (no Grok Build binary could be run here; the fixtures are
hand-made, see `fixtures/grok/README.md`). Files read; everything else under the home is left
alone (`auth.json`, `*.lock`, `*.tmp`, the search database, the shared log):

- `active_sessions.json`: the live index, an array of `{session_id, pid, cwd, opened_at}`; one
  pid can hold several sessions. Each session becomes one `LiveIndexRead` (its own `source`), a
  session that left the array a `LiveIndexRemoved`.
- `sessions/<encoded cwd>/<session id>/events.jsonl`: the phase log: turns, tool calls, status.
- `.../updates.jsonl`: background tasks and the usage of each completed turn.
- `.../summary.json`: cwd, kind, title, model. `.../chat_history.jsonl`: the first prompt
  (a title), the model of each reply.
- `.../subagents/<id>/meta.json`: a sub-agent, its type, title and how it ended.

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
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar
from urllib.parse import unquote

from ..events import (
    Event,
    Kind,
    LiveIndexRead,
    LiveIndexRemoved,
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
from .base import Defaults, FileKind, FileReader
from .claude_code import TITLE_MAX
from .fields import count, home, nonempty, timestamp

INDEX = "active_sessions.json"
_SESSION_FILES: dict[str, FileKind] = {
    "events.jsonl": "jsonl",
    "updates.jsonl": "jsonl",
    "chat_history.jsonl": "jsonl",
    "summary.json": "doc",
}
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


class Grok(Defaults):
    name: ClassVar[str] = "grok"
    home_flag: ClassVar[str] = "grok.home"
    watch_dirs: ClassVar[tuple[str, ...]] = ("sessions", INDEX)
    holder_names: ClassVar[tuple[str, ...]] = ()  # the live index says who runs

    def __init__(self) -> None:
        self.shared: dict[str, Shared] = {}

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        return home(environ, "GROK_HOME", ".grok")

    def match(self, rel: PurePosixPath) -> FileKind | None:
        parts = rel.parts
        if parts == (INDEX,):
            return "doc"
        if len(parts) == 4 and parts[0] == "sessions":
            return _SESSION_FILES.get(parts[3])
        if len(parts) == 6 and parts[0] == "sessions" and parts[3] == "subagents":
            return "doc" if parts[5] == "meta.json" else None
        return None

    def reader(self, rel: PurePosixPath) -> FileReader:
        parts = rel.parts
        if parts == (INDEX,):
            return IndexReader(self)
        session_id = parts[2]
        shared = self.of(session_id)
        if len(parts) == 6:
            return MetaReader(session_id, parts[4])
        if parts[3] == "events.jsonl":
            return EventsReader(session_id, decode_cwd(parts[1]), shared)
        if parts[3] == "updates.jsonl":
            return UpdatesReader(session_id, shared)
        if parts[3] == "summary.json":
            return SummaryReader(session_id, shared)
        return ChatHistoryReader(session_id, shared)

    def of(self, session_id: str) -> Shared:
        found = self.shared.get(session_id)
        if found is None:
            found = self.shared[session_id] = Shared()
        return found


def decode_cwd(name: str) -> str | None:
    """A session folder's parent: the cwd URL-encoded (Rust `urlencoding`), or, for a cwd too long
    for a file name, `{slug}-{hash}` (the cwd is then in a `.cwd` file; it comes from
    `summary.json` instead)."""
    return unquote(name) if name.startswith("%") else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class IndexReader:
    """`active_sessions.json`, rewritten (tmp, then rename) whenever a session opens or closes."""

    def __init__(self, harness: Grok) -> None:
        self.harness = harness
        self.listed: set[str] = set()

    def feed(self, record: object) -> list[Event]:
        if record is None:
            record = []
        if not isinstance(record, list):
            return []  # a torn write: nothing changes until the next one
        entries = [e for e in record if isinstance(e, dict) and _valid(e)]
        first: dict[int, float] = {}  # each pid's earliest registration: closest to its start
        for e in entries:
            opened = timestamp(e.get("opened_at"))
            if opened is not None:
                first[e["pid"]] = min(first.get(e["pid"], opened), opened)
        events: list[Event] = []
        listed: set[str] = set()
        for e in entries:
            session_id = e["session_id"]
            listed.add(session_id)
            shared = self.harness.of(session_id)
            shared.entry = LiveIndexRead(
                pid=e["pid"],
                session_id=session_id,
                started_at=first.get(e["pid"]),
                status=None,
                cwd=e["cwd"],
                source=f"{INDEX}#{session_id}",
                opened_after_start=True,
            )
            events += shared.live()
        for session_id in sorted(self.listed - listed):
            self.harness.of(session_id).entry = None
            events.append(LiveIndexRemoved(source=f"{INDEX}#{session_id}"))
        self.listed = listed
        return events


def _valid(entry: Mapping[str, Any]) -> bool:
    pid = entry.get("pid")
    return (
        isinstance(entry.get("session_id"), str)
        and bool(entry["session_id"])
        and isinstance(pid, int)
        and not isinstance(pid, bool)
        and pid > 0
        and isinstance(entry.get("cwd"), str)
        and bool(entry["cwd"])
        and timestamp(entry.get("opened_at")) is not None  # no registration time: no proof
    )


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
            self.shared.waiting_for = _text(record.get("tool_name")) or self.shared.waiting_for
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
        model = _text(record.get("model_id"))
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
        tool = _text(record.get("tool_name"))
        if tool is None:
            return []
        self.count += 1
        call_id = f"{self.session_id}/tool/{self.count}@{record.get('ts')}"
        self.open.setdefault(tool, []).append((call_id, False))
        self.shared.waiting_for = tool
        return [ToolCallStarted(session_id=self.session_id, at=self.at, call_id=call_id, tool=tool)]

    def _resolved(self, record: Mapping[str, Any]) -> None:
        decision, tool = record.get("decision"), _text(record.get("tool_name"))
        waiting = self.open.get(tool or "")
        if waiting and not (isinstance(decision, str) and decision.startswith("allow")):
            waiting[-1] = (waiting[-1][0], True)  # assumed: any other decision denies the tool
        if self.shared.phase == "permission_prompt":
            self.shared.phase, self.shared.phase_at = "tool_execution", self.at

    def _tool_completed(self, record: Mapping[str, Any]) -> list[Event]:
        waiting = self.open.get(_text(record.get("tool_name")) or "")
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
        model = _text(record.get("current_model_id"))
        events: list[Event] = []
        at = timestamp(record.get("created_at"))
        if at is not None:
            events.append(
                SessionSeen(
                    session_id=self.session_id, at=at, cwd=_text(cwd), kind=kind, model=model
                )
            )
        title = _text(record.get("generated_title"))
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
        title = " ".join(prompt.split())[:TITLE_MAX]
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
                subagent_type=_text(record.get("subagent_type")) or "general-purpose",
                title=_text(record.get("description")),
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

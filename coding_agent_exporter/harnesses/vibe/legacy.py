"""Vibe's legacy engine (every version before 2.26, and `vibe --legacy-harness`).

`<save dir>/session_<date>_<time>_<id8>/` holds `messages.jsonl` (one message per line, rewritten
at the end of every step, with NO timestamps and no turn ids) and `meta.json` (the session id,
start and end time, cwd, title, the model, cumulative token stats, its sub-agents). Each
sub-agent (`task` tool) is a session of its own in `agents/<agent>_<…>/` inside its lead's folder.

What is known and what is not:
- Times: a message gets the time its line was first read at, taken from `meta.json`'s
  `end_time` (rewritten at every save): followed live, right to within a step. Lines read
  before any save was seen (a session read afterwards) are spread evenly between the session's
  `start_time` and `end_time`, in file order.
- Usage exists only as the session's cumulative stats: counted as carried usage (tokens without
  a message) on the session, or on the sub-agent for a sub-agent's own stats; each assistant
  line is one message.
- A turn ends completed at an answer without tool calls, interrupted at a denial
  (`<user_cancellation>`) or when the next prompt comes before any answer, failed when the file
  ends on a prompt nobody answered (an API error; an interrupted last prompt reads the same).
- A failed command is a `<tool_error>` text; approvals are never written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...events import (
    Event,
    Kind,
    ModelResponded,
    SessionSeen,
    SubagentEnded,
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
from ..fields import count, nonempty, timestamp
from .store import UNKNOWN_MODEL, listed, text_of

_HEADLESS_MARK = "# Headless Mode"


@dataclass
class Legacy:
    """One legacy session (or sub-agent) folder: its lines wait for its `meta.json`."""

    default_model: str | None = None
    meta: dict[str, Any] | None = None
    lines: list[dict[str, Any]] = field(default_factory=list)
    told: bool = False  # times are taken from saves once something was told
    open_turn: bool = False
    answered: bool = False  # the open turn got a response
    seen_meta: bool = False
    linked: set[str] = field(default_factory=set)  # sub-agents told
    call_at: dict[str, float] = field(default_factory=dict)  # tool call id → its line's time
    lines_read: int = 0  # the file is saved whole at every step: a new copy repeats old lines

    @property
    def session_id(self) -> str | None:
        meta = self.meta or {}
        return nonempty(meta.get("parent_session_id")) or nonempty(meta.get("session_id"))

    @property
    def subagent_id(self) -> str | None:
        meta = self.meta or {}
        return nonempty(meta.get("session_id")) if meta.get("parent_session_id") else None

    def model(self) -> str:
        config = (self.meta or {}).get("config")
        found = nonempty(config.get("active_model")) if isinstance(config, dict) else None
        return found or self.default_model or UNKNOWN_MODEL

    def flush(self) -> list[Event]:
        if self.meta is None or self.session_id is None:
            return []
        events = self._meta_events() if not self.seen_meta else []
        self.seen_meta = True
        start = timestamp(self.meta.get("start_time")) or 0.0
        end = max(start, timestamp(self.meta.get("end_time")) or start)
        lines, self.lines = self.lines, []
        for i, line in enumerate(lines):
            at = end if self.told else start + (end - start) * i / max(1, len(lines) - 1)
            events += self._line(line, at)
            if line.get("tool_calls"):
                events += self._children(end, called_only=True)  # launched by that line
        self.told = self.told or bool(lines)
        if lines and self.open_turn and not self.answered and self.subagent_id is None:
            events += self._end(end, "failed")
        return events + self._children(end) + self._stats(end)

    def _meta_events(self) -> list[Event]:
        meta = self.meta or {}
        session_id = self.session_id
        assert session_id is not None
        start = timestamp(meta.get("start_time")) or 0.0
        if self.subagent_id is not None:
            return [
                SubagentStarted(
                    session_id=session_id,
                    at=start,
                    subagent_id=self.subagent_id,
                    subagent_type=_agent_of(meta),
                )
            ]
        environment = meta.get("environment")
        cwd = environment.get("working_directory") if isinstance(environment, dict) else None
        prompt = meta.get("system_prompt")
        headless = _HEADLESS_MARK in str(prompt.get("content") if isinstance(prompt, dict) else "")
        kind: Kind = "headless" if headless else "interactive"
        events: list[Event] = [
            SessionSeen(
                session_id=session_id, at=start, cwd=nonempty(cwd), kind=kind, model=self.model()
            )
        ]
        if nonempty(meta.get("title")):
            source: TitleSource = (
                "harness" if meta.get("title_source") in ("auto", None) else "user"
            )
            events.append(TitleSet(session_id=session_id, title=meta["title"], source=source))
        return events

    def _children(self, end: float, called_only: bool = False) -> list[Event]:
        """The lead's `child_sessions`: each sub-agent's id, agent and launching call, started
        when that call was (or at the latest save, if its line was not read)."""
        events: list[Event] = []
        for child in listed((self.meta or {}).get("child_sessions")):
            if not (isinstance(child, dict) and nonempty(child.get("session_id"))):
                continue
            if child["session_id"] in self.linked or self.session_id is None:
                continue
            call_id = nonempty(child.get("tool_call_id"))
            if called_only and call_id not in self.call_at:
                continue
            self.linked.add(child["session_id"])
            events.append(
                SubagentStarted(
                    session_id=self.session_id,
                    at=self.call_at.get(call_id or "", end),
                    call_id=call_id,
                    subagent_id=child["session_id"],
                    subagent_type=nonempty(child.get("agent")),
                )
            )
        return events

    def _stats(self, at: float) -> list[Event]:
        stats = (self.meta or {}).get("stats")
        if not isinstance(stats, dict) or self.session_id is None:
            return []
        cached = count(stats.get("session_cached_tokens"))
        used = Usage(
            input=max(0, count(stats.get("session_prompt_tokens")) - cached),
            output=count(stats.get("session_completion_tokens")),
            cache_read=cached,
        )
        if used == Usage():
            return []
        owner = self.subagent_id or self.session_id
        return [self._responded(f"{owner}:stats", at, used, carried=True)]

    def _responded(self, message_id: str, at: float, used: Usage, carried: bool) -> ModelResponded:
        assert self.session_id is not None
        return ModelResponded(
            session_id=self.session_id,
            at=at,
            message_id=message_id,
            model=self.model(),
            usage=used,
            subagent_id=self.subagent_id,
            main=self.subagent_id is None,
            carried=carried,
        )

    def _line(self, line: dict[str, Any], at: float) -> list[Event]:
        role = line.get("role")
        if role == "user" and not line.get("injected"):
            return self._prompt(line, at)
        if role == "assistant":
            return self._answer(line, at)
        if role == "tool":
            return self._tool_result(line, at)
        return []

    def _prompt(self, line: dict[str, Any], at: float) -> list[Event]:
        if self.subagent_id is not None or self.session_id is None:
            return []
        events = self._end(at, "interrupted") if self.open_turn else []
        record_id = nonempty(line.get("message_id")) or f"{self.session_id}:{at}"
        self.open_turn, self.answered = True, False
        prompt = line.get("content")
        text = prompt if isinstance(prompt, str) else text_of(prompt)
        return [
            *events,
            TurnStarted(session_id=self.session_id, at=at, record_id=record_id, prompt=text),
        ]

    def _answer(self, line: dict[str, Any], at: float) -> list[Event]:
        assert self.session_id is not None
        self.answered = True
        events: list[Event] = []
        message_id = nonempty(line.get("message_id"))
        if message_id:
            events.append(self._responded(message_id, at, Usage(), carried=False))
        calls = [c for c in listed(line.get("tool_calls")) if isinstance(c, dict)]
        for call in calls:
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            assert isinstance(function, dict)
            if nonempty(call.get("id")):
                self.call_at[call["id"]] = at
                events.append(
                    ToolCallStarted(
                        session_id=self.session_id,
                        at=at,
                        call_id=call["id"],
                        tool=str(function.get("name") or "tool"),
                        subagent_id=self.subagent_id,
                        arguments=function.get("arguments"),
                    )
                )
        if not calls and self.open_turn:
            events += self._end(at, "completed")
        return events

    def _tool_result(self, line: dict[str, Any], at: float) -> list[Event]:
        call_id = nonempty(line.get("tool_call_id"))
        if call_id is None or self.session_id is None:
            return []
        content = str(line.get("content") or "")
        outcome: ToolOutcome = "ok"
        if content.startswith("<user_cancellation>"):
            outcome = "rejected"
        elif content.startswith("<tool_error>"):
            outcome = "error"
        events: list[Event] = [
            ToolCallEnded(session_id=self.session_id, at=at, call_id=call_id, outcome=outcome)
        ]
        result = line.get("tool_result")
        if line.get("name") == "task" and isinstance(result, dict):
            output = result.get("output") if isinstance(result.get("output"), dict) else {}
            assert isinstance(output, dict)
            done = output.get("completed") is True and not result.get("cancelled")
            events.append(
                SubagentEnded(
                    session_id=self.session_id,
                    at=at,
                    outcome="completed" if done else "failed",
                    call_id=call_id,
                )
            )
        if outcome == "rejected" and self.open_turn:
            events += self._end(at, "interrupted")
        return events

    def _end(self, at: float, outcome: TurnOutcome) -> list[Event]:
        if not self.open_turn or self.session_id is None:
            return []
        self.open_turn = False
        return [TurnEnded(session_id=self.session_id, at=at, outcome=outcome)]


def _agent_of(meta: dict[str, Any]) -> str | None:
    profile = meta.get("agent_profile")
    return nonempty(profile.get("name")) if isinstance(profile, dict) else None


class MessagesReader:
    """`messages.jsonl`; a copy saved over it starts a new reader, whose lines up to what was
    read already are the same messages (the file only grows by steps)."""

    def __init__(self, session: Legacy) -> None:
        self.session = session
        self.line = 0

    def feed(self, record: object) -> list[Event]:
        self.line += 1
        if self.line <= self.session.lines_read:
            return []
        self.session.lines_read = self.line
        if isinstance(record, dict):
            self.session.lines.append(record)
        return self.session.flush()


class MetaReader:
    def __init__(self, session: Legacy) -> None:
        self.session = session

    def feed(self, record: object) -> list[Event]:
        if isinstance(record, dict) and nonempty(record.get("session_id")):
            self.session.meta = record
        return self.session.flush()

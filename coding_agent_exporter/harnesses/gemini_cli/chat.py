"""One Gemini CLI chat file (`tmp/<slug>/chats/…`), a lead session's or a sub-agent's, as
events; and `Shared`, what the files of one home tell each other.

Every line ever written counts: a cancelled or failed exchange drops out of the message list
(`$set messages`) after its tokens were spent, so each `gemini` id with `tokens` is one response
(state keeps the largest usage per id). After a denied tool the TUI appends copies of the whole
history with new ids (no tokens, `content` as parts, the first one starting with the
`<session_context>` block); they are neither prompts nor responses.

The file never says whether a reply with text also calls tools (`toolCalls` are added after they
ran): a reply with text and no tool calls ends its turn (completed). `info` "Request cancelled."
ends it interrupted; an `error` record (TUI), or a `$set messages` that rolls the list back to
before the prompt without a cancel (an API error), ends it failed.

What its tokens and a tool call's state say in our terms: `gemini_fields`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...events import (
    Event,
    Kind,
    ModelFailed,
    ModelResponded,
    SessionSeen,
    SubagentEnded,
    SubagentOutcome,
    SubagentStarted,
    TitleSet,
    ToolCallEnded,
    ToolCallStarted,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
    Usage,
)
from ..fields import nonempty, timestamp, title_of
from .fields import CONTEXT, prompt_of, result_text, tool_outcome, usage_of, workspace_of

_CANCELLED = "Request cancelled."
_SUBAGENT_ENDS: dict[str, SubagentOutcome] = {
    "completed": "completed",
    "cancelled": "cancelled",
    "error": "failed",
    "failed": "failed",
}


@dataclass(slots=True)
class Shared:
    """What the files of one home tell each other: project roots by slug, the sessions the TUI
    ran, the lead sessions already seen, and the root session of each sub-agent."""

    roots: dict[str, str] = field(default_factory=dict)
    interactive: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)
    root_of: dict[str, str] = field(default_factory=dict)


class ChatReader:
    """One chat file: a lead session's, or a sub-agent's (`parent` = the folder it lies in)."""

    def __init__(self, shared: Shared, slug: str, parent: str | None) -> None:
        self.shared, self.slug, self.parent = shared, slug, parent
        self.session_id: str | None = None
        self.subagent_id: str | None = None
        self.started = 0.0
        self.cwd: str | None = None
        self.announced = False
        self.at = 0.0
        self.previous_at: float | None = None  # the record before a response: its request
        self.response_at: float | None = None  # the latest response: its tools start then
        self.order: dict[str, int] = {}  # message id → position of its first write
        self.prompt: tuple[str, float] | None = None  # the open turn's prompt id and time
        self.copying = False  # the TUI is appending copies of the history
        self.ended_tools: set[str] = set()
        self.usage: dict[str, Usage] = {}  # reported usage per response id (rewrites repeat it)
        self.titled = False

    @property
    def main(self) -> bool:
        return self.parent is None

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        if self.session_id is None:
            return self._header(record) if nonempty(record.get("sessionId")) else []
        patch = record.get("$set")
        if isinstance(patch, dict):
            return self._announce(patch.get("messages")) + self._patch(patch)
        if not isinstance(record.get("id"), str) or not record["id"]:
            return []  # `$rewindTo` and records we do not know
        events = self._announce(None)
        at = timestamp(record.get("timestamp"))
        self.at = max(self.at, at or 0.0)
        self.order.setdefault(record["id"], len(self.order))
        kind = nonempty(record.get("type"))
        if kind == "user":
            events += self._user(record)
        elif kind == "gemini":
            events += self._gemini(record)
        elif kind in ("info", "error"):
            events += self._notice(record)
        if kind != "gemini" or record.get("tokens"):
            self.previous_at = self.at
        return events

    # -- the session ------------------------------------------------------------------------

    def _header(self, header: Mapping[str, Any]) -> list[Event]:
        own = str(header["sessionId"])
        self.started = self.at = timestamp(header.get("startTime")) or 0.0
        self.previous_at = self.at or None
        if self.main:
            self.session_id = own
            return []
        assert self.parent is not None
        root = self.shared.root_of.get(self.parent, self.parent)
        self.session_id, self.subagent_id = root, own
        self.shared.root_of[own] = root
        folders = header.get("directories")
        self.cwd = nonempty(folders[0]) if isinstance(folders, list) and folders else None
        return []

    def _announce(self, messages: object) -> list[Event]:
        """The session, once: on the first line after the header, which names the workspace."""
        if self.announced or self.session_id is None:
            return []
        self.announced = True
        for position, message in enumerate(messages if isinstance(messages, list) else []):
            if isinstance(message, dict) and isinstance(message.get("id"), str):
                self.order.setdefault(message["id"], position)
        cwd = self.cwd or workspace_of(messages) or self.shared.roots.get(self.slug)
        at = self.started or self.at
        if not self.main:
            return [
                SessionSeen(session_id=self.session_id, at=at, cwd=cwd, main=False),
                SubagentStarted(
                    session_id=self.session_id,
                    at=at,
                    subagent_id=self.subagent_id,
                    parent_id=self.parent if self.parent != self.session_id else None,
                ),
            ]
        self.shared.seen.add(self.session_id)
        kind: Kind = "interactive" if self.session_id in self.shared.interactive else "headless"
        return [SessionSeen(session_id=self.session_id, at=at, cwd=cwd, kind=kind)]

    def _patch(self, patch: Mapping[str, Any]) -> list[Event]:
        at = timestamp(patch.get("lastUpdated"))
        self.at = max(self.at, at or 0.0)
        events: list[Event] = []
        summary = nonempty(patch.get("summary"))
        if summary is not None and self.main and self.session_id is not None:
            title = title_of(summary)
            events.append(TitleSet(session_id=self.session_id, title=title, source="harness"))
        messages = patch.get("messages")
        if isinstance(messages, list):
            self.copying = False
            if self._rolled_back(messages):
                events += self._failed()
        return events

    def _rolled_back(self, messages: list[Any]) -> bool:
        """The list went back to before the open turn's prompt: its request failed."""
        if self.prompt is None:
            return False
        before = self.order.get(self.prompt[0], -1)
        ids = [m.get("id") for m in messages if isinstance(m, dict)]
        return bool(ids) and all(
            isinstance(i, str) and self.order.get(i, before) < before for i in ids
        )

    # -- turns ------------------------------------------------------------------------------

    def _user(self, record: Mapping[str, Any]) -> list[Event]:
        parts = record.get("content")
        if self.main and isinstance(parts, list) and parts:
            first = parts[0].get("text") if isinstance(parts[0], dict) else None
            if isinstance(first, str) and first.startswith(CONTEXT):
                self.copying = True  # a copy of the history starts with its context block
        text = prompt_of(record)
        if text is None or not self.main or self.copying or self.session_id is None:
            return []
        events: list[Event] = []
        if self.prompt is not None:
            events.append(TurnEnded(session_id=self.session_id, at=self.at, outcome="interrupted"))
        self.prompt = (str(record["id"]), self.at)
        events.append(
            TurnStarted(
                session_id=self.session_id, at=self.at, record_id=self.prompt[0], prompt=text
            )
        )
        if not self.titled:
            self.titled = True
            title = title_of(text)
            events.append(TitleSet(session_id=self.session_id, title=title, source="prompt"))
        return events

    def _notice(self, record: Mapping[str, Any]) -> list[Event]:
        if record.get("type") == "error":
            return self._failed()
        if record.get("content") == _CANCELLED:
            return self._ended("interrupted")
        return []

    def _failed(self) -> list[Event]:
        if self.prompt is None or self.session_id is None:
            return []
        failed = ModelFailed(
            session_id=self.session_id,
            at=self.at,
            error="api_error",
            subagent_id=self.subagent_id,
            requested_at=self.previous_at,
        )
        return [failed, *self._ended("failed")]

    def _ended(self, outcome: TurnOutcome) -> list[Event]:
        if self.prompt is None or self.session_id is None:
            return []
        self.prompt = None
        return [TurnEnded(session_id=self.session_id, at=self.at, outcome=outcome)]

    # -- responses and tools ----------------------------------------------------------------

    def _gemini(self, record: Mapping[str, Any]) -> list[Event]:
        if self.session_id is None:
            return []
        events: list[Event] = []
        tokens, calls, content = (
            record.get("tokens"),
            record.get("toolCalls"),
            record.get("content"),
        )
        text = content if isinstance(content, str) else None
        at = timestamp(record.get("timestamp")) or self.at
        usage = usage_of(tokens) if isinstance(tokens, dict) else None
        if usage is not None:
            self.response_at = at
        if usage is not None and usage != self.usage.get(record["id"]):
            self.usage[record["id"]] = usage
            events.append(
                ModelResponded(
                    session_id=self.session_id,
                    at=at,
                    message_id=str(record["id"]),
                    model=nonempty(record.get("model")) or "unknown",
                    usage=usage,
                    subagent_id=self.subagent_id,
                    main=self.main,
                    requested_at=self.previous_at,
                    finish_reason="tool_calls" if calls or not text else "stop",
                    text=text or None,
                )
            )
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict):
                events += self._tool_call(call, self.response_at or at)
        if text and text.strip() and not calls and self.main:
            events += self._ended("completed")
        return events

    def _tool_call(self, call: Mapping[str, Any], started: float) -> list[Event]:
        call_id, outcome = nonempty(call.get("id")), tool_outcome(call)
        if call_id is None or outcome is None or call_id in self.ended_tools:
            return []
        assert self.session_id is not None
        self.ended_tools.add(call_id)
        ended = timestamp(call.get("timestamp")) or self.at
        name = nonempty(call.get("name")) or "unknown"
        events: list[Event] = [
            ToolCallStarted(
                session_id=self.session_id,
                at=min(started, ended),
                call_id=call_id,
                tool=name,
                subagent_id=self.subagent_id,
                arguments=call.get("args"),
            )
        ]
        agent = nonempty(call.get("agentId"))
        if name == "invoke_agent" and agent is not None:
            events += self._subagent(call, call_id, agent, started, ended)
        result = result_text(call)
        events.append(
            ToolCallEnded(
                session_id=self.session_id,
                at=ended,
                call_id=call_id,
                outcome=outcome,
                result=result or None,
            )
        )
        return events

    def _subagent(
        self, call: Mapping[str, Any], call_id: str, agent: str, started: float, ended: float
    ) -> list[Event]:
        """The parent's side of a sub-agent: its type, and how it ended."""
        assert self.session_id is not None
        args, display = call.get("args"), call.get("resultDisplay")
        args = args if isinstance(args, dict) else {}
        display = display if isinstance(display, dict) else {}
        kind = nonempty(args.get("agent_name")) or nonempty(display.get("agentName"))
        state = display.get("state")
        status = call.get("status")
        outcome = _SUBAGENT_ENDS.get(state) if isinstance(state, str) else None
        if outcome is None:
            outcome = "completed" if status == "success" else _SUBAGENT_ENDS.get(str(status))
        events: list[Event] = [
            SubagentStarted(
                session_id=self.session_id,
                at=min(started, ended),
                call_id=call_id,
                subagent_id=agent,
                subagent_type=kind or "subagent",
                parent_id=self.subagent_id,
            )
        ]
        if outcome is not None:
            events.append(
                SubagentEnded(
                    session_id=self.session_id,
                    at=ended,
                    outcome=outcome,
                    call_id=call_id,
                    subagent_id=agent,
                )
            )
        return events

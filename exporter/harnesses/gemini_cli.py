"""Gemini CLI: `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`.

Files read (everything else under the home is left alone: settings, OAuth credentials, tool
outputs, shell history):

- `tmp/<project slug>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl`: one session, a log of
  UPDATES. Line 1 is a header `{sessionId, projectHash, startTime, lastUpdated, kind}`; then
  message records `{id, timestamp, type: user|gemini|info|warning|error, content, ...}` upserted
  by `id` (a `gemini` record is written when its stream ends, again with `toolCalls` once its
  tools finished), `{"$set": {...}}` patches (`lastUpdated`, `summary`, `messages` = the whole
  list replaced) and `{"$rewindTo": id}`.
- `tmp/<slug>/chats/<parent id>/<child id>.jsonl`: a sub-agent (`kind: "subagent"`), started by
  the parent's `invoke_agent` call (`agentId` = the child's id).
- `tmp/<slug>/logs.json`: the TUI's prompt log; a session listed there is interactive.
- `projects.json`: `{"projects": {<abs path>: <slug>}}`, the cwd when a session does not say.

Every line ever written counts: a cancelled or failed exchange drops out of the message list
(`$set messages`) after its tokens were spent, so each `gemini` id with `tokens` is one response
(state keeps the largest usage per id). After a denied tool the TUI appends copies of the whole
history with new ids (no tokens, `content` as parts, the first one starting with the
`<session_context>` block); they are neither prompts nor responses.

Tokens: Gemini's `input` includes the cached input and `output` excludes the thoughts, so
input = input - cached, cache_read = cached, output = output, reasoning = thoughts (on top of
output, not a part of it), cache_write = 0.

The file never says whether a reply with text also calls tools (`toolCalls` are added after they
ran): a reply with text and no tool calls ends its turn (completed). `info` "Request cancelled."
ends it interrupted; an `error` record (TUI), or a `$set messages` that rolls the list back to
before the prompt without a cancel (an API error), ends it failed. Approvals are not recorded: a
denied call is `cancelled` without `resultDisplay` (rejected), a call stopped while it ran is
`cancelled` with its partial output (cancelled). A shell command that fails is `success` with
`Exit Code: N` in its output (error).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from ..events import (
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
    ToolOutcome,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
    Usage,
)
from .base import Defaults, FileKind, FileReader
from .fields import count, nonempty, timestamp

_SESSION = re.compile(r"^session-\d{4}-\d\d-\d\dT\d\d-\d\d-[0-9A-Za-z_-]+\.jsonl$")
_CHILD = re.compile(r"^([0-9A-Za-z_-]+)\.jsonl$")
_CONTEXT = "<session_context>"
_WORKSPACE = re.compile(r"\*\*Workspace Directories:\*\*\s*\n\s*- ([^\n]+)")
_EXIT_CODE = re.compile(r"Exit Code: (-?\d+)")
_CANCELLED = "Request cancelled."
_SHELL = "run_shell_command"
_SUBAGENT_ENDS: dict[str, SubagentOutcome] = {
    "completed": "completed",
    "cancelled": "cancelled",
    "error": "failed",
    "failed": "failed",
}
TITLE_MAX = 200


@dataclass(slots=True)
class Shared:
    """What the files of one home tell each other: project roots by slug, the sessions the TUI
    ran, the lead sessions already seen, and the root session of each sub-agent."""

    roots: dict[str, str] = field(default_factory=dict)
    interactive: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)
    root_of: dict[str, str] = field(default_factory=dict)


class GeminiCli(Defaults):
    name: ClassVar[str] = "gemini-cli"
    home_flag: ClassVar[str] = "gemini.home"
    watch_dirs: ClassVar[tuple[str, ...]] = ("tmp", "projects.json")
    holder_names: ClassVar[tuple[str, ...]] = ()  # the CLI opens its file per write only

    def __init__(self) -> None:
        self.shared = Shared()

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        configured = environ.get("GEMINI_CLI_HOME")  # the CLI's own stand-in for $HOME
        if configured:
            return Path(configured) / ".gemini"
        return Path(environ.get("HOME", "~")).expanduser() / ".gemini"

    def match(self, rel: PurePosixPath) -> FileKind | None:
        parts = rel.parts
        if parts == ("projects.json",):
            return "doc"
        if len(parts) < 3 or parts[0] != "tmp":
            return None
        if len(parts) == 3 and parts[2] == "logs.json":
            return "doc"
        if len(parts) == 4 and parts[2] == "chats" and _SESSION.match(parts[3]):
            return "jsonl"
        if len(parts) == 5 and parts[2] == "chats" and _CHILD.match(parts[4]):
            return "jsonl"
        return None

    def reader(self, rel: PurePosixPath) -> FileReader:
        parts = rel.parts
        if parts == ("projects.json",):
            return ProjectsReader(self.shared)
        if parts[-1] == "logs.json":
            return LogsReader(self.shared)
        parent = parts[3] if len(parts) == 5 else None
        return ChatReader(self.shared, parts[1], parent)


def usage_of(raw: Mapping[str, Any]) -> Usage:
    """Gemini tokens → ours. Gemini counts the cached input inside input and the thoughts
    outside output; ours: input without the cached part, output with the thoughts (reasoning is
    a part of output for every agent), reasoning = the thoughts."""
    cached, thoughts = count(raw.get("cached")), count(raw.get("thoughts"))
    return Usage(
        input=max(0, count(raw.get("input")) - cached),
        output=count(raw.get("output")) + thoughts,
        cache_read=cached,
        reasoning=thoughts,
    )


def tool_outcome(call: Mapping[str, Any]) -> ToolOutcome | None:
    """A finished call's outcome, or None while it has no final status."""
    status = call.get("status")
    if status == "success":
        code = _EXIT_CODE.search(result_text(call)) if call.get("name") == _SHELL else None
        return "error" if code is not None and int(code.group(1)) != 0 else "ok"
    if status == "error":
        return "error"
    if status == "cancelled":
        denied = "denied" in result_text(call) or not call.get("resultDisplay")
        return "rejected" if denied else "cancelled"
    return None


def result_text(call: Mapping[str, Any]) -> str:
    """The output (or error) the call returned to the model."""
    texts: list[str] = []
    for part in call.get("result") or []:
        answer = part.get("functionResponse") if isinstance(part, dict) else None
        response = answer.get("response") if isinstance(answer, dict) else None
        if isinstance(response, dict):
            texts += [str(response[k]) for k in ("output", "error") if k in response]
    return "\n".join(texts)


def prompt_of(record: Mapping[str, Any]) -> str | None:
    """The user's own words in a `user` record; None for tool results and injected context."""
    parts = record.get("content")
    texts = [p.get("text") for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
    text = next((t for t in texts if isinstance(t, str)), None)
    if text is None or not text.strip() or text.startswith(_CONTEXT):
        return None
    return text


def workspace_of(messages: object) -> str | None:
    """The first workspace directory named in a `<session_context>` message."""
    for message in messages if isinstance(messages, list) else []:
        parts = message.get("content") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else []:
            text = part.get("text") if isinstance(part, dict) else None
            found = _WORKSPACE.search(text) if isinstance(text, str) else None
            if found is not None and text is not None and text.startswith(_CONTEXT):
                return found.group(1).strip()
    return None


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
            title = " ".join(summary.split())[:TITLE_MAX]
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
            if isinstance(first, str) and first.startswith(_CONTEXT):
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
            title = " ".join(text.split())[:TITLE_MAX]
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


class ProjectsReader:
    """`projects.json`: project roots by slug, for sessions that do not name their workspace."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def feed(self, record: object) -> list[Event]:
        projects = record.get("projects") if isinstance(record, dict) else None
        for root, slug in projects.items() if isinstance(projects, dict) else []:
            if isinstance(root, str) and isinstance(slug, str) and root and slug:
                self.shared.roots[slug] = root
        return []


class LogsReader:
    """`tmp/<slug>/logs.json`, written by the TUI only: its sessions are interactive."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def feed(self, record: object) -> list[Event]:
        events: list[Event] = []
        for entry in record if isinstance(record, list) else []:
            session = nonempty(entry.get("sessionId")) if isinstance(entry, dict) else None
            if session is None or session in self.shared.interactive:
                continue
            self.shared.interactive.add(session)
            at = timestamp(entry.get("timestamp"))
            if session in self.shared.seen and at is not None:  # read before this file
                events.append(SessionSeen(session_id=session, at=at, kind="interactive"))
        return events

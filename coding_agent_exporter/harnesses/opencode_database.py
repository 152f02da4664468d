"""The `event` rows of an OpenCode database (`EVENTS`), as events: shared by the harnesses of
OpenCode (`opencode.db`) and of its fork Kilo Code (`kilo.db`), whose databases have the same
tables and rows (recorded with both). One reader follows the whole database, so it knows every
session:

- `session.created.1` / `session.updated.1` carry the whole session `info`: `directory` (cwd),
  `parentID` (a sub-agent, started by the `task` tool: its work carries `session_id` = the root,
  `subagent_id` = its own id), `title` (a placeholder `New session - <ISO time>` until the small
  model names it), `model.id`, `version`, and `permission`: `opencode run` denies `question` in
  the session's own rules, the TUI sets none, which is how a headless run is told apart.
- `message.updated.1` carries a message `info`, written again as it changes. A user message in a
  root session starts a turn; an assistant message (`parentID` = its user message) reports
  `tokens {input, output, reasoning, cache {read, write}}` once its step finished, then
  `time.completed`, and `finish` (`tool-calls` while the loop goes on) or `error`
  (`APIError`: the turn failed; `MessageAbortedError`, Esc: interrupted, its tokens are 0 even
  when the usage had arrived). A step that stopped for `tool-calls` after the user rejected a
  tool ends the turn too (OpenCode stops the loop): interrupted; unless the rejection came
  with feedback ("... with the following feedback: ..."): then the loop goes on with it (the
  next step answers it; recorded with Kilo Code's TUI).
- `message.part.updated.1` carries a part: `text` (the first one of a root session's user
  message is the prompt title), `tool` (`callID`, `tool`, `state.status` pending -> running ->
  completed | error, `state.time {start, end}`, the exit code in `state.metadata.exit`, the
  child session of a `task` in `state.metadata.sessionId`).

What its tokens and a tool part's state say in our terms: `opencode_fields`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

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
    TurnEnded,
    TurnOutcome,
    TurnStarted,
    Usage,
)
from .base import TableLog
from .fields import TITLE_MAX, nonempty, title_of, usd
from .opencode_fields import tool_outcome, usage_of

EVENTS = TableLog(
    table="event",
    columns=("aggregate_id", "seq", "type", "data"),
    group="aggregate_id",
    seq="seq",
    heads=("event_sequence", "aggregate_id", "seq"),
    json=("data",),
)
REMEMBERED = 4096  # messages and tool parts kept for the updates that may still come
_PLACEHOLDER = re.compile(r"^(New|Child) session - \d{4}-\d\d-\d\dT")
_WITH_FEEDBACK = re.compile(r"with the following feedback", re.IGNORECASE)
"""A rejection the user answered with a message: the loop goes on (OpenCode's `CorrectedError`)."""


def _seconds(value: object) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    return value / 1000.0 if ok else None  # type: ignore[operator]


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(slots=True)
class _Session:
    root: str
    parent: str | None
    title: str | None = None
    seen: tuple[object, ...] = ()


@dataclass(slots=True)
class _Message:
    session_id: str
    role: str
    usage: Usage = field(default_factory=Usage)
    ended: bool = False
    rejected: bool = False
    prompt: bool = False


@dataclass(slots=True)
class _Tool:
    call_id: str
    session_id: str
    message_id: str
    tool: str
    at: float
    started: bool = False
    ended: bool = False
    child: str | None = None


class DatabaseReader:
    """The `event` rows of one OpenCode database, oldest first."""

    log: TableLog = EVENTS

    def __init__(self) -> None:
        self.at = 0.0
        self.sessions: dict[str, _Session] = {}
        self.messages: dict[str, _Message] = {}
        self.tools: dict[str, _Tool] = {}

    def feed(self, record: object) -> list[Event]:
        row = _dict(record)
        data = _dict(row.get("data"))
        kind = nonempty(row.get("type"))
        if kind in ("session.created.1", "session.updated.1"):
            return self._session(_dict(data.get("info")))
        if kind == "message.updated.1":
            return self._message(_dict(data.get("info")))
        if kind == "message.part.updated.1":
            self.at = max(self.at, _seconds(data.get("time")) or 0.0)
            return self._part(_dict(data.get("part")))
        return []

    # -- sessions ---------------------------------------------------------------------------

    def _session(self, info: dict[str, Any]) -> list[Event]:
        session_id = nonempty(info.get("id"))
        if session_id is None:
            return []
        times = _dict(info.get("time"))
        at = _seconds(times.get("updated")) or _seconds(times.get("created")) or self.at
        self.at = max(self.at, at)
        known = self.sessions.get(session_id)
        first = known is None
        if known is None:
            parent = nonempty(info.get("parentID"))
            root = self.sessions[parent].root if parent in self.sessions else parent
            known = self.sessions[session_id] = _Session(root or session_id, parent)
        if known.parent is not None:
            return self._child_seen(session_id, known, info, at) if first else []
        events: list[Event] = []
        seen = (_cwd(info), _kind(info), nonempty(info.get("version")), _model(info))
        if seen != known.seen:
            known.seen = seen
            cwd, kind, version, model = seen
            events.append(
                SessionSeen(
                    session_id=session_id,
                    at=_seconds(times.get("created")) or at,
                    cwd=cwd,
                    kind=kind,
                    version=version,
                    model=model,
                )
            )
        title = nonempty(info.get("title"))
        if title and title != known.title and not _PLACEHOLDER.match(title):
            known.title = title
            events.append(
                TitleSet(session_id=session_id, title=title[:TITLE_MAX], source="harness")
            )
        return events

    def _child_seen(
        self, session_id: str, known: _Session, info: dict[str, Any], at: float
    ) -> list[Event]:
        created = _seconds(_dict(info.get("time")).get("created")) or at
        return [
            SessionSeen(
                session_id=known.root,
                at=created,
                cwd=_cwd(info),
                version=nonempty(info.get("version")),
                main=False,
            ),
            SubagentStarted(
                session_id=known.root,
                at=created,
                subagent_id=session_id,
                subagent_type=nonempty(info.get("agent")),
                title=nonempty(info.get("title")),
                parent_id=known.parent if known.parent != known.root else None,
            ),
        ]

    def _where(self, session_id: str) -> tuple[str, str | None]:
        """(root session, sub-agent id or None) of a session's work."""
        known = self.sessions.get(session_id)
        if known is None or known.parent is None:
            return session_id, None
        return known.root, session_id

    # -- messages ---------------------------------------------------------------------------

    def _message(self, info: dict[str, Any]) -> list[Event]:
        message_id, session_id = nonempty(info.get("id")), nonempty(info.get("sessionID"))
        role = nonempty(info.get("role"))
        if message_id is None or session_id is None or role is None:
            return []
        times = _dict(info.get("time"))
        created = _seconds(times.get("created")) or self.at
        self.at = max(self.at, created)
        known = self.messages.get(message_id)
        if known is None:
            known = self.messages[message_id] = _Message(session_id, role)
            _forget_oldest(self.messages)
            if role == "user" and self._where(session_id)[1] is None:
                return [TurnStarted(session_id=session_id, at=created, record_id=message_id)]
        if role != "assistant" or known.ended:
            return []
        return self._assistant(message_id, known, info, created)

    def _assistant(
        self, message_id: str, known: _Message, info: dict[str, Any], created: float
    ) -> list[Event]:
        root, subagent = self._where(known.session_id)
        completed = _seconds(_dict(info.get("time")).get("completed"))
        at = completed or max(self.at, created)
        self.at = max(self.at, at)
        model = nonempty(info.get("modelID")) or "unknown"
        events: list[Event] = []
        usage = usage_of(info.get("tokens"))
        if usage != Usage() and usage != known.usage:
            known.usage = usage
            events.append(
                ModelResponded(
                    session_id=root,
                    at=at,
                    message_id=message_id,
                    model=model,
                    usage=usage,
                    subagent_id=subagent,
                    main=subagent is None,
                    requested_at=created,
                    finish_reason=nonempty(info.get("finish")),
                    reported_cost=usd(info.get("cost")),
                )
            )
        error = _dict(info.get("error"))
        finish = nonempty(info.get("finish"))
        if not error and (completed is None or finish is None):
            return events
        known.ended = True
        events += self._flush_pending(message_id)
        name = nonempty(error.get("name"))
        if error and name != "MessageAbortedError":
            events.append(
                ModelFailed(
                    session_id=root,
                    at=at,
                    error=name or "error",
                    model=model,
                    subagent_id=subagent,
                    requested_at=created,
                )
            )
        if subagent is not None:
            return events
        outcome: TurnOutcome
        if error:
            outcome = "interrupted" if name == "MessageAbortedError" else "failed"
        elif finish == "tool-calls":
            if not known.rejected:
                return events  # the loop goes on with the next step
            outcome = "interrupted"  # OpenCode stops after a rejected tool
        else:
            outcome = "completed"
        events.append(TurnEnded(session_id=root, at=at, outcome=outcome))
        return events

    # -- parts ------------------------------------------------------------------------------

    def _part(self, part: dict[str, Any]) -> list[Event]:
        kind = nonempty(part.get("type"))
        if kind == "tool":
            return self._tool(part)
        message = self.messages.get(str(part.get("messageID")))
        if kind != "text" or message is None or message.role != "user" or message.prompt:
            return []
        text = nonempty(part.get("text"))
        session_id, subagent = self._where(message.session_id)
        if text is None or part.get("synthetic") or subagent is not None:
            return []
        message.prompt = True
        title = title_of(text)
        return [TitleSet(session_id=session_id, title=title, source="prompt")]

    def _tool(self, part: dict[str, Any]) -> list[Event]:
        part_id, session_id = nonempty(part.get("id")), nonempty(part.get("sessionID"))
        call_id = nonempty(part.get("callID")) or part_id
        if part_id is None or session_id is None or call_id is None:
            return []
        state = _dict(part.get("state"))
        known = self.tools.get(part_id)
        if known is None:
            tool = nonempty(part.get("tool")) or "unknown"
            message_id = str(part.get("messageID"))
            known = self.tools[part_id] = _Tool(call_id, session_id, message_id, tool, self.at)
            _forget_oldest(self.tools)
        if known.ended:
            return []
        events: list[Event] = []
        if state.get("status") != "pending" and not known.started:
            events.append(self._started(known, state.get("input")))
        events += self._linked(call_id, known, state)
        outcome = tool_outcome(state)
        if outcome is None:
            return events
        known.ended = True
        if outcome == "rejected" and not _WITH_FEEDBACK.search(str(state.get("error", ""))):
            message = self.messages.get(known.message_id)
            if message is not None:
                message.rejected = True
        at = _seconds(_dict(state.get("time")).get("end")) or self.at
        result = state.get("output") if outcome != "rejected" else state.get("error")
        root, _ = self._where(session_id)
        events.append(
            ToolCallEnded(
                session_id=root,
                at=at,
                call_id=call_id,
                outcome=outcome,
                result=result if isinstance(result, str) else None,
            )
        )
        if known.child is not None:
            ended: SubagentOutcome = (
                "completed" if outcome == "ok" else "failed" if outcome == "error" else "cancelled"
            )
            events.append(
                SubagentEnded(
                    session_id=root, at=at, outcome=ended, call_id=call_id, subagent_id=known.child
                )
            )
        return events

    def _started(self, known: _Tool, arguments: object) -> ToolCallStarted:
        known.started = True
        root, subagent = self._where(known.session_id)
        return ToolCallStarted(
            session_id=root,
            at=known.at,
            call_id=known.call_id,
            tool=known.tool,
            subagent_id=subagent,
            arguments=arguments or None,
        )

    def _linked(self, call_id: str, known: _Tool, state: dict[str, Any]) -> list[Event]:
        """A `task` call names the child session it started."""
        child = nonempty(_dict(state.get("metadata")).get("sessionId"))
        if child is None or known.child is not None or known.tool != "task":
            return []
        known.child = child
        root, subagent = self._where(known.session_id)
        arguments = _dict(state.get("input"))
        return [
            SubagentStarted(
                session_id=root,
                at=None,
                call_id=call_id,
                subagent_id=child,
                subagent_type=nonempty(arguments.get("subagent_type")),
                title=nonempty(arguments.get("description")),
                parent_id=subagent,
            )
        ]

    def _flush_pending(self, message_id: str) -> list[Event]:
        """Tool parts of a finished message that never left `pending` were still called."""
        return [
            self._started(tool, None)
            for tool in self.tools.values()
            if tool.message_id == message_id and not tool.started
        ]


def _cwd(info: dict[str, Any]) -> str | None:
    directory = nonempty(info.get("directory"))
    if directory:
        return directory
    path = nonempty(info.get("path"))  # stored without its leading "/"
    return "/" + path.lstrip("/") if path else None


def _kind(info: dict[str, Any]) -> Kind:
    rules = info.get("permission")
    for rule in rules if isinstance(rules, list) else []:
        if isinstance(rule, dict) and (rule.get("permission"), rule.get("action")) == (
            "question",
            "deny",
        ):
            return "headless"  # `opencode run` cannot ask: it denies questions
    return "interactive"


def _model(info: dict[str, Any]) -> str | None:
    return nonempty(_dict(info.get("model")).get("id"))


def _forget_oldest(known: dict[str, Any]) -> None:
    if len(known) > REMEMBERED:
        del known[next(iter(known))]

"""Hermes Agent's `state.db`: its `sessions` rows and its `messages`, oldest first.

How it is read (`sources.sqlite_tail`): `messages` is append-only, numbered as a whole by its
`AUTOINCREMENT` id (`TableLog` with no group); `sessions` rows are updated in place while a
session runs (`RowWatch`: delivered again when they change, asked for while `ended_at IS
NULL`, and once more when they end), read before the new messages of the same snapshot.

What the rows say, recorded with hermes-agent 0.19.0 (`fixtures/hermes/`):

- a `sessions` row per session: `parent_session_id` names a delegated child's parent (its
  sub-agent, `delegate_task`), `model`, `cwd`, `started_at`, `ended_at` and `end_reason`
  (`agent_close` when the process closed it), `title`, and the session's token **totals** (its
  own calls only, not its children's: `input_tokens` without the cached part, `cache_read_tokens`,
  `output_tokens` with the reasoning in it, `reasoning_tokens`). Hermes adds each call's usage to
  them as it comes; nothing per call is written anywhere (`messages.token_count` stays empty),
  so they are the only usage there is: `UsageTotalsRead`, each replacing the last.
- a `messages` row per message: `user` (a prompt; a turn starts), `assistant` (one model
  response: its `tool_calls` JSON, `finish_reason` `tool_calls` or `stop`: the turn is over),
  `tool` (`tool_call_id`, `tool_name` and the result: JSON `{"output", "exit_code", "error"}`
  for `terminal`).
- a failed model request writes nothing: a turn whose session ended with no answer after its
  prompt failed (a `ModelFailed` with no error text: the text is only printed).
- a `delegate_task` of the TUI runs in the background: its result is `{"status": "dispatched",
  ...}`, the child's rows come after it, and when the children are done a `user` message
  `[ASYNC DELEGATION BATCH COMPLETE — <id>] ...` wakes the lead (a turn of its own).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...events import (
    Event,
    ModelFailed,
    ModelResponded,
    SessionClosed,
    SessionSeen,
    SubagentEnded,
    SubagentOutcome,
    SubagentStarted,
    TitleSet,
    ToolCallEnded,
    ToolCallStarted,
    ToolOutcome,
    TurnEnded,
    TurnStarted,
    Usage,
    UsageTotalsRead,
)
from ..base import RowWatch, TableLog
from ..fields import TITLE_MAX, count, nonempty, timestamp, title_of

SESSIONS = RowWatch(
    table="sessions",
    columns=(
        "id",
        "source",
        "model",
        "parent_session_id",
        "started_at",
        "ended_at",
        "end_reason",
        "message_count",
        "title",
        "cwd",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
    ),
    key=("id",),
    open="ended_at IS NULL",
    closed="ended_at",
)
WAKE = "[ASYNC DELEGATION BATCH COMPLETE"
"""How the `user` message starts that hands a background delegation's results back to its
lead: a turn of the lead's (it answers it), not a prompt of the user's (no title)."""
USAGE_KEY = ("session_id", "model", "billing_provider", "billing_base_url", "billing_mode", "task")
SIDE_USAGE = RowWatch(
    table="session_model_usage",
    columns=(
        *USAGE_KEY,
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "reasoning_tokens",
        "last_seen",
    ),
    key=USAGE_KEY,
    open="0",  # none stays open: a row's `last_seen` moves on each call it adds
    closed="last_seen",
)
MESSAGES = TableLog(
    table="messages",
    columns=(
        "id",
        "session_id",
        "role",
        "content",
        "tool_call_id",
        "tool_calls",
        "tool_name",
        "timestamp",
        "finish_reason",
    ),
    group=None,
    seq="id",
    watched=(SESSIONS, SIDE_USAGE),
)


@dataclass(slots=True)
class _Session:
    root: str
    parent: str | None
    model: str = "unknown"
    ended: bool = False
    end: tuple[float, str | None] | None = None  # its row says it ended: applied once read
    count: int = 0  # its messages, as its row says
    read: int = 0  # its messages read so far
    turn_open: bool = False
    answered: bool = False  # the open turn had an answer (any assistant row)
    titled: bool = False
    delegations: list[str] = field(default_factory=list)  # `delegate_task` calls whose
    # children may still start: open ones, and those dispatched to the background until their
    # results come back
    linked: bool = False  # a child: linked to its parent's call
    last_at: float | None = None  # its last message's time: the next response was asked then


class StateReader:
    """The rows of one Hermes `state.db`."""

    log: TableLog = MESSAGES

    def __init__(self) -> None:
        self.at = 0.0
        self.sessions: dict[str, _Session] = {}

    def feed(self, record: object) -> list[Event]:
        row = record if isinstance(record, dict) else {}
        table = row.get("_table")
        if table == SESSIONS.table:
            return self._session(row)
        if table == SIDE_USAGE.table:
            return self._side_usage(row)
        return self._message(row)

    # -- sessions -----------------------------------------------------------------------

    def _session(self, row: dict[str, Any]) -> list[Event]:
        session_id = nonempty(row.get("id"))
        if session_id is None:
            return []
        started = timestamp(row.get("started_at")) or self.at
        ended = timestamp(row.get("ended_at"))
        self.at = max(self.at, ended or started)
        known = self.sessions.get(session_id)
        events: list[Event] = []
        if known is None:
            parent = nonempty(row.get("parent_session_id"))
            root = self.sessions[parent].root if parent in self.sessions else parent
            known = self.sessions[session_id] = _Session(root or session_id, parent)
            events += self._seen(session_id, known, row, started)
        known.model = nonempty(row.get("model")) or known.model
        title = nonempty(row.get("title"))
        if title and known.parent is None:
            events.append(
                TitleSet(session_id=session_id, title=title[:TITLE_MAX], source="harness")
            )
        events.append(self._totals(session_id, known, row, ended or self.at))
        known.count = count(row.get("message_count"))
        if ended is None:
            if known.ended:  # resumed: it runs again
                events.append(SessionClosed(session_id=known.root, at=self.at, closed=False))
            known.ended, known.end = False, None
        elif not known.ended:
            known.end = (ended, nonempty(row.get("end_reason")))
        return events + self._end(session_id, known)

    def _side_usage(self, row: dict[str, Any]) -> list[Event]:
        """The totals of Hermes' own calls for a session, per task (`approval`,
        `title_generation`): in no `sessions` row. The task "" is the conversation's own calls,
        the same as its `sessions` row (which is read instead: it is written on every path)."""
        session_id, task = nonempty(row.get("session_id")), nonempty(row.get("task"))
        known = self.sessions.get(session_id or "")
        if session_id is None or task is None or known is None:
            return []
        child = known.parent is not None
        scope = "\x1f".join(str(row.get(k) or "") for k in USAGE_KEY[2:])
        return [
            UsageTotalsRead(
                session_id=known.root,
                at=timestamp(row.get("last_seen")) or self.at,
                model=nonempty(row.get("model")) or known.model,
                usage=_usage(row),
                subagent_id=session_id if child else None,
                scope=scope,
            )
        ]

    def _end(self, session_id: str, known: _Session) -> list[Event]:
        """A session's end, once its messages are read: its row is read before the messages
        of the same snapshot, and its `message_count` says how many there are."""
        if known.end is None or known.read < known.count:
            return []
        (at, reason), known.end, known.ended = known.end, None, True
        return self._ended(session_id, known, at, reason)

    def _seen(
        self, session_id: str, known: _Session, row: dict[str, Any], at: float
    ) -> list[Event]:
        cwd, model = nonempty(row.get("cwd")), nonempty(row.get("model"))
        if known.parent is None:
            return [SessionSeen(session_id=session_id, at=at, cwd=cwd, model=model)]
        return [
            SessionSeen(session_id=known.root, at=at, cwd=cwd, main=False),
            SubagentStarted(
                session_id=known.root,
                at=at,
                subagent_id=session_id,
                subagent_type="delegate_task",
                parent_id=known.parent if known.parent != known.root else None,
            ),
        ]

    def _totals(self, session_id: str, known: _Session, row: dict[str, Any], at: float) -> Event:
        child = known.parent is not None
        return UsageTotalsRead(
            session_id=known.root,
            at=at,
            model=known.model,
            usage=_usage(row),
            subagent_id=session_id if child else None,
        )

    def _ended(
        self, session_id: str, known: _Session, at: float, reason: str | None
    ) -> list[Event]:
        if known.parent is not None:
            outcome: SubagentOutcome = "completed" if reason in (None, "agent_close") else "failed"
            return [
                SubagentEnded(session_id=known.root, at=at, outcome=outcome, subagent_id=session_id)
            ]
        closed = SessionClosed(session_id=session_id, at=at)
        if not known.turn_open:
            return [closed]
        known.turn_open = False
        if known.answered:  # stopped after a tool call, before the next answer
            return [TurnEnded(session_id=session_id, at=at, outcome="interrupted"), closed]
        failed = ModelFailed(session_id=session_id, at=at, error="no answer", model=known.model)
        return [failed, TurnEnded(session_id=session_id, at=at, outcome="failed"), closed]

    # -- messages -----------------------------------------------------------------------

    def _message(self, row: dict[str, Any]) -> list[Event]:
        session_id, role = nonempty(row.get("session_id")), nonempty(row.get("role"))
        known = self.sessions.get(session_id or "")
        if session_id is None or role is None or known is None:
            return []
        at = timestamp(row.get("timestamp")) or self.at
        self.at = max(self.at, at)
        known.read += 1
        asked, known.last_at = known.last_at, at
        events = self._linked(session_id, known)
        record_id = f"{session_id}:{row.get('id')}"
        if role == "user":
            events += self._prompt(session_id, known, record_id, at, row.get("content"))
        elif role == "assistant":
            events += self._answer(session_id, known, record_id, (asked, at), row)
        elif role == "tool":
            events += self._result(known, at, row)
        return events + self._end(session_id, known)

    def _linked(self, session_id: str, known: _Session) -> list[Event]:
        """A child's first message comes after its parent's `delegate_task` call: the child
        is that call's sub-agent (the latest open one: the rows name no call)."""
        parent = self.sessions.get(known.parent or "")
        if parent is None or known.linked or not parent.delegations:
            return []
        known.linked = True
        return [
            SubagentStarted(
                session_id=known.root,
                at=None,
                call_id=parent.delegations[-1],
                subagent_id=session_id,
            )
        ]

    def _prompt(
        self, session_id: str, known: _Session, record_id: str, at: float, content: object
    ) -> list[Event]:
        if known.parent is not None:
            return []  # a child's task: its parent's call
        text = nonempty(content)
        if text and text.startswith(WAKE):  # a background delegation's results: the lead's
            known.delegations.clear()  # its children are done: none starts any more
        events: list[Event] = []
        if known.turn_open:  # a prompt before the last one was answered
            events.append(TurnEnded(session_id=session_id, at=at, outcome="interrupted"))
        known.turn_open, known.answered = True, False
        events.append(TurnStarted(session_id=session_id, at=at, record_id=record_id, prompt=text))
        if text and not known.titled and not text.startswith(WAKE):
            known.titled = True
            events.append(TitleSet(session_id=session_id, title=title_of(text), source="prompt"))
        return events

    def _answer(
        self,
        session_id: str,
        known: _Session,
        record_id: str,
        times: tuple[float | None, float],
        row: dict[str, Any],
    ) -> list[Event]:
        """A response: asked when the session's message before it was written (`times`)."""
        (asked, at), child = times, session_id if known.parent is not None else None
        finish = nonempty(row.get("finish_reason"))
        events: list[Event] = [
            ModelResponded(
                session_id=known.root,
                at=at,
                message_id=record_id,
                model=known.model,
                usage=Usage(),  # the usage is in the session's totals only
                subagent_id=child,
                main=child is None,
                requested_at=asked,
                finish_reason=finish,
                text=nonempty(row.get("content")),
            )
        ]
        for call in _calls(row.get("tool_calls")):
            call_id = nonempty(call.get("id")) or nonempty(call.get("call_id"))
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            if call_id is not None:
                if function.get("name") == "delegate_task":
                    known.delegations.append(call_id)
                events.append(
                    ToolCallStarted(
                        session_id=known.root,
                        at=at,
                        call_id=call_id,
                        tool=nonempty(function.get("name")) or "unknown",
                        subagent_id=child,
                        arguments=function.get("arguments"),
                    )
                )
        known.answered = True
        if child is None and known.turn_open and finish == "stop":
            known.turn_open = False
            events.append(TurnEnded(session_id=session_id, at=at, outcome="completed"))
        return events

    def _result(self, known: _Session, at: float, row: dict[str, Any]) -> list[Event]:
        call_id = nonempty(row.get("tool_call_id"))
        if call_id is None:
            return []
        content = row.get("content")
        text = content if isinstance(content, str) else None
        if call_id in known.delegations and not _dispatched(text):
            known.delegations.remove(call_id)
        return [
            ToolCallEnded(
                session_id=known.root, at=at, call_id=call_id, outcome=_outcome(text), result=text
            )
        ]


def _dispatched(text: str | None) -> bool:
    """A `delegate_task` result saying its children run in the background
    (`{"status": "dispatched", "mode": "background", "delegation_id": ...}`)."""
    try:
        doc = json.loads(text or "")
    except ValueError:
        return False
    return isinstance(doc, dict) and doc.get("status") == "dispatched"


def _usage(row: dict[str, Any]) -> Usage:
    return Usage(
        input=count(row.get("input_tokens")),
        output=count(row.get("output_tokens")),
        cache_read=count(row.get("cache_read_tokens")),
        cache_write=count(row.get("cache_write_tokens")),
        reasoning=count(row.get("reasoning_tokens")),
    )


def _calls(value: object) -> list[dict[str, Any]]:
    """The `tool_calls` JSON of an assistant row ([] when absent or damaged)."""
    if not isinstance(value, str):
        return []
    try:
        calls = json.loads(value)
    except ValueError:
        return []
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def _outcome(text: str | None) -> ToolOutcome:
    """A tool result's outcome: a command the user denied at the approval question is
    rejected (`error`: "BLOCKED: User denied ..."), an `exit_code` other than 0 or another
    `error` is an error."""
    try:
        doc = json.loads(text or "")
    except ValueError:
        return "ok"
    if not isinstance(doc, dict):
        return "ok"
    error = doc.get("error")
    if isinstance(error, str) and error.startswith("BLOCKED: User denied"):
        return "rejected"
    code = doc.get("exit_code")
    failed = (isinstance(code, int) and code != 0) or bool(doc.get("error"))
    return "error" if failed else "ok"

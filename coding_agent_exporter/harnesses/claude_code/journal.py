"""Claude Code's journals: `projects/<encoded cwd>/<session id>.jsonl` (the lead's) and
`.../subagents/agent-<agent id>.jsonl` (a sub-agent's), one JSON record a line, mapped to events by
`JournalReader` (one per journal; `claude_code.ClaudeCode` says which file is which).

One model response is written as one `assistant` record per content block, all sharing
`message.id`; every copy is reported and `state` keeps the largest usage per id. The cwd comes
from the records, never from the encoded folder name (the encoding is lossy).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from typing import Any

from msgspec import Raw

from ...events import (
    CostReported,
    Event,
    Kind,
    ModelFailed,
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
    TurnStarted,
)
from ...sources.decode import whole
from ..fields import timestamp, title_of, usd
from .fields import (
    INTERRUPTED,
    hour_writes_of,
    is_prompt,
    notification_end,
    text_of,
    usage_of,
)
from .workflow import run_launched

SYNTHETIC_MODEL = "<synthetic>"
AGENT_TOOLS = frozenset({"Agent", "Task"})
_REJECTED = ("The user doesn't want to proceed", "User rejected tool use")
COPY_SLACK = 1.0
"""`--fork-session` starts the new journal with its own records, then copies the old ones
verbatim (ids and timestamps): conversation records older than the journal's first record, read
before any conversation record of its own, are such copies. Once the journal has one of its own,
an older timestamp is only a clock that went back, and counts as usual."""


_AGENT_ID = re.compile(r"^agentId: ([A-Za-z0-9_-]+)", re.M)
_LAUNCHED = "Async agent launched"


def agent_result_of(text: str) -> dict[str, str]:
    """What an Agent call's result text says, where no `toolUseResult` came with it (a
    sub-agent's journal: the call that started a grandchild): the agent's id when it names
    one (a failed agent's error does not), and whether it was only launched (background)
    rather than run to its end."""
    found = _AGENT_ID.search(text)
    status = "async_launched" if text.lstrip().startswith(_LAUNCHED) else "completed"
    return {"status": status} if found is None else {"agentId": found.group(1), "status": status}


_KEPT = (
    "agent_calls",
    "at",
    "copying",
    "cwd",
    "first_at",
    "forked",
    "pending",
    "previous_at",
    "request_id",
    "requested_at",
    "session_id",
    "subagent_id",
)
"""What a `JournalReader` keeps (its slots), in the order it is pickled."""


class JournalReader:
    """A lead journal, or a sub-agent's journal when `subagent_id` is given."""

    __slots__ = _KEPT  # one per followed journal: no dict of its own

    def __init__(self, session_id: str, subagent_id: str | None = None) -> None:
        self.session_id = session_id
        self.subagent_id = subagent_id
        self.at = 0.0
        self.first_at: float | None = None
        self.copying = True  # until the journal's own first conversation record
        self.forked = False  # it began with records copied from another session
        self.pending: TurnEnded | None = None
        self.previous_at = 0.0
        self.request_id = ""  # the message last responded, and when it was requested
        self.requested_at: float | None = None
        self.cwd: str | None = None
        self.agent_calls: set[str] = set()  # Agent calls of this journal awaiting their result

    def __getstate__(self) -> tuple[Any, ...]:
        """Flat, for the catch-up cache: a pickler keeps what it made to write each reader."""
        return tuple(getattr(self, name) for name in _KEPT)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(_KEPT, state, strict=True):
            setattr(self, name, value)

    def __reduce__(self) -> tuple[Any, ...]:
        """Made by `__init__`, then given its state: a class compiled by mypyc (`setup.py`) is
        not made without calling it."""
        return JournalReader, (self.session_id, self.subagent_id), self.__getstate__()

    @property
    def main(self) -> bool:
        return self.subagent_id is None

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        at = timestamp(record.get("timestamp"))
        kind = record.get("type") if isinstance(record.get("type"), str) else None
        if at is not None:
            if self.first_at is None:
                self.first_at = at
            if kind in _CONVERSATION and self.copying:
                if at < self.first_at - COPY_SLACK:
                    return self._copied(record)
                self.copying = False  # the journal's own conversation has begun
            self.previous_at, self.at = self.at, max(self.at, at)
        events: list[Event] = self._settle(record)
        if kind in _CONVERSATION:
            events += self._seen(record)
        if kind == "assistant":
            events += self._assistant(record)
        elif kind == "user":
            events += self._user(record)
        elif kind == "system" and self.main and record.get("subtype") == "turn_duration":
            events.append(TurnEnded(session_id=self.session_id, at=self.at, outcome="completed"))
        elif kind == "attachment":
            events += self._attachment(record)
        elif kind == "cost-state" and self.main:
            events += self._cost(record)
        elif kind in _TITLES and self.main:
            title = record.get(_TITLES[kind])
            if isinstance(title, str) and title:
                source: TitleSource = "user" if kind == "custom-title" else "harness"
                events.append(TitleSet(session_id=self.session_id, title=title, source=source))
        return events

    def _copied(self, record: Mapping[str, Any]) -> list[Event]:
        """A record copied from the session this one was forked from: it titles, counts nothing."""
        self.forked = True
        if record.get("type") != "user" or not self.main:
            return []
        message = record.get("message")
        text = text_of(message.get("content") if isinstance(message, dict) else None)
        if not is_prompt(record, text):
            return []
        return [TitleSet(session_id=self.session_id, title=title_of(text), source="prompt")]

    def _seen(self, record: Mapping[str, Any]) -> list[Event]:
        cwd = record.get("cwd")
        if not self.main or not isinstance(cwd, str) or cwd == self.cwd:
            return []
        self.cwd = cwd = sys.intern(cwd)  # one copy per project, not per journal
        entry = record.get("entrypoint")
        kind: Kind | None = None
        if isinstance(entry, str):
            kind = "interactive" if entry == "cli" else "headless"
        version = record.get("version")
        return [
            SessionSeen(
                session_id=self.session_id,
                at=self.at,
                cwd=cwd,
                kind=kind,
                version=version if isinstance(version, str) else None,
            )
        ]

    def _assistant(self, record: Mapping[str, Any]) -> list[Event]:
        message = record.get("message")
        if not isinstance(message, dict):
            return []
        model = message.get("model")
        if model == SYNTHETIC_MODEL or not isinstance(model, str):
            return self._failed(record) if record.get("isApiErrorMessage") else []
        events: list[Event] = []
        message_id = message.get("id")
        if isinstance(message_id, str):
            if self.request_id != message_id:  # the first of its copies: note the request time
                self.request_id, self.requested_at = message_id, self.previous_at or None
            reason = message.get("stop_reason")
            events.append(
                ModelResponded(
                    session_id=self.session_id,
                    at=self.at,
                    message_id=message_id,
                    model=model,
                    usage=usage_of(message.get("usage")),
                    cache_write_1h=hour_writes_of(message.get("usage")),
                    subagent_id=self.subagent_id,
                    main=self.main,
                    requested_at=self.requested_at,
                    finish_reason=reason if isinstance(reason, str) else None,
                    text=text_of(message.get("content")) or None,
                )
            )
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "tool_use":
                events += self._tool_use(part)
        if message.get("stop_reason") == "end_turn" and self.main:
            self.pending = TurnEnded(session_id=self.session_id, at=self.at, outcome="completed")
        return events

    def _cost(self, record: Mapping[str, Any]) -> list[Event]:
        """What Claude Code says the session cost so far, per model (`cost-state`: the
        conversation's running total, carried over a resume). A fork's includes the cost of the
        session it was forked from, which no record of the fork tells apart: not reported."""
        models = record.get("modelUsage")
        if self.forked or not isinstance(models, dict):
            return []
        found = ((m, usd(u.get("costUSD"))) for m, u in models.items() if isinstance(u, dict))
        return [
            CostReported(session_id=self.session_id, model=model, usd=cost)
            for model, cost in found
            if isinstance(model, str) and cost is not None
        ]

    def _failed(self, record: Mapping[str, Any]) -> list[Event]:
        status, error = record.get("apiErrorStatus"), record.get("apiError") or record.get("error")
        reason = str(status) if isinstance(status, int) else str(error or "api_error")
        events: list[Event] = [
            ModelFailed(
                session_id=self.session_id,
                at=self.at,
                error=reason,
                subagent_id=self.subagent_id,
                requested_at=self.previous_at or None,
            )
        ]
        if self.main:
            events.append(TurnEnded(session_id=self.session_id, at=self.at, outcome="failed"))
        return events

    def _settle(self, record: Mapping[str, Any]) -> list[Event]:
        """Emit a held `end_turn` unless this record shows the turn went on.

        2.1.3xx keeps a turn going after a stream that was cut short (written with
        `end_turn`): it adds a `turnCompanion` note and retries, or gives up with an API error.
        """
        pending, self.pending = self.pending, None
        if pending is None or record.get("turnCompanion") or record.get("isApiErrorMessage"):
            return []
        return [pending]

    def _tool_use(self, part: Mapping[str, Any]) -> list[Event]:
        call_id, tool = part.get("id"), part.get("name")
        if not isinstance(call_id, str) or not isinstance(tool, str):
            return []
        arguments = part.get("input")
        if tool in AGENT_TOOLS:
            arguments = whole(arguments)
        events: list[Event] = [
            ToolCallStarted(
                session_id=self.session_id,
                at=self.at,
                call_id=call_id,
                tool=tool,
                subagent_id=self.subagent_id,
                arguments=None if isinstance(arguments, Raw) else arguments,
            )
        ]
        if tool in AGENT_TOOLS:
            self.agent_calls.add(call_id)
            raw = arguments
            args: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
            kind, title = args.get("subagent_type"), args.get("description")
            background = args.get("run_in_background")
            events.append(
                SubagentStarted(
                    session_id=self.session_id,
                    at=self.at,
                    call_id=call_id,
                    subagent_type=kind if isinstance(kind, str) else None,
                    title=title if isinstance(title, str) else None,
                    background=True if background is True else None,
                    parent_id=self.subagent_id,
                )
            )
        return events

    def _user(self, record: Mapping[str, Any]) -> list[Event]:
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        events: list[Event] = []
        for part in content if isinstance(content, list) else []:
            if isinstance(part, dict) and part.get("type") == "tool_result":
                events += self._tool_result(record, part)
        if events:
            return events
        text = text_of(content)
        origin = record.get("origin")
        sender = origin.get("from") if isinstance(origin, dict) and origin.get("handback") else None
        if isinstance(sender, str):  # a sub-agent of this journal's agent reported back
            return [
                SubagentEnded(
                    session_id=self.session_id, at=self.at, subagent_id=sender, outcome="completed"
                )
            ]
        notified = notification_end(self.session_id, text, self.at)
        if notified is not None:  # also in a sub-agent's journal: its own background child
            return [notified]
        if not self.main:
            return []
        if text.lstrip().startswith(INTERRUPTED):
            return [TurnEnded(session_id=self.session_id, at=self.at, outcome="interrupted")]
        if is_prompt(record, text):
            return [
                TurnStarted(
                    session_id=self.session_id,
                    at=self.at,
                    record_id=_record_id(record),
                    prompt=text,
                ),
                TitleSet(session_id=self.session_id, title=title_of(text), source="prompt"),
            ]
        return []

    def _tool_result(self, record: Mapping[str, Any], part: Mapping[str, Any]) -> list[Event]:
        call_id = part.get("tool_use_id")
        if not isinstance(call_id, str):
            return []
        result = record.get("toolUseResult")
        outcome: ToolOutcome = "error" if part.get("is_error") is True else "ok"
        launching = call_id in self.agent_calls  # its text names the agent: decode it whole
        self.agent_calls.discard(call_id)
        content = part.get("content")
        text = text_of(
            whole(content) if launching and isinstance(content, Raw) else _refusal(content)
        )
        if (
            record.get("toolDenialKind")
            or (isinstance(result, str) and result.startswith(_REJECTED[1]))
            or text.startswith(_REJECTED[0])
        ):
            outcome = "rejected"
        events: list[Event] = [
            ToolCallEnded(
                session_id=self.session_id,
                at=self.at,
                call_id=call_id,
                outcome=outcome,
                result=text,
            )
        ]
        if launching and not isinstance(result, dict):  # a sub-agent's journal: no toolUseResult
            events += self._agent_result(call_id, agent_result_of(text), outcome)
        elif isinstance(result, dict) and isinstance(result.get("agentId"), str):
            events += self._agent_result(call_id, result, outcome)
        elif isinstance(result, dict) and outcome == "ok":
            launched = run_launched(self.session_id, self.at, call_id, result)
            events += [launched] if launched is not None else []
        return events

    def _agent_result(
        self, call_id: str, result: Mapping[str, Any], outcome: ToolOutcome
    ) -> list[Event]:
        agent_id = result.get("agentId")
        launched = result.get("status") == "async_launched" or result.get("isAsync") is True
        events: list[Event] = []
        if isinstance(agent_id, str):
            events.append(
                SubagentStarted(
                    session_id=self.session_id,
                    at=None,
                    call_id=call_id,
                    subagent_id=agent_id,
                    background=True if launched else None,
                )
            )
        if not launched:
            ended: SubagentOutcome = "completed" if outcome == "ok" else "failed"
            if outcome in ("rejected", "cancelled"):
                ended = "cancelled"
            events.append(
                SubagentEnded(
                    session_id=self.session_id, at=self.at, call_id=call_id, outcome=ended
                )
            )
        return events

    def _attachment(self, record: Mapping[str, Any]) -> list[Event]:
        attachment = record.get("attachment")
        if not self.main or not isinstance(attachment, dict):
            return []
        if attachment.get("type") != "queued_command":
            return []
        prompt = attachment.get("prompt")
        ended = notification_end(self.session_id, text_of(prompt), self.at)
        return [ended] if ended is not None else []


def _refusal(content: object) -> object:
    """A tool result's content; undecoded (a lean decoder's), decoded only if its start may say
    the user refused the call (such a result is short: nothing precedes the words)."""
    if not isinstance(content, Raw):
        return content
    head = bytes(memoryview(content)[:_HEAD])
    return whole(content) if _REJECTED[0].encode() in head else None


_HEAD = 256
_CONVERSATION = frozenset({"user", "assistant", "system", "attachment"})
_TITLES = {"custom-title": "customTitle", "ai-title": "aiTitle"}


def _record_id(record: Mapping[str, Any]) -> str:
    uuid = record.get("uuid")
    return uuid if isinstance(uuid, str) else f"{record.get('sessionId')}@{record.get('timestamp')}"

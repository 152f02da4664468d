"""One Cline messages file (`sessions/<id>/<id>.messages.json`, a lead's, or
`sessions/<id>/agent_<…>.messages.json`, a sub-agent's) as events (what the files of one home
tell each other: `cline_shared`).

The file is one JSON document, rewritten whole after every message: each read hands the reader
the whole list again, so it remembers which message ids it has told (a message is written once
it is complete: an assistant message with its `metrics`, a tool result after its tool ran).

A lead's user message with text is a prompt (a turn starts); an assistant message with
`metrics` is one model response (tokens counted once per message id: the file's `metrics` win
over the session file's `usage` / `aggregateUsage` totals, which are never read); its
`tool_use` blocks start tool calls and its `tool_result` blocks (in the next user message) end
them. An assistant message without tool calls ends its turn (completed: Cline's own rule, "a
response without tool calls is the final answer"); an assistant message with
`metadata.displayRole: "error"` is the API error that ended the turn (failed).

A `spawn_agent` call starts a sub-agent; the sub-agent's own file names its lead
(`origin.parentThreadId`) and its agent id (`origin.subagent`), and its first prompt is the
call's `task`: that is how a call and its file are linked, in whichever order they are read.
A sub-agent may call `spawn_agent` too (recorded: 3.0.65 offers it): the grandchild's file
names only the lead as its parent thread, so its parent is the sub-agent whose call gave its
task.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...events import (
    Event,
    ModelFailed,
    ModelResponded,
    SubagentEnded,
    SubagentStarted,
    ToolCallEnded,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
)
from ..fields import nonempty, timestamp, title_of
from .fields import prompt_of, text_of, tool_outcome, usage_of
from .shared import ASK, Shared

SPAWN = "spawn_agent"


class MessagesReader:
    """One messages file: a lead's (its turns, calls and responses) or a sub-agent's."""

    def __init__(self, shared: Shared, lead_file: bool) -> None:
        self.shared = shared
        self.lead_file = lead_file
        self.session_id: str | None = None
        self.subagent_id: str | None = None
        self.told: dict[str, bool] = {}  # message id told → whether its usage was
        self.at = 0.0
        self.names: dict[str, str] = {}  # call id → tool name

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict) or not self._identify(record):
            return []
        messages = record.get("messages")
        events: list[Event] = []
        for message in messages if isinstance(messages, list) else []:
            if not isinstance(message, dict):
                continue
            key = nonempty(message.get("id"))
            if key is None or self.told.get(key):
                continue
            if key in self.told:  # told before its `metrics` were written (not seen in 3.0.65)
                events += self._late_usage(key, message)
                continue
            self.told[key] = message.get("role") != "assistant" or "metrics" in message
            events += self._message(key, message)
        return events

    def _identify(self, record: Mapping[str, Any]) -> bool:
        """Whose file this is: a lead's names its session; a sub-agent's, its lead
        (`origin.parentThreadId`) and its agent id (`origin.subagent`)."""
        if self.session_id is not None:
            return True
        origin = record.get("origin")
        origin = origin if isinstance(origin, dict) else {}
        if record.get("agent") == "lead" and self.lead_file:
            self.session_id = nonempty(record.get("sessionId"))
        elif not self.lead_file:
            self.session_id = nonempty(origin.get("parentThreadId"))
            self.subagent_id = nonempty(origin.get("subagent")) or nonempty(record.get("sessionId"))
            if self.subagent_id is None:
                self.session_id = None
        return self.session_id is not None

    @property
    def lead(self) -> bool:
        return self.subagent_id is None

    # -- one message -------------------------------------------------------------------------

    def _message(self, key: str, message: Mapping[str, Any]) -> list[Event]:
        at = timestamp(message.get("ts")) or self.at
        previous, self.at = self.at, max(self.at, at)
        if self.lead:
            assert self.session_id is not None
            self.shared.last[self.session_id] = self.at
            self._spend(message.get("metrics"))
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            return self._results(content, at) + self._prompt(key, content, at)
        if role != "assistant":
            return []
        metadata = message.get("metadata")
        if isinstance(metadata, dict) and metadata.get("displayRole") == "error":
            return self._failed(message, at, previous)
        return self._response(key, message, at, previous)

    def _prompt(self, key: str, content: object, at: float) -> list[Event]:
        text = text_of(content)
        if text is None:
            return []  # only tool results
        prompt = prompt_of(text)
        if not self.lead:
            return self._subagent_seen(prompt, at)
        assert self.session_id is not None
        prompted = self.shared.prompted
        prompted[self.session_id] = max(prompted.get(self.session_id, 0.0), at)
        events: list[Event] = [*self.shared.told(self.session_id)]  # its process had started
        if self.shared.turns.pop(self.session_id, None) is not None:  # it went no further
            events.append(TurnEnded(session_id=self.session_id, at=at, outcome="interrupted"))
        self.shared.turns[self.session_id] = at
        started = TurnStarted(session_id=self.session_id, at=at, record_id=key, prompt=prompt)
        return [*events, started]

    def _response(
        self, key: str, message: Mapping[str, Any], at: float, previous: float
    ) -> list[Event]:
        assert self.session_id is not None
        events: list[Event] = []
        metrics = message.get("metrics")
        model = _model(message)
        if isinstance(metrics, dict):
            events.append(
                ModelResponded(
                    session_id=self.session_id,
                    at=at,
                    message_id=key,
                    model=model or "unknown",
                    usage=usage_of(metrics),
                    subagent_id=self.subagent_id,
                    main=self.lead,
                    requested_at=previous or None,
                    text=text_of(message.get("content")),
                )
            )
        calls = _tool_uses(message.get("content"))
        for call in calls:
            events += self._call(call, at)
        if not calls and self.lead and self._turn_ends():
            events.append(TurnEnded(session_id=self.session_id, at=at, outcome="completed"))
        return events

    def _turn_ends(self) -> bool:
        """The lead's open turn ends here; False when none is open (`Shared.turns`)."""
        assert self.session_id is not None
        return self.shared.turns.pop(self.session_id, None) is not None

    def _spend(self, metrics: object) -> None:
        """The lead's `inputTokens` and `outputTokens` read so far, as written (the session
        file's usage totals count the same: `Shared.cut`)."""
        if isinstance(metrics, dict) and self.session_id is not None:
            spent = self.shared.spent.get(self.session_id, (0, 0))
            more = (_whole(metrics.get("inputTokens")), _whole(metrics.get("outputTokens")))
            self.shared.spent[self.session_id] = (spent[0] + more[0], spent[1] + more[1])

    def _late_usage(self, key: str, message: Mapping[str, Any]) -> list[Event]:
        """An assistant message written again, now with its `metrics`: its usage only (its
        calls and its turn's end were told the first time)."""
        metrics = message.get("metrics")
        if message.get("role") != "assistant" or not isinstance(metrics, dict):
            return []
        assert self.session_id is not None
        self.told[key] = True
        if self.lead:
            self._spend(metrics)
        return [
            ModelResponded(
                session_id=self.session_id,
                at=timestamp(message.get("ts")) or self.at,
                message_id=key,
                model=_model(message) or "unknown",
                usage=usage_of(metrics),
                subagent_id=self.subagent_id,
                main=self.lead,
            )
        ]

    def _failed(self, message: Mapping[str, Any], at: float, previous: float) -> list[Event]:
        assert self.session_id is not None
        error = text_of(message.get("content")) or "error"
        events: list[Event] = [
            ModelFailed(
                session_id=self.session_id,
                at=at,
                error=title_of(error),
                model=_model(message),
                subagent_id=self.subagent_id,
                requested_at=previous or None,
            )
        ]
        if self.lead and self._turn_ends():
            events.append(TurnEnded(session_id=self.session_id, at=at, outcome="failed"))
        return events

    # -- tools and sub-agents ----------------------------------------------------------------

    def _call(self, call: Mapping[str, Any], at: float) -> list[Event]:
        assert self.session_id is not None
        call_id, name = str(call["id"]), str(call["name"])
        self.names[call_id] = name
        events: list[Event] = [
            ToolCallStarted(
                session_id=self.session_id,
                at=at,
                call_id=call_id,
                tool=name,
                subagent_id=self.subagent_id,
                arguments=call.get("input"),
            )
        ]
        if name == ASK and self.lead:  # the user is asked: waits while the process runs
            self.shared.asking[self.session_id] = call_id
            events += self.shared.told(self.session_id)
        arguments = call.get("input")
        task = arguments.get("task") if isinstance(arguments, dict) else None
        if name == SPAWN and isinstance(task, str):
            lead = self.session_id
            self.shared.calls[(lead, task)] = call_id
            if self.subagent_id is not None:  # a sub-agent's own: its child's parent is it
                self.shared.parents[(lead, task)] = self.subagent_id
            events.append(
                SubagentStarted(
                    session_id=lead,
                    at=at,
                    call_id=call_id,
                    subagent_id=self.shared.agents.get((lead, task)),
                    subagent_type=SPAWN,
                    title=title_of(task),
                    background=False,
                    parent_id=self.subagent_id,
                )
            )
        return events

    def _results(self, content: object, at: float) -> list[Event]:
        assert self.session_id is not None
        events: list[Event] = []
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            call_id = nonempty(block.get("tool_use_id"))
            if call_id is None:
                continue
            result = block.get("content")
            outcome = tool_outcome(result)
            if outcome == "ok" and block.get("is_error") is True:
                outcome = "error"  # a tool whose result we do not know, marked failed
            events.append(
                ToolCallEnded(
                    session_id=self.session_id,
                    at=at,
                    call_id=call_id,
                    outcome=outcome,
                    result=result if isinstance(result, str) else json.dumps(result),
                )
            )
            if self.shared.asking.get(self.session_id) == call_id:  # answered
                del self.shared.asking[self.session_id]
                events += self.shared.told(self.session_id)
            if (block.get("name") or self.names.get(call_id)) == SPAWN:
                events.append(
                    SubagentEnded(
                        session_id=self.session_id,
                        at=at,
                        outcome="completed" if outcome == "ok" else "failed",
                        call_id=call_id,
                    )
                )
        return events

    def _subagent_seen(self, task: str, at: float) -> list[Event]:
        """A sub-agent's first prompt (its task): it is known, under its lead's call when that
        call was read first."""
        assert self.session_id is not None and self.subagent_id is not None
        key = (self.session_id, task)
        if key in self.shared.agents:
            return []
        self.shared.agents[key] = self.subagent_id
        return [
            SubagentStarted(
                session_id=self.session_id,
                at=at,
                call_id=self.shared.calls.get(key),
                subagent_id=self.subagent_id,
                subagent_type=SPAWN,
                title=title_of(task),
                background=False,
                parent_id=self.shared.parents.get(key),
            )
        ]


def _whole(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _model(message: Mapping[str, Any]) -> str | None:
    info = message.get("modelInfo")
    return nonempty(info.get("id")) if isinstance(info, dict) else None


def _tool_uses(content: object) -> list[Mapping[str, Any]]:
    blocks = content if isinstance(content, list) else []
    return [
        b
        for b in blocks
        if isinstance(b, dict)
        and b.get("type") == "tool_use"
        and nonempty(b.get("id"))
        and nonempty(b.get("name"))
    ]

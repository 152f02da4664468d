"""A session's `wire.jsonl`: Kimi CLI's own log of everything its UI was sent (Kimi CLI 1.51.0,
`fixtures/kimi/`): the lead's prompts, requests, responses and tool calls.

Records: `{"type": "metadata", "protocol_version": …}` first, then `{"timestamp", "message":
{"type", "payload"}}` with `TurnBegin` (a prompt; `<system-reminder>…` when Kimi wakes the
lead itself, e.g. after a background task ended), `StepBegin {n}` (a model request),
`StepRetry` (that request failed and is tried again: `error_type`, `status_code`),
`StepInterrupted` (the step ended without an answer: the last attempt failed, or the user
cancelled), `StatusUpdate` (a response's usage, by `message_id`), `ContentPart`, `ToolCall`,
`ToolResult`, `Notification` (a background task ended), `TurnEnd` (may be missing after an
interruption), and `SubagentEvent {parent_tool_call_id, agent_id, subagent_type, event}`: a
foreground sub-agent's events, repeated here from its own wire (`subagents.py`, which is what
counts them): only the link to its `Agent` call is read here.

Tokens: each response once, from its `StatusUpdate`. `context.jsonl` is not read: its
`_usage` lines are the context's size (`token_count`), not a response's usage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...events import (
    Event,
    SubagentEnded,
    SubagentOutcome,
    SubagentStarted,
    TitleSet,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
)
from ..fields import nonempty, timestamp, title_of
from .messages import call_of, prompt_of
from .steps import Steps, feed_step

AGENT_TOOL = "Agent"
WAKE_UP = "<system-reminder>"
"""How a turn Kimi starts by itself begins (not a prompt: no turn of the user's)."""
FIELD = re.compile(r"^(agent_id|task_id|actual_subagent_type): (\S+)$", re.MULTILINE)
"""The lines of an `Agent` call's result that name what it started."""
TASK_ENDS: dict[str, SubagentOutcome] = {"completed": "completed", "killed": "cancelled"}
"""A background task's final status → the sub-agent's outcome (others: failed)."""


class WireReader:
    """The lead session's wire; `folder` is its sessions folder's name (the md5 of its work
    dir), `shared` what the home's other files told (`harness.Shared`)."""

    def __init__(self, session_id: str, folder: str, shared: Any) -> None:
        self.session_id = session_id
        self.folder = folder
        self.shared = shared
        self.seen = False
        self.titled = False
        self.turn_open = False
        self.answered = False  # the lead's current step got its response
        self.refused = False  # a call of the lead's last step was rejected by the user
        self.lead = Steps(session_id, None, shared)
        self.agent_calls: dict[str, dict[str, Any]] = {}  # Agent call id -> its arguments
        self.linked: set[str] = set()  # sub-agents whose call is known
        self.tasks: dict[str, tuple[str, str | None]] = {}  # task id -> (call id, agent id)

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        at = timestamp(record.get("timestamp"))
        message = record.get("message")
        if at is None or not isinstance(message, dict):
            return []
        events: list[Event] = []
        if not self.seen:
            self.seen = True
            events.append(self.shared.seen(self.session_id, self.folder, at))
        payload = message.get("payload")
        payload = payload if isinstance(payload, dict) else {}
        return events + self.message(at, message.get("type"), payload)

    def message(self, at: float, kind: object, payload: Mapping[str, Any]) -> list[Event]:
        if kind == "TurnBegin":
            return self.turn_begin(at, payload)
        if kind == "TurnEnd":
            return self.turn_end(at)
        if kind == "SubagentEvent":
            return self.subagent(at, payload)
        if kind == "Notification":
            return self.notification(at, payload)
        events = feed_step(self.lead, at, kind, payload)
        if kind == "StepBegin":
            self.answered = self.refused = False
        elif kind == "StatusUpdate":
            self.answered = self.answered or bool(events)
        elif kind == "StepInterrupted":
            events += self.interrupted(at, failed=bool(events))
        elif kind == "ToolCall":
            self.remember_agent_call(payload)
        elif kind == "ToolResult":
            events += self.result(at, payload, events)
        return events

    # -- turns ---------------------------------------------------------------------------------
    def turn_begin(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        self.lead.begin(at)
        self.answered = self.refused = False
        prompt = prompt_of(payload)
        if prompt is not None and prompt.startswith(WAKE_UP):
            return []  # Kimi woke the lead itself: its work is the session's, not a turn
        self.turn_open = True
        events: list[Event] = [
            TurnStarted(session_id=self.session_id, at=at, record_id=repr(at), prompt=prompt)
        ]
        if not self.titled and prompt and prompt.strip():
            self.titled = True
            title = title_of(prompt)
            events.append(TitleSet(session_id=self.session_id, title=title, source="prompt"))
        return events

    def turn_end(self, at: float) -> list[Event]:
        """Completed, unless its last step got no response (Esc while it streamed: Kimi writes
        the text so far and `TurnEnd`, no `StepInterrupted`) or the user rejected a call of it
        (Kimi then asks the model nothing more): interrupted."""
        if not self.turn_open:
            return []  # ended by its `StepInterrupted`, or a wake-up
        self.turn_open = False
        done = self.answered and not self.refused
        outcome: TurnOutcome = "completed" if done else "interrupted"
        return [TurnEnded(session_id=self.session_id, at=at, outcome=outcome)]

    def interrupted(self, at: float, failed: bool) -> list[Event]:
        """The step got no answer: after failed attempts the last one failed too (the turn
        failed); else the user stopped it. `TurnEnd` may follow, or not."""
        if not self.turn_open:
            return []
        self.turn_open = False
        outcome: TurnOutcome = "failed" if failed else "interrupted"
        return [TurnEnded(session_id=self.session_id, at=at, outcome=outcome)]

    # -- sub-agents ----------------------------------------------------------------------------
    def remember_agent_call(self, payload: Mapping[str, Any]) -> None:
        call = call_of(payload)
        if call is not None and call[1] == AGENT_TOOL:
            self.agent_calls[call[0]] = call[2] if isinstance(call[2], dict) else {}

    def result(self, at: float, payload: Mapping[str, Any], ended: list[Event]) -> list[Event]:
        """A call's result: a rejected one ends the turn's work; an `Agent` call's names the
        sub-agent (`agent_id: …`) and ends it, unless it runs in the background (then its
        `task_id` ends it, in a `Notification`)."""
        events: list[Event] = []
        for end in ended:
            outcome = getattr(end, "outcome", None)
            self.refused = self.refused or outcome == "rejected"
            call_id = str(getattr(end, "call_id", ""))
            if call_id not in self.agent_calls:
                continue
            said = dict(FIELD.findall(str(getattr(end, "result", None) or "")))
            agent_id = said.get("agent_id")
            events += self.link(at, call_id, agent_id, said.get("actual_subagent_type"))
            if self.background(call_id) and outcome == "ok" and "task_id" in said:
                self.tasks[said["task_id"]] = (call_id, agent_id)
                continue
            done: SubagentOutcome = "completed" if outcome == "ok" else "failed"
            events.append(self.sub_ended(at, done, call_id, agent_id))
        return events

    def subagent(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        """A foreground sub-agent's event: its link to the `Agent` call, once."""
        agent_id = nonempty(payload.get("agent_id"))
        call_id = nonempty(payload.get("parent_tool_call_id"))
        if agent_id is None or call_id is None:
            return []
        return self.link(at, call_id, agent_id, nonempty(payload.get("subagent_type")))

    def link(
        self, at: float, call_id: str, agent_id: str | None, subagent_type: str | None
    ) -> list[Event]:
        if agent_id is None or agent_id in self.linked:
            return []
        self.linked.add(agent_id)
        arguments = self.agent_calls.get(call_id)
        title = nonempty(arguments.get("description")) if arguments else None
        subagent_type = subagent_type or (
            nonempty(arguments.get("subagent_type")) if arguments else None
        )
        return [
            SubagentStarted(
                session_id=self.session_id,
                at=at,
                call_id=call_id,
                subagent_id=agent_id,
                subagent_type=subagent_type,
                title=title,
                background=self.background(call_id) if arguments is not None else None,
            )
        ]

    def background(self, call_id: str) -> bool:
        """The call's `run_in_background` (false when left out)."""
        return self.agent_calls.get(call_id, {}).get("run_in_background") is True

    def notification(self, at: float, payload: Mapping[str, Any]) -> list[Event]:
        """`{category: "task", type: "task.completed", payload {task_id, status}}`: a
        background sub-agent's task ended."""
        body = payload.get("payload")
        if payload.get("category") != "task" or not isinstance(body, dict):
            return []
        task = self.tasks.pop(str(body.get("task_id")), None)
        if task is None:
            return []
        outcome = TASK_ENDS.get(str(body.get("status")), "failed")
        return [self.sub_ended(at, outcome, *task)]

    def sub_ended(
        self, at: float, outcome: SubagentOutcome, call_id: str, agent_id: str | None
    ) -> SubagentEnded:
        return SubagentEnded(
            session_id=self.session_id,
            at=at,
            outcome=outcome,
            call_id=call_id,
            subagent_id=agent_id,
        )

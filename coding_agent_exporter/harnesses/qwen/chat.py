"""The lead session's chat, `projects/<cwd slug>/chats/<session id>.jsonl` (see `records`).

- `user` records with `provenance: real_user` are prompts: a turn each; the first also titles
  the session (Qwen Code writes no title of its own).
- `system` records of subtype `ui_telemetry` hold one event per model call: `api_response`
  (its `response_id`, the id of the response the next `assistant` record holds) and
  `api_error` (a failed call: Qwen Code retries, writing one per attempt). Their `prompt_id` is
  `<session>########<n>` for the lead and `<session>#<agent id>#<n>` for another agent. The
  lead's token counts are the same numbers as its assistant record's `usageMetadata`, which
  wins (it is the message); a sub-agent's are in its own transcript, which wins likewise. Only
  Qwen Code's own housekeeping (`managed-…` agents: the `managed-auto-memory-extractor` it
  may run after a turn) has no other record: its `api_response` is counted, as internal
  (totals only). Any other agent's calls are left to its transcript (a sub-agent's own
  sub-agent: not recorded). The per-call copies in `usage/token-usage-*.jsonl` are never read.
- `assistant` records with `usageMetadata` are responses; their `functionCall`s are tool calls
  (`agent` launches a sub-agent); one with text and no call ends the turn, completed. A stream
  cut by Esc leaves an `assistant` record of the text so far without `usageMetadata` (the usage
  never arrived): it ends the turn, interrupted (recorded in the TUI).
- `tool_result` records end a call (`toolCallResult.status`); an `agent` call's result also
  ends its sub-agent (`resultDisplay.status`). A call refused or cancelled ends the turn,
  interrupted: Qwen Code does not ask the model again in that turn.

A turn whose last model call failed has no end record: it ends `failed` when the next prompt
starts, or when `usage_record.jsonl` says its process ended within `LAST_FAILURE` seconds of
that failure (`Shared`; whichever file is read first); a killed process leaves it open.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...events import (
    Event,
    ModelFailed,
    ModelResponded,
    SessionSeen,
    SubagentEnded,
    SubagentOutcome,
    SubagentStarted,
    TitleSet,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
    Usage,
)
from ..fields import count, nonempty, timestamp, title_of
from .records import calls, ended, started, text_of, usage_of

AGENT_TOOL = "agent"
MANAGED = "managed-"
"""The agent ids of Qwen Code's own housekeeping (`managed-auto-memory-extractor-<hex>`)."""
LAST_FAILURE = 5.0
"""Seconds between a failed call and its process's end within which that call ended the turn
(Qwen Code exits right after its last retry fails: 32 to 65 ms in three recordings)."""
SUBAGENT_OUTCOMES: dict[str, SubagentOutcome] = {
    "completed": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
}


@dataclass(slots=True)
class Shared:
    """What the readers of one session's files tell each other."""

    failed_at: float | None = None
    """When the open turn's last model call failed (None: it did not, or no turn is open)."""
    ends: list[float] = field(default_factory=list)
    """When its processes ended (`usage_record.jsonl`)."""
    agent_calls: set[str] = field(default_factory=set)
    """The lead's `agent` calls (each launched a sub-agent)."""
    linked: set[str] = field(default_factory=set)
    """The sub-agents already linked to their call."""
    models: dict[str, str] = field(default_factory=dict)
    """The model of each agent's calls (telemetry) and of the lead's (under ""): a sub-agent's
    transcript names none."""

    def model_of(self, agent: str) -> str:
        return self.models.get(agent) or self.models.get("") or "unknown"

    def ended(self, at: float) -> list[float]:
        """A process of the session ended at `at`: when its open turn failed, if it did."""
        self.ends.append(at)
        failed_at = self.failed_at
        if failed_at is None or failed_at > at:
            return []
        self.failed_at = None
        return [failed_at]

    def failed(self, at: float) -> list[float]:
        """A model call failed at `at`: when the turn ended failed, if the process ended just
        after (its end was read first); else nothing until the next prompt or that end."""
        self.failed_at = at
        if not any(0.0 <= end - at <= LAST_FAILURE for end in self.ends):
            return []
        self.failed_at = None
        return [at]


class ChatReader:
    """The lead's chat; a prompt written with no `provenance` (older versions) is a prompt."""

    def __init__(self, session_id: str, shared: Shared) -> None:
        self.session_id = session_id
        self.shared = shared
        self.seen = False
        self.titled = False
        self.response_id: str | None = None
        self.requested_at: float | None = None

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict) or record.get("isSidechain"):
            return []
        at = timestamp(record.get("timestamp"))
        if at is None:
            return []
        events: list[Event] = []
        if not self.seen:
            self.seen = True
            events.append(
                SessionSeen(
                    session_id=self.session_id,
                    at=at,
                    cwd=nonempty(record.get("cwd")),
                    version=nonempty(record.get("version")),
                )
            )
        kind = record.get("type")
        if kind == "user" and record.get("provenance", "real_user") == "real_user":
            events += self.prompt(at, record)
        elif kind == "system" and record.get("subtype") == "ui_telemetry":
            events += self.telemetry(at, record)
        elif kind == "assistant":
            events += self.response(at, record)
        elif kind == "tool_result":
            events += self.result(at, record)
        return events

    def prompt(self, at: float, record: Mapping[str, Any]) -> list[Event]:
        text = text_of(record)
        events: list[Event] = self.close_failed()
        uuid = nonempty(record.get("uuid")) or f"{self.session_id}@{at}"
        events.append(TurnStarted(session_id=self.session_id, at=at, record_id=uuid, prompt=text))
        if not self.titled and text.strip():
            self.titled = True
            events.append(
                TitleSet(session_id=self.session_id, title=title_of(text), source="prompt")
            )
        self.requested_at = at
        return events

    def close_failed(self) -> list[Event]:
        """The end of a turn whose last call failed, once something shows it is over."""
        failed_at, self.shared.failed_at = self.shared.failed_at, None
        if failed_at is None:
            return []
        return [TurnEnded(session_id=self.session_id, at=failed_at, outcome="failed")]

    def telemetry(self, at: float, record: Mapping[str, Any]) -> list[Event]:
        payload = record.get("systemPayload")
        event = payload.get("uiEvent") if isinstance(payload, dict) else None
        if not isinstance(event, dict):
            return []
        agent = self.agent_of(event.get("prompt_id"))
        name = event.get("event.name")
        model = nonempty(event.get("model"))
        if model is not None:
            self.shared.models[agent or ""] = model
        if agent is not None:  # a sub-agent's call (its transcript counts it) or housekeeping
            call = self.launched_by_call(agent)
            if call is not None:
                return self.linked(at, agent, call)
            if name == "qwen-code.api_response" and agent.startswith(MANAGED):
                return self.housekeeping(at, event)
            return []  # e.g. a sub-agent's own sub-agent: its transcript counts it
        if name == "qwen-code.api_response":
            self.response_id = nonempty(event.get("response_id"))
        elif name == "qwen-code.api_error":
            status = event.get("status_code")
            error = nonempty(event.get("error_type")) or (str(status) if status else None)
            ends = self.shared.failed(at)
            return [
                ModelFailed(
                    session_id=self.session_id,
                    at=at,
                    error=str(error or "api_error"),
                    model=nonempty(event.get("model")),
                    requested_at=self.requested_at,
                ),
                *(TurnEnded(session_id=self.session_id, at=e, outcome="failed") for e in ends),
            ]
        return []

    def agent_of(self, prompt_id: object) -> str | None:
        """The agent a call's `prompt_id` names: None for the lead (`<session>########<n>`)."""
        if not isinstance(prompt_id, str):
            return None
        rest = prompt_id.removeprefix(self.session_id).removeprefix("#")
        return rest.split("#", 1)[0] or None

    def launched_by_call(self, agent: str) -> str | None:
        """The lead's `agent` call that launched `agent` (its id is `<type>-<call id>`)."""
        return next((c for c in self.shared.agent_calls if agent.endswith(f"-{c}")), None)

    def linked(self, at: float, agent: str, call: str) -> list[Event]:
        """The first telemetry of a sub-agent's calls names its agent id: linked to the call
        that launched it before its end (its own files are read after the lead's)."""
        if agent in self.shared.linked:
            return []
        self.shared.linked.add(agent)
        return [SubagentStarted(session_id=self.session_id, at=at, call_id=call, subagent_id=agent)]

    def housekeeping(self, at: float, event: Mapping[str, Any]) -> list[Event]:
        """A call Qwen Code made on its own (its `managed-auto-memory-extractor` after a turn):
        no transcript holds it, so its telemetry is its only record; counted in the totals."""
        cached = count(event.get("cached_content_token_count"))
        usage = Usage(
            input=max(0, count(event.get("input_token_count")) - cached),
            output=count(event.get("output_token_count")),
            cache_read=cached,
            reasoning=count(event.get("thoughts_token_count")),
        )
        return [
            ModelResponded(
                session_id=self.session_id,
                at=at,
                message_id=nonempty(event.get("response_id")) or f"{self.session_id}@{at}",
                model=nonempty(event.get("model")) or "unknown",
                usage=usage,
                internal=True,
            )
        ]

    def response(self, at: float, record: Mapping[str, Any]) -> list[Event]:
        events: list[Event] = []
        metadata = record.get("usageMetadata")
        found = calls(record)
        if isinstance(metadata, dict):
            self.shared.failed_at = None
            model = nonempty(record.get("model"))
            if model is not None:
                self.shared.models[""] = model
            message_id = self.response_id or nonempty(record.get("uuid")) or f"{at}"
            self.response_id = None
            events.append(
                ModelResponded(
                    session_id=self.session_id,
                    at=at,
                    message_id=message_id,
                    model=nonempty(record.get("model")) or "unknown",
                    usage=usage_of(metadata),
                    requested_at=self.requested_at,
                    finish_reason="tool_calls" if found else "stop",
                    text=text_of(record) or None,
                )
            )
        events += started(self.session_id, at, record, None)
        for call in found:
            if call["name"] == AGENT_TOOL:
                events.append(self.launched(at, call))
        if not found and text_of(record):  # the answer; without usage: cut by Esc
            outcome: TurnOutcome = "completed" if isinstance(metadata, dict) else "interrupted"
            events.append(TurnEnded(session_id=self.session_id, at=at, outcome=outcome))
        self.requested_at = at
        return events

    def launched(self, at: float, call: Mapping[str, Any]) -> SubagentStarted:
        args = call.get("args")
        args = args if isinstance(args, dict) else {}
        background = args.get("run_in_background")
        self.shared.agent_calls.add(call["id"])
        return SubagentStarted(
            session_id=self.session_id,
            at=at,
            call_id=call["id"],
            subagent_type=nonempty(args.get("subagent_type")) or "general-purpose",
            title=nonempty(args.get("description")),
            background=background if isinstance(background, bool) else True,
        )

    def result(self, at: float, record: Mapping[str, Any]) -> list[Event]:
        self.requested_at = at
        events: list[Event] = []
        for end in ended(self.session_id, at, record):
            events.append(end)
            if end.call_id in self.shared.agent_calls:
                events += self.handed_back(at, end.call_id, record)
            if end.outcome in ("rejected", "cancelled"):  # Qwen Code asks the model no more
                events.append(TurnEnded(session_id=self.session_id, at=at, outcome="interrupted"))
        return events

    def handed_back(self, at: float, call_id: str, record: Mapping[str, Any]) -> list[Event]:
        """An `agent` call's result: its sub-agent's end, unless it went on in the background
        (its `meta.json` then says how it ended)."""
        result = record.get("toolCallResult")
        display = result.get("resultDisplay") if isinstance(result, dict) else None
        status = display.get("status") if isinstance(display, dict) else None
        outcome = SUBAGENT_OUTCOMES.get(str(status))
        if outcome is None:
            return []
        return [SubagentEnded(session_id=self.session_id, at=at, outcome=outcome, call_id=call_id)]

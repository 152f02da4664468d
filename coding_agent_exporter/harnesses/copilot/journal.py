"""GitHub Copilot CLI's session journal: `session-state/<session id>/events.jsonl`.

One JSON record a line, `{type, data, id, timestamp, parentId}`, appended as the session goes
(shapes as Copilot CLI 1.0.102 writes them: `fixtures/copilot/1.0.102/`; every type is listed
in the schema the program ships, `schemas/session-events.schema.json`). What is read:

- `session.start` (`sessionId`, `startTime`, `copilotVersion`, `selectedModel`,
  `context.cwd`), `session.resume` (a later process took the session up again): the session.
- `system.message`: whether the session runs headless: Copilot's own system prompt says "You
  are running in non-interactive mode" in a `-p` run only.
- `user.message` without a `source` (a sub-agent's prompt names its lead as `agent-<id>`): a
  turn starts; the first one titles the session.
- `session.usage_record`: one per model call (`usage.inputTokens` counts the cached input too,
  as OpenAI's `prompt_tokens`; `outputTokens` the output with any reasoning). `session.shutdown`
  repeats the sums per model and per agent: never counted, the calls win.
- `assistant.message`: whether the model's answer asked for tools; with none, its
  `assistant.turn_end` ends the turn (`completed`). `session.error` ends it `failed` (the API
  gave up after Copilot's retries: a `ModelFailed`), `abort` `interrupted`, and so does a new
  prompt or the session's end while one is still open.
- `tool.execution_start` / `tool.execution_complete`: tool calls, except those of an
  `assistant.message` with no `apiCallId` (no model asked for them: the runtime's own
  `read_agent` when a background sub-agent finished). One ends `rejected` when the user said
  no at its approval question ("No, and tell Copilot what to do differently": `error.code`
  `denied`), `error` when `success` is false or its shell command's exit code
  (`shellExecution.exitCode`) is not 0.
- `subagent.started` / `subagent.completed` / `subagent.failed`: a sub-agent (the `task` tool)
  runs in the same journal; its records carry `parentToolCallId`, the id of the `task` call
  that launched it, which is its id here. A usage record carries none: it belongs to the agent
  of the record it follows (`parentId`), its model call's own turn start.
- `permission.requested` / `permission.completed`: the session waits for the user's approval.

The live status is `Shared`'s: the journal says what the session does, the `inuse.<pid>.lock`
file (`copilot.harness`) which process holds it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...events import (
    Event,
    Kind,
    LiveIndexRead,
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
from ..fields import count, nonempty, timestamp, title_of

HEADLESS = "You are running in non-interactive mode"
"""What Copilot's system prompt says in a `-p` run (and not in its TUI)."""
KEPT = 256
"""Records whose agent is remembered, for a usage record's `parentId` (the last ones only)."""


@dataclass(frozen=True, slots=True)
class Lock:
    """A process holding the session: `session-state/<id>/inuse.<pid>.lock`."""

    pid: int
    source: str


@dataclass
class Shared:
    """What the journal and the in-use locks of one session know together: whichever learns
    something new emits the session's `LiveIndexRead`s again (one per lock, its own `source`)."""

    session_id: str
    locks: dict[str, Lock] = field(default_factory=dict)
    opened_at: float | None = None  # the last session.start / session.resume
    turn_at: float | None = None  # the open turn's start
    waiting: dict[str, str] = field(default_factory=dict)  # permission request → tool name
    status_at: float | None = None
    kind: Kind | None = None

    def status(self) -> tuple[str, str | None]:
        if self.waiting:
            return "waiting", next(iter(self.waiting.values()))
        return ("busy" if self.turn_at is not None else "idle"), None

    def live(self) -> list[Event]:
        status, reason = self.status()
        return [
            LiveIndexRead(
                pid=lock.pid,
                session_id=self.session_id,
                started_at=self.opened_at,
                status=status,
                reason=reason,
                status_at=self.status_at or self.opened_at,
                updated_at=self.status_at,
                source=lock.source,
                kind=self.kind,
                opened_after_start=True,
            )
            for lock in self.locks.values()
        ]


def usage_of(u: Mapping[str, Any]) -> Usage:
    cached = count(u.get("cacheReadTokens"))
    return Usage(
        input=max(0, count(u.get("inputTokens")) - cached),
        output=count(u.get("outputTokens")),
        cache_read=cached,
        cache_write=count(u.get("cacheWriteTokens")),
        reasoning=count(u.get("reasoningTokens")),
    )


class EventsReader:
    """`events.jsonl` of one session (see the module docstring)."""

    def __init__(self, session_id: str, shared: Shared) -> None:
        self.session_id = session_id
        self.shared = shared
        self.agents: OrderedDict[str, str | None] = OrderedDict()  # record id → its agent
        self.requested: dict[str | None, float] = {}  # agent → its model call's turn start
        self.final = False  # the lead's last answer asked for no tool
        self.titled = False
        self.model: str | None = None
        self.tools: dict[str, str] = {}  # open tool call → its tool
        self.unasked: set[str] = set()  # tool calls the runtime made itself (not counted)

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        at = timestamp(record.get("timestamp"))
        data = record.get("data")
        kind = record.get("type")
        if at is None or not isinstance(data, dict) or not isinstance(kind, str):
            return []
        agent = self._agent(record, data)
        before = self.shared.status()
        events = self._record(kind, data, at, agent)
        if self.shared.status() != before:
            self.shared.status_at = at
            events += self.shared.live()
        return events

    def _agent(self, record: Mapping[str, Any], data: Mapping[str, Any]) -> str | None:
        """The sub-agent a record belongs to (its launching `task` call), None for the lead."""
        agent = nonempty(data.get("parentToolCallId"))
        parent = nonempty(record.get("parentId"))
        if agent is None and record.get("type") == "session.usage_record" and parent:
            agent = self.agents.get(parent)
        rid = nonempty(record.get("id"))
        if rid is not None:
            self.agents[rid] = agent
            if len(self.agents) > KEPT:
                self.agents.popitem(last=False)
        return agent

    def _record(
        self, kind: str, data: Mapping[str, Any], at: float, agent: str | None
    ) -> list[Event]:
        handler = _HANDLERS.get(kind)
        return handler(self, data, at, agent) if handler else []

    # ------------------------------------------------------------ the session
    def _started(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        opened = timestamp(data.get("startTime") or data.get("resumeTime")) or at
        self.shared.opened_at = opened
        context = data.get("context")
        cwd = nonempty(context.get("cwd")) if isinstance(context, dict) else None
        model = nonempty(data.get("selectedModel"))
        self.model = model or self.model
        seen = SessionSeen(
            session_id=self.session_id,
            at=opened,
            cwd=cwd,
            version=nonempty(data.get("copilotVersion")),
            model=model,
        )
        return [seen, *self._ended(at, "interrupted")]  # a turn the last process left open

    def _system(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        content = data.get("content")
        if agent is not None or self.shared.kind is not None or not isinstance(content, str):
            return []
        kind: Kind = "headless" if HEADLESS in content else "interactive"
        self.shared.kind = kind
        return [SessionSeen(session_id=self.session_id, at=at, kind=kind)]

    def _prompt(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        if agent is not None or data.get("source") is not None:
            return []  # a sub-agent's prompt
        content = data.get("content")
        prompt = content if isinstance(content, str) else None
        events = self._ended(at, "interrupted")
        record_id = nonempty(data.get("messageId")) or f"{self.session_id}@{at}"
        events.append(
            TurnStarted(session_id=self.session_id, at=at, record_id=record_id, prompt=prompt)
        )
        self.shared.turn_at, self.final = at, False
        if not self.titled and prompt and prompt.strip():
            self.titled = True
            events.append(
                TitleSet(session_id=self.session_id, title=title_of(prompt), source="prompt")
            )
        return events

    def _ended(self, at: float, outcome: TurnOutcome) -> list[Event]:
        """The open turn ends (nothing if none is open); open permission requests with it."""
        self.shared.waiting.clear()
        if self.shared.turn_at is None:
            return []
        end = max(at, self.shared.turn_at)
        self.shared.turn_at = None
        return [TurnEnded(session_id=self.session_id, at=end, outcome=outcome)]

    # ------------------------------------------------------------ model calls
    def _turn_start(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        self.requested[agent] = at
        return []

    def _usage(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        u = data.get("usage")
        if not isinstance(u, dict):
            return []
        accounting = u.get("accounting")
        usage_id = accounting.get("usageId") if isinstance(accounting, dict) else None
        message_id = nonempty(u.get("apiCallId")) or nonempty(usage_id)
        model = nonempty(u.get("model")) or self.model
        if message_id is None or model is None:
            return []
        return [
            ModelResponded(
                session_id=self.session_id,
                at=at,
                message_id=message_id,
                model=model,
                usage=usage_of(u),
                subagent_id=agent,
                main=agent is None,
                requested_at=self.requested.get(agent),
                finish_reason=nonempty(u.get("finishReason")),
            )
        ]

    def _message(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        requests = data.get("toolRequests")
        requests = requests if isinstance(requests, list) else []
        if data.get("apiCallId") is None:  # the runtime's own call, no model asked for it
            ids = (r.get("toolCallId") for r in requests if isinstance(r, dict))
            self.unasked.update(i for i in ids if isinstance(i, str))
        elif agent is None:
            self.final = not requests
        return []

    def _turn_end(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        if agent is None and self.final:
            return self._ended(at, "completed")
        return []

    def _error(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        status = data.get("statusCode")
        error = f"http_{status}" if isinstance(status, int) else nonempty(data.get("errorType"))
        failed = ModelFailed(
            session_id=self.session_id,
            at=at,
            error=error or "error",
            model=self.model,
            subagent_id=agent,
            requested_at=self.requested.get(agent),
        )
        return [failed, *self._ended(at, "failed")]

    def _abort(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        return self._ended(at, "interrupted")

    def _shutdown(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        return self._ended(at, "interrupted")  # a turn still open when the process ended

    # ------------------------------------------------------------ tools and sub-agents
    def _tool_start(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        call_id, tool = nonempty(data.get("toolCallId")), nonempty(data.get("toolName"))
        if call_id is None or tool is None or call_id in self.unasked:
            return []
        self.tools[call_id] = tool
        return [
            ToolCallStarted(
                session_id=self.session_id,
                at=at,
                call_id=call_id,
                tool=tool,
                subagent_id=agent,
                arguments=data.get("arguments"),
            )
        ]

    def _tool_end(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        call_id = nonempty(data.get("toolCallId"))
        if call_id is None or call_id in self.unasked:
            self.unasked.discard(call_id or "")
            return []
        self.tools.pop(call_id, None)
        result = data.get("result")
        content = result.get("content") if isinstance(result, dict) else None
        return [
            ToolCallEnded(
                session_id=self.session_id,
                at=at,
                call_id=call_id,
                outcome=_outcome(data),
                result=content if isinstance(content, str) else None,
            )
        ]

    def _sub_started(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        call_id = nonempty(data.get("toolCallId"))
        if call_id is None:
            return []
        mode = data.get("executionMode")
        return [
            SubagentStarted(
                session_id=self.session_id,
                at=at,
                call_id=call_id,
                subagent_id=call_id,
                subagent_type=nonempty(data.get("agentType")) or nonempty(data.get("agentName")),
                title=nonempty(data.get("agentDescription"))
                or nonempty(data.get("agentDisplayName")),
                background=mode == "background" if isinstance(mode, str) else None,
                parent_id=agent,
            )
        ]

    def _sub_completed(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        return self._sub_ended(data, at, "completed")

    def _sub_failed(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        return self._sub_ended(data, at, "failed")

    def _sub_ended(
        self, data: Mapping[str, Any], at: float, outcome: SubagentOutcome
    ) -> list[Event]:
        call_id = nonempty(data.get("toolCallId"))
        if call_id is None:
            return []
        return [
            SubagentEnded(
                session_id=self.session_id,
                at=at,
                outcome=outcome,
                call_id=call_id,
                subagent_id=call_id,
            )
        ]

    # ------------------------------------------------------------ approvals
    def _asked(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        request = nonempty(data.get("requestId"))
        asked = data.get("permissionRequest")
        if request is None or not isinstance(asked, dict):
            return []
        call_id = nonempty(asked.get("toolCallId"))
        tool = self.tools.get(call_id or "") or nonempty(asked.get("kind")) or "tool"
        self.shared.waiting[request] = tool
        return []

    def _answered(self, data: Mapping[str, Any], at: float, agent: str | None) -> list[Event]:
        request = nonempty(data.get("requestId"))
        if request is not None:
            self.shared.waiting.pop(request, None)
        return []


def _outcome(data: Mapping[str, Any]) -> ToolOutcome:
    """`ok` for a call that worked: `success`, and for a shell command exit code 0 (Copilot
    writes `success: true` for a command that ran and exited 3; the exit code is
    `shellExecution`'s); `rejected` when the user said no at its approval question (`error.code`
    `denied`); else `error`."""
    error = data.get("error")
    if isinstance(error, dict) and error.get("code") == "denied":
        return "rejected"
    shell = data.get("shellExecution")
    code = shell.get("exitCode") if isinstance(shell, dict) else 0
    return "ok" if data.get("success") is True and code in (0, None) else "error"


Handler = Callable[[EventsReader, Mapping[str, Any], float, str | None], list[Event]]
_HANDLERS: dict[str, Handler] = {
    "session.start": EventsReader._started,
    "session.resume": EventsReader._started,
    "system.message": EventsReader._system,
    "user.message": EventsReader._prompt,
    "assistant.turn_start": EventsReader._turn_start,
    "session.usage_record": EventsReader._usage,
    "assistant.message": EventsReader._message,
    "assistant.turn_end": EventsReader._turn_end,
    "session.error": EventsReader._error,
    "abort": EventsReader._abort,
    "session.shutdown": EventsReader._shutdown,
    "tool.execution_start": EventsReader._tool_start,
    "tool.execution_complete": EventsReader._tool_end,
    "subagent.started": EventsReader._sub_started,
    "subagent.completed": EventsReader._sub_completed,
    "subagent.failed": EventsReader._sub_failed,
    "permission.requested": EventsReader._asked,
    "permission.completed": EventsReader._answered,
}
"""What each record type read means (every other type is left alone)."""

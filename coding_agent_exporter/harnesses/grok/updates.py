"""Grok Build's `updates.jsonl` (one session's ACP update stream, as 0.2.111 writes it): its
`session/update` and `_x.ai/session/update` rows: the turns (a prompt's first
`user_message_chunk`, by its `promptIndex`, to `turn_completed`), tool calls (`tool_call` /
`tool_call_update`, by `toolCallId`), the usage of each completed turn (`turn_completed`: a
lead's counts its foreground sub-agents' too), an API error that ended the retries
(`retry_state` of type `failed`), sub-agents spawned (`grok_subagents`), background tasks
(`task_backgrounded` / `task_completed`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...events import (
    Event,
    ModelFailed,
    ModelResponded,
    SubagentStarted,
    ToolCallEnded,
    ToolCallStarted,
    ToolOutcome,
    TurnOutcome,
    TurnStarted,
    Usage,
)
from ..fields import count, nonempty, timestamp
from .session import Shared
from .subagents import SPAWN, Marker, Spawns

_ENDED_TOOL = frozenset({"completed", "failed"})
_TURN_OUTCOME: dict[str, TurnOutcome] = {
    "end_turn": "completed",
    "error": "failed",
    "cancelled": "interrupted",
    "interrupted": "interrupted",
}
UPDATE_METHODS = frozenset({"_x.ai/session/update", "session/update"})
_SUBAGENT_ROWS = frozenset({"tool_call", "tool_call_update"})  # read in a sub-agent's folder


class UpdatesReader:
    """`updates.jsonl`: its `session/update` and `_x.ai/session/update` rows."""

    def __init__(self, session_id: str, shared: Shared, mark_child: Marker) -> None:
        self.session_id = session_id
        self.shared = shared
        self.mark_child = mark_child
        self.calls: dict[str, bool] = {}  # tool call id → ended
        self.prompt: int | None = None  # the prompt index of the open turn
        self.spawns = Spawns()

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        method = record.get("method")
        if not isinstance(method, str) or method not in UPDATE_METHODS:  # a list is no method
            return []
        params = record.get("params")
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict) or not isinstance(params, dict):
            return []
        at = _update_time(record, params)
        kind = nonempty(update.get("sessionUpdate"))
        if at is None or kind is None:
            return []
        if self.shared.child and not self._sub_row(kind):
            return []  # a sub-agent's folder: its tool calls (usage) only, once its lead is known
        if kind == "subagent_spawned":
            return self.spawns.spawned(self.session_id, update, at, self.mark_child)
        handler = _HANDLERS.get(kind)
        if handler is not None:
            return handler(self, update, at)
        return self._tasks(kind, update, at)

    def _sub_row(self, kind: str) -> bool:
        """A row of a sub-agent's folder that is read: its tool calls, a background one's usage."""
        if self.shared.parent is None:
            return False
        return kind in _SUBAGENT_ROWS or (kind == "turn_completed" and self.shared.background)

    def _tool_call(self, update: Mapping[str, Any], at: float) -> list[Event]:
        call_id, tool = nonempty(update.get("toolCallId")), _tool_name(update)
        if call_id is None or tool is None or call_id in self.calls:
            return []
        self.calls[call_id] = False
        if tool == SPAWN:
            self.spawns.called(call_id, update)
        lead, sub = self._owner()
        return [
            ToolCallStarted(session_id=lead, at=at, call_id=call_id, tool=tool, subagent_id=sub)
        ]

    def _owner(self) -> tuple[str, str | None]:
        """Whose tool calls these are: the session's, or (a sub-agent's folder) its lead's,
        as the sub-agent's."""
        if self.shared.child and self.shared.parent is not None:
            return self.shared.parent, self.session_id
        return self.session_id, None

    def _tool_update(self, update: Mapping[str, Any], at: float) -> list[Event]:
        call_id, status = nonempty(update.get("toolCallId")), update.get("status")
        if call_id is None or status not in _ENDED_TOOL or self.calls.get(call_id) is not False:
            return []
        self.calls[call_id] = True
        raw = update.get("rawOutput")
        output: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        code = output.get("exit_code")
        failed = status == "failed" or (isinstance(code, int) and code != 0)
        outcome: ToolOutcome = "error" if failed else "ok"
        if status == "failed" and _text(update).startswith("User rejected"):
            outcome = "rejected"  # "No, reject" at the permission question
        lead, _ = self._owner()
        ended = ToolCallEnded(session_id=lead, at=at, call_id=call_id, outcome=outcome)
        sub = nonempty(output.get("subagent_id"))
        if output.get("type") != "SubagentCompleted" or sub is None:
            return [ended]
        # a `spawn_subagent` call that ended with its sub-agent: the two ids linked
        link = SubagentStarted(session_id=lead, at=None, call_id=call_id, subagent_id=sub)
        return [link, ended]

    def _prompt(self, update: Mapping[str, Any], at: float) -> list[Event]:
        """A prompt's first chunk starts its turn (`grok_turns` says how it ends); a turn still
        open ends there (its `turn_completed` and `turn_ended` were never read)."""
        meta = update.get("_meta")
        index = meta.get("promptIndex") if isinstance(meta, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or index == self.prompt:
            return []
        turns, self.prompt = self.shared.turns, index
        events = turns.ended(self.session_id, at, "completed")
        content = update.get("content")
        text = content.get("text") if isinstance(content, dict) else None
        record = f"{self.session_id}/prompt/{index}"
        prompt = text if isinstance(text, str) else None
        events.append(
            TurnStarted(session_id=self.session_id, at=at, record_id=record, prompt=prompt)
        )
        return events + turns.started(self.session_id, at)

    def _completed(self, update: Mapping[str, Any], at: float) -> list[Event]:
        """`turn_completed`: the turn's usage, then its end (a turn with no prompt row, such as
        the wake-up after a background task, gives its usage only)."""
        stop = update.get("stop_reason")
        outcome = _TURN_OUTCOME.get(stop if isinstance(stop, str) else "", "completed")
        return self._usage(update, at) + self.shared.turns.ended(self.session_id, at, outcome)

    def _usage(self, update: Mapping[str, Any], at: float) -> list[Event]:
        usage, prompt = update.get("usage"), update.get("prompt_id")
        if not isinstance(usage, dict) or not isinstance(prompt, str):
            return []
        cached = count(usage.get("cachedReadTokens"))
        counted = Usage(
            input=max(count(usage.get("inputTokens")) - cached, 0),
            output=count(usage.get("outputTokens")),
            cache_read=cached,
            reasoning=count(usage.get("reasoningTokens")),
        )
        message_id = f"{self.session_id}/{prompt}"
        if self.shared.child:  # a background sub-agent's turn, unless its lead's counted it
            lead = self.shared.lead
            if lead is not None and lead.counts(at):
                return []
            return _subagent_usage(self.shared, self.session_id, message_id, at, counted, usage)
        self.shared.turn_counted(at)
        return self.shared.turn_usage(message_id, at, counted)

    def _retry(self, update: Mapping[str, Any], at: float) -> list[Event]:
        if update.get("type") != "failed":
            return []  # a retry still under way
        error = nonempty(update.get("error_type")) or "error"
        return [
            ModelFailed(session_id=self.session_id, at=at, error=error, model=self.shared.model)
        ]

    def _tasks(self, kind: str, update: Mapping[str, Any], at: float) -> list[Event]:
        """Background tasks: `task_backgrounded` starts one (`task_id`), `task_completed` ends it
        (`task_snapshot.task_id`); `background_tasks`, a list of them with their `status`, is the
        documented shape (not seen in 0.2.111's files)."""
        before = self.shared.status()
        task = nonempty(update.get("task_id"))
        if kind == "task_backgrounded" and task is not None:
            self.shared.tasks[task] = True
            self.shared.tasks_at = at
        elif kind == "background_tasks" and isinstance(update.get("tasks"), list):
            self.shared.tasks = {
                task["task_id"]: task.get("status") == "running"
                for task in update["tasks"]
                if isinstance(task, dict) and isinstance(task.get("task_id"), str)
            }
            self.shared.tasks_at = at
        elif kind == "task_completed":
            snapshot = update.get("task_snapshot")
            task_id = snapshot.get("task_id") if isinstance(snapshot, dict) else None
            if isinstance(task_id, str):
                self.shared.tasks[task_id] = False
                self.shared.tasks_at = at
        return self.shared.live() if self.shared.status() != before else []


_HANDLERS: dict[str, Callable[[UpdatesReader, Mapping[str, Any], float], list[Event]]] = {
    "tool_call": UpdatesReader._tool_call,
    "tool_call_update": UpdatesReader._tool_update,
    "user_message_chunk": UpdatesReader._prompt,
    "turn_completed": UpdatesReader._completed,
    "retry_state": UpdatesReader._retry,
}


def _subagent_usage(
    shared: Shared, child: str, message_id: str, at: float, counted: Usage, usage: Mapping[str, Any]
) -> list[Event]:
    """A background sub-agent's turn usage, as its lead's sub-agent's; the model from the
    usage's own `modelUsage` (its folder's other files are not read)."""
    models = usage.get("modelUsage")
    names = [m for m in models if isinstance(m, str)] if isinstance(models, dict) else []
    if shared.parent is None or len(names) != 1:
        return []
    return [
        ModelResponded(
            session_id=shared.parent,
            at=at,
            message_id=message_id,
            model=names[0],
            usage=counted,
            subagent_id=child,
            main=False,
        )
    ]


def _update_time(record: Mapping[str, Any], params: Mapping[str, Any]) -> float | None:
    """The row's time: `_meta.agentTimestampMs` (milliseconds), else `timestamp` (seconds)."""
    meta = params.get("_meta")
    ms = meta.get("agentTimestampMs") if isinstance(meta, dict) else None
    if isinstance(ms, int) and not isinstance(ms, bool) and ms > 0:
        return ms / 1000
    return timestamp(record.get("timestamp"))


def _text(update: Mapping[str, Any]) -> str:
    """The first text of a `tool_call_update`'s `content` (`[{content: {text}}]`), or ""."""
    content = update.get("content")
    first = content[0] if isinstance(content, list) and content else None
    inner = first.get("content") if isinstance(first, dict) else None
    text = inner.get("text") if isinstance(inner, dict) else None
    return text if isinstance(text, str) else ""


def _tool_name(update: Mapping[str, Any]) -> str | None:
    meta = update.get("_meta")
    tool = meta.get("x.ai/tool") if isinstance(meta, dict) else None
    name = tool.get("name") if isinstance(tool, dict) else None
    return nonempty(name) or nonempty(update.get("title"))

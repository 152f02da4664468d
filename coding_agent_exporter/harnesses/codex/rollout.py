"""Codex's rollouts: `sessions/YYYY/MM/DD/rollout-<UTC stamp>-<thread id>[_<rollout id>].jsonl`
(and compressed, and archived; `codex.Codex` says which file is which), one thread each, mapped to
events by `RolloutReader`.

A thread is the lead session (a root), a sub-agent (`parent_thread_id`, any depth: its work
carries `session_id` = the root from `session_meta.session_id`, `subagent_id` = the thread), or
internal work (an automatic guardian review, memory consolidation): its tokens count in the
totals, never in a session, and a review ends in a `ReviewEnded`.

Tokens: OpenAI's `input_tokens` include the cached input and `output_tokens` include the
reasoning, so one `token_usage_record` (one per model response, keyed by `response_id`) maps to
input = input - cached, cache_read = cached, cache_write = cache_write_input_tokens (0 on the
Responses API), output = output (reasoning included), reasoning = reasoning_output_tokens. Rollouts
without `token_usage_record` (older Codex) count the `last_token_usage` of each `token_count`
whose running total moved.

A sub-agent ends with its own thread's turn end; the parent's `wait` results repeat it later and
are not used, so the end does not depend on which file is read first. The rollout cannot tell a
denied approval from an interrupted command (both read `aborted by user`): both are `cancelled`.
A tool's `item_completed` (`CommandExecution`, `McpToolCall`, `FileChange`) comes before its
output and says how it ended (`codex_fields.exit_of`): an MCP result with `isError` is an `error`.
A refused `apply_patch` leaves no item and no exit code, only its error text: an `error`.
A `compacted` record (the history replaced by a summary) is a `ContextCompacted`; the compaction's
own request is a model response like any other (its `token_usage_record` comes first), and the
record names it (`compaction_response_id`) with a copy of that record: its usage, when it is there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...events import (
    ContextCompacted,
    Event,
    ModelFailed,
    ModelResponded,
    ReviewEnded,
    SessionSeen,
    SubagentEnded,
    SubagentOutcome,
    SubagentStarted,
    TitleSet,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
)
from ..fields import nonempty, timestamp
from .fields import (
    Role,
    exit_of,
    kind_of,
    prompt_text,
    role_of,
    usage_of,
    verdict_of,
)
from .tools import DONE_AT_CALL, TOOL_CALLS, TOOL_OUTPUTS, ToolItems, nickname_of


class RolloutReader(ToolItems):
    """One thread's rollout: the lead session's own, a sub-agent's, or a review's."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.session_id = thread_id
        self.role: Role = "root"
        self.parent_id: str | None = None
        self.at = self.previous_at = 0.0
        self.model: str | None = None
        self.cwd: str | None = None
        self.request: tuple[float | None, bool] | None = None  # (requested at, tool called)
        self.exits: dict[str, int | None] = {}  # tool ends told by item_completed, by call id
        self.spawns: set[str] = set()  # open `spawn_agent` calls
        self.coded: set[str] = set()  # open calls of REFUSED_WITHOUT_CODE tools
        self.records = False  # token_usage_record seen: token_count is a repeat
        self.total: object = None
        self.last_message: str | None = None
        self.ended = False

    def __reduce__(self) -> tuple[Any, ...]:
        """Made by `__init__`, then given its state: a class compiled by mypyc (`setup.py`) is
        not made without calling it (the catch-up cache and workers pickle readers)."""
        return RolloutReader, (self.thread_id,), self.__getstate__()

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        payload = record.get("payload")
        if not isinstance(payload, dict):
            return []
        at = timestamp(record.get("timestamp"))
        if at is not None:
            self.previous_at, self.at = self.at, max(self.at, at)
        kind = nonempty(record.get("type"))
        if kind == "session_meta":
            return self._meta(payload)
        if kind == "turn_context":
            return self._settings(payload)
        if kind == "token_usage_record":
            self.records = True
            return self._responded(payload.get("response_id"), payload.get("usage"))
        if kind == "response_item":
            return self._item(payload)
        if kind == "compacted":
            return [self._compacted(payload)]
        if kind == "event_msg":
            return self._event(payload)
        return []

    # -- thread -----------------------------------------------------------------------------

    def _meta(self, meta: Mapping[str, Any]) -> list[Event]:
        self.thread_id = nonempty(meta.get("id")) or self.thread_id
        self.session_id = nonempty(meta.get("session_id")) or self.thread_id
        self.role = role_of(meta)
        parent = nonempty(meta.get("parent_thread_id"))
        self.parent_id = parent if parent != self.session_id else None
        self.cwd = nonempty(meta.get("cwd"))
        seen = SessionSeen(
            session_id=self.session_id,
            at=timestamp(meta.get("timestamp")) or self.at,
            cwd=self.cwd,
            kind=kind_of(meta),
            version=nonempty(meta.get("cli_version")),
            main=self.role == "root",
        )
        if self.role != "subagent":
            return [seen]
        role = nonempty(meta.get("agent_role"))
        started = SubagentStarted(
            session_id=self.session_id,
            at=seen.at,
            subagent_id=self.thread_id,
            subagent_type=role or "subagent",
            title=nonempty(meta.get("agent_nickname")),
            background=None,
            parent_id=self.parent_id,
        )
        return [seen, started]

    def _settings(self, settings: Mapping[str, Any]) -> list[Event]:
        model, cwd = nonempty(settings.get("model")), nonempty(settings.get("cwd"))
        changed = (model or self.model) != self.model or (cwd or self.cwd) != self.cwd
        self.model, self.cwd = model or self.model, cwd or self.cwd
        if not changed or self.role != "root":
            return []
        return [SessionSeen(session_id=self.session_id, at=self.at, cwd=self.cwd, model=self.model)]

    # -- turns ------------------------------------------------------------------------------

    def _event(self, payload: Mapping[str, Any]) -> list[Event]:
        kind = nonempty(payload.get("type"))
        if kind == "thread_settings_applied":
            settings = payload.get("thread_settings")
            return self._settings(settings) if isinstance(settings, dict) else []
        if kind in ("task_started", "turn_started"):
            return self._turn_started(payload)
        if kind in ("task_complete", "turn_complete"):
            return self._turn_ended(payload.get("error"), payload.get("last_agent_message"))
        if kind == "turn_aborted":
            return self._turn_ended(None, None, aborted=True)
        if kind == "token_count" and not self.records:
            return self._counted(payload.get("info"))
        if kind == "item_completed":
            item = payload.get("item")
            return self._completed(item) if isinstance(item, dict) else []
        return []

    def _turn_started(self, payload: Mapping[str, Any]) -> list[Event]:
        self.request = None
        if self.role != "root":
            return []
        turn = nonempty(payload.get("turn_id")) or f"{self.thread_id}@{self.at}"
        return [TurnStarted(session_id=self.session_id, at=self.at, record_id=turn)]

    def _turn_ended(self, error: object, message: object, *, aborted: bool = False) -> list[Event]:
        self.request = None
        failed = error is not None and error is not False
        events: list[Event] = []
        if failed:
            events.append(self._failed(error))
        if self.role == "root":
            outcome: TurnOutcome = "interrupted" if aborted else "failed" if failed else "completed"
            events.append(TurnEnded(session_id=self.session_id, at=self.at, outcome=outcome))
        elif self.role == "subagent" and not self.ended:
            self.ended = True
            ended: SubagentOutcome = "cancelled" if aborted else "failed" if failed else "completed"
            events.append(
                SubagentEnded(
                    session_id=self.session_id,
                    at=self.at,
                    subagent_id=self.thread_id,
                    outcome=ended,
                )
            )
        elif self.role == "review" and not self.ended:
            self.ended = True
            verdict = "cancelled" if aborted else "failed" if failed else verdict_of(message)
            events.append(
                ReviewEnded(
                    session_id=self.session_id,
                    at=self.at,
                    review_id=self.thread_id,
                    outcome=verdict,
                )
            )
        return events

    def _failed(self, error: object) -> ModelFailed:
        info = error.get("codex_error_info") if isinstance(error, dict) else None
        if isinstance(info, dict):
            info = next(iter(info), None)
        return ModelFailed(
            session_id=self.session_id,
            at=self.at,
            error=info if isinstance(info, str) and info else "api_error",
            model=self.model,
            subagent_id=self.subagent_id,
            requested_at=self.previous_at or None,
        )

    # -- model responses --------------------------------------------------------------------

    def _responded(self, response_id: object, usage: object) -> list[Event]:
        requested, tool_called = self.request or (self.previous_at or None, False)
        self.request = None
        if not isinstance(response_id, str) or not response_id:
            return []
        return [
            ModelResponded(
                session_id=self.session_id,
                at=self.at,
                message_id=response_id,
                model=self.model or "unknown",
                usage=usage_of(usage),
                subagent_id=self.subagent_id,
                main=self.role == "root",
                internal=self.role in ("review", "internal"),
                requested_at=requested,
                finish_reason="tool_calls" if tool_called else "stop",
            )
        ]

    def _compacted(self, payload: Mapping[str, Any]) -> ContextCompacted:
        """A compaction, with the usage of its own request when the record names that response
        (`compaction_response_id`) and carries its `token_usage_record`."""
        response = nonempty(payload.get("compaction_response_id"))
        record = payload.get("latest_token_usage_record")
        usage = None
        if isinstance(record, dict) and response and record.get("response_id") == response:
            usage = usage_of(record.get("usage"))
        window = nonempty(payload.get("window_id")) or response
        return ContextCompacted(
            session_id=self.session_id,
            at=self.at,
            compaction_id=window or f"{self.thread_id}@{self.at}",
            subagent_id=self.subagent_id,
            usage=usage,
        )

    def _counted(self, info: object) -> list[Event]:
        """Older rollouts: one response per `token_count` whose running total moved."""
        if not isinstance(info, dict) or info.get("total_token_usage") in (None, self.total):
            return []
        self.total = total = info["total_token_usage"]
        last = info.get("last_token_usage")
        if not isinstance(last, dict) or not isinstance(total, dict):
            return []
        return self._responded(f"{self.thread_id}#{total.get('total_tokens')}", last)

    def _output_seen(self, tool: bool) -> None:
        """A model output item: the first of a response notes when the request went out."""
        if self.request is None:
            self.request = (self.previous_at or None, tool)
        elif tool:
            self.request = (self.request[0], True)

    # -- items ------------------------------------------------------------------------------

    def _item(self, payload: Mapping[str, Any]) -> list[Event]:
        kind = nonempty(payload.get("type"))
        if kind == "reasoning" or (kind == "message" and payload.get("role") == "assistant"):
            self._output_seen(tool=False)
            return []
        if kind == "message" and payload.get("role") == "user" and self.role == "root":
            title = prompt_text(payload.get("content"))
            if title is None:
                return []
            return [TitleSet(session_id=self.session_id, title=title, source="prompt")]
        if kind in TOOL_CALLS:
            self._output_seen(tool=kind not in DONE_AT_CALL)  # a search asks nothing back
            return self._tool_call(payload)
        if kind in TOOL_OUTPUTS:
            return self._tool_output(payload)
        return []

    def _completed(self, item: Mapping[str, Any]) -> list[Event]:
        kind, call_id = nonempty(item.get("type")), nonempty(item.get("id"))
        if kind in ("Reasoning", "AgentMessage"):
            self._output_seen(tool=False)
        elif kind in ("CommandExecution", "McpToolCall", "FileChange") and call_id is not None:
            self.exits[call_id] = exit_of(item)
            if len(self.exits) > 1024:  # outputs that never came (killed): forget the oldest
                del self.exits[next(iter(self.exits))]
        elif kind == "CollabAgentToolCall" and item.get("tool") == "spawn_agent" and call_id:
            receivers = item.get("receiver_thread_ids")
            agent_id = receivers[0] if isinstance(receivers, list) and receivers else None
            if isinstance(agent_id, str) and agent_id:
                return [self._linked(call_id, agent_id, nickname_of(item))]
        return []

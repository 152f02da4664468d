"""OpenAI Codex (CLI, TUI, VS Code): `$CODEX_HOME`, else `~/.codex`.

Files read (everything else under the home is left alone: `auth.json`, the SQLite stores, logs):

- `sessions/YYYY/MM/DD/rollout-<UTC stamp>-<thread id>[_<rollout id>].jsonl`, also compressed
  (`.jsonl.zst`) and under `archived_sessions/`: one file per thread, records
  `{timestamp, type, payload}`, `session_meta` first.
- `session_index.jsonl`: `{id, thread_name, updated_at}` lines, the newest per id wins.

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
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar, Literal

from ..events import (
    Event,
    Kind,
    ModelFailed,
    ModelResponded,
    ReviewEnded,
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
from .fields import count, home, nonempty, timestamp

Role = Literal["root", "subagent", "review", "internal"]
_ROLLOUT = re.compile(
    r"^rollout-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-([0-9a-fA-F-]{36})(?:_[0-9a-fA-F-]{36})?"
    r"\.jsonl(\.zst)?$"
)
_INDEX = "session_index.jsonl"
TOOL_CALLS = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "web_search_call", "tool_search_call"}
)
TOOL_OUTPUTS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "tool_search_output",
    }
)
_DONE_AT_CALL = frozenset({"web_search_call"})  # run by the API: no output item follows
_NOT_PROMPTS = (
    "<",
    "# AGENTS.md instructions",
    "These AGENTS.md instructions replace",
    "The previously provided AGENTS.md instructions",
)
_REQUEST_MARK = "## My request for Codex:"
_ABORTED = re.compile(r"(^|\n)aborted by user\s*$")
_EXIT_CODE = re.compile(r"Process exited with code (-?\d+)")
_INTERNAL_SOURCES = frozenset({"memory_consolidation"})
TITLE_MAX = 200


class Codex(Defaults):
    name: ClassVar[str] = "codex"
    home_flag: ClassVar[str] = "codex.home"
    watch_dirs: ClassVar[tuple[str, ...]] = ("sessions", "archived_sessions", _INDEX)
    holder_names: ClassVar[tuple[str, ...]] = ("codex",)  # no live index: who holds a rollout

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        return home(environ, "CODEX_HOME", ".codex")

    def match(self, rel: PurePosixPath) -> FileKind | None:
        if rel.parts == (_INDEX,):
            return "jsonl"
        if len(rel.parts) < 2 or rel.parts[0] not in ("sessions", "archived_sessions"):
            return None
        found = _ROLLOUT.match(rel.name)
        if found is None:
            return None
        return "zstd" if found.group(2) else "jsonl"

    def reader(self, rel: PurePosixPath) -> FileReader:
        if rel.parts == (_INDEX,):
            return IndexReader()
        found = _ROLLOUT.match(rel.name)
        assert found is not None
        return RolloutReader(found.group(1))


def usage_of(raw: object) -> Usage:
    """OpenAI usage → ours: cached input and reasoning are parts of input and output."""
    if not isinstance(raw, dict):
        return Usage()
    cached = count(raw.get("cached_input_tokens"))
    return Usage(
        input=max(0, count(raw.get("input_tokens")) - cached),
        output=count(raw.get("output_tokens")),
        cache_read=cached,
        cache_write=count(raw.get("cache_write_input_tokens")),
        reasoning=count(raw.get("reasoning_output_tokens")),
    )


def role_of(meta: Mapping[str, Any]) -> Role:
    source, thread_source = meta.get("source"), meta.get("thread_source")
    thread_source = thread_source if isinstance(thread_source, str) else None
    spawned = source.get("subagent") if isinstance(source, dict) else None
    other = spawned.get("other") if isinstance(spawned, dict) else None
    if thread_source == "guardian_review" or other == "guardian":
        return "review"
    if thread_source in _INTERNAL_SOURCES or other is not None:
        return "internal"
    if meta.get("parent_thread_id") or spawned is not None or thread_source == "subagent":
        return "subagent"
    return "root"


def kind_of(meta: Mapping[str, Any]) -> Kind:
    headless = meta.get("originator") == "codex_exec" or meta.get("source") in ("exec", "mcp")
    return "headless" if headless else "interactive"


def prompt_text(content: object) -> str | None:
    """The user's own words in a role-user message, or None for injected harness messages."""
    parts = content if isinstance(content, list) else []
    texts = [p.get("text") for p in parts if isinstance(p, dict)]
    text = "\n".join(t for t in texts if isinstance(t, str)).strip()
    if _REQUEST_MARK in text:
        text = text.split(_REQUEST_MARK, 1)[1].strip()
    if not text or text.startswith(_NOT_PROMPTS):
        return None
    return " ".join(text.split())[:TITLE_MAX]


def output_outcome(payload: Mapping[str, Any], exit_code: int | None) -> ToolOutcome:
    output = payload.get("output")
    if isinstance(output, list):
        output = " ".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    text = output if isinstance(output, str) else json.dumps(output)
    if _ABORTED.search(text):
        return "cancelled"  # an interrupted command, or a denied approval: the same record
    if exit_code is None:
        found = _EXIT_CODE.search(text)
        exit_code = int(found.group(1)) if found else None
    if exit_code not in (0, None) or payload.get("success") is False:
        return "error"
    if isinstance(output, dict) and output.get("success") is False:
        return "error"
    return "ok"


def verdict_of(text: object) -> str:
    """A guardian review's outcome from its JSON verdict (`allow`, `deny`, ...)."""
    try:
        verdict = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return "unknown"
    outcome = verdict.get("outcome") if isinstance(verdict, dict) else None
    return outcome.lower() if isinstance(outcome, str) and outcome else "unknown"


def tool_name(payload: Mapping[str, Any]) -> str:
    kind = str(payload.get("type"))
    name = nonempty(payload.get("name")) or kind.removesuffix("_call")
    namespace = nonempty(payload.get("namespace"))
    return f"{namespace}.{name}" if namespace else name


class RolloutReader:
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
        self.exits: dict[str, int | None] = {}  # CommandExecution exit codes by call id
        self.spawns: set[str] = set()  # open `spawn_agent` calls
        self.records = False  # token_usage_record seen: token_count is a repeat
        self.total: object = None
        self.last_message: str | None = None
        self.ended = False

    @property
    def subagent_id(self) -> str | None:
        return self.thread_id if self.role == "subagent" else None

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
            self._output_seen(tool=True)
            return self._tool_call(payload)
        if kind in TOOL_OUTPUTS:
            return self._tool_output(payload)
        return []

    def _tool_call(self, payload: Mapping[str, Any]) -> list[Event]:
        call_id = nonempty(payload.get("call_id")) or nonempty(payload.get("id"))
        if call_id is None or self.role in ("review", "internal"):
            return []
        name = tool_name(payload)
        events: list[Event] = [
            ToolCallStarted(
                session_id=self.session_id,
                at=self.at,
                call_id=call_id,
                tool=name,
                subagent_id=self.subagent_id,
                arguments=payload.get("arguments") or payload.get("input") or payload.get("action"),
            )
        ]
        if name.endswith("spawn_agent"):
            self.spawns.add(call_id)
        if payload.get("type") in _DONE_AT_CALL:
            outcome: ToolOutcome = "ok" if payload.get("status") in (None, "completed") else "error"
            events.append(
                ToolCallEnded(
                    session_id=self.session_id, at=self.at, call_id=call_id, outcome=outcome
                )
            )
        return events

    def _tool_output(self, payload: Mapping[str, Any]) -> list[Event]:
        call_id = nonempty(payload.get("call_id"))
        if call_id is None or self.role in ("review", "internal"):
            return []
        outcome = output_outcome(payload, self.exits.pop(call_id, None))
        output = payload.get("output")
        result = output if isinstance(output, str) else json.dumps(output) if output else None
        events: list[Event] = [
            ToolCallEnded(
                session_id=self.session_id,
                at=self.at,
                call_id=call_id,
                outcome=outcome,
                result=result,
            )
        ]
        agent_id = _spawned(payload.get("output")) if call_id in self.spawns else None
        self.spawns.discard(call_id)
        if agent_id is not None:
            events.append(self._linked(call_id, agent_id, None))
        return events

    def _completed(self, item: Mapping[str, Any]) -> list[Event]:
        kind, call_id = nonempty(item.get("type")), nonempty(item.get("id"))
        if kind in ("Reasoning", "AgentMessage"):
            self._output_seen(tool=False)
        elif kind == "CommandExecution" and call_id is not None:
            code = item.get("exit_code")
            failed = item.get("status") == "failed" and not isinstance(code, int)
            self.exits[call_id] = 1 if failed else code if isinstance(code, int) else None
            if len(self.exits) > 1024:  # outputs that never came (killed): forget the oldest
                del self.exits[next(iter(self.exits))]
        elif kind == "CollabAgentToolCall" and item.get("tool") == "spawn_agent" and call_id:
            receivers = item.get("receiver_thread_ids")
            agent_id = receivers[0] if isinstance(receivers, list) and receivers else None
            if isinstance(agent_id, str) and agent_id:
                return [self._linked(call_id, agent_id, _nickname(item))]
        return []

    def _linked(self, call_id: str, agent_id: str, title: str | None) -> SubagentStarted:
        """The parent's side of a spawn: which call started which thread (the child's file
        says when)."""
        return SubagentStarted(
            session_id=self.session_id,
            at=None,
            call_id=call_id,
            subagent_id=agent_id,
            title=title,
            parent_id=self.subagent_id,
        )


def _spawned(output: object) -> str | None:
    """`spawn_agent`'s output `{"agent_id": ..., "nickname": ...}`."""
    if not isinstance(output, str) or not output.startswith("{") or "agent_id" not in output:
        return None
    try:
        data = json.loads(output)
    except ValueError:
        return None
    return nonempty(data.get("agent_id")) if isinstance(data, dict) else None


def _nickname(item: Mapping[str, Any]) -> str | None:
    agents = item.get("receiver_agents")
    first = agents[0] if isinstance(agents, list) and agents else None
    return nonempty(first.get("agent_nickname")) if isinstance(first, dict) else None


class IndexReader:
    """`session_index.jsonl`: thread names, the generated one and `/rename`s, newest last."""

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        thread, name = nonempty(record.get("id")), nonempty(record.get("thread_name"))
        if thread is None or name is None:
            return []
        return [TitleSet(session_id=thread, title=name[:TITLE_MAX], source="harness")]

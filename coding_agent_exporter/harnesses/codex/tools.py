"""A Codex rollout's tool calls: the items that call a tool and those that answer one, and the
spawns they link to a child thread. `ToolItems` is the part of `codex_rollout.RolloutReader`
that reads them (a mixin: the reader keeps the thread's role, clock and open calls); an output's
outcome comes from `codex_fields.output_outcome` and the `item_completed` noted before it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...events import Event, SubagentStarted, ToolCallEnded, ToolCallStarted, ToolOutcome
from ..fields import nonempty
from .fields import REFUSED_WITHOUT_CODE, Role, output_outcome, tool_name

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
DONE_AT_CALL = frozenset({"web_search_call"})  # run by the API: no output item follows


class ToolItems:
    """Tool calls and their outputs, for the thread whose reader this is."""

    thread_id: str
    session_id: str
    role: Role
    at: float
    exits: dict[str, int | None]  # tool ends told by item_completed, by call id
    spawns: set[str]  # open `spawn_agent` calls
    coded: set[str]  # open calls of REFUSED_WITHOUT_CODE tools

    @property
    def subagent_id(self) -> str | None:
        return self.thread_id if self.role == "subagent" else None

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
        if name in REFUSED_WITHOUT_CODE and len(self.coded) < 1024:
            self.coded.add(call_id)
        if payload.get("type") in DONE_AT_CALL:
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
        coded = call_id in self.coded
        self.coded.discard(call_id)
        outcome = output_outcome(payload, self.exits.pop(call_id, None), coded=coded)
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


def nickname_of(item: Mapping[str, Any]) -> str | None:
    agents = item.get("receiver_agents")
    first = agents[0] if isinstance(agents, list) and agents else None
    return nonempty(first.get("agent_nickname")) if isinstance(first, dict) else None

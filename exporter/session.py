"""What is known about one session and its sub-agents: plain mutable records owned by `state`."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .events import Kind, TitleSource, Usage

TITLE_RANK: dict[TitleSource, int] = {"prompt": 0, "process": 1, "harness": 2, "user": 3}


@dataclass(slots=True)
class OpenTool:
    tool: str
    at: float
    subagent: Subagent | None


@dataclass(slots=True)
class Subagent:
    call_id: str | None = None
    agent_id: str | None = None
    subagent_type: str | None = None
    title: str | None = None
    background: bool = False
    parent_id: str | None = None
    state: str = "running"
    started_at: float | None = None
    ended_at: float | None = None
    messages: int = 0
    tokens: Usage = field(default_factory=Usage)
    tool_calls: int = 0

    @property
    def id(self) -> str:
        return self.agent_id or self.call_id or ""

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "call_id": self.call_id,
            "type": self.subagent_type or "unknown",
            "title": self.title,
            "background": self.background,
            "state": self.state,
            "parent_id": self.parent_id,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "messages": self.messages,
            "tokens": self.tokens.as_dict(),
            "tool_calls": self.tool_calls,
        }


@dataclass(slots=True)
class Session:
    agent: str
    session_id: str
    cwd: str | None = None
    kind: Kind | None = None
    version: str | None = None
    title: str | None = None
    title_source: TitleSource | None = None
    model: str | None = None
    started_at: float | None = None
    updated_at: float | None = None
    messages: int = 0
    tokens: Usage = field(default_factory=Usage)
    turns: Counter[str] = field(default_factory=Counter)
    turn_open_at: float | None = None
    last_turn: tuple[str, float] | None = None  # record id and start of the latest turn
    tool_calls: int = 0
    tool_errors: int = 0
    open_tools: dict[str, OpenTool] = field(default_factory=dict)
    subagents: dict[str, Subagent] = field(default_factory=dict)  # by agent id or call id
    counted: bool = False

    def touch(self, at: float | None) -> None:
        if at is None:
            return
        if self.started_at is None or at < self.started_at:
            self.started_at = at
        if self.updated_at is None or at > self.updated_at:
            self.updated_at = at

    def set_title(self, title: str, source: TitleSource) -> None:
        if self.title_source is None:
            self.title, self.title_source = title, source
            return
        rank, current = TITLE_RANK[source], TITLE_RANK[self.title_source]
        if rank > current or (rank == current and source != "prompt"):
            self.title, self.title_source = title, source

    def subagent(self, call_id: str | None, agent_id: str | None) -> Subagent | None:
        """Find a sub-agent by either id; link the two ids when both are given."""
        found = self.subagents.get(agent_id or "") or self.subagents.get(call_id or "")
        if found is not None and agent_id and call_id:
            other = self.subagents.get(call_id) if found is self.subagents.get(agent_id) else None
            if other is not None and other is not found:
                _merge(found, other)
            found.agent_id = found.agent_id or agent_id
            found.call_id = found.call_id or call_id
            self.subagents[agent_id] = self.subagents[call_id] = found
        return found

    def has_open_work(self) -> bool:
        """A turn, a tool call or a sub-agent that has not ended yet."""
        if self.turn_open_at is not None or self.open_tools:
            return True
        return any(sub.state == "running" for sub in self.subagents.values())

    def unique_subagents(self) -> list[Subagent]:
        seen: dict[int, Subagent] = {}
        for sub in self.subagents.values():
            seen.setdefault(id(sub), sub)
        return sorted(seen.values(), key=lambda s: (s.started_at or 0.0, s.id))


def _merge(into: Subagent, other: Subagent) -> None:
    """Fold what was learnt under a second id into the first record."""
    into.messages += other.messages
    into.tokens = into.tokens.plus(other.tokens)
    into.tool_calls += other.tool_calls
    for name in ("subagent_type", "title", "parent_id", "started_at"):
        if getattr(into, name) is None:
            setattr(into, name, getattr(other, name))
    into.background = into.background or other.background
    if into.state == "running":
        into.state, into.ended_at = other.state, other.ended_at

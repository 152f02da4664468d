"""What is known about one session and its sub-agents: plain mutable records owned by `state`.

History can hold tens of thousands of sessions, each kept for `sessions --all`; a finished one
costs its object, its id, its title, its token counts and two times. What most sessions never
need takes no room: no token record until a response counts (the shared `ZERO`), no table of
open tool calls or sub-agents while there are none (`None`, shown as an empty mapping), turn
counts as three integers rather than a `Counter`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..events import Kind, TitleSource, TurnOutcome, Usage

TITLE_RANK: dict[TitleSource, int] = {"prompt": 0, "process": 1, "harness": 2, "user": 3}
ZERO = Usage()
"""No tokens: shared by every record that has counted none yet (`Usage` is frozen)."""


@dataclass(slots=True)
class Counted:
    """What is counted of a recent response: its largest usage, the session it counts for (the
    first that reported it), its sub-agent, when it first came, what it costs so far (USD)."""

    usage: Usage
    owner_id: str
    sub: Subagent | None
    first_at: float
    cost: float = 0.0
    reported: float = 0.0  # what the agent said it cost (USD), the largest of its reports


@dataclass(slots=True)
class OpenTool:
    tool: str
    at: float
    subagent: Subagent | None


Run = tuple[str, str | None]
"""A run of sub-agents (a Claude Code workflow): the tool call that launched it, its name."""


@dataclass(slots=True)
class Subagent:
    call_id: str | None = None
    agent_id: str | None = None
    subagent_type: str | None = None
    title: str | None = None
    background: bool = False
    parent_id: str | None = None
    run_id: str | None = None  # the run (workflow) it belongs to, if any
    state: str = "running"
    started_at: float | None = None
    ended_at: float | None = None
    messages: int = 0
    tokens: Usage = ZERO
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
    tokens: Usage = ZERO
    completed: int = 0  # turns, by outcome (`turns`)
    interrupted: int = 0
    failed: int = 0
    turn_open_at: float | None = None
    last_turn: tuple[str, float] | None = None  # record id and start of the latest traced turn
    tool_calls: int = 0
    tool_errors: int = 0
    tools: dict[str, OpenTool] | None = None  # open tool calls (`open_tools`); None: none
    subs: dict[str, Subagent] | None = None  # by agent id or call id (`subagents`); None: none
    runs: dict[str, Run] | None = None  # runs of sub-agents (workflows) by run id; None: none
    counted: bool = False
    closed: bool = False  # its files say it was closed (`SessionClosed`): no holder makes it live
    cost: float = 0.0  # USD, estimated from its tokens (`spend`)
    reported_cost: float | None = None  # USD, what the agent says it cost; None: it says nothing
    files: str | tuple[str, ...] | None = None  # the files its work was read from (`read_from`)
    born: int = 0  # the state's count of sessions before it: the order sessions are listed in

    @property
    def turns(self) -> Mapping[str, int]:
        """Ended turns by outcome: those with none left out, and read as 0."""
        turns = _Turns()
        if self.completed:
            turns["completed"] = self.completed
        if self.interrupted:
            turns["interrupted"] = self.interrupted
        if self.failed:
            turns["failed"] = self.failed
        return turns

    def count_turn(self, outcome: TurnOutcome) -> None:
        if outcome == "completed":
            self.completed += 1
        elif outcome == "interrupted":
            self.interrupted += 1
        elif outcome == "failed":
            self.failed += 1

    @property
    def open_tools(self) -> Mapping[str, OpenTool]:
        """Tool calls started and not ended yet, by call id."""
        return _NO_TOOLS if self.tools is None else self.tools

    def open_tool(self, call_id: str, tool: OpenTool) -> None:
        if self.tools is None:
            self.tools = {}
        self.tools[call_id] = tool

    def end_tool(self, call_id: str) -> OpenTool | None:
        """The open tool call `call_id`, no longer open; None if it was not."""
        if self.tools is None:
            return None
        found = self.tools.pop(call_id, None)
        if not self.tools:
            self.tools = None  # an emptied table keeps its room: let it go
        return found

    @property
    def subagents(self) -> Mapping[str, Subagent]:
        """Sub-agents by agent id and by call id (one record under both when both are known)."""
        return _NO_SUBAGENTS if self.subs is None else self.subs

    def add_subagent(self, key: str, sub: Subagent) -> None:
        if self.subs is None:
            self.subs = {}
        self.subs[key] = sub

    def run(self, run_id: str | None) -> Run | None:
        """The call that launched run `run_id` and the run's name, once told."""
        return None if self.runs is None or run_id is None else self.runs.get(run_id)

    def add_run(self, run_id: str, run: Run) -> None:
        if self.runs is None:
            self.runs = {}
        self.runs[run_id] = run

    def read_from(self, name: str) -> None:
        """Note a file that told its work (the engine's own name for it: no copy is kept)."""
        files = self.files
        if files is None:
            self.files = name
        elif isinstance(files, str):
            if files != name:
                self.files = (files, name)
        elif name not in files:
            self.files = (*files, name)

    @property
    def file_names(self) -> tuple[str, ...]:
        files = self.files
        return () if files is None else (files,) if isinstance(files, str) else files

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
            self.add_subagent(agent_id, found)
            self.add_subagent(call_id, found)
        return found

    def has_open_work(self) -> bool:
        """A turn, a tool call or a sub-agent that has not ended yet."""
        if self.turn_open_at is not None or self.tools:
            return True
        return self.subs is not None and any(s.state == "running" for s in self.subs.values())

    def unique_subagents(self) -> list[Subagent]:
        seen: dict[int, Subagent] = {}
        for sub in self.subagents.values():
            seen.setdefault(id(sub), sub)
        return sorted(seen.values(), key=lambda s: (s.started_at or 0.0, s.id))


class _Turns(dict[str, int]):
    """Counts by outcome; an outcome with none is 0 (as in a `Counter`)."""

    __slots__ = ()

    def __missing__(self, key: str) -> int:
        return 0


_NO_TOOLS: Mapping[str, OpenTool] = MappingProxyType({})
_NO_SUBAGENTS: Mapping[str, Subagent] = MappingProxyType({})


def _merge(into: Subagent, other: Subagent) -> None:
    """Fold what was learnt under a second id into the first record."""
    into.messages += other.messages
    into.tokens = into.tokens.plus(other.tokens)
    into.tool_calls += other.tool_calls
    for name in ("subagent_type", "title", "parent_id", "run_id", "started_at"):
        if getattr(into, name) is None:
            setattr(into, name, getattr(other, name))
    into.background = into.background or other.background
    if into.state == "running":
        into.state, into.ended_at = other.state, other.ended_at

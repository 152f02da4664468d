"""What the readers of one Vibe unified session store know together.

A store (`unified/<session id>/` or a sub-agent's `unified/child-<hex>/`) is read through several
files: its journal segments, the content-addressed chunks of its snapshots, its generations'
runtime state and, for a lead, the lock file of the process running it. Each reader folds what it
reads into the store's `Store` record; the record decides which events are new, so a fact read
twice (from a journal line and from a snapshot chunk, or from two generations) is told once.

Identity: a completion is its action id (the snapshot's `assistant-<action id>` entry, the
runtime state's completion action); a tool call is its action id (the `effect-<action id>`
entry) or, for the calls the runtime runs without an action of their own (`run_typescript`, 3.0's
`wait`), the model's call id. Turns are the harness's turn ids.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...events import (
    Event,
    Kind,
    LiveIndexRead,
    ModelResponded,
    SubagentEnded,
    SubagentStarted,
    ToolCallEnded,
    ToolCallStarted,
    ToolOutcome,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
    Usage,
)
from ..fields import count

CHILD_PREFIX = "child-"
PENDING_MAX = 10_000
"""Records of a sub-agent's store kept until its state names the lead (a few, in practice)."""
UNKNOWN_MODEL = "unknown"


def usage(value: object) -> Usage:
    """Vibe's `{input_tokens (with the cached part), cached_input_tokens, output_tokens}`, in
    snake case (completion results) or camel case (the session's cumulative `tokenUsage`)."""
    if not isinstance(value, dict):
        return Usage()
    total = count(value.get("input_tokens", value.get("inputTokens")))
    cached = count(value.get("cached_input_tokens", value.get("cachedInputTokens")))
    output = count(value.get("output_tokens", value.get("outputTokens")))
    return Usage(input=max(0, total - cached), output=output, cache_read=cached)


def listed(value: object) -> list[Any]:
    """A JSON array, else nothing."""
    return value if isinstance(value, list) else []


def at_least_zero(value: Usage) -> Usage:
    return Usage(*(max(0, v) for v in value.as_dict().values()))


def tool_name(name: str) -> str:
    """`file_system.bash` → `bash`: the name the model calls the tool by."""
    return name.rsplit(".", 1)[-1]


@dataclass
class Store:
    """One unified store's shared knowledge (see the module docstring)."""

    name: str
    default_model: str | None = None
    root: str | None = None  # the lead session's id; unknown for a child until its state says
    parent: str | None = None
    model: str | None = None
    kind: Kind | None = None
    clock: float | None = None  # the latest time read from the store's own records
    lock: LiveIndexRead | None = None  # from `active/<id>.lock.json`, status left out
    turns: set[str] = field(default_factory=set)  # started
    open_turn: str | None = None
    turn_broken: bool = False  # the open turn saw a discarded (interrupted) response
    waiting: dict[str, str] = field(default_factory=dict)  # approval callback id → tool
    status_at: float | None = None
    last_seq: int = 0
    journal_usage: Usage = field(default_factory=Usage)  # of the responses the journal showed
    unseen: Usage = field(default_factory=Usage)  # in `tokenUsage`, not in the journal
    requested: dict[str, float] = field(default_factory=dict)  # completion action → asked at
    calls: dict[str, str] = field(default_factory=dict)  # model call id → tool, not yet run
    actions: dict[str, str] = field(default_factory=dict)  # running tool action → model call id
    denied: set[str] = field(default_factory=set)  # model call ids the user denied
    tools: set[str] = field(default_factory=set)  # tool call ids started
    ended_tools: set[str] = field(default_factory=set)
    pending: list[tuple[str, Any]] = field(default_factory=list)  # waiting for `root`
    announced: bool = False  # a sub-agent's start was told
    kind_told: bool = False
    told: dict[str, Usage] = field(default_factory=dict)  # responses told, by action id
    history: list[Any] = field(default_factory=list)  # checkpoint conversations held back
    after_turn: Callable[[Store, Any], list[Event]] | None = None  # tells them
    prompts: dict[str, str | None] = field(default_factory=dict)  # turn id → its prompt
    ended_turns: set[str] = field(default_factory=set)  # a sub-agent's ended turns

    def __post_init__(self) -> None:
        if not self.name.startswith(CHILD_PREFIX):
            self.root = self.name

    @property
    def subagent_id(self) -> str | None:
        return self.name if self.name != self.root else None

    @property
    def lead(self) -> bool:
        return self.subagent_id is None

    def tick(self, at: float | None) -> float | None:
        if at is not None and (self.clock is None or at > self.clock):
            self.clock = at
        return self.clock

    def now(self) -> float:
        return self.clock or 0.0

    def the_model(self) -> str:
        return self.model or self.default_model or UNKNOWN_MODEL

    # -- what the readers report ---------------------------------------------------------------

    def responded(
        self,
        action_id: str,
        used: Usage,
        *,
        finish: str | None = None,
        text: str | None = None,
        carried: bool = False,
        at: float | None = None,
    ) -> list[Event]:
        told = self.told.get(action_id)
        if self.root is None or (told is not None and told.max(used) == told):
            return []  # told already (a snapshot read again, or a later generation's copy)
        self.told[action_id] = used if told is None else told.max(used)
        return [
            ModelResponded(
                session_id=self.root,
                at=at or self.now(),
                message_id=action_id,
                model=self.the_model(),
                usage=used,
                subagent_id=self.subagent_id,
                main=self.lead,
                requested_at=self.requested.pop(action_id, None),
                finish_reason=finish,
                text=text,
                carried=carried,
            )
        ]

    def tool_started(self, call_id: str, tool: str, arguments: object = None) -> list[Event]:
        if call_id in self.tools or self.root is None:
            return []
        self.tools.add(call_id)
        return [
            ToolCallStarted(
                session_id=self.root,
                at=self.now(),
                call_id=call_id,
                tool=tool,
                subagent_id=self.subagent_id,
                arguments=arguments,
            )
        ]

    def tool_ended(
        self, call_id: str, outcome: ToolOutcome, result: str | None = None
    ) -> list[Event]:
        if call_id in self.ended_tools or call_id not in self.tools or self.root is None:
            return []
        self.ended_tools.add(call_id)
        return [
            ToolCallEnded(
                session_id=self.root, at=self.now(), call_id=call_id, outcome=outcome, result=result
            )
        ]

    def settle_calls(self, outcome: ToolOutcome | None = None) -> list[Event]:
        """The model's calls that never became an action (run by the runtime itself) ended when
        the next request went out or the turn ended: ok, or how the user answered them."""
        events: list[Event] = []
        for call_id, tool in list(self.calls.items()):
            events += self.tool_started(call_id, tool)
            ended = "rejected" if call_id in self.denied else outcome or "ok"
            events += self.tool_ended(call_id, ended)
        self.calls.clear()
        self.denied.clear()
        return events

    def turn_started(self, turn_id: str, at: float | None, prompt: str | None) -> list[Event]:
        if not self.lead or turn_id in self.turns or self.root is None:
            return []
        events = self.turn_ended(self.open_turn, "interrupted") if self.open_turn else []
        self.waiting.clear()  # an approval belongs to its turn
        self.turns.add(turn_id)
        self.open_turn, self.turn_broken = turn_id, False
        at = self.tick(at) or self.now()
        return [*events, TurnStarted(session_id=self.root, at=at, record_id=turn_id, prompt=prompt)]

    def turn_ended(self, turn_id: str | None, outcome: TurnOutcome) -> list[Event]:
        if turn_id is None or turn_id != self.open_turn or self.root is None:
            return []
        outcome = "interrupted" if self.turn_broken and outcome == "completed" else outcome
        events = self.settle_calls("cancelled" if outcome != "completed" else None)
        self.open_turn = None
        self.waiting.clear()
        events.append(TurnEnded(session_id=self.root, at=self.now(), outcome=outcome))
        if self.history and self.after_turn is not None:
            held, self.history = self.history, []
            for items in held:
                events += self.after_turn(self, items)
        return events

    def child_ended(self, outcome: TurnOutcome) -> list[Event]:
        if self.lead or self.root is None:
            return []
        ended = {"completed": "completed", "failed": "failed"}.get(outcome, "cancelled")
        return [
            SubagentEnded(
                session_id=self.root,
                at=self.now(),
                outcome=ended,  # type: ignore[arg-type]
                subagent_id=self.name,
            )
        ]

    def child_seen(self) -> list[Event]:
        if self.lead or self.root is None or self.announced:
            return []
        self.announced = True
        return [
            SubagentStarted(
                session_id=self.root,
                at=self.clock,
                subagent_id=self.name,
                parent_id=self.parent if self.parent != self.root else None,
            )
        ]

    def live(self) -> list[Event]:
        """The lock's entry with the store's current status, if a process holds the session."""
        if self.lock is None:
            return []
        if self.waiting:
            status, reason = "waiting", next(iter(self.waiting.values()))
        else:
            status, reason = ("busy" if self.open_turn else "idle"), None
        lock = self.lock
        return [
            LiveIndexRead(
                pid=lock.pid,
                session_id=lock.session_id,
                started_at=lock.started_at,
                status=status,
                reason=reason,
                status_at=self.status_at or lock.started_at,
                updated_at=self.status_at,
                source=lock.source,
                kind=self.kind,
                opened_after_start=True,
            )
        ]


def text_of(content: object) -> str | None:
    """The text parts of an entry's content."""
    if not isinstance(content, list):
        return None
    texts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(texts) or None


def result_outcome(result: dict[str, Any]) -> ToolOutcome:
    """A tool's result: a shell command that failed is a `success` with a non-zero returncode."""
    if result.get("type") not in ("success", None):
        return "error"
    structured = result.get("structured_content")
    if isinstance(structured, dict):
        code = structured.get("returncode")
        if structured.get("timed_out") is True or (isinstance(code, int) and code != 0):
            return "error"
    return "ok"


def action_of(entry_id: str, prefix: str) -> str | None:
    """`assistant-<action id>` / `effect-<action id>` → the action id."""
    return entry_id[len(prefix) :] if entry_id.startswith(prefix) else None

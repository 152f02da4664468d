"""Normalized events: what a harness says happened, in the past tense.

A harness turns the records of one agent's files into these small frozen values; `state.State`
folds them. Times are Unix seconds taken from the records themselves (never from a clock).
`session_id` is always the lead session's id; work done by a sub-agent carries `subagent_id`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal, TypeVar

TurnOutcome = Literal["completed", "interrupted", "failed"]
ToolOutcome = Literal["ok", "error", "rejected", "cancelled"]
SubagentOutcome = Literal["completed", "failed", "cancelled"]
TitleSource = Literal["user", "harness", "process", "prompt"]
Kind = Literal["interactive", "headless"]
_T = TypeVar("_T")
_FIELDS: dict[type, tuple[str, ...]] = {}


class _Pickled:
    """Pickled as the class and its field values, rebuilt by its `__init__` (`_made`): a frozen
    dataclass compiled by mypyc (`setup.py`) is not made without calling it, nor can its
    fields be set one by one. The catch-up cache and the catch-up workers pickle events."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, ...]:
        cls = type(self)
        return _made, (cls, tuple([getattr(self, name) for name in _names(cls)]))


def _names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls))
    return names


def _made(cls: type[_T], values: tuple[Any, ...]) -> _T:
    """An event of class `cls` whose fields are `values`, in the order of its fields."""
    return cls(**dict(zip(_names(cls), values, strict=True)))


@dataclass(frozen=True, slots=True)
class Usage:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0

    def __reduce__(self) -> tuple[Any, ...]:
        """Made by `__init__` (see `_Pickled`)."""
        return Usage, (self.input, self.output, self.cache_read, self.cache_write, self.reasoning)

    def max(self, other: Usage) -> Usage:
        return Usage(
            max(self.input, other.input),
            max(self.output, other.output),
            max(self.cache_read, other.cache_read),
            max(self.cache_write, other.cache_write),
            max(self.reasoning, other.reasoning),
        )

    def minus(self, other: Usage) -> Usage:
        return Usage(
            self.input - other.input,
            self.output - other.output,
            self.cache_read - other.cache_read,
            self.cache_write - other.cache_write,
            self.reasoning - other.reasoning,
        )

    def plus(self, other: Usage) -> Usage:
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.reasoning + other.reasoning,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "input": self.input,
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
            "reasoning": self.reasoning,
        }


TOKEN_TYPES = ("input", "output", "cache_read", "cache_write", "reasoning")


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSeen(_Pickled):
    session_id: str
    at: float
    cwd: str | None = None
    kind: Kind | None = None
    version: str | None = None
    model: str | None = None  # the model the session is set to use, before any response
    main: bool = True  # from the lead session's own file; False only fills what is missing


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionClosed(_Pickled):
    """The agent's own files say a session was closed (Hermes' `ended_at`), or opened again
    (`closed=False`). A closed session is not live although a process holds the file it shares
    with other sessions (a database of all of them); a prompt opens it again."""

    session_id: str
    at: float
    closed: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class TitleSet(_Pickled):
    session_id: str
    title: str
    source: TitleSource


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponded(_Pickled):
    """One model response; the same `message_id` may be reported again with larger usage."""

    session_id: str
    at: float
    message_id: str
    model: str
    usage: Usage
    subagent_id: str | None = None
    main: bool = True  # written in the lead session's own journal (sets the session's model)
    requested_at: float | None = None  # the record before the response: the request went out
    finish_reason: str | None = None
    internal: bool = False  # the agent's own housekeeping (a review): totals only, no session
    text: str | None = None  # content of this record's blocks (spans, with capture-content only)
    carried: bool = False  # usage of responses whose records are gone: tokens, not a message
    cache_write_1h: int = 0  # of usage.cache_write, those kept an hour (priced apart), if recorded
    reported_cost: float | None = None  # USD, what the agent itself says the response cost


@dataclass(frozen=True, slots=True, kw_only=True)
class CostReported(_Pickled):
    """What the agent itself says a session's calls of `model` cost so far, in USD (a running
    total: only its growth counts)."""

    session_id: str
    model: str
    usd: float


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageTotalsRead(_Pickled):
    """What the agent says a session's calls of `model` used so far, in total (Droid's session
    settings file, Hermes' session rows): the session's totals are now `usage`. It replaces the
    totals last read for that session, sub-agent and model, never adds to them; only its growth
    counts. A harness whose agent also writes per-call usage emits `ModelResponded` for it
    instead: per-call usage wins, and the totals are then not emitted at all. `scope` tells
    apart totals the agent keeps side by side for one model (Hermes: its own calls per task,
    `approval`, `title_generation`, beside the conversation's); each replaces only its own,
    all count for the session."""

    session_id: str
    at: float
    model: str
    usage: Usage
    subagent_id: str | None = None
    scope: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelFailed(_Pickled):
    """A model request that ended in an error instead of a response (an API error)."""

    session_id: str
    at: float
    error: str
    model: str | None = None
    subagent_id: str | None = None
    requested_at: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnStarted(_Pickled):
    session_id: str
    at: float
    record_id: str  # unique per prompt, so a copied prompt (fork) is not a second turn
    prompt: str | None = None  # content: reaches spans only with --traces.capture-content


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEnded(_Pickled):
    session_id: str
    at: float
    outcome: TurnOutcome


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted(_Pickled):
    session_id: str
    at: float
    call_id: str
    tool: str
    subagent_id: str | None = None
    arguments: Any = None  # content (spans, with capture-content only)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEnded(_Pickled):
    session_id: str
    at: float
    call_id: str
    outcome: ToolOutcome
    result: str | None = None  # content (spans, with capture-content only)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentStarted(_Pickled):
    """A sub-agent became known, from its launching tool call or from its own files.

    Either id may be missing; `state` links the two when a later event names both.
    """

    session_id: str
    at: float | None
    call_id: str | None = None
    subagent_id: str | None = None
    subagent_type: str | None = None
    title: str | None = None
    background: bool | None = None
    parent_id: str | None = None
    run_id: str | None = None
    """The run of several sub-agents it belongs to (a Claude Code workflow): its launching call
    is the one `RunLaunched` names for that run."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLaunched(_Pickled):
    """A tool call launched a run of sub-agents in the background (a Claude Code workflow):
    the sub-agents of `run_id` are linked to `call_id`; their titles start with `name`."""

    session_id: str
    at: float
    call_id: str
    run_id: str
    name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SubagentEnded(_Pickled):
    session_id: str
    at: float
    outcome: SubagentOutcome
    call_id: str | None = None
    subagent_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewEnded(_Pickled):
    """An automatic review the agent ran on its own work (Codex's guardian) came to a verdict.

    Not a session and not a sub-agent: it is only counted, by outcome (`allow`, `deny`,
    `failed`, `cancelled`, `unknown`).
    """

    session_id: str
    at: float
    review_id: str
    outcome: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextCompacted(_Pickled):
    """The agent compacted a conversation: its history was replaced by a summary.

    `usage` is what the compaction's own model request cost, only when the agent recorded it
    (never estimated); that request is also a `ModelResponded`, so these tokens are a part of
    the token totals, not added to them.
    """

    session_id: str
    at: float
    compaction_id: str
    subagent_id: str | None = None
    usage: Usage | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveIndexRead(_Pickled):
    """A live-index entry: one running agent process and what it says it is doing."""

    pid: int
    session_id: str
    started_at: float | None
    status: str | None  # the agent's own word, e.g. "busy", "waiting", "idle"
    reason: str | None = None
    status_at: float | None = None
    updated_at: float | None = None
    name: str | None = None
    cwd: str | None = None
    kind: Kind | None = None
    hidden: bool = False  # daemon spare: a process nobody claimed yet
    job_id: str | None = None
    parked_job_id: str | None = None
    source: str = ""  # the index file it came from
    derived: bool = False  # the agent writes no status: running while a turn is open, else idle
    opened_after_start: bool = False  # `started_at` is when the session was opened, not when
    # its process started: only a process started after it is a recycled pid


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveIndexRemoved(_Pickled):
    source: str


Event = (
    SessionSeen
    | SessionClosed
    | ModelFailed
    | TitleSet
    | ModelResponded
    | CostReported
    | UsageTotalsRead
    | TurnStarted
    | TurnEnded
    | ToolCallStarted
    | ToolCallEnded
    | SubagentStarted
    | SubagentEnded
    | RunLaunched
    | ReviewEnded
    | ContextCompacted
    | LiveIndexRead
    | LiveIndexRemoved
)

__all__ = [
    "TOKEN_TYPES",
    "ContextCompacted",
    "CostReported",
    "Event",
    "LiveIndexRead",
    "LiveIndexRemoved",
    "ModelFailed",
    "ModelResponded",
    "ReviewEnded",
    "RunLaunched",
    "SessionClosed",
    "SessionSeen",
    "SubagentEnded",
    "SubagentStarted",
    "TitleSet",
    "ToolCallEnded",
    "ToolCallStarted",
    "TurnEnded",
    "TurnStarted",
    "Usage",
    "UsageTotalsRead",
]

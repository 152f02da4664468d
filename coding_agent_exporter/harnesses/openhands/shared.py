"""`Shared`: what a conversation's state document and its event folder tell each other.

A response's tokens are in `base_state.json` (`stats.usage_to_metrics.<usage>.token_usages`,
one entry per model call, with its `response_id`); its time, its place in the turn and whether
it asked for tools are in the event folder (the events that carry that `llm_response_id`). The
two are read in any order (the state document first in a catch-up, by name; either first while
the agent runs), so whichever comes second says the response: the state document's reader
with the time the events gave, the events' reader with the tokens the state gave. A response
told once with no tokens (its events read first) is told again with them: the state keeps the
larger usage of a message id, so it counts once. What was matched is dropped: nothing is kept
per response once both sides told it.

The same goes for a sub-agent: the lead's `task` call names its type and description, the
sub-agent's own folder (`subagents/<id>/`) its work; they are linked by the prompt
(`tasks`), the lead's folder being read first (it is shallower, and written before).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...events import Usage


@dataclass(slots=True)
class Response:
    """What the events said of a response whose tokens are not known yet."""

    at: float
    requested_at: float | None
    finish_reason: str
    subagent_id: str | None


@dataclass(frozen=True, slots=True)
class Task:
    """A `task` call of the lead: its sub-agent's folder names none of it, but its first
    prompt is the call's `prompt` (how the two are linked)."""

    prompt: str
    call_id: str
    subagent_type: str | None
    description: str | None


@dataclass(slots=True)
class Shared:
    usage: dict[tuple[str, str], tuple[str, Usage]] = field(default_factory=dict)
    """(conversation, response id) → (model, tokens), read before its events."""
    seen: dict[tuple[str, str], Response] = field(default_factory=dict)
    """(conversation, response id) → what its events said, before its tokens were read."""
    model: dict[str, str] = field(default_factory=dict)
    """conversation → the model its state document says it is set to."""
    tasks: dict[str, list[Task]] = field(default_factory=dict)
    """lead session → its `task` calls whose sub-agent's folder was not read yet."""
    last: dict[str, float] = field(default_factory=dict)
    """conversation → the time of its latest event (for calls no event names: the condenser's)."""

"""Grok Build's turns, told by two files that are read in any order.

A turn is a prompt: it starts at the prompt's first `user_message_chunk` in `updates.jsonl` and
ends at the first of its `turn_completed` there (which a print run can exit before writing) or
the `turn_ended` of the phase log's turn it falls in (`events.jsonl`, whose turns also include
wake-ups that no prompt started: those are no turns of ours). Read whole first (a catch-up),
the phase log has ended a turn before `updates.jsonl` starts it: it then ends at once, at the
phase log's end, and the rest of its records (tool calls, usage) are no later than that end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...events import Event, TurnEnded, TurnOutcome

SLACK = 0.05  # s: the prompt row and the phase log's `turn_started` are written together
KEPT = 64  # ended phase-log turns remembered for a prompt read after them


@dataclass
class PromptTurns:
    """One session's prompt turn (open or last ended) and the phase log's ended turns."""

    open_at: float | None = None  # the open prompt turn's start
    started_at: float | None = None  # the last prompt turn's start
    ended_at: float | None = None  # the last prompt turn's end, once it ended
    phase_ends: list[tuple[float, float, TurnOutcome]] = field(default_factory=list)
    phase_start: float | None = None  # the phase log's open turn's start

    def started(self, session_id: str, at: float) -> list[Event]:
        """A prompt turn started at `at` (after the caller ended the one left open and told its
        `TurnStarted`): if the phase log already ended the turn it falls in, it ends too."""
        self.open_at, self.started_at, self.ended_at = at, at, None
        for start, end, outcome in reversed(self.phase_ends):
            if start - SLACK <= at <= end + SLACK:
                return self.ended(session_id, end, outcome)
        return []

    def phase_ended(self, session_id: str, end: float, outcome: TurnOutcome) -> list[Event]:
        """The phase log's open turn ended at `end`: so does the prompt turn in it."""
        start = self.phase_start if self.phase_start is not None else end
        self.phase_start = None
        self.phase_ends = [*self.phase_ends[-KEPT + 1 :], (start, end, outcome)]
        if self.open_at is not None and self.open_at >= start - SLACK:
            return self.ended(session_id, end, outcome)
        return []

    def ended(self, session_id: str, at: float, outcome: TurnOutcome) -> list[Event]:
        """The open prompt turn ends at `at` (nothing if none is open)."""
        if self.open_at is None:
            return []
        end = max(at, self.open_at)
        self.open_at, self.ended_at = None, end
        return [TurnEnded(session_id=session_id, at=end, outcome=outcome)]

    def usage_at(self, at: float) -> float:
        """When a turn's usage, written at `at`, counts: no later than its turn's end."""
        if self.open_at is None and self.ended_at is not None and self.ended_at < at:
            return self.ended_at
        return at

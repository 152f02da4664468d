"""What `State` tells a listener as it counts work: the seam between state and traces.

State calls these once per counted thing, in order, after deduplication (a forked copy or a
repeated record never reaches an observer). Times come from the records.
"""

from __future__ import annotations

from typing import Protocol

from ..events import ModelFailed, ModelResponded, ToolCallEnded, ToolCallStarted, Usage
from .session import Session, Subagent


class Observer(Protocol):
    capture: bool
    """It shows what records say (prompts, replies, tool arguments and results): readers must
    keep it (`pool.decoder`)."""

    def turn_started(
        self, session: Session, at: float, record_id: str, prompt: str | None
    ) -> None: ...
    def turn_ended(self, session: Session, at: float, outcome: str) -> None:
        """Also told when no turn was open: the agent worked on its own (a hand-back)."""

    def settled(self, now: float) -> None:
        """The reading settled (after a catch-up, after each batch of changes), at `now`."""

    def responded(
        self, session: Session, sub: Subagent | None, event: ModelResponded, usage: Usage
    ) -> None: ...
    def failed(self, session: Session, sub: Subagent | None, event: ModelFailed) -> None: ...
    def tool_started(
        self, session: Session, sub: Subagent | None, event: ToolCallStarted
    ) -> None: ...
    def tool_ended(self, session: Session, event: ToolCallEnded) -> None: ...
    def subagent_started(self, session: Session, sub: Subagent) -> None: ...
    def subagent_ended(self, session: Session, sub: Subagent, outcome: str, at: float) -> None: ...
    def waited(self, session: Session, reason: str, start: float, end: float) -> None: ...


class NoObserver:
    """Nobody listens (no traces configured)."""

    capture = False

    def turn_started(self, session: Session, at: float, record_id: str, prompt: str | None) -> None:
        pass

    def turn_ended(self, session: Session, at: float, outcome: str) -> None:
        pass

    def responded(
        self, session: Session, sub: Subagent | None, event: ModelResponded, usage: Usage
    ) -> None:
        pass

    def failed(self, session: Session, sub: Subagent | None, event: ModelFailed) -> None:
        pass

    def tool_started(self, session: Session, sub: Subagent | None, event: ToolCallStarted) -> None:
        pass

    def tool_ended(self, session: Session, event: ToolCallEnded) -> None:
        pass

    def subagent_started(self, session: Session, sub: Subagent) -> None:
        pass

    def subagent_ended(self, session: Session, sub: Subagent, outcome: str, at: float) -> None:
        pass

    def waited(self, session: Session, reason: str, start: float, end: float) -> None:
        pass

    def settled(self, now: float) -> None:
        pass

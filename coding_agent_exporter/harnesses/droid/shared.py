"""What a Droid session's two files must know together: the latest time its journal told, and
the token totals its settings file told before there was one.

The settings file has no time of its own; its totals count at the journal's latest record
time. Totals read before the journal (the engine reads files in any order) wait here until the
journal gives a time.
"""

from __future__ import annotations

from ...events import Event, Kind, UsageTotalsRead


class Shared:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.at: float | None = None  # the latest record time of the journal
        self.model: str | None = None  # the model of the latest response
        self.held: UsageTotalsRead | None = None  # totals read before any time was known
        self.kind: Kind | None = None  # what the settings file's tags say of how it runs

    def timed(self, at: float) -> list[Event]:
        """The journal told a record time: totals held until then now count, at that time."""
        self.at = at if self.at is None else max(self.at, at)
        held, self.held = self.held, None
        if held is None:
            return []
        return [
            UsageTotalsRead(
                session_id=held.session_id, at=self.at, model=held.model, usage=held.usage
            )
        ]

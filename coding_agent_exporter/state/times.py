"""Times of records as dates: held to the years a `datetime` has.

A record's time is whatever its file says; a damaged or hostile file can say the year 10000,
or a number no date has (`inf`, `nan`). Where a time becomes a date (the prices in force then,
a row's ISO time), it is held to the nearest date a `datetime` can be, so an odd record costs
its own odd figures, never the request or the reading that meets it.
"""

from __future__ import annotations

from datetime import UTC, datetime

EARLIEST = datetime(1, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def utc(at: float) -> datetime:
    """`at` (seconds since the epoch) in UTC; out of range, the nearest date there is."""
    try:
        return datetime.fromtimestamp(at, UTC)
    except (ValueError, OverflowError, OSError):
        return LATEST if at > 0 else EARLIEST

"""Small readers of record fields that every harness needs: times, counts, money, text, homes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from ..sources.places import user_home
from .base import RecordRejected

LATEST = 253402300799.0
"""9999-12-31T23:59:59Z, the last second a date has: an epoch beyond it is no time of a record."""


def timestamp(value: object) -> float | None:
    """ISO 8601 text or epoch (ms or s) → Unix seconds; None for what is no time (an epoch
    before 1970 or after the year 9999, `inf`, `nan`: a damaged record)."""
    if isinstance(value, str):  # the common case first: it is most records' time
        try:
            return datetime.fromisoformat(value).timestamp()
        except ValueError:
            return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if value > 1e11 else float(value)
        return seconds if 0.0 <= seconds <= LATEST else None  # nan compares false: None
    return None


def count(value: object) -> int:
    """A token count or similar: a whole number of zero or more (an absent one, `null`, is 0).
    Anything else makes the record unusable whole (`RecordRejected`, reason `bad_field`): a
    record whose usage says "many" is not a response of no tokens."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    raise RecordRejected("bad_field", f"{value!r} is not a count of tokens")


def usd(value: object) -> float | None:
    """An amount of money an agent reports: a positive finite number, else None (an agent that
    does not know a model's price writes 0: that is no report)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 < value < float("inf") else None


def nonempty(value: object) -> str | None:
    """A non-empty string, else None."""
    return value if isinstance(value, str) and value else None


TITLE_MAX = 200
"""The longest session title a harness reports."""


def title_of(text: str) -> str:
    """A title made of `text`: on one line (white space folded), at most `TITLE_MAX` long."""
    return " ".join(text.split())[:TITLE_MAX]


def home(environ: Mapping[str, str], variable: str, *default: str) -> Path:
    """`$variable` if set, else the `default` folder under the user's home."""
    configured = environ.get(variable)
    if configured:
        return Path(configured)
    return user_home(environ).joinpath(*default)

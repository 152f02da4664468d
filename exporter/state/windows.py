"""5-hour usage windows, computed as ccusage's `blocks` computes them.

Claude's subscriptions meter use in windows of 5 hours. ccusage (`_session-blocks.ts`,
`identifySessionBlocks`) finds them from the responses in time order: the first response opens
a window at the start of its clock hour (UTC); a response joins the open window unless it came
more than 5 hours after the window's start, in which case it opens the next window, again at
the start of its hour (ccusage also opens one after a pause of more than 5 hours since the
response before, which the first condition implies: no response of a window precedes its
start). A response exactly 5 hours after the start still joins. A window ends 5 hours
after its start, and is active while it has not ended and its last response is less than 5
hours old. Its burn rate is its input and output tokens (not the cache's) and its cost over the
minutes from its first response to its last; none with a single instant.

Responses are read file by file, not in time order, so `Windows` keeps no response: only what
the rule needs of each clock hour, in two groups (responses at the hour's very first instant,
which join a window started 5 hours before, and the others), and finds the windows from those
groups in time order. A group is always wholly in a window or wholly in the next: within an hour
no two responses are 5 hours apart, and a window's start is a whole hour. So memory grows with
the hours that saw use, not with the responses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..events import Usage
from .session import ZERO

LENGTH = 5 * 3600.0
"""A window's length, and the gap after which the next response opens a new one (seconds)."""
HOUR = 3600


@dataclass(slots=True)
class Group:
    """Responses of one clock hour, in one of its two groups: their token counts by type (as
    plain numbers: a response adds to them, `tokens` makes them a `Usage`)."""

    first: float
    last: float
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0
    cost: float = 0.0
    responses: int = 0

    def add(self, at: float, tokens: Usage, cost: float) -> None:
        if at < self.first:
            self.first = at
        elif at > self.last:
            self.last = at
        self.input += tokens.input
        self.output += tokens.output
        self.cache_read += tokens.cache_read
        self.cache_write += tokens.cache_write
        self.reasoning += tokens.reasoning
        self.cost += cost
        self.responses += 1

    @property
    def tokens(self) -> Usage:
        counts = (self.input, self.output, self.cache_read, self.cache_write, self.reasoning)
        return Usage(*counts)


@dataclass(slots=True)
class Window:
    start: float
    first: float
    """When its first response came."""
    last: float
    """When its last response came (ccusage's `actualEndTime`)."""
    tokens: Usage = ZERO
    cost: float = 0.0
    responses: int = 0

    @property
    def end(self) -> float:
        return self.start + LENGTH

    def active(self, now: float) -> bool:
        return now - self.last < LENGTH and now < self.end

    def burn_rate(self) -> tuple[float, float] | None:
        """(input and output tokens, USD) per minute, from its first response to its last."""
        minutes = (self.last - self.first) / 60
        if minutes <= 0:
            return None
        return (self.tokens.input + self.tokens.output) / minutes, self.cost / minutes

    def took(self, group: Group) -> None:
        self.last = max(self.last, group.last)
        self.tokens = self.tokens.plus(group.tokens)
        self.cost += group.cost
        self.responses += group.responses


@dataclass(slots=True)
class Windows:
    """The windows of one agent's responses, whatever order they are added in."""

    groups: dict[tuple[int, bool], Group] = field(default_factory=dict)
    """By (hour, whether at its very first instant)."""
    _found: list[Window] | None = None

    def add(self, at: float, tokens: Usage, cost: float = 0.0) -> None:
        """A response at `at` (seconds since the epoch) with its tokens and cost."""
        hour = int(at // HOUR)
        key = (hour, at == hour * HOUR)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = Group(at, at)
        group.add(at, tokens, cost)
        self._found = None

    def windows(self) -> list[Window]:
        """Every window, oldest first."""
        if self._found is None:
            self._found = list(_windows(self.groups))
        return self._found

    def current(self, now: float) -> Window | None:
        """The active window at `now`, if any."""
        found = self.windows()
        return found[-1] if found and found[-1].active(now) else None

    def largest(self, now: float) -> Window | None:
        """The window with the most tokens (all kinds) among those no longer active."""
        past = [w for w in self.windows() if not w.active(now)]
        return max(past, key=lambda w: all_tokens(w.tokens), default=None)


def _windows(groups: dict[tuple[int, bool], Group]) -> list[Window]:
    """The rule, over the groups in time order (an hour's first instant before the rest)."""
    found: list[Window] = []
    for key in sorted(groups, key=lambda k: (k[0], not k[1])):
        group = groups[key]
        window = found[-1] if found else None
        if window is None or group.first - window.start > LENGTH:
            window = Window(start=key[0] * HOUR, first=group.first, last=group.first)
            found.append(window)
        window.took(group)
    return found


def all_tokens(tokens: Usage) -> int:
    """Input, output and the cache's (reasoning is a part of output)."""
    return tokens.input + tokens.output + tokens.cache_read + tokens.cache_write

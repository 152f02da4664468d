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

from bisect import bisect_left, bisect_right, insort
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
    """The windows of one agent's responses, whatever order they are added in. The windows are
    found again only from the one holding the earliest group that changed since they were last
    asked for: a live response changes the newest window, not the history's."""

    groups: dict[tuple[int, int], Group] = field(default_factory=dict)
    """By (hour, 0 for its very first instant, 1 for the rest): in time order as sorted."""
    order: list[tuple[int, int]] = field(default_factory=list)
    """The groups' keys, sorted."""
    found: list[Window] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    """Where each window found begins in `order`."""
    best: list[int] = field(default_factory=list)
    """For each window found, the one with the most tokens up to it (the first of equals)."""
    dirty: int | None = None
    """The position in `order` of the earliest group changed since `found` was made."""

    def add(self, at: float, tokens: Usage, cost: float = 0.0) -> None:
        """A response at `at` (seconds since the epoch) with its tokens and cost."""
        hour = int(at // HOUR)
        key = (hour, 0 if at == hour * HOUR else 1)
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = Group(at, at)
            insort(self.order, key)
        group.add(at, tokens, cost)
        changed = bisect_left(self.order, key)
        self.dirty = changed if self.dirty is None else min(self.dirty, changed)

    def windows(self) -> list[Window]:
        """Every window, oldest first."""
        if self.dirty is not None:
            # from the window holding the change's position (a group put before a window's
            # first is tried on the window before, which stays the last one kept)
            keep = max(0, bisect_right(self.starts, self.dirty) - 1)
            begin = self.starts[keep] if self.starts else 0
            # the last window kept may take groups again: its best is found again too
            del self.found[keep:], self.starts[keep:], self.best[max(0, keep - 1) :]
            self._find(begin)
            for at in range(len(self.best), len(self.found)):
                before = self.best[-1] if self.best else at
                self.best.append(at if _more(self.found[at], self.found[before]) else before)
            self.dirty = None
        return self.found

    def current(self, now: float) -> Window | None:
        """The active window at `now`, if any."""
        found = self.windows()
        return found[-1] if found and found[-1].active(now) else None

    def largest(self, now: float) -> Window | None:
        """The window with the most tokens (all kinds) among those no longer active. The active
        ones are the newest (a window's end and last response both come after the one
        before's): one, or none, unless `now` is before some of the responses."""
        found = self.windows()
        past = len(found)
        while past and found[past - 1].active(now):
            past -= 1
        return found[self.best[past - 1]] if past else None

    def _find(self, begin: int) -> None:
        """The rule, over the groups from position `begin` on, after the windows kept."""
        for at in range(begin, len(self.order)):
            key = self.order[at]
            group = self.groups[key]
            window = self.found[-1] if self.found else None
            if window is None or group.first - window.start > LENGTH:
                window = Window(start=key[0] * HOUR, first=group.first, last=group.first)
                self.found.append(window)
                self.starts.append(at)
            window.took(group)


def _more(window: Window, than: Window) -> bool:
    return all_tokens(window.tokens) > all_tokens(than.tokens)


def all_tokens(tokens: Usage) -> int:
    """Input, output and the cache's (reasoning is a part of output)."""
    return tokens.input + tokens.output + tokens.cache_read + tokens.cache_write

"""The rows that changed, pushed to the console as server-sent events (`GET /api/events`).

The reading loop calls `Feed.publish` after each batch of changes it read and after each
refresh of which sessions are live. A publish looks at the sessions the state was told of since
the last one (`State.take_touched`), the live ones and the ones that were live, makes their rows,
and keeps those that differ from the row last published for that session: a new session, a
state that changed, tokens that grew. Each publish is a generation; a stream (one per open
console) waits for the next generation and writes every row published since its own, merged
into one event, so a slow client gets fewer, larger events rather than a queue. A stream
that fell behind the kept generations (`KEEP`) is told to fetch its page again (`reset`), as it
is after the catch-up, after the state was rebuilt, and when more sessions were told of than the
state keeps apart (`state.MAX_TOUCHED`: a catch-up names every session of history). Nothing is
computed while no stream is open. Streams are capped (`MAX_STREAMS`); one that waits
`KEEPALIVE` seconds with nothing to say writes a comment, so proxies keep it open and a gone
client is noticed.

    retry: 2000
    event: hello          data: {"generation": 7, "ready": true}
    event: rows           data: {"generation": 8, "ready": true, "rows": [row, ...]}
    event: reset          data: {"generation": 9, "ready": true}     fetch the page again
    : keepalive
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict, deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..state.labels import ProjectLabel
from ..state.state import State
from .views import rows_of

Key = tuple[str, str]
Row = dict[str, Any]
KEEP = 64
"""Generations kept for streams that are behind; further behind, a stream is reset."""
SENT = 10_000
"""Rows remembered as last published (the oldest forgotten: published again if it changes)."""
MAX_STREAMS = 64
KEEPALIVE = 15.0
GONE_EVERY = 1.0
"""Seconds between looks at whether a quiet stream's client left."""
RETRY_MS = 2000


@dataclass(slots=True)
class _Published:
    generation: int
    rows: dict[Key, Row] | None  # None: a reset
    ready: bool


@dataclass(slots=True)
class Feed:
    project: ProjectLabel
    linked: Callable[[Row], Row] = lambda row: row
    generation: int = 0
    streams: int = 0
    closed: bool = False
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _kept: deque[_Published] = field(default_factory=lambda: deque(maxlen=KEEP))
    _sent: OrderedDict[Key, str] = field(default_factory=OrderedDict)
    _live: set[Key] = field(default_factory=set)
    _ready: bool = False
    _state: State | None = None  # the state last published: another one is a reset

    def publish(self, state: State, *, reset: bool = False, ready: bool | None = None) -> None:
        """What changed in `state` since the last publish, for the streams (with `reset`: tell
        them to fetch their page again, e.g. after the catch-up or a rebuilt state)."""
        with state.lock:  # also keeps publishes of two threads apart
            touched = state.take_touched()
            if state is not self._state or touched is None:  # the first, a state rebuilt
                reset, self._state = True, state  # from the files, or too many to tell apart
            if not self.streams and not reset:
                self._live = set(state.live)
                self._sent.clear()  # nobody saw them: a stream fetches its page first
                return
            keys = (touched or set()) | self._live | set(state.live)
            self._live = set(state.live)
            changed = {} if reset else self._changed(rows_of(state, self.project, keys))
        with self._cond:
            self._ready = self._ready if ready is None else ready
            if not changed and not reset:
                return
            self.generation += 1
            self._kept.append(_Published(self.generation, None if reset else changed, self._ready))
            self._cond.notify_all()

    def _changed(self, rows: dict[Key, Row | None]) -> dict[Key, Row]:
        changed = {}
        for key, row in rows.items():
            if row is None:
                continue
            text = json.dumps(self.linked(row), sort_keys=True)
            if self._sent.get(key) != text:
                changed[key] = row
                self._sent[key] = text
            self._sent.move_to_end(key)
        while len(self._sent) > SENT:
            self._sent.popitem(last=False)
        return changed

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def stream(
        self, gone: Callable[[], bool] = lambda: False
    ) -> Generator[bytes, None, None] | None:
        """The events of one client, as bytes to write; None when too many are open. `gone`
        says the client left: looked at every `GONE_EVERY` seconds while nothing is said, so
        its slot is free again within that, not at the next keep-alive."""
        with self._cond:
            if self.streams >= MAX_STREAMS or self.closed:
                return None
            self.streams += 1
            cursor = self.generation
        return self._events(cursor, gone)

    def _events(self, cursor: int, gone: Callable[[], bool]) -> Generator[bytes, None, None]:
        try:
            with self._cond:
                hello = {"generation": cursor, "ready": self._ready}
            yield f"retry: {RETRY_MS}\n\n".encode() + _event("hello", hello)
            while True:
                quiet = 0.0
                with self._cond:
                    while not self._after(cursor) and quiet < KEEPALIVE:
                        self._cond.wait_for(partial(self._after, cursor), GONE_EVERY)
                        quiet += GONE_EVERY
                        if gone():
                            return
                    if self.closed:
                        return
                    if self.generation == cursor:
                        out = b": keepalive\n\n"
                    else:
                        out, cursor = self._since(cursor), self.generation
                yield out
        finally:
            with self._cond:
                self.streams -= 1

    def _after(self, cursor: int) -> bool:
        return self.generation > cursor or self.closed

    def _since(self, cursor: int) -> bytes:
        """Under the condition: one event for every publish after `cursor`."""
        kept = [p for p in self._kept if p.generation > cursor]
        head = {"generation": self.generation, "ready": self._ready}
        if not kept or kept[0].generation != cursor + 1 or any(p.rows is None for p in kept):
            return _event("reset", head)
        merged: dict[Key, Row] = {}
        for published in kept:
            merged.update(published.rows or {})
        return _event("rows", {**head, "rows": [self.linked(r) for r in merged.values()]})


def _event(name: str, data: object) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

"""Finished sessions asleep: their records kept as rows of columns, not as objects.

History can hold a hundred thousand sessions, nearly all of them finished: each awake costs its
`Session`, its id, its title, its token counts, its times and its key in the state's table (~700
bytes). Asleep, a session is a row: its labels (agent, project folder, kind, version, model,
title source) as indexes into one table of interned strings, its times and costs as doubles, its
counts as integers, its id as 16 bytes when it is a UUID, its title as UTF-8, in arrays; the
names of its files (the engine's own strings) by reference; what a finished session rarely has
(sub-agents, runs of them, the latest traced turn) in a side table. A row is found by an 8-byte
digest of its agent and id, packed with its row number in buckets of bytes (as `seen.SeenIds`
packs ids).

`woken` gives the `Session` back exactly as it fell asleep (equal field by field, `born` kept);
`copy` gives it without waking it (what views read). Only a session without open work sleeps:
no open turn, tool call or running sub-agent.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterator
from hashlib import blake2b
from operator import attrgetter
from pickle import PickleBuffer
from typing import Any

from ..events import Usage
from .attributes import assign, attributes
from .session import ZERO, Run, Session, Subagent

LABELS = ("agent", "cwd", "kind", "version", "model", "title_source")
"""Fields whose values many sessions share: kept as indexes into `Asleep.labels` (0: None)."""
FLOATS = ("started_at", "updated_at")
"""Fields that are a float or None (NaN: None)."""
COUNTS = ("born", "messages", "completed", "interrupted", "failed", "tool_calls", "tool_errors")
TOKENS = ("input", "output", "cache_read", "cache_write", "reasoning")
"""`Session.tokens` (a `Usage`), a column per kind."""
FLAGS = ("counted", "closed")
REFERENCES = ("files",)
"""Fields kept by reference (its files are the engine's own names)."""
EXTRAS = ("subs", "runs", "last_turn")
"""Fields a finished session rarely has: a side table by row, only for rows that have them."""
OTHERS = ("session_id", "cost", "title", "reported_cost")
"""The id (16 bytes, or by reference when not a UUID), the estimated cost (a double), the title
(UTF-8, in one array of bytes; None: a flag) and the cost the agent reported (few do: by row)."""
OPEN = ("turn_open_at", "tools")
"""Fields of open work: None in every session that sleeps."""

_LABELS, _FLOATS, _COUNTS, _TOKENS = len(LABELS), len(FLOATS), len(COUNTS), len(TOKENS)
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_BITS = 12
_BUCKETS = 1 << _BITS
_ENTRY = 12  # bytes in a bucket per row: its digest (8), its row number (4)
_NO_ID = bytes(16)
_ARRAYS = ("label_rows", "floats", "costs", "counts", "tokens", "title_ends")
_labels, _floats, _counts = attrgetter(*LABELS), attrgetter(*FLOATS), attrgetter(*COUNTS)
_tokens = attrgetter(*TOKENS)

Extras = tuple[dict[str, Subagent] | None, dict[str, Run] | None, tuple[str, float] | None]


class Asleep:
    """The sleeping sessions, in columns; rows woken are left as holes until they are many."""

    def __init__(self) -> None:
        self.labels: list[str | None] = [None]
        self._label_of: dict[str, int] = {}
        self.label_rows = array("I")  # len(LABELS) per row; agent 0: the row was woken
        self.floats = array("d")  # len(FLOATS) per row
        self.costs = array("d")
        self.counts = array("I")  # len(COUNTS) per row
        self.tokens = array("q")  # len(TOKENS) per row
        self.flags = bytearray()
        self.ids = bytearray()  # 16 bytes per row: a UUID's; zeros: in `named`
        self.named: dict[int, str] = {}
        self.reported: dict[int, float] = {}  # `reported_cost`, of the rows that have one
        self.titles = bytearray()  # UTF-8, one after another (a `title_ends`' row: where it ends)
        self.title_ends = array("I")
        self.files: list[str | tuple[str, ...] | None] = []
        self.extras: dict[int, Extras] = {}
        self.buckets: list[bytearray | None] = [None] * _BUCKETS
        self.rows = 0  # rows written, holes included
        self.awake = 0  # holes: rows woken since

    def __len__(self) -> int:
        return self.rows - self.awake

    @staticmethod
    def can_sleep(session: Session) -> bool:
        """No open work: a finished session."""
        return (
            session.turn_open_at is None
            and session.tools is None
            and not (
                session.subs is not None
                and any(s.state == "running" for s in session.subs.values())
            )
        )

    def put(self, session: Session) -> None:
        """`session` as a new row (it must not be here already, and `can_sleep`)."""
        row, label = self.rows, self._label
        self.label_rows.extend([label(value) for value in _labels(session)])
        self.floats.extend([_nan(value) for value in _floats(session)])
        self.costs.append(session.cost)
        self.counts.extend(_counts(session))
        self.tokens.extend(_tokens(session.tokens))
        title = session.title
        self.flags.append(session.counted | session.closed << 1 | (title is None) << 2)
        sid = session.session_id
        if _UUID.fullmatch(sid):
            self.ids += bytes.fromhex(sid.replace("-", ""))
        else:
            self.ids += _NO_ID
            self.named[row] = sid
        if session.reported_cost is not None:
            self.reported[row] = session.reported_cost
        if title:
            self.titles += title.encode("utf-8", "surrogatepass")  # lone surrogates too
        self.title_ends.append(len(self.titles))
        self.files.append(session.files)
        if session.subs is not None or session.runs is not None or session.last_turn is not None:
            self.extras[row] = (session.subs, session.runs, session.last_turn)
        digest = _digest(session.agent, sid)
        entry = digest + row.to_bytes(4, "little")
        index = _bucket(digest)
        bucket = self.buckets[index]
        if bucket is None:
            self.buckets[index] = bytearray(entry)
        else:
            bucket += entry
        self.rows += 1

    def woken(self, agent: str, session_id: str) -> Session | None:
        """The session, taken out of its row (a hole from now on); None if it is not asleep."""
        found = self._find(agent, session_id)
        if found is None:
            return None
        row, bucket, at = found
        session = self._session(row, session_id)
        del bucket[at : at + _ENTRY]
        self.label_rows[row * _LABELS] = 0
        self.files[row] = None
        self.extras.pop(row, None)
        self.named.pop(row, None)
        self.reported.pop(row, None)
        self.awake += 1
        if self.awake > 1024 and self.awake * 2 >= self.rows:
            self._compact()
        return session

    def copy(self, agent: str, session_id: str) -> Session | None:
        """The session as it sleeps, without waking it (a copy: changing it changes nothing)."""
        found = self._find(agent, session_id)
        return None if found is None else self._session(found[0], session_id)

    def __contains__(self, key: tuple[str, str]) -> bool:
        return self._find(*key) is not None

    def sessions(self) -> Iterator[Session]:
        """Copies of the sleeping sessions, in the order they fell asleep."""
        for row in range(self.rows):
            if self.label_rows[row * _LABELS]:
                yield self._session(row, self._id(row))

    def briefs(self) -> Iterator[tuple[int, str, str, str | None, float | None, bool, str | None]]:
        """Per sleeping session: born, agent, id, cwd, latest record, counted, title."""
        labels, floats, counts = self.labels, self.floats, self.counts
        born, updated = COUNTS.index("born"), FLOATS.index("updated_at")
        for row in range(self.rows):
            agent = labels[self.label_rows[row * _LABELS]]
            if agent is None:
                continue
            yield (
                counts[row * _COUNTS + born],
                agent,
                self._id(row),
                labels[self.label_rows[row * _LABELS + 1]],
                _float(floats[row * _FLOATS + updated]),
                bool(self.flags[row] & 1),
                self._title(row),
            )

    def frozen(self) -> Asleep:
        """A copy of what `briefs` reads (its columns copied whole, at the speed of memory: a
        list of 100,000 sessions is made from it after the state's lock is let go); nothing
        else of it may be asked."""
        copy = Asleep()
        copy.labels, copy.named = list(self.labels), dict(self.named)
        copy.label_rows, copy.floats = array("I", self.label_rows), array("d", self.floats)
        copy.counts, copy.title_ends = array("I", self.counts), array("I", self.title_ends)
        copy.flags, copy.ids, copy.titles = (
            bytearray(self.flags),
            bytearray(self.ids),
            bytearray(self.titles),
        )
        copy.rows, copy.awake = self.rows, self.awake
        return copy

    def _label(self, value: str | None) -> int:
        if value is None:
            return 0
        found = self._label_of.get(value)
        if found is None:
            found = self._label_of[value] = len(self.labels)
            self.labels.append(value)
        return found

    def _title(self, row: int) -> str | None:
        if self.flags[row] & 4:
            return None
        start = self.title_ends[row - 1] if row else 0
        return self.titles[start : self.title_ends[row]].decode("utf-8", "surrogatepass")

    def _id(self, row: int) -> str:
        raw = self.ids[row * 16 : row * 16 + 16]
        if raw == _NO_ID and row in self.named:
            return self.named[row]
        h = raw.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def _find(self, agent: str, session_id: str) -> tuple[int, bytearray, int] | None:
        """The row of the session, its bucket and where in it; None if it is not asleep."""
        if self.rows == self.awake:
            return None
        digest = _digest(agent, session_id)
        bucket = self.buckets[_bucket(digest)]
        if bucket is None:
            return None
        at = bucket.find(digest)
        while at >= 0:
            if at % _ENTRY == 0:
                row = int.from_bytes(bucket[at + 8 : at + _ENTRY], "little")
                mine = self.labels[self.label_rows[row * _LABELS]] == agent
                if mine and self._id(row) == session_id:
                    return row, bucket, at
            at = bucket.find(digest, at + 1)
        return None

    def _session(self, row: int, session_id: str) -> Session:
        labels = [self.labels[i] for i in self.label_rows[row * _LABELS : (row + 1) * _LABELS]]
        floats = [_float(t) for t in self.floats[row * _FLOATS : (row + 1) * _FLOATS]]
        counts = self.counts[row * _COUNTS : (row + 1) * _COUNTS]
        tokens = self.tokens[row * _TOKENS : (row + 1) * _TOKENS]
        fields: dict[str, Any] = dict(zip(LABELS, labels, strict=True))
        fields.update(zip(FLOATS, floats, strict=True))
        fields.update(zip(COUNTS, counts, strict=True))
        fields.update(zip(EXTRAS, self.extras.get(row, (None, None, None)), strict=True))
        flags = self.flags[row]
        return Session(
            session_id=session_id,
            cost=self.costs[row],
            tokens=Usage(*tokens) if any(tokens) else ZERO,
            counted=bool(flags & 1),
            closed=bool(flags & 2),
            title=self._title(row),
            files=self.files[row],
            reported_cost=self.reported.get(row),
            **fields,
        )

    def _compact(self) -> None:
        """The rows still asleep, written again without the holes the woken ones left."""
        old = (self.label_rows, self.floats, self.costs, self.counts, self.tokens, self.flags)
        ids, named, files, extras = self.ids, self.named, self.files, {}
        titles = [self._title(row) for row in range(self.rows)]
        kept = [row for row in range(self.rows) if self.label_rows[row * _LABELS]]
        renumbered = {row: new for new, row in enumerate(kept)}
        new = tuple(_rows(column, kept, len(column) // max(self.rows, 1)) for column in old)
        self.label_rows, self.floats, self.costs, self.counts, self.tokens, self.flags = new
        self.ids = bytearray(b"".join(ids[row * 16 : row * 16 + 16] for row in kept))
        self.named = {renumbered[row]: sid for row, sid in named.items()}
        self.reported = {renumbered[row]: usd for row, usd in self.reported.items()}
        self.titles, self.title_ends = bytearray(), array("I")
        for row in kept:
            self.titles += (titles[row] or "").encode("utf-8", "surrogatepass")
            self.title_ends.append(len(self.titles))
        self.files = [files[row] for row in kept]
        for row, extra in self.extras.items():
            extras[renumbered[row]] = extra
        self.extras = extras
        for index, bucket in enumerate(self.buckets):
            if bucket:
                self.buckets[index] = _renumbered(bucket, renumbered)
        self.rows, self.awake = len(kept), 0

    def __reduce__(self) -> tuple[Any, ...]:
        """Made by `__init__`, then given its state: a class compiled by mypyc (`setup.py`) is
        not made without calling it."""
        return Asleep, (), self.__getstate__()

    def __getstate__(self) -> dict[str, Any]:
        """Columns as buffers, written from their own memory (no copy: the cache is written at
        the peak of a catch-up), read back as `bytearray`s (the cache's unpickler takes no
        `array`)."""
        state = attributes(self)
        del state["_label_of"]
        for name in _ARRAYS:
            state[name] = (state[name].typecode, PickleBuffer(state[name]))
        for name in ("flags", "ids", "titles"):
            state[name] = PickleBuffer(state[name])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name in _ARRAYS:
            typecode, raw = state[name]
            column = array(typecode)
            column.frombytes(raw)
            state[name] = column
        assign(self, state)
        self._label_of = {label: i for i, label in enumerate(self.labels) if label is not None}


def _digest(agent: str, session_id: str) -> bytes:
    return blake2b(f"{agent}\x1f{session_id}".encode(), digest_size=8).digest()


def _bucket(digest: bytes) -> int:
    return digest[0] << (_BITS - 8) | digest[1] >> (16 - _BITS)


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def _float(value: float) -> float | None:
    return None if value != value else value  # NaN: None


def _rows(column: Any, kept: list[int], width: int) -> Any:
    out = type(column)() if isinstance(column, bytearray) else array(column.typecode)
    for row in kept:
        out += column[row * width : row * width + width]
    return out


def _renumbered(bucket: bytearray, renumbered: dict[int, int]) -> bytearray:
    out = bytearray()
    for at in range(0, len(bucket), _ENTRY):
        row = int.from_bytes(bucket[at + 8 : at + _ENTRY], "little")
        out += bucket[at : at + 8] + renumbered[row].to_bytes(4, "little")
    return out

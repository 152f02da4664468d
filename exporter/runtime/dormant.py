"""Files followed before and unchanged since: kept as a few bytes, not as live objects.

Most of a history is finished files. Their follower (offset, identity) and reader (what the file
told it so far) are needed again only if the file changes, so the engine keeps such a file
asleep in `Sleepers`: the `stat_key` at which reading it would find nothing new, and its
follower and reader pickled together. Unchanged, it costs one `stat` and its bytes; changed, it
is woken (unpickled) and read on exactly as if it had never slept. Only the files of harnesses
whose readers keep to their own file (`pool.PARALLEL`) sleep: a reader that shares objects with
the readers of other files would come back with copies of them.

`Sleepers` keeps columns, not an object per file: a warm start loads a few large values from
the cache and indexes its names, with nothing made per file until one is woken.
"""

from __future__ import annotations

import os
import pickle
from array import array
from typing import Any

from ..sources.tail import JsonDoc, JsonlTail, ZstdJsonl, stat_key

Key = tuple[int, int, int, int]
_CAN_SLEEP = (JsonlTail, ZstdJsonl, JsonDoc)
"""The followers that can sleep: those that know when a read would find nothing."""


def settled(tail: object) -> Key | None:
    """The `stat_key` at which `tail` would read nothing; None when it cannot sleep."""
    return tail.settled() if isinstance(tail, _CAN_SLEEP) else None


class Sleepers:
    """Sleeping files, by index: the index of each one's source, its name, its `stat_key`
    (four values each) and its pickle (`data[offsets[i]:offsets[i + 1]]`)."""

    __slots__ = ("data", "dead", "keys", "names", "offsets", "sources")

    def __init__(self) -> None:
        self.dead = 0
        """Files woken since: their pickles are still in `data` (gone at the next copy)."""
        self.sources = array("q")
        self.names: list[str] = []
        self.keys = array("q")
        self.offsets = array("q", [0])
        self.data = bytearray()

    def __len__(self) -> int:
        return len(self.names)

    def add(self, source: int, name: str, key: Key, tail: Any, reader: object) -> int:
        """Put a file to sleep; its index. The follower is pickled without its path, which
        `names` holds already (a third of a pickle)."""
        tail.file = ""
        try:
            blob = pickle.dumps((tail, reader), -1)
        finally:
            tail.file = name
        return self._append(source, name, key, blob)

    def moved(self, other: Sleepers, at: int) -> int:
        """File `at` of `other`, asleep here; its index here."""
        blob = other.data[other.offsets[at] : other.offsets[at + 1]]
        return self._append(other.sources[at], other.names[at], other.key(at), blob)

    def key(self, at: int) -> Key:
        keys, i = self.keys, 4 * at
        return keys[i], keys[i + 1], keys[i + 2], keys[i + 3]

    def unchanged(self, at: int) -> bool:
        """File `at` is as it was when it fell asleep (a file that cannot be looked at has
        changed: waking it lets its follower report why)."""
        try:
            st = os.stat(self.names[at])
        except OSError:
            return False
        return stat_key(st) == self.key(at)

    def woken(self, at: int) -> tuple[Any, Any]:
        """The follower and reader of file `at`, as they were; the file no longer sleeps here."""
        tail, reader = pickle.loads(self.data[self.offsets[at] : self.offsets[at + 1]])
        tail.file = self.names[at]
        self.dead += 1
        return tail, reader

    def _append(self, source: int, name: str, key: Key, blob: bytes | bytearray) -> int:
        self.sources.append(source)
        self.names.append(name)
        self.keys.extend(key)
        self.data += blob
        self.offsets.append(len(self.data))
        return len(self.names) - 1

    def __getstate__(self) -> tuple[Any, ...]:
        """A few large values for the cache (names joined: a path holds no NUL)."""
        columns = (self.sources, self.keys, self.offsets)
        return (*(c.tobytes() for c in columns), "\0".join(self.names), self.data)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        sources, keys, offsets, names, data = state
        self.dead = 0
        self.sources, self.keys, self.offsets = _column(sources), _column(keys), _column(offsets)
        self.names = names.split("\0") if names else []
        self.data = data if isinstance(data, bytearray) else bytearray(data)
        if not (len(self.sources) == len(self.names) == len(self.offsets) - 1):
            raise ValueError("sleeping files: columns of different lengths")
        if len(self.keys) != 4 * len(self.names) or self.offsets[-1] != len(self.data):
            raise ValueError("sleeping files: keys or pickles do not match the names")


def _column(raw: bytes) -> array[int]:
    column = array("q")
    column.frombytes(raw)
    return column

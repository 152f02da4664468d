"""Files followed before and unchanged since: kept as a few bytes, not as live objects.

Most of a history is finished files. Their follower (offset, identity) and reader (what the file
told it so far) are needed again only if the file changes, so the engine keeps such a file
asleep in `Sleepers`: the `stat_key` at which reading it would find nothing new, and its
follower and reader pickled together. Unchanged, it costs one `stat` and its bytes; changed, it
is woken (unpickled) and read on exactly as if it had never slept. Only the files of harnesses
whose readers keep to their own file (`pool.PARALLEL`) sleep: a reader that shares objects with
the readers of other files would come back with copies of them.

`Sleepers` keeps columns, not an object per file: a warm start loads a few large values from
the cache and indexes its names, with nothing made per file until one is woken. The pickles are
kept in blocks of `BLOCK` files, each compressed (zstd) once it is full: pickles of one agent's
files repeat the same class names, folders and record shapes, so a sleeping file's pickle costs
a fifth of its size (`bench/RESULTS.md`); waking one decompresses its block (the last block
decompressed is kept, as files are woken in the order they fell asleep).
"""

from __future__ import annotations

import pickle
from array import array
from typing import Any, BinaryIO

import zstandard

from ..sources.reading import changed, stat_current, stat_key
from ..sources.tail import JsonDoc, JsonlTail, ZstdJsonl

Key = tuple[int, int, int, int]
BLOCK = 256
"""Sleeping files per compressed block of pickles."""
NAMES_CHUNK = 1024
"""Names written to the cache at a time (each chunk joined, then encoded: two copies of its
names at the peak of a catch-up, ~0.3 MB)."""
_CAN_SLEEP = (JsonlTail, ZstdJsonl, JsonDoc)
"""The followers that can sleep: those that know when a read would find nothing."""


def settled(tail: object) -> Key | None:
    """The `stat_key` at which `tail` would read nothing; None when it cannot sleep."""
    return tail.settled() if isinstance(tail, _CAN_SLEEP) else None


class Sleepers:
    """Sleeping files, by index: the index of each one's source, its name, its `stat_key`
    (four values each) and its pickle: bytes `offsets[i]` to `offsets[i + 1]` of the pickles
    one after another, file `i` being in block `i // BLOCK` (`blocks`, compressed, then `data`,
    the block being filled)."""

    __slots__ = ("_unpacked", "blocks", "data", "dead", "keys", "names", "offsets", "sources")

    def __init__(self) -> None:
        self.dead = 0
        """Files woken since: their pickles are still kept (gone at the next copy)."""
        self.sources = array("q")
        self.names: list[str] = []
        self.keys = array("q")
        self.offsets = array("q", [0])
        self.blocks: list[bytes] = []
        self.data = bytearray()
        self._unpacked: tuple[int, bytes] = (-1, b"")

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
        return self._append(other.sources[at], other.names[at], other.key(at), other.pickle(at))

    def pickle(self, at: int) -> bytes | bytearray:
        """The pickle of file `at`."""
        block = at // BLOCK
        base = self.offsets[block * BLOCK]
        if block == len(self.blocks):
            data: bytes | bytearray = self.data
        elif self._unpacked[0] == block:
            data = self._unpacked[1]
        else:
            data = zstandard.ZstdDecompressor().decompress(self.blocks[block])
            self._unpacked = (block, data)
        return data[self.offsets[at] - base : self.offsets[at + 1] - base]

    def key(self, at: int) -> Key:
        keys, i = self.keys, 4 * at
        return keys[i], keys[i + 1], keys[i + 2], keys[i + 3]

    def unchanged(self, at: int) -> bool:
        """File `at` is as it was when it fell asleep (a file that cannot be looked at has
        changed: waking it lets its follower report why)."""
        try:
            st = stat_current(self.names[at])
        except OSError:
            return False
        return stat_key(st) == self.key(at)

    def changed(self) -> list[int]:
        """The files as `unchanged` would find them changed, all at once (`reading.changed`)."""
        return changed(self.names, self.keys)

    def woken(self, at: int) -> tuple[Any, Any]:
        """The follower and reader of file `at`, as they were; the file no longer sleeps here."""
        tail, reader = pickle.loads(self.pickle(at))
        tail.file = self.names[at]
        self.dead += 1
        return tail, reader

    def _append(self, source: int, name: str, key: Key, blob: bytes | bytearray) -> int:
        self.sources.append(source)
        self.names.append(name)
        self.keys.extend(key)
        self.data += blob
        self.offsets.append(self.offsets[-1] + len(blob))
        if len(self.names) % BLOCK == 0:  # the block is full
            self.blocks.append(_compressed(self.data))
            self.data = bytearray()
        return len(self.names) - 1

    def write(self, out: BinaryIO) -> None:
        """The columns to `out` as sections (a length, then its bytes), straight from memory:
        pickling them would copy each (the names twice: joined, then encoded)."""
        _section(out, self.sources, self.keys, self.offsets)
        _section(out, len(self.blocks).to_bytes(8, "little"), *self.blocks, self.data)
        chunks = range(0, len(self.names), NAMES_CHUNK)
        _section(out, len(chunks).to_bytes(8, "little"))
        for start in chunks:
            _section(out, "\0".join(self.names[start : start + NAMES_CHUNK]).encode())

    @classmethod
    def read(cls, stream: BinaryIO) -> Sleepers:
        """What `write` wrote; `ValueError` when it does not hold together."""
        sleepers = cls()
        sources, keys, offsets = (_column(_read_section(stream)) for _ in range(3))
        sleepers.sources, sleepers.keys, sleepers.offsets = sources, keys, offsets
        blocks = int.from_bytes(_read_section(stream), "little")
        sleepers.blocks = [_read_section(stream) for _ in range(blocks)]
        sleepers.data = bytearray(_read_section(stream))
        chunks = int.from_bytes(_read_section(stream), "little")
        for _ in range(chunks):
            sleepers.names += _read_section(stream).decode().split("\0")
        sleepers._check()
        return sleepers

    def _check(self) -> None:
        count = len(self.names)
        if not (len(self.sources) == count == len(self.offsets) - 1):
            raise ValueError("sleeping files: columns of different lengths")
        if len(self.keys) != 4 * count or len(self.blocks) != count // BLOCK:
            raise ValueError("sleeping files: keys or blocks do not match the names")
        if self.offsets[-1] - self.offsets[len(self.blocks) * BLOCK] != len(self.data):
            raise ValueError("sleeping files: pickles do not match the names")


def _section(out: BinaryIO, *parts: bytes | bytearray | array[int]) -> None:
    for part in parts:
        view = memoryview(part).cast("B")
        out.write(len(view).to_bytes(8, "little"))
        out.write(view)


def _read_section(stream: BinaryIO) -> bytes:
    size = int.from_bytes(_exactly(stream, 8), "little")
    return _exactly(stream, size)


def _exactly(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    while len(data) < size:  # a decompressing reader may return less
        more = stream.read(size - len(data))
        if not more:
            raise ValueError("sleeping files: the cache ends inside them")
        data += more
    return data


def _compressed(data: bytearray) -> bytes:
    """`data` compressed, in bytes of its own size (zstandard's `compress` returns bytes that
    keep the whole buffer it wrote into: the bound of the compressed size, not the size)."""
    return bytes(memoryview(zstandard.ZstdCompressor(level=3).compress(data)))


def _column(raw: bytes) -> array[int]:
    column = array("q")
    column.frombytes(raw)
    return column

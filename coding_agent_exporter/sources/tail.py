"""Read agent session files incrementally, never writing and never holding them open.

Three kinds of file, three followers (SQLite tables: ``sqlite_tail``):

``JsonlTail`` follows one append-only JSONL file. Each ``read()`` opens the file, reads
the bytes after the remembered offset to EOF in chunks, closes it, and returns the
complete new lines as ``Line`` values (bytes; callers decode and parse). The contract:

* A trailing partial line (no ``\\n`` yet) is not consumed; it is read again, and
  delivered whole, once its newline arrives. Lines are bytes, so a UTF-8 character split
  across two writes is never cut.
* ``\\r\\n`` endings lose the ``\\r``. Empty lines are skipped but still counted in
  ``Line.number``.
* A line longer than ``max_line_bytes`` is skipped and counted in ``oversized``; its bytes
  are dropped as they are read (memory stays under twice ``max_line_bytes`` plus one
  ``READ_LIMIT`` piece) and ``offset`` moves past them, so they are never read again.
* A read takes what the file holds beyond the offset in one piece (up to ``READ_LIMIT``);
  each line is a view of that piece, not a copy (a line spanning two reads is joined once),
  so following a file costs little more than reading it.
* Truncation (size below the offset) and rewrite/replacement (another device or inode, the
  first 64 bytes differ from those seen before, or the 64 bytes before the offset do: a file
  saved whole again, longer, over the same inode) restart at byte 0 with ``reset=True``: the
  caller drops what it derived from this file. The bytes before the offset are kept as a
  CRC-32, not as bytes.
* A file whose identity, size and mtime are unchanged is not opened (one ``stat``), so a
  same-size in-place rewrite within one mtime tick is noticed at the file's next change.
* An error opening or reading (deleted, permission denied, ...) is returned in ``error``
  with no lines and leaves the state as it was, so the next call retries and a re-created
  file is detected as a rewrite.

On every system (``reading``): a file is opened read-only (on Windows sharing delete, so the
agent can still rename or delete it while it is read), read at an offset with ``os.pread`` or,
where there is none, a seek and a read, and known again by ``(st_dev, st_ino)``, or by its size
and mtime alone where inode numbers are not trusted (``st_ino`` 0, WSL's 9P mounts of Windows
drives): the checks above still find a rewrite or a truncation there.

``ZstdJsonl`` follows a zstd-compressed JSONL file (an agent compresses a finished journal
into ``*.jsonl.zst``, written once). It decompresses the whole stream again only when
``(device, inode, size, mtime_ns)`` changed, returns every line (``reset=True`` on a re-read:
the caller drops what it derived), and treats a damaged or half-written stream as a read
error (``error``, nothing committed) that is retried at the file's next change.

``JsonDoc`` follows a small whole-document JSON file that is rewritten in place or
replaced. It re-reads only when ``(device, inode, size, mtime_ns)`` changed since the last
read of its content (the same one-tick caveat applies); a half-written (invalid) document
is re-read as soon as it changes again, so it never sticks.
"""

from __future__ import annotations

import errno
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, NamedTuple

import zstandard

from . import platform
from .decode import loads
from .reading import Pread, identity, pread_for, stat_current, stat_key
from .reading import open_regular as _open_regular  # a test counts the opens through it

__all__ = [
    "DocResult",
    "JsonDoc",
    "JsonlTail",
    "Line",
    "TailResult",
    "ZstdJsonl",
]

_CHUNK = 65536
_HEAD = 64
READ_LIMIT = 8 * 1024 * 1024
"""Bytes one ``JsonlTail.read()`` goes through at most (beyond the line it is in), so a large
file is read in pieces and memory does not grow with it."""


class Line(NamedTuple):
    """One complete line of a JSONL file (a named tuple: one is made per record, and a tuple is
    made several times faster than a frozen dataclass)."""

    file: str
    """The file's path, as its follower holds it (no `Path` made per read)."""
    offset: int
    """Byte offset of the line start."""
    number: int
    """1-based line number, counted from the start of the current file content."""
    text: bytes | memoryview
    """The line without its ``\\n`` (or ``\\r\\n``): from ``JsonlTail``, a view of the bytes
    read (decoders take it as it is; ``bytes()`` copies it)."""


@dataclass(frozen=True, slots=True)
class TailResult:
    """What one ``JsonlTail.read()`` found."""

    lines: list[Line]
    reset: bool
    """The file was truncated or replaced; reading restarted at byte 0."""
    bytes_read: int
    """Bytes read from the file by this call (a held-back partial line is read again)."""
    error: OSError | None
    oversized: int
    """Lines skipped for exceeding ``max_line_bytes``."""
    more: bool = False
    """The read stopped after ``READ_LIMIT`` bytes: call again for the rest."""
    oversized_line: int = 0
    """The number of the first line skipped for its length (0: none)."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Made by `__init__`: a frozen dataclass compiled by mypyc (`setup.py`) is not made
        without calling it (catch-up workers send back what they read)."""
        fields = (self.bytes_read, self.error, self.oversized, self.more, self.oversized_line)
        return TailResult, (self.lines, self.reset, *fields)


@dataclass(slots=True)
class _Cursor:
    offset: int = 0
    """First byte not yet consumed."""
    number: int = 0
    """Lines consumed so far."""
    discarding: bool = False
    """Inside an oversized line: drop bytes up to the next newline."""
    first_oversized: int = 0
    """The number of the first line this read skipped for its length."""


class JsonlTail:
    """Follows one append-only JSONL file."""

    # One per followed file, for as long as it is followed: slots, and the cursor kept flat
    # (`_Cursor` only while a read is under way), no object of its own per file.
    __slots__ = (
        "_discarding",
        "_head",
        "_ident",
        "_limit",
        "_max",
        "_mtime_ns",
        "_number",
        "_offset",
        "_seam",
        "file",
    )

    def __init__(self, path: Path | str, *, max_line_bytes: int = 16 * 1024 * 1024) -> None:
        self.file = os.fspath(path)
        self._max = max_line_bytes
        self._limit = READ_LIMIT
        self._offset, self._number, self._discarding = 0, 0, False  # a `_Cursor`, flat
        self._ident: tuple[int, int] | None = None
        self._head = b""
        self._seam = 0  # CRC-32 of the bytes just before `_offset` (up to _HEAD of them)
        self._mtime_ns = -1

    @property
    def path(self) -> Path:
        """The file followed (kept as the string `file`: a `Path` costs five times as much)."""
        return Path(self.file)

    @property
    def max_line_bytes(self) -> int:
        """The longest line read; a longer one is skipped and counted."""
        return self._max

    @property
    def offset(self) -> int:
        """Bytes consumed: complete lines and discarded oversized bytes."""
        return self._offset

    def __getstate__(self) -> tuple[Any, ...]:
        """Flat, for the catch-up cache (`cache`), which loads one of these per file."""
        where = (self._offset, self._number, self._discarding, self._ident, self._head)
        return (self.file, self._max, *where, self._seam, self._mtime_ns)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.file, self._max, self._offset, self._number, self._discarding, *rest = state
        self._ident, self._head, self._seam, self._mtime_ns = rest
        self._limit = READ_LIMIT

    def __reduce__(self) -> tuple[Any, ...]:
        """Made by `__init__`, then given its state: a class compiled by mypyc (`setup.py`) is
        not made without calling it (the catch-up cache pickles followers)."""
        return JsonlTail, (self.file,), self.__getstate__()

    def start_near_end(self, keep: int) -> int:
        """Before the first read: begin at the first line of the file's last `keep` bytes (a
        replay of a long session, `runtime.replay`); the bytes left out before it."""
        if self._ident is not None:
            return 0
        try:
            size = stat_current(self.file).st_size
        except OSError:
            return 0
        if size <= keep:
            return 0
        self._offset, self._discarding = size - keep, True  # the rest of a line is skipped
        return size - keep

    def read(self) -> TailResult:
        """Return all complete lines appended since the last call."""
        try:
            # a file never read has no stat to compare with: opened at once
            if self._ident is not None and self._unchanged(stat_current(self.file)):
                return TailResult([], False, 0, None, 0)
            fd, st = _open_regular(self.file)
        except OSError as exc:
            return TailResult([], False, 0, _named(exc, self.file), 0)
        try:
            return self._read_fd(fd, st, pread_for(platform.current()))
        except OSError as exc:
            return TailResult([], False, 0, _named(exc, self.file), 0)
        finally:
            os.close(fd)

    def settled(self) -> tuple[int, int, int, int] | None:
        """The `stat_key` of the file for which `read()` finds nothing to do (None: it reads)."""
        if self._ident is None:
            return None
        return (*self._ident, self._offset, self._mtime_ns)

    def _unchanged(self, st: os.stat_result) -> bool:
        ident = self._ident  # the inode compared first: the cost of a file that did not change
        return (
            ((st.st_dev, st.st_ino) == ident or (ident == (0, 0) and identity(st) == ident))
            and st.st_size == self._offset
            and st.st_mtime_ns == self._mtime_ns
        )

    def _read_fd(self, fd: int, st: os.stat_result, pread: Pread) -> TailResult:
        ident = identity(st)
        head = pread(fd, _HEAD, 0)
        reset = self._replaced(ident, st.st_size, head) or self._seam_moved(fd, pread)
        cursor = _Cursor() if reset else _Cursor(self._offset, self._number, self._discarding)
        lines, nread, oversized, more = self._scan(fd, cursor, st.st_size, pread)
        moved = cursor.offset != self._offset or reset
        seam = _seam(fd, cursor.offset, pread) if moved else self._seam
        # Commit only now: an OSError above leaves the old state for a retry.
        c = cursor
        self._offset, self._number, self._discarding = c.offset, c.number, c.discarding
        self._ident, self._head, self._seam = ident, head, seam
        self._mtime_ns = st.st_mtime_ns
        return TailResult(lines, reset, nread, None, oversized, more, cursor.first_oversized)

    def _replaced(self, ident: tuple[int, int], size: int, head: bytes) -> bool:
        if self._ident is None:
            return False
        return ident != self._ident or size < self._offset or not head.startswith(self._head)

    def _seam_moved(self, fd: int, pread: Pread) -> bool:
        """The bytes before the offset are not those read there: the file was written again."""
        return self._ident is not None and _seam(fd, self._offset, pread) != self._seam

    def _scan(
        self, fd: int, cursor: _Cursor, size: int, pread: Pread
    ) -> tuple[list[Line], int, int, bool]:
        lines: list[Line] = []
        nread = oversized = 0
        held = b""  # bytes from cursor.offset on, not yet consumed (no newline in them)
        start = cursor.offset
        while True:
            if nread >= self._limit and cursor.offset > start:  # the rest at the next call
                return lines, nread, oversized, True
            at = cursor.offset + len(held)
            chunk = pread(fd, max(_CHUNK, min(size - at, self._limit)), at)
            if not chunk:
                return lines, nread, oversized, False
            nread += len(chunk)
            data = held + chunk if held else chunk  # a line across two reads: joined once
            if cursor.discarding or b"\n" in chunk or len(data) > self._max:
                held, skipped = self._split(data, cursor, lines)
                oversized += skipped
            else:
                held = data

    def _split(self, data: bytes, cursor: _Cursor, lines: list[Line]) -> tuple[bytes, int]:
        """Consume the complete lines at the front of `data` (each a view of `data`, not a
        copy); return the rest and how many lines were too long."""
        oversized = start = 0
        find, path, view = data.find, self.file, memoryview(data)
        while (end := find(b"\n", start)) >= 0:
            if cursor.discarding:
                cursor.discarding = False
            elif end - start > self._max:
                oversized += 1
                cursor.first_oversized = cursor.first_oversized or cursor.number + 1
            else:
                stop = end - 1 if end > start and data[end - 1] == 13 else end  # 13: "\r"
                if stop > start:
                    lines.append(
                        Line(path, cursor.offset + start, cursor.number + 1, view[start:stop])
                    )
            cursor.number += 1
            start = end + 1
        cursor.offset += start
        rest = data[start:] if start else data
        if cursor.discarding or len(rest) > self._max:
            oversized += not cursor.discarding
            cursor.first_oversized = cursor.first_oversized or cursor.number + 1
            cursor.discarding = True
            cursor.offset += len(rest)
            rest = b""
        return rest, oversized


class ZstdJsonl:
    """A compressed JSONL file, read whole each time it changes (it is written once)."""

    __slots__ = ("_key", "_max", "file")

    def __init__(self, path: Path | str, *, max_line_bytes: int = 16 * 1024 * 1024) -> None:
        self.file = os.fspath(path)
        self._max = max_line_bytes
        self._key: tuple[int, int, int, int] | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        """Made by `__init__`, then given its state: a class compiled by mypyc (`setup.py`) is
        not made without calling it (the catch-up cache pickles followers)."""
        return ZstdJsonl, (self.file,), self.__getstate__()

    def read(self) -> TailResult:
        try:
            if self._key is not None and stat_key(stat_current(self.file)) == self._key:
                return TailResult([], False, 0, None, 0)
            fd, st = _open_regular(self.file)
            with os.fdopen(fd, "rb") as raw:
                lines, oversized, first = self._lines(raw)
        except (OSError, zstandard.ZstdError) as exc:
            error = (
                _named(exc, self.file)
                if isinstance(exc, OSError)
                else OSError(errno.EIO, f"zstd: {exc}")
            )
            return TailResult([], False, 0, error, 0)
        reset, self._key = self._key is not None, stat_key(st)
        return TailResult(lines, reset, st.st_size, None, oversized, False, first)

    def settled(self) -> tuple[int, int, int, int] | None:
        """The `stat_key` of the file for which `read()` finds nothing to do (None: it reads)."""
        return self._key

    @property
    def path(self) -> Path:
        return Path(self.file)

    def _lines(self, raw: IO[bytes]) -> tuple[list[Line], int, int]:
        """Every line of the stream (the last one needs no newline: the file is complete), how
        many were too long, and the first of those."""
        lines: list[Line] = []
        oversized = number = offset = first = 0
        buf, skipping, path = b"", False, self.file
        for chunk in _decompressed(raw):
            *complete, rest = (buf + chunk).split(b"\n")
            for text in complete:
                number += 1
                if skipping or len(text) > self._max:
                    oversized, skipping = oversized + (not skipping), False
                    first = first or number
                elif line := text.removesuffix(b"\r"):
                    lines.append(Line(path, offset, number, line))
                offset += len(text) + 1
            buf = rest
            if len(buf) > self._max:  # drop the long line's bytes as they come
                oversized, skipping, offset, buf = oversized + 1, True, offset + len(buf), b""
                first = first or number + 1
        if buf.strip() and not skipping:
            lines.append(Line(path, offset, number + 1, buf.removesuffix(b"\r")))
        return lines, oversized, first


def _decompressed(raw: IO[bytes]) -> Iterator[bytes]:
    """The decompressed bytes of every frame; a stream cut inside a frame is an error."""
    zstd = zstandard.ZstdDecompressor()
    frame, pending = zstd.decompressobj(), False
    while data := raw.read(_CHUNK):
        while data:
            pending = True
            yield frame.decompress(data)
            if not frame.eof:
                break
            data, frame, pending = frame.unused_data, zstd.decompressobj(), False
    if pending:
        raise OSError(errno.EIO, "zstd: the compressed stream ends inside a frame")


def _seam(fd: int, offset: int, pread: Pread) -> int:
    """CRC-32 of the up-to-`_HEAD` bytes of `fd` that end at `offset` (0 at the start)."""
    size = min(_HEAD, offset)
    return zlib.crc32(pread(fd, size, offset - size)) if size else 0


def _named(error: OSError, file: str) -> OSError:
    """The error, naming the file it is about (an error raised by a helper may name none)."""
    if error.filename is None:
        error.filename = file
    return error


@dataclass(frozen=True, slots=True)
class DocResult:
    """What one ``JsonDoc.read()`` found.

    ``changed`` is True when the content was read again, or when the error differs from
    the previous call's; otherwise ``error`` repeats the previous result and ``data`` is None:
    a document is not kept once its reader was given it (memory does not grow with the
    documents of history).
    """

    changed: bool
    data: object | None
    """Parsed JSON; None when missing or invalid."""
    error: str | None
    """"missing", "permission", "too_large", "invalid_json", "descriptors" or "io"; None when
    ok."""
    bytes_read: int

    def __reduce__(self) -> tuple[Any, ...]:
        """Made by `__init__`: a frozen dataclass compiled by mypyc (`setup.py`) is not made
        without calling it (a sleeping `JsonDoc` keeps its last result)."""
        return DocResult, (self.changed, self.data, self.error, self.bytes_read)


_NOTHING = DocResult(False, None, None, 0)


DOC_LIMIT = 1024 * 1024
"""The largest whole document read unless its harness says otherwise (`doc_limit`): a larger
one is not parsed (`too_large`)."""


class JsonDoc:
    """A small whole-document JSON file that is rewritten in place or replaced."""

    __slots__ = ("_key", "_last", "_max", "_text", "file")

    def __init__(self, path: Path | str, *, max_bytes: int = DOC_LIMIT, text: bool = False) -> None:
        self.file = os.fspath(path)
        self._text = text  # plain text, fed as `str` (undecodable bytes replaced)
        self._max = max_bytes
        self._key: tuple[int, int, int, int] | None = None
        self._last = _NOTHING

    def __getstate__(self) -> tuple[Any, ...]:
        """Flat, for the catch-up cache, which keeps one per sleeping document (`dormant`):
        the last result by its error alone, all that `_settle` keeps of it."""
        return (self.file, self._text, self._max, self._key, self._last.error)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.file, self._text, self._max, self._key, error = state
        self._last = _NOTHING if error is None else DocResult(False, None, error, 0)

    def __reduce__(self) -> tuple[Any, ...]:
        """Made by `__init__`, then given its state: a class compiled by mypyc (`setup.py`) is
        not made without calling it (the catch-up cache pickles followers)."""
        return JsonDoc, (self.file,), self.__getstate__()

    def read(self) -> DocResult:
        """Re-read and parse the document if its identity, size or mtime changed."""
        try:
            if self._key is not None and stat_key(stat_current(self.file)) == self._key:
                last = self._last
                return DocResult(False, None, last.error, 0) if last.error else _NOTHING
            fd, st = _open_regular(self.file)
            try:
                key = stat_key(st)
                raw = _read_up_to(fd, self._max + 1, key[2]) if key[2] <= self._max else b""
            finally:
                os.close(fd)
        except OSError as exc:
            return self._failed(_error_code(exc))
        if key[2] > self._max or len(raw) > self._max:
            return self._settle(key, DocResult(True, None, "too_large", len(raw)))
        try:
            data: object = raw.decode("utf-8", "replace") if self._text else loads(raw)
        except (ValueError, RecursionError):
            return self._settle(key, DocResult(True, None, "invalid_json", len(raw)))
        return self._settle(key, DocResult(True, data, None, len(raw)))

    def settled(self) -> tuple[int, int, int, int] | None:
        """The `stat_key` of the file for which `read()` finds nothing to do (None: it reads)."""
        return self._key

    @property
    def path(self) -> Path:
        return Path(self.file)

    def _failed(self, error: str) -> DocResult:
        """The content could not be read: forget the key so the next call retries."""
        changed = error != self._last.error
        return self._settle(None, DocResult(changed, None, error, 0))

    def _settle(self, key: tuple[int, int, int, int] | None, result: DocResult) -> DocResult:
        kept = _NOTHING if result.error is None else DocResult(False, None, result.error, 0)
        self._key, self._last = key, kept  # what a read of the same content repeats
        return result


def _read_up_to(fd: int, limit: int, size: int) -> bytes:
    """At most `limit` bytes of `fd`, fewer at its end, which the file's `size` foretells
    (no file object, no buffer of `limit` bytes made for a small file)."""
    data = os.read(fd, min(limit, size + 1))
    while len(data) < limit and (more := os.read(fd, min(limit - len(data), _CHUNK))):
        data += more
    return data


def _error_code(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return "missing"
    if isinstance(exc, PermissionError):
        return "permission"
    if exc.errno in (errno.EMFILE, errno.ENFILE):
        return "descriptors"  # no descriptor left: the caller reads it again later
    return "io"

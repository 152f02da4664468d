"""Follow a folder of small JSON documents, one per event, as one stream.

Some agents write each event of a conversation to a file of its own, named so that the order of
the names is the order written (OpenHands: `events/event-00042-<uuid>.json`, written once,
never changed). Following each file would cost a follower, a reader and a sleeper per event:
thousands per conversation. `DocFolder` follows the folder instead, with the name of the last
document it delivered and the folder's `stat_key`:

* `read()` lists the folder (one `scandir`, no `stat` per file) only when the folder's key
  changed (a file was added, renamed or removed there) or a document was held back; it reads
  the documents whose names come after the last one delivered, in name order, at most
  `BATCH` per call (`more` says there are others: a long conversation comes in pieces).
* A document that cannot be parsed yet (created, not written to the end) is held back with
  all after it, and read again at the next call, which the file's own change brings: its
  folder's key does not change when a file's content does, so `settled()` is None meanwhile.
  A document still not parsed once a later one is complete is skipped and counted
  (`invalid`): the agent does not go back to it.
* A folder replaced (another identity) starts again from its first document, `reset=True`:
  the caller drops what it derived from it. A document removed is not noticed (the events are
  told already); the folder removed is an `error` ("missing").
* Documents larger than `max_bytes` are skipped and counted (`too_large`).

Nothing is kept of a document once delivered: memory per folder is its name, its key and the
last name, whatever the number of documents in it. A folder never sleeps (`runtime.dormant`):
OpenHands' readers share memory across a conversation's files, so its files stay awake.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .decode import loads
from .reading import identity

BATCH = 512
"""Documents one `read()` delivers at most."""
DOC_LIMIT = 1024 * 1024
"""The largest document read (bytes)."""

Key = tuple[int, int, int, int]


@dataclass(slots=True)
class FolderResult:
    docs: list[object] = field(default_factory=list)
    """The new documents, parsed, in name order."""
    error: str | None = None
    """"missing", "permission" or "io" when the folder could not be listed."""
    reset: bool = False
    more: bool = False
    bytes_read: int = 0
    invalid: int = 0
    too_large: int = 0


class DocFolder:
    """The follower of one folder of event documents (see the module's docstring)."""

    __slots__ = ("_held", "_id", "_key", "_last", "_max", "_suffix", "file")

    def __init__(self, path: str, *, suffix: str = ".json", max_bytes: int = DOC_LIMIT) -> None:
        self.file = path
        self._suffix = suffix
        self._max = max_bytes
        self._key: Key | None = None
        self._id: tuple[int, int] | None = None  # the folder's identity when first listed
        self._last = ""  # the name of the last document delivered
        self._held = False  # a document was held back (not complete yet)

    def settled(self) -> Key | None:
        """The folder's `stat_key` at which `read()` finds nothing (None: it reads)."""
        return None if self._held else self._key

    def read(self) -> FolderResult:
        try:
            st = os.stat(self.file)
        except OSError as exc:
            self._key = None
            return FolderResult(error=_error_code(exc))
        key: Key = (*identity(st), st.st_size, st.st_mtime_ns)
        if key == self._key and not self._held:
            return FolderResult()
        result = FolderResult()
        if self._id is not None and identity(st) != self._id and identity(st) != (0, 0):
            self._last, result.reset = "", True
        self._id = identity(st)
        try:
            names = sorted(n for n in _names(self.file) if n > self._last and self._ours(n))
        except OSError as exc:
            return FolderResult(error=_error_code(exc))
        self._held = False
        for i, name in enumerate(names):
            if len(result.docs) >= BATCH:
                result.more = True
                self._key = None  # not all read: the next call lists again
                return result
            doc, size, problem = self._doc(name)
            result.bytes_read += size
            if problem == "torn" and i == len(names) - 1:
                self._held = True  # the agent is writing it: read again at its change
                break
            if problem == "torn":
                result.invalid += 1
            elif problem == "too_large":
                result.too_large += 1
            else:
                result.docs.append(doc)
            self._last = name
        self._key = key
        return result

    def _ours(self, name: str) -> bool:
        return name.endswith(self._suffix) and not name.startswith(".")

    def _doc(self, name: str) -> tuple[object, int, str | None]:
        """The parsed document, its size, and what kept it from being read ("torn",
        "too_large"; a file gone meanwhile is torn: it is skipped unless it is the last)."""
        try:
            with open(os.path.join(self.file, name), "rb") as fh:
                raw = fh.read(self._max + 1)
        except OSError:
            return None, 0, "torn"
        if len(raw) > self._max:
            return None, len(raw), "too_large"
        try:
            return loads(raw), len(raw), None
        except (ValueError, RecursionError):
            return None, len(raw), "torn"


def _names(folder: str) -> list[str]:
    with os.scandir(folder) as entries:
        return [e.name for e in entries]


def _error_code(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError | NotADirectoryError):
        return "missing"
    if isinstance(exc, PermissionError):
        return "permission"
    return "io"

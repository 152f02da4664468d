"""What the engine's parts share: the agents' homes (`Source`), a followed file (`Entry`), the
engine's attributes (`Parts`) and how a found file is named, ordered and placed in its home."""

from __future__ import annotations

import errno
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..harnesses import FileReader, Harness
from ..sources.docfolder import DocFolder
from ..sources.holders import HeldSessions, holders
from ..sources.locks import by_writer_lock
from ..sources.sqlite_tail import SqliteTail
from ..sources.tail import JsonDoc, JsonlTail, ZstdJsonl
from ..state.health import Stats
from ..state.state import State
from .dormant import Sleepers

log = logging.getLogger(__name__)
Found = Path | str
"""A file the engine found: a `Path`, or the name of one it already follows (no `Path` made)."""
SEP = os.sep
"""How the walk joins a folder and a file name: the system's own separator, so a walked name is
the `str` of the `Path` a watcher reports for the same file (on Windows `\\`: with `/`, a
watcher's path never matched the walk's and a second follower read the file again)."""
_COMPANIONS = ("-wal", "-journal")
"""Files SQLite writes beside a database on each commit (not `-shm`: readers touch it too)."""
Tail = JsonlTail | ZstdJsonl | JsonDoc | SqliteTail | DocFolder


@dataclass(slots=True)
class Source:
    harness: Harness
    home: Path
    held: HeldSessions | None = None  # for agents without a live index

    def __post_init__(self) -> None:
        if self.held is None and self.harness.holder_names:
            lock_of = getattr(self.harness, "writer_lock", None)  # optional: see harnesses.base
            find = holders if lock_of is None else by_writer_lock(self.home, lock_of)
            self.held = HeldSessions(self.harness.holder_names, find)


@dataclass(slots=True)
class Entry:
    source: Source
    path: str
    """Its key in `Engine._files`: the follower's own string, never a `Path` per file kept."""
    reader: FileReader
    tail: Tail

    @property
    def rel(self) -> PurePosixPath:
        return rel_of(Path(self.path), self.source)


class Parts:
    """The engine's attributes its parts (`walking`, `following`) use, set by `Engine.__init__`,
    which says what each holds."""

    sources: list[Source]
    state: State
    stats: Stats
    retry: set[str]
    unfinished: dict[str, None]
    rewritten: list[str]
    _files: dict[str, Entry | int]
    _sleepers: Sleepers
    _index: dict[int, int]
    _walked: set[str]
    _logged: set[tuple[str, str]]
    _links: dict[str, str]
    _linked: set[str]
    _sliced: bool
    _cached: bool

    @property
    def content(self) -> bool:
        """Spans show what records say (prompts, replies, tool arguments and results)."""
        return self.state.observer.capture

    def _source_of_sleeper(self, at: int) -> Source:
        return self.sources[self._sleepers.sources[at]]

    def _source_of_entry(self, entry: Entry | int) -> Source:
        return self._source_of_sleeper(entry) if isinstance(entry, int) else entry.source

    def _once(self, path: Found, reason: str, agent: str, detail: object) -> None:
        if (name_of(path), reason) in self._logged:
            return
        self._logged.add((name_of(path), reason))
        log.warning("%s: %s: %s (%s; reported once per file)", agent, path, detail, reason)


def no_descriptor(error: Exception) -> bool:
    """The error says no file descriptor was left (the process's or the system's limit)."""
    return isinstance(error, OSError) and error.errno in (errno.EMFILE, errno.ENFILE)


def name_of(path: Found) -> str:
    return path if isinstance(path, str) else str(path)


def order_of(item: tuple[Found, Source]) -> tuple[int, str]:
    """Shallow files first, then by name. A name (the walk's `folder/name`, equal to the `str`
    of its `Path`) counts its parts without a `Path` made: one more than its separators (a
    name that starts with two, `//x` or Windows' `\\\\server\\share`, is counted by its `Path`)."""
    path = item[0]
    sep = SEP
    if isinstance(path, Path) or path.startswith(sep + sep):
        return len(Path(path).parts), str(path)
    return path.count(sep) + 1, path


def path_order(name: str) -> str:
    """Sorts names as their `Path`s sort, part by part (without case on Windows), none made:
    the separator as the least of characters, which no name holds."""
    return os.path.normcase(name).replace(SEP, "\0")


def database_of(path: Path, source: Source) -> Path:
    """A SQLite companion file (`x.db-wal`) stands for its database when the harness reads it."""
    for suffix in _COMPANIONS:
        if path.name.endswith(suffix):
            database = path.with_name(path.name.removesuffix(suffix))
            if source.harness.match(rel_of(database, source)) == "sqlite":
                return database
    return path


def folder_of(path: Path, source: Source) -> Path:
    """A file in a folder read as one stream (`docfolder`) stands for its folder."""
    stream = getattr(source.harness, "doc_folder", None)  # optional: see harnesses.base
    if stream is not None and path != source.home and stream(rel_of(path.parent, source)):
        return path.parent
    return path


def rel_of(path: Found, source: Source) -> PurePosixPath:
    """`path` below its home, in the `/`-separated form harnesses match on every system."""
    text, home, sep = os.fspath(path), os.fspath(source.home), SEP
    if text.startswith(home) and text[len(home) : len(home) + 1] == sep:  # no Path made
        rest = text[len(home) + 1 :]
        return PurePosixPath(rest if sep == "/" else rest.replace(sep, "/"))
    return PurePosixPath(Path(path).relative_to(source.home).as_posix())


def key_of(tail: Tail) -> str:
    """A follower's path as a string: the one it keeps, if it keeps one."""
    return str(tail.path) if isinstance(tail, SqliteTail) else tail.file


def size_of(path: str) -> int | None:
    """The file's size; None for a link (one `lstat` either way)."""
    try:
        found = os.lstat(path)
    except OSError:
        return 0  # the worker meets the error, the main process reports it
    return None if stat.S_ISLNK(found.st_mode) else found.st_size


class Stale(Exception):
    """A file the cache read was replaced or removed since."""

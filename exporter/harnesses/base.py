"""The one interface every harness (agent reader) implements.

A harness knows one agent's file layout and record format, nothing else: no I/O, no clock, no
metrics. The engine finds files under the agent's home, asks `match` what each one is, keeps one
`FileReader` per file, and feeds it parsed records (one JSON value per JSONL line, compressed or
not, the whole document of a JSON file, `None` once that document is gone, or one new row of a
SQLite database's append-only table as a dict of its columns). Readers return
normalized events; records they do not understand are ignored, never errors: formats change
under us.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import ClassVar, Literal, Protocol, runtime_checkable

from ..events import Event

FileKind = Literal["jsonl", "zstd", "doc", "sqlite", "text"]
"""An appended JSONL file, a zstd-compressed JSONL file (read whole), a whole JSON document, a
SQLite database (its reader says which table to follow: `TableReader`), a small plain-text file
(read whole, fed as `str`)."""


class RecordRejected(ValueError):
    """Raised by a reader for a record it must not use (e.g. one that breaks a hash chain): the
    engine counts it under `reason` in `parse_errors_total`, logs it once, and reads on."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class FileReader(Protocol):
    def feed(self, record: object) -> list[Event]: ...


@dataclass(frozen=True, slots=True)
class TableLog:
    """An append-only table of a SQLite database, followed by (`group`, `seq`): each group's
    rows are numbered 0, 1, 2, ... in the order they were written.

    `heads` names a table holding the last `seq` of each group (`table`, `group`, `seq` columns),
    so finding what is new costs one row per group, not one per event. `json` lists the
    columns holding JSON text: they are parsed before the row reaches the reader.
    """

    table: str
    columns: tuple[str, ...]
    group: str
    seq: str
    heads: tuple[str, str, str] | None = None
    json: tuple[str, ...] = ()


@runtime_checkable
class TableReader(FileReader, Protocol):
    """The reader of a "sqlite" file: fed the new rows of `log`, oldest first."""

    log: TableLog


class Harness(Protocol):
    name: ClassVar[str]
    """Label value, flag suffix (`--harness.<name>`) and fixture folder name."""
    home_flag: ClassVar[str]
    """The flag naming this agent's home folder, e.g. `claude.home`."""
    holder_names: ClassVar[tuple[str, ...]]
    """For agents without a live index: words that name their processes; a session is live
    while such a process holds one of its files open (see `holders`). Empty otherwise."""
    watch_dirs: ClassVar[tuple[str, ...]]
    """Folders below the home that hold its files (watched recursively), or single files."""

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path: ...

    def match(self, rel: PurePosixPath) -> FileKind | None:
        """What the file at `rel` (relative to the home) is, or None to leave it alone."""
        ...

    def reader(self, rel: PurePosixPath) -> FileReader: ...

    # Optional: `lean`, a `TypedDict` of the fields its JSONL readers look at; its lines
    # are then decoded against it, the rest skipped unbuilt, unless spans show content
    # (`decode.lean`, `pool.decoder`; Claude Code's `claude_schema.Record`).

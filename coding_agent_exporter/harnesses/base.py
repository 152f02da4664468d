"""The one interface every harness (agent reader) implements.

A harness knows one agent's file layout and record format, nothing else: no I/O, no clock, no
metrics. The engine finds files under the agent's home, asks `match` what each one is, keeps one
`FileReader` per file, and feeds it parsed records (one JSON value per JSONL line, compressed or
not, the whole document of a JSON file, `None` once that document is gone, or one new row of a
SQLite database's append-only table as a dict of its columns). Readers return
normalized events; records they do not understand are ignored, never errors: formats change
under us.

How a harness is made is the same for every agent (`Defaults` gives what most need): its own
flags (`options`), the TOML settings file below its home that the runtime reads for it
(`settings_file`), a pure `settings` that turns those into `Settings` (where its files are, the
model its agent is set to), and `made(settings, probes)`. `Probes` is what a harness may ask of
the machine; the runtime hands in the real ones from `sources`, tests hand in plain functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import ClassVar, Literal, Protocol, Self, runtime_checkable

from ..events import Event
from ..sources.sqlite_tail import RowWatch as RowWatch  # a table of rows updated in place
from ..sources.sqlite_tail import TableLog as TableLog  # how a harness names a followed table

FileKind = Literal["jsonl", "zstd", "doc", "sqlite", "text", "docs"]
"""An appended JSONL file, a zstd-compressed JSONL file (read whole), a whole JSON document, a
SQLite database (its reader says which table to follow: `TableReader`), a small plain-text file
(read whole, fed as `str`), a folder of JSON documents read as one stream in name order (each
new document fed once: `sources.docfolder`; named by the optional `doc_folder`, below)."""


class RecordRejected(ValueError):
    """Raised by a reader for a record it must not use (e.g. one that breaks a hash chain): the
    engine counts it under `reason` in `parse_errors_total`, logs it once, and reads on."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class FileReader(Protocol):
    def feed(self, record: object) -> list[Event]: ...


@runtime_checkable
class TableReader(FileReader, Protocol):
    """The reader of a "sqlite" file: fed the new rows of `log`, oldest first."""

    log: TableLog


@dataclass(frozen=True, slots=True)
class Option:
    """A flag of one harness's own, `--<flag>` (and its environment variable, like every flag);
    its value reaches `settings` under `flag`, as text ("" when not given)."""

    flag: str
    help: str
    metavar: str = "DIR"

    @property
    def dest(self) -> str:
        """Its name among the parsed flags."""
        return self.flag.replace("-", "_")


@dataclass(frozen=True, slots=True)
class Settings:
    """What the runtime found for one agent before reading its files."""

    home: Path
    """Where its files are: the folder its `watch_dirs` and `match` are relative to."""
    model: str | None = None
    """The model its agent's own settings name, for the sessions whose files name none."""


Document = Mapping[str, object]
"""A parsed settings file (TOML): empty when the file is absent or cannot be read."""

TerminalLookup = Callable[[int], tuple[str, float] | None]
"""pid → (the terminal on its standard input, as `pts-3`; its start time), None when it is gone,
reads no terminal or is another program."""


def no_terminal(pid: int) -> None:
    """The terminal lookup of a history read offline: no process is known."""
    return None


@dataclass(frozen=True, slots=True)
class Probes:
    """What a harness may ask of the running machine: answered by `sources`, never by itself.
    The default knows nothing (a history read offline)."""

    terminal: TerminalLookup = no_terminal


class Defaults:
    """How most harnesses are made: no flags or settings file of their own, the home as given,
    nothing asked of the machine."""

    options: ClassVar[tuple[Option, ...]] = ()
    settings_file: ClassVar[str] = ""

    @staticmethod
    def settings(home: Path, options: Mapping[str, str], document: Document) -> Settings:
        return Settings(home)

    @classmethod
    def made(cls, settings: Settings, probes: Probes) -> Self:
        return cls()


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
    options: ClassVar[tuple[Option, ...]]
    """Its own flags besides `--harness.<name>` and its home flag."""
    settings_file: ClassVar[str]
    """A TOML file below its home that the runtime reads and hands to `settings` ("": none)."""

    @staticmethod
    def settings(home: Path, options: Mapping[str, str], document: Document) -> Settings:
        """Pure: where its files are and its configured model, from its home, the values of its
        `options` and the parsed `settings_file` (empty when absent or unreadable)."""
        ...

    @classmethod
    def made(cls, settings: Settings, probes: Probes) -> Harness: ...

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path: ...

    def match(self, rel: PurePosixPath) -> FileKind | None:
        """What the file at `rel` (relative to the home) is, or None to leave it alone."""
        ...

    def reader(self, rel: PurePosixPath) -> FileReader: ...

    # Optional: `writer_lock(rel) -> PurePosixPath | None`, for an agent with `holder_names`
    # that locks a file while it writes one of its files: that lock (relative to the home);
    # its holder in `/proc/locks` makes the session live, before any open-file scan
    # (`sources.locks`; Codex's `thread-writer-locks/<thread>.lock`).
    # Optional: `read_with(rel) -> tuple[str, ...]`, for an agent whose readers share what
    # one file tells with the readers of others: glob patterns (relative to the home) of the
    # files to read with the one at `rel` when a session's turns are replayed from its files
    # (`runtime.replay`; Vibe's session folders, Gemini CLI's logs).
    # Optional: `live_dirs`, those of `watch_dirs` that hold only the agent's live index
    # (Claude Code's `sessions/`), whose files come before the agent's others in the
    # catch-up's order (shallower): a first start reads them before it walks the history, so
    # a session waiting for its user shows at once (`runtime.engine`).
    # Optional: `doc_limit`, the largest "doc" file (bytes) its readers take, for an agent
    # whose whole documents grow with the session (default `sources.tail.DOC_LIMIT`, 1 MiB;
    # Cline's messages files, which hold every tool output of the conversation).
    # Optional: `doc_folder(rel) -> bool`, for an agent that writes each event to a file of its
    # own: whether the folder at `rel` is read as one stream ("docs", `sources.docfolder`: one
    # follower and one reader per folder, not per file; its files are never matched one by
    # one, a change of one of them is a change of its folder). `reader(rel)` is then asked
    # for the folder's reader (OpenHands' `conversations/<id>/events`).
    # Optional: `lean`, a `TypedDict` of the fields its JSONL readers look at; its lines
    # are then decoded against it, the rest skipped unbuilt, unless spans show content
    # (`decode.lean`, `pool.decoder`; Claude Code's `claude_schema.Record`).

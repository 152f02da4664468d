"""The one interface every harness (agent reader) implements.

A harness knows one agent's file layout and record format, nothing else: no I/O, no clock, no
metrics. The engine finds files under the agent's home, asks `match` what each one is, keeps one
`FileReader` per file, and feeds it parsed records (one JSON value per JSONL line, compressed or
not, or the whole document of a JSON file, `None` once that document is gone). Readers return
normalized events; records they do not understand are ignored, never errors: formats change
under us.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import ClassVar, Literal, Protocol

from ..events import Event

FileKind = Literal["jsonl", "zstd", "doc"]
"""An appended JSONL file, a zstd-compressed JSONL file (read whole), a whole JSON document."""


class FileReader(Protocol):
    def feed(self, record: object) -> list[Event]: ...


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

"""OpenCode (`opencode-ai`): its data folder, `$XDG_DATA_HOME/opencode` (`~/.local/share/opencode`).

Everything is in one SQLite database in WAL mode, `opencode.db` (`$OPENCODE_DB` moves it; the
home is then its folder). Only its append-only `event` table is read (`TableLog`: rows numbered
per session by `(aggregate_id, seq)`, the last number of each in `event_sequence`); the account
and credential tables, the logs and the snapshots are never opened. One reader follows the
whole database, so it knows every session: `opencode_database` says what its rows carry and
how they become events.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import ClassVar

from ...sources.places import user_home
from ..base import Defaults, FileKind, FileReader
from ..opencode_database import DatabaseReader

DATABASE = "opencode.db"


class OpenCode(Defaults):
    name: ClassVar[str] = "opencode"
    home_flag: ClassVar[str] = "opencode.home"
    watch_dirs: ClassVar[tuple[str, ...]] = (DATABASE, f"{DATABASE}-wal")
    holder_names: ClassVar[tuple[str, ...]] = ("opencode",)  # holds the database open

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        database = environ.get("OPENCODE_DB", "")
        if database and Path(database).is_absolute():
            return Path(database).parent
        data = environ.get("XDG_DATA_HOME")
        if data:
            return Path(data) / "opencode"
        return user_home(environ) / ".local" / "share" / "opencode"

    def match(self, rel: PurePosixPath) -> FileKind | None:
        return "sqlite" if rel.parts == (DATABASE,) else None

    def reader(self, rel: PurePosixPath) -> FileReader:
        return DatabaseReader()

"""Kilo Code CLI (`@kilocode/cli`, a fork of OpenCode): its data folder, `$XDG_DATA_HOME/kilo`
(`~/.local/share/kilo`).

Kilo resolves its folders with `xdg-basedir` on every system, macOS and Windows included (no
`Library/Application Support`, no `%APPDATA%`): `$XDG_DATA_HOME/kilo`, else
`<home>/.local/share/kilo`. Everything is in one SQLite database in WAL mode, `kilo.db`, with
OpenCode's tables and rows (`$KILO_DB`, an absolute path, moves it: the home is then its
folder). Only its append-only `event` table is read, by the reader OpenCode's harness uses too
(`opencode_database`); the account and credential tables, the logs and the snapshots are never
opened.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import ClassVar

from ..base import Defaults, FileKind, FileReader
from ..fields import home
from ..opencode_database import DatabaseReader

DATABASE = "kilo.db"


class KiloCode(Defaults):
    name: ClassVar[str] = "kilo-code"
    home_flag: ClassVar[str] = "kilo.home"
    watch_dirs: ClassVar[tuple[str, ...]] = (DATABASE, f"{DATABASE}-wal")
    holder_names: ClassVar[tuple[str, ...]] = ("kilo",)  # `kilo`, `.kilo`, `kilo.exe`

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        database = environ.get("KILO_DB", "")  # relative: below the data folder
        if database and Path(database).is_absolute():
            return Path(database).parent
        return home(environ, "XDG_DATA_HOME", ".local", "share") / "kilo"

    def match(self, rel: PurePosixPath) -> FileKind | None:
        return "sqlite" if rel.parts == (DATABASE,) else None

    def reader(self, rel: PurePosixPath) -> FileReader:
        return DatabaseReader()

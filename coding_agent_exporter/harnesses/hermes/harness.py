"""Hermes Agent (PyPI `hermes-agent`): its home, `$HERMES_HOME`, else `~/.hermes`
(`%LOCALAPPDATA%\\hermes` on Windows: `hermes_constants._get_platform_default_hermes_home`).

Everything is in one SQLite database in WAL mode, `state.db`: its `sessions` rows (updated in
place: running totals, the end) and its append-only `messages` (`state_db` says how they are
read and what they become). The FTS tables, `session_model_usage`, `async_delegations`, the
logs, `config.yaml` and the auth files are never opened.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import ClassVar

from ...sources.places import user_home
from ...sources.platform import current
from ..base import Defaults, FileKind, FileReader
from .state_db import StateReader

DATABASE = "state.db"


class Hermes(Defaults):
    name: ClassVar[str] = "hermes"
    home_flag: ClassVar[str] = "hermes.home"
    watch_dirs: ClassVar[tuple[str, ...]] = (DATABASE, f"{DATABASE}-wal")
    holder_names: ClassVar[tuple[str, ...]] = ("hermes",)  # holds state.db open while it runs

    @staticmethod
    def default_home(environ: Mapping[str, str], system: str | None = None) -> Path:
        configured = environ.get("HERMES_HOME", "").strip()
        if configured:
            return Path(configured)
        if (system or current().system) == "windows":
            local = environ.get("LOCALAPPDATA", "").strip()
            base = Path(local) if local else user_home(environ, "windows") / "AppData" / "Local"
            return base / "hermes"
        return user_home(environ, system) / ".hermes"  # macOS too

    def match(self, rel: PurePosixPath) -> FileKind | None:
        return "sqlite" if rel.parts == (DATABASE,) else None

    def reader(self, rel: PurePosixPath) -> FileReader:
        return StateReader()

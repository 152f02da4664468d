"""Factory Droid (npm `droid`): `~/.factory`, where `~` is `$FACTORY_HOME_OVERRIDE` if set, else
the user's home (`os.homedir()`: `HOME`, `USERPROFILE` on Windows; the same `.factory` folder
on Linux, macOS and Windows; `.factory-dev` only in Factory's own development builds).

Written against the files Droid 0.215.0 writes (`fixtures/droid/0.215.0/`, recorded from the
real program). Files read; everything else under the home is left alone (`settings.json`,
which holds the custom models' API keys, `auth*`, `logs/`, `cache/`, `certs/`, `telemetry/`,
`droids/`, `host.json`, the `*.settings.json.bak` copies, the background process and task
registries):

- `sessions/<cwd slug>/<session id>.jsonl` (and `sessions/<session id>.jsonl`, where Droid
  also looks for a session): the session's journal (`journal`).
- `sessions/<cwd slug>/<session id>.settings.json`: its settings, with its token totals
  (`settings`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import ClassVar

from ...sources.places import user_home
from ..base import Defaults, FileKind, FileReader
from .journal import JournalReader
from .settings import SettingsReader
from .shared import Shared

SESSIONS = "sessions"
SETTINGS = ".settings.json"
_ID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


class Droid(Defaults):
    name: ClassVar[str] = "droid"
    home_flag: ClassVar[str] = "droid.home"
    watch_dirs: ClassVar[tuple[str, ...]] = (SESSIONS,)
    holder_names: ClassVar[tuple[str, ...]] = ()  # opens its files only to write a record

    def __init__(self) -> None:
        self.shared: dict[str, Shared] = {}

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        override = environ.get("FACTORY_HOME_OVERRIDE", "")
        return (Path(override) if override else user_home(environ)) / ".factory"

    def match(self, rel: PurePosixPath) -> FileKind | None:
        parts = rel.parts
        if not 2 <= len(parts) <= 3 or parts[0] != SESSIONS:
            return None
        name = parts[-1]
        if name.endswith(".jsonl") and _ID.match(name.removesuffix(".jsonl")):
            return "jsonl"
        if name.endswith(SETTINGS) and _ID.match(name.removesuffix(SETTINGS)):
            return "doc"
        return None

    def reader(self, rel: PurePosixPath) -> FileReader:
        name = rel.name
        if name.endswith(SETTINGS):
            return SettingsReader(self.of(name.removesuffix(SETTINGS)))
        return JournalReader(self.of(name.removesuffix(".jsonl")))

    def of(self, session_id: str) -> Shared:
        found = self.shared.get(session_id)
        if found is None:
            found = self.shared[session_id] = Shared(session_id, self.shared)
        return found

    def read_with(self, rel: PurePosixPath) -> tuple[str, ...]:
        """The files read together with a session's journal when its turns are replayed: its
        settings file (the totals)."""
        if rel.name.endswith(".jsonl"):
            return (str(rel.with_name(rel.name.removesuffix(".jsonl") + SETTINGS)),)
        return ()

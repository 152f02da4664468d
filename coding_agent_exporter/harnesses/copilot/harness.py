"""GitHub Copilot CLI: `$COPILOT_HOME`, else `~/.copilot` (on every system: the program takes
`os.homedir()`, the user's profile folder on Windows; `--config-dir` moves it for one run).

Written against the files Copilot CLI 1.0.102 writes (`fixtures/copilot/1.0.102/`, recorded
from the real binary). Files read; everything else under the home is left alone (`config.json`,
`settings.json`, `session-store.db`, `logs/`, each session's `checkpoints/`, `files/`,
`rewind-file-snapshots/` and `workspace.yaml`, the `inuse.<pid>.hold` files and the
operation locks):

- `session-state/<session id>/events.jsonl`: the session's journal (`copilot.journal`).
- `session-state/<session id>/inuse.<pid>.lock` (its text is the pid): written when a process
  opens the session, removed when it exits cleanly (a killed one leaves it: its pid is then
  gone, or reused by a process started later). Each becomes one `LiveIndexRead` of that pid
  (`source` its path), with the status the journal tells; its removal a `LiveIndexRemoved`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import ClassVar

from ...events import Event, LiveIndexRemoved
from ..base import Defaults, FileKind, FileReader
from ..fields import home
from .journal import EventsReader, Lock, Shared

STATE = "session-state"
_SESSION = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)
_IN_USE = re.compile(r"^inuse\.(\d+)\.lock$")


class Copilot(Defaults):
    name: ClassVar[str] = "copilot"
    home_flag: ClassVar[str] = "copilot.home"
    watch_dirs: ClassVar[tuple[str, ...]] = (STATE,)
    holder_names: ClassVar[tuple[str, ...]] = ()  # the in-use locks name their process

    def __init__(self) -> None:
        self.shared: dict[str, Shared] = {}

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        return home(environ, "COPILOT_HOME", ".copilot")

    def match(self, rel: PurePosixPath) -> FileKind | None:
        parts = rel.parts
        if len(parts) != 3 or parts[0] != STATE or not _SESSION.match(parts[1]):
            return None
        if parts[2] == "events.jsonl":
            return "jsonl"
        return "text" if _IN_USE.match(parts[2]) else None

    def reader(self, rel: PurePosixPath) -> FileReader:
        session_id = rel.parts[1]
        shared = self.of(session_id)
        found = _IN_USE.match(rel.name)
        if found is not None:
            return InUseReader(shared, Lock(int(found.group(1)), rel.as_posix()))
        return EventsReader(session_id, shared)

    def of(self, session_id: str) -> Shared:
        found = self.shared.get(session_id)
        if found is None:
            found = self.shared[session_id] = Shared(session_id)
        return found


class InUseReader:
    """`inuse.<pid>.lock`: a process holds the session while the file is there."""

    def __init__(self, shared: Shared, lock: Lock) -> None:
        self.shared = shared
        self.lock = lock

    def feed(self, record: object) -> list[Event]:
        if record is None:  # removed: the process let the session go
            if self.shared.locks.pop(self.lock.source, None) is None:
                return []
            return [LiveIndexRemoved(source=self.lock.source)]
        if not isinstance(record, str) or record.strip() != str(self.lock.pid):
            return []  # not written whole yet (or not by this pid): no proof
        self.shared.locks[self.lock.source] = self.lock
        return [e for e in self.shared.live() if getattr(e, "source", None) == self.lock.source]

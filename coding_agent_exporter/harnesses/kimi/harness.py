"""Kimi CLI (PyPI `kimi-cli`): `~/.kimi`, or `$KIMI_SHARE_DIR` (Kimi CLI's own override; on every
system its share folder is `Path.home() / ".kimi"`, `kimi_cli/share.py`).

Written against the files Kimi CLI 1.51.0 writes (`fixtures/kimi/1.51.0/`, recorded from the
real program). Files read; everything else under the home is left alone (`config.toml` holds
the providers' API keys, `credentials/`, `mcp-oauth/`, `device_id`, `logs/`, each session's
`context.jsonl`, `state.json`, `notifications/`, `tasks/` and its sub-agents' `context.jsonl`,
`meta.json`, `prompt.txt`, `output`):

- `sessions/<md5 of the work dir>/<session id>/wire.jsonl`: the session (`wire`).
- `sessions/<md5>/<session id>/subagents/<agent id>/wire.jsonl`: a sub-agent's own events
  (`subagents`).
- `kimi.json`: `work_dirs` `[{path, kaos, last_session_id}]`: the work dir of each sessions
  folder (its name is the md5 of `path`, prefixed `<kaos>_` for a remote one).
- `telemetry/failed_*.jsonl`: the telemetry events Kimi CLI could not send (offline, or its
  endpoint unreachable), each with the session id, Kimi's version and the model's name: the only
  place the model is written. Kimi CLI sends them again on a later start and deletes them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import ClassVar

from ...events import Event, Kind, SessionSeen
from ..base import Defaults, FileKind, FileReader
from ..fields import home, nonempty, timestamp
from .subagents import SubagentWireReader
from .wire import WireReader

WORK_DIRS = "kimi.json"
LOCAL = "local"
UI_KINDS: dict[str, Kind] = {"print": "headless", "shell": "interactive"}
"""Telemetry's `ui_mode` → how the session ran (`acp` / `wire`: another program drove it)."""


@dataclass(frozen=True, slots=True)
class Told:
    """What Kimi's telemetry says of a session."""

    model: str | None
    version: str | None
    kind: Kind | None


class Shared:
    """What the home's files tell the sessions' readers: each sessions folder's work dir
    (`kimi.json`), each session's model, version and kind (`telemetry/`), and the sessions
    seen so far (the folder they are in, when first seen)."""

    def __init__(self) -> None:
        self.cwds: dict[str, str] = {}  # sessions folder name -> work dir
        self.told: dict[str, Told] = {}  # session id -> its telemetry
        self.sessions: dict[str, dict[str, float]] = {}  # folder -> session id -> first time
        self.folders: dict[str, str] = {}  # session id -> its folder

    def seen(self, session_id: str, folder: str, at: float) -> SessionSeen:
        """A session's wire was read: all that is known of it."""
        self.sessions.setdefault(folder, {}).setdefault(session_id, at)
        self.folders.setdefault(session_id, folder)
        return self.about(session_id, at)

    def about(self, session_id: str, at: float) -> SessionSeen:
        told = self.told.get(session_id, Told(None, None, None))
        folder = self.folders.get(session_id, "")
        return SessionSeen(
            session_id=session_id,
            at=at,
            cwd=self.cwds.get(folder),
            model=told.model,
            version=told.version,
            kind=told.kind,
        )

    def model(self, session_id: str) -> str:
        told = self.told.get(session_id)
        return told.model if told is not None and told.model else "unknown"


def folder_of(path: str, kaos: str) -> str:
    """The sessions folder Kimi CLI keeps a work dir's sessions in (`metadata.py`)."""
    digest = hashlib.md5(path.encode("utf-8"), usedforsecurity=False).hexdigest()
    return digest if kaos == LOCAL else f"{kaos}_{digest}"


class Kimi(Defaults):
    name: ClassVar[str] = "kimi"
    home_flag: ClassVar[str] = "kimi.home"
    watch_dirs: ClassVar[tuple[str, ...]] = ("sessions", WORK_DIRS, "telemetry")
    holder_names: ClassVar[tuple[str, ...]] = ()  # its process holds only `logs/kimi.log` open

    def __init__(self) -> None:
        self.shared = Shared()

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        return home(environ, "KIMI_SHARE_DIR", ".kimi")

    def match(self, rel: PurePosixPath) -> FileKind | None:
        parts = rel.parts
        if parts == (WORK_DIRS,):
            return "doc"
        if len(parts) == 2 and parts[0] == "telemetry" and parts[1].startswith("failed_"):
            return "jsonl" if rel.suffix == ".jsonl" else None
        if parts[:1] != ("sessions",) or rel.name != "wire.jsonl":
            return None
        if len(parts) == 4 or (len(parts) == 6 and parts[3] == "subagents"):
            return "jsonl"
        return None

    def read_with(self, rel: PurePosixPath) -> tuple[str, ...]:
        """The files read with a session's wire when its turns are replayed: the work dirs and
        the telemetry (its model), both read before it (shallower paths come first), and its
        sub-agents' wires."""
        parts = rel.parts
        if len(parts) != 4 or parts[0] != "sessions":
            return ()
        return (WORK_DIRS, "telemetry/failed_*.jsonl", f"{rel.parent}/subagents/*/wire.jsonl")

    def reader(self, rel: PurePosixPath) -> FileReader:
        parts = rel.parts
        if parts == (WORK_DIRS,):
            return WorkDirsReader(self.shared)
        if parts[0] == "telemetry":
            return TelemetryReader(self.shared)
        if len(parts) == 6:
            return SubagentWireReader(parts[2], parts[4], self.shared)
        return WireReader(parts[2], parts[1], self.shared)


class WorkDirsReader:
    """`kimi.json`: learns each sessions folder's work dir, and tells it for the sessions
    already read from that folder."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def feed(self, record: object) -> list[Event]:
        dirs = record.get("work_dirs") if isinstance(record, dict) else None
        events: list[Event] = []
        for entry in dirs if isinstance(dirs, list) else []:
            path = nonempty(entry.get("path")) if isinstance(entry, dict) else None
            if path is None:
                continue
            folder = folder_of(path, nonempty(entry.get("kaos")) or LOCAL)
            if self.shared.cwds.get(folder) == path:
                continue
            self.shared.cwds[folder] = path
            for session_id, at in self.shared.sessions.get(folder, {}).items():
                events.append(SessionSeen(session_id=session_id, at=at, cwd=path, main=False))
        return events


class TelemetryReader:
    """`telemetry/failed_<hex>.jsonl`: `{session_id, event, timestamp, context {version, model,
    ui_mode, …}}` per event; each session's model, version and kind, from its first record
    (a session's events may be spread over several files: the first file read tells it)."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        session_id = nonempty(record.get("session_id"))
        context = record.get("context")
        at = timestamp(record.get("timestamp"))
        if session_id is None or not isinstance(context, dict) or at is None:
            return []
        if session_id in self.shared.told:
            return []
        self.shared.told[session_id] = Told(
            nonempty(context.get("model")),
            nonempty(context.get("version")),
            UI_KINDS.get(str(context.get("ui_mode"))),
        )
        folder = self.shared.folders.get(session_id)
        if folder is None:
            return []  # its wire, read later, tells it
        return [self.shared.about(session_id, self.shared.sessions[folder][session_id])]

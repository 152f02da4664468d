"""Mistral Vibe: its session folder, `~/.vibe/logs/session` (or `$VIBE_HOME`, or wherever
`session_logging.save_dir` in its `config.toml` puts it, or `--vibe.session-dir`).

Its settings (`Vibe.settings`, from the `config.toml` the runtime reads) say where that folder is
and the model it is set to (`active_model`): a session may not name its model (2.26's TUI), and
then that is the one it used. The home its readers see is that session folder. Files read;
everything else is left alone (`plugins/`, `*.lock`, the session indexes,
`scheduled-loops.json`, checkpoints):

- `unified/<id>/…` and a sub-agent's `unified/child-<hex>/…`: the unified engine's stores
  (`vibe_unified`): journal segments, snapshot chunks, runtime states, and the lead's
  `meta.json` (cwd, start time, title, model).
- `<prefix>_<date>_<time>_<id8>/{messages.jsonl, meta.json}` and their `agents/<…>/` sub-agents:
  the legacy engine (`vibe_legacy`).
- `active/<id>.lock.json` `{acquired_at, process_id, session_id}`: a process runs the session.
  The status comes from the store: waiting while an approval callback is open, busy while a
  turn is, else idle; for a legacy session (which writes no status) it is derived from its
  turns. A lock left by a killed process names a dead pid: `state` drops it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from ...events import Event, LiveIndexRead, LiveIndexRemoved, SessionSeen, TitleSet, TitleSource
from ..base import Defaults, Document, FileKind, FileReader, Option, Probes, Settings
from ..fields import home, nonempty, timestamp
from .legacy import Legacy, MessagesReader, MetaReader
from .store import CHILD_PREFIX, Store
from .unified import ChunkReader, JournalReader, RuntimeReader
from .unified_records import history

UNIFIED = "unified"
ACTIVE = "active"
LOCK_SUFFIX = ".lock.json"
_NOT_LEGACY = frozenset({UNIFIED, ACTIVE, "plugins"})
_LEGACY_FILES: dict[str, FileKind] = {"messages.jsonl": "jsonl", "meta.json": "doc"}


class Vibe(Defaults):
    name: ClassVar[str] = "vibe"
    home_flag: ClassVar[str] = "vibe.home"
    watch_dirs: ClassVar[tuple[str, ...]] = (".",)
    holder_names: ClassVar[tuple[str, ...]] = ()  # the lock files say who runs
    options: ClassVar[tuple[Option, ...]] = (
        Option(
            "vibe.session-dir",
            "Vibe's session folder (default: `session_logging.save_dir` of Vibe's "
            "config.toml, else logs/session under --vibe.home).",
        ),
    )
    settings_file: ClassVar[str] = "config.toml"

    @staticmethod
    def settings(home: Path, options: Mapping[str, str], document: Document) -> Settings:
        """The session folder (`--vibe.session-dir` wins, then `save_dir`) and `active_model`."""
        logging_table = document.get("session_logging")
        save_dir = logging_table.get("save_dir") if isinstance(logging_table, dict) else None
        if options.get("vibe.session-dir"):
            sessions = Path(options["vibe.session-dir"]).expanduser()
        elif isinstance(save_dir, str) and save_dir:
            sessions = Path(save_dir).expanduser()
        else:
            sessions = home / "logs" / "session"
        model = document.get("active_model")
        return Settings(sessions, model if isinstance(model, str) and model else None)

    @classmethod
    def made(cls, settings: Settings, probes: Probes) -> Vibe:
        return cls(settings.model)

    def __init__(self, model: str | None = None) -> None:
        self.model = model  # `active_model` of Vibe's config: the stores may not name it
        self.stores: dict[str, Store] = {}
        self.legacy: dict[str, Legacy] = {}
        self.legacy_ids: set[str] = set()

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        return home(environ, "VIBE_HOME", ".vibe")

    def match(self, rel: PurePosixPath) -> FileKind | None:
        parts = rel.parts
        if len(parts) == 2 and parts[0] == ACTIVE:
            return "doc" if parts[1].endswith(LOCK_SUFFIX) else None
        if len(parts) >= 3 and parts[0] == UNIFIED:
            return _store_file(parts[2:], lead=not parts[1].startswith(CHILD_PREFIX))
        if parts and parts[0] in _NOT_LEGACY:
            return None
        if len(parts) == 2 or (len(parts) == 4 and parts[1] == "agents"):
            return _LEGACY_FILES.get(parts[-1])
        return None

    def read_with(self, rel: PurePosixPath) -> tuple[str, ...]:
        """The files read together with the one at `rel` (a session's store or folder): its
        readers share what each file tells (`Harness`: a session's turns replayed)."""
        parts = rel.parts
        if parts[0] == ACTIVE or len(parts) < 2:
            return ()
        if parts[0] == UNIFIED:
            return (f"{UNIFIED}/{parts[1]}/**/*",)
        return (f"{parts[0]}/*", f"{parts[0]}/agents/*/*")

    def reader(self, rel: PurePosixPath) -> FileReader:
        parts = rel.parts
        if parts[0] == ACTIVE:
            return LockReader(self, str(rel))
        if parts[0] == UNIFIED:
            store = self.store(parts[1])
            if parts[2] == "meta.json":
                return StoreMetaReader(store)
            if parts[2] == "journal":
                return JournalReader(store)
            if parts[2] == "chunks":
                return ChunkReader(store)
            return RuntimeReader(store)
        folder = "/".join(parts[:-1])
        session = self.legacy.get(folder)
        if session is None:
            session = self.legacy[folder] = Legacy(default_model=self.model)
        if parts[-1] == "meta.json":
            return LegacyMetaReader(self, session)
        return MessagesReader(session)

    def store(self, name: str) -> Store:
        found = self.stores.get(name)
        if found is None:
            found = Store(name, default_model=self.model, after_turn=history)
            self.stores[name] = found
        return found


def _store_file(rest: tuple[str, ...], lead: bool) -> FileKind | None:
    if rest == ("meta.json",):
        return "doc" if lead else None
    if len(rest) == 2 and rest[0] == "journal" and rest[1].endswith(".jsonl"):
        return "jsonl"
    if len(rest) == 2 and rest[0] == "chunks" and rest[1].endswith(".json"):
        return "doc"
    if len(rest) == 3 and rest[0] == "generations" and rest[2] == "runtime-state.json":
        return "doc"
    return None


class LockReader:
    """`active/<id>.lock.json`: written when a process takes the session, removed at its exit."""

    def __init__(self, harness: Vibe, source: str) -> None:
        self.harness = harness
        self.source = source
        self.session_id: str | None = None

    def feed(self, record: object) -> list[Event]:
        if record is None:
            if self.session_id is None:
                return []
            self.harness.store(self.session_id).lock = None
            return [LiveIndexRemoved(source=self.source)]
        if not isinstance(record, dict) or not _valid_lock(record):
            return []  # a torn write: nothing changes until the next one
        self.session_id = record["session_id"]
        entry = LiveIndexRead(
            pid=record["process_id"],
            session_id=record["session_id"],
            started_at=timestamp(record.get("acquired_at")),
            status=None,
            source=self.source,
            opened_after_start=True,
        )
        if record["session_id"] in self.harness.legacy_ids:
            return [_derived(entry)]
        store = self.harness.store(record["session_id"])
        store.lock = entry
        return store.live() if store.clock is not None else [_derived(entry)]


def _derived(entry: LiveIndexRead) -> LiveIndexRead:
    """A session whose status is not written (legacy) or not read yet: running while a turn is
    open, else idle."""
    return LiveIndexRead(
        pid=entry.pid,
        session_id=entry.session_id,
        started_at=entry.started_at,
        status=None,
        source=entry.source,
        derived=True,
        opened_after_start=True,
    )


def _valid_lock(record: Mapping[str, Any]) -> bool:
    pid = record.get("process_id")
    return (
        isinstance(pid, int)
        and not isinstance(pid, bool)
        and pid > 0
        and nonempty(record.get("session_id")) is not None
        and timestamp(record.get("acquired_at")) is not None
    )


class StoreMetaReader:
    """A unified lead's `meta.json`: cwd, start time, title, model (3.0: `config`)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def feed(self, record: object) -> list[Event]:
        root = self.store.root
        if not isinstance(record, dict) or root is None:
            return []
        store = self.store
        config = record.get("config")
        if isinstance(config, dict):
            store.model = nonempty(config.get("active_model")) or store.model
        environment = record.get("environment")
        cwd = environment.get("working_directory") if isinstance(environment, dict) else None
        at = timestamp(record.get("start_time"))
        store.tick(at)
        events: list[Event] = [
            SessionSeen(
                session_id=root,
                at=at or store.now(),
                cwd=nonempty(cwd),
                kind=store.kind,
                model=store.model or store.default_model,
            )
        ]
        title = nonempty(record.get("title"))
        if title:
            source: TitleSource = (
                "harness" if record.get("title_source") in ("auto", None) else "user"
            )
            events.append(TitleSet(session_id=root, title=title, source=source))
        return events


class LegacyMetaReader(MetaReader):
    """A legacy `meta.json`; its session id marks the session's lock as one without status."""

    def __init__(self, harness: Vibe, session: Legacy) -> None:
        super().__init__(session)
        self.harness = harness

    def feed(self, record: object) -> list[Event]:
        if isinstance(record, dict) and nonempty(record.get("session_id")):
            self.harness.legacy_ids.add(record["session_id"])
        return super().feed(record)

"""A session's turns for the console, replayed from its files: the spans `traces` would send.

The exporter keeps no span in memory for history (a turn's spans are sent once and forgotten),
so the console's view of a session reads that session's files again when asked (the engine
noted each file's sessions as it read them: `Session.files`), with a reader, state and span
writer of its own whose spans stay in memory (`traces.sdk.recording`): the same code as an
export, so the same trees, ids and times. The live state's view of the session is carried
over: a live session gets its live-index entry (its turns still open are drawn `running`,
their open work ended at the moment of the replay, a wait for the user under way as the `wait`
span it will be); any other has its open work ended as a refresh with no process would end it.
Waits that are over are not in any file (a live index holds only its present status): only the
traces sent while they happened have them. A replay is kept (`KEEP` of them) until one of the files
changes or the session's live entry does; replays run one at a time, so a burst of requests
costs one reading of the files.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from ..events import LiveIndexRead
from ..harnesses import make
from ..state.health import Stats
from ..state.state import State
from .app import PROBES, App
from .engine import Engine, Source

KEEP = 8
"""Replays kept, by session and the state of its files."""
LAST_BYTES = 16 * 1024 * 1024
"""A file longer than this is replayed from the first line of its last this many bytes: a
long session's last turns in about a second, not all of them in a minute (the turns before
are left out, `skipped_bytes`; the first one read may lack its start)."""
TRACES = 500
"""Turns kept of one replay (the console asks for at most this many)."""


class Replays:
    def __init__(self, app: App, clock: Callable[[], float] = time.time) -> None:
        self.app, self.clock = app, clock
        self._kept: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def turns(self, agent: str, session_id: str, limit: int) -> dict[str, Any] | None:
        """The session's last `limit` turns as span trees; None if there is no such session."""
        state = self.app.state
        with state.lock:
            session = state.sessions.get((agent, session_id))
            if session is None or not session.counted:
                return None
            files, entry = session.file_names, state.live.get((agent, session_id))
        with self._lock:
            key = (agent, session_id, _stats(files), _status(entry))
            found = self._kept.get(key)
            if found is None:
                found = self._replay(agent, session_id, files, entry)
                self._kept[key] = found
                while len(self._kept) > KEEP:
                    self._kept.popitem(last=False)
            self._kept.move_to_end(key)
        return {**found, "turns": found["turns"][-limit:] if limit else []}

    def _replay(
        self, agent: str, session_id: str, files: tuple[str, ...], entry: LiveIndexRead | None
    ) -> dict[str, Any]:
        from ..traces.sdk import recording  # OpenTelemetry only once a session is looked at
        from ..traces.spans import SpanWriter
        from ..traces.waterfall import turns

        started = time.monotonic()
        config = self.app.config
        tracer, finished = recording(TRACES)
        writer = SpanWriter(tracer, config.project, capture=config.capture)
        state = State(writer, config.pricing)
        found = config.settings[agent]
        source = Source(make(agent, found, PROBES), found.home)
        engine = Engine([source], state, Stats(), None, 0)
        skipped = engine.read_files(_with_context(source, files), LAST_BYTES)
        now = self.clock()
        with state.lock:
            if entry is not None:  # what the live state knows of its process
                state.apply(agent, entry)
            state.refresh(now, _alive(entry, now))
            if entry is not None and entry.status == "waiting":  # drawn as it would be sent
                since = entry.status_at if entry.status_at is not None else now
                session = state.session(agent, session_id)
                writer.waited(session, entry.reason or "input", since, max(since, now))
            running = writer.send_open(now)
        kept = finished()
        return {
            "agent": agent,
            "session_id": session_id,
            "total": kept.turns[session_id],
            "files": len(files),
            "skipped_bytes": skipped,
            "replayed_ms": round((time.monotonic() - started) * 1000, 1),
            "turns": turns(kept.kept.values(), session_id, running),
        }


def _with_context(source: Source, files: tuple[str, ...]) -> list[str]:
    """The session's files and those its agent's readers need read with them (`read_with`)."""
    read_with = getattr(source.harness, "read_with", None)
    if read_with is None:
        return list(files)
    found = dict.fromkeys(files)
    for name in files:
        try:
            rel = PurePosixPath(Path(name).relative_to(source.home))
        except ValueError:
            continue
        for pattern in read_with(rel):
            found.update(dict.fromkeys(str(p) for p in source.home.glob(pattern) if p.is_file()))
    return list(found)


def _alive(entry: LiveIndexRead | None, now: float) -> Callable[[int], float | None]:
    """The probe of a replay: the live entry's process runs, no other."""
    if entry is None:
        return lambda pid: None
    started = now if entry.started_at is None else entry.started_at
    return lambda pid: started if pid == entry.pid else None


def _status(entry: LiveIndexRead | None) -> tuple[Any, ...] | None:
    return None if entry is None else (entry.pid, entry.status, entry.status_at, entry.reason)


def _stats(files: tuple[str, ...]) -> tuple[tuple[int, int] | None, ...]:
    """Size and modification time of each file (and of a database's `-wal`)."""
    found: list[tuple[int, int] | None] = []
    for name in files:
        for path in (name, f"{name}-wal"):
            try:
                info = os.stat(path)
            except OSError:
                found.append(None)
                continue
            found.append((info.st_size, info.st_mtime_ns))
    return tuple(found)

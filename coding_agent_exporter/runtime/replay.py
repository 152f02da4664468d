"""A session's turns for the console, replayed from its files: the spans `traces` would send.

The exporter keeps no span in memory for history (a turn's spans are sent once and forgotten),
so the console's view of a session reads that session's files again when asked (the engine
noted each file's sessions as it read them: `Session.files`), with a reader, state and span
writer of its own whose sent spans stay in memory (`traces.sdk.recording`): the same code as an
export, so the same trees, ids and times. A replay is kept (`KEEP` sessions) and read on when
asked again: only what was appended to its files since, so a live session's view costs the
new records, not the session. The live state's view of the session is carried over: a live
session gets its live-index entry, so the turns it has not ended are drawn as they stand,
`running`, their open work ending at the moment of the answer (`Tree.parts`: nothing is ended
early), and a wait for the user under way as the `wait` span it will be; a session no longer
live has its open work ended as a refresh with no process ends it. Waits that are over are in
no file (a live index holds only its present status): only the traces sent while they happened
have them. A file written again from its start is replayed again from its start.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ..events import LiveIndexRead, LiveIndexRemoved
from ..harnesses import make
from ..state.health import Stats
from ..state.state import State
from ..traces.semconv import CONVERSATION_ID
from .app import PROBES, App
from .engine import Engine, Source

if TYPE_CHECKING:  # OpenTelemetry is imported only once a session is looked at
    from ..traces.sdk import Recent
    from ..traces.spans import SpanWriter

KEEP = 4
"""Sessions whose replay is kept, to be read on (one of a 100 MB session holds ~11 MB)."""
TRACES = 500
"""Turns kept of one replay (the console asks for at most this many)."""
LAST_BYTES = 16 * 1024 * 1024
"""A file longer than this is replayed from the first line of its last this many bytes: a
long session's last turns in about a second, not all of them in a minute (the turns before
are left out, `skipped_bytes`; the first one read may lack its start)."""
Key = tuple[str, str]


@dataclass(slots=True)
class _Replay:
    source: Source
    engine: Engine
    state: State
    writer: SpanWriter
    kept: Recent
    entry: LiveIndexRead | None = None
    skipped: int = 0
    seen: tuple[Any, ...] | None = None  # the files' stats and the live status answered for
    answer: dict[str, Any] | None = None


class Replays:
    def __init__(self, app: App, clock: Callable[[], float] = time.time) -> None:
        self.app, self.clock = app, clock
        self._kept: OrderedDict[Key, _Replay] = OrderedDict()
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
            key = (agent, session_id)
            replay = self._kept.pop(key, None) or self._begin(agent)
            self._kept[key] = replay
            while len(self._kept) > KEEP:
                self._kept.popitem(last=False)
            seen = (_stats(files), _status(entry))
            if replay.answer is None or replay.seen != seen:
                started = time.monotonic()
                if not self._read_on(replay, agent, files):
                    replay = self._kept[key] = self._begin(agent)  # a file was written again
                    self._read_on(replay, agent, files)
                replay.answer = self._answer(replay, agent, session_id, entry)
                replay.answer["replayed_ms"] = round((time.monotonic() - started) * 1000, 1)
                replay.answer["files"], replay.seen = len(files), seen
            found = replay.answer
        return {**found, "turns": found["turns"][-limit:] if limit else []}

    def _begin(self, agent: str) -> _Replay:
        from ..traces.sdk import recording
        from ..traces.spans import SpanWriter

        config = self.app.config
        tracer, kept = recording(TRACES)
        writer = SpanWriter(tracer, config.project, capture=config.capture)
        state = State(writer, config.pricing)
        found = config.settings[agent]
        source = Source(make(agent, found, PROBES), found.home)
        return _Replay(source, Engine([source], state, Stats(), None, 0), state, writer, kept)

    def _read_on(self, replay: _Replay, agent: str, files: tuple[str, ...]) -> bool:
        """What is new in the session's files, read; False if one was written again."""
        replay.skipped += replay.engine.read_files(_with_context(replay.source, files), LAST_BYTES)
        return not replay.engine.rewritten

    def _answer(
        self, replay: _Replay, agent: str, session_id: str, entry: LiveIndexRead | None
    ) -> dict[str, Any]:
        from ..traces.waterfall import UnderWay, turns, under_way, waiting

        now, state, writer = self.clock(), replay.state, replay.writer
        with state.lock:
            if replay.entry is not None and (entry is None or entry.source != replay.entry.source):
                state.apply(agent, LiveIndexRemoved(source=replay.entry.source))
            if entry is not None:  # what the live state knows of its process
                state.apply(agent, entry)
            replay.entry = entry
            state.refresh(now, _alive(entry, now))  # sends the turns now complete
            open_turns = []
            for tree in writer.unsent():
                outcome = tree.outcome if tree.ended_at is not None else "running"
                open_turns.append(UnderWay(outcome, tree.model, under_way(tree.parts(now))))
            more = []
            wait = state.waiting((agent, session_id))
            if wait is not None:
                where = writer.wait_under_way(state.session(agent, session_id), *wait)
                more = [waiting(where, wait[1], max(wait[1], now))] if where else []
        roots = replay.kept.turns[session_id] + sum(
            t.spans[0].attributes.get(CONVERSATION_ID) == session_id for t in open_turns
        )
        return {
            "agent": agent,
            "session_id": session_id,
            "total": roots,
            "skipped_bytes": replay.skipped,
            "turns": turns(replay.kept.kept.values(), open_turns, session_id, more),
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

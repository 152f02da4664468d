"""pi (`$PI_CODING_AGENT_DIR`, else `~/.pi/agent`) and oh-my-pi (`~/${PI_CONFIG_DIR:-.omp}`).

One transcript format.

Files read (everything else is left alone: `auth.json`, `models.json`/`models.yml`, the other
SQLite stores, logs, caches):

- pi: `sessions/--<cwd, '/' → '-'>--/<ISO time>_<uuidv7>.jsonl` below its agent folder.
- oh-my-pi: `agent/sessions/<bucket>/<ISO time>_<uuidv7>.jsonl`, and its sub-agents in
  `agent/sessions/<bucket>/<session basename>/<Name>.jsonl` (nested: `<Parent>.<Child>.jsonl`);
  `agent/history.db`, its prompt history (table `history{id, prompt, created_at, cwd,
  session_id}`), written by the TUI only: a session listed there is interactive, any other
  headless, and a session killed before its transcript was first written is known from there
  alone (its cwd and first prompt; its turn is not counted, a history row cannot be matched to a
  transcript's prompt entry).
- oh-my-pi's presence files `run/daemons/<hash>/clients/<pid>-<uuid>.json` and terminal
  breadcrumbs `agent/terminal-sessions/<terminal>`: which sessions run (`pi_live`).
- oh-my-pi's named profiles (`OMP_PROFILE=<name>`, `--profile <name>`): each
  `profiles/<name>/` is another root with all of the above (recorded:
  `fixtures/oh-my-pi/18.2.3/profile-*`). A session id met under two roots is told by the first
  one read (the default root's at catch-up: shallower paths are read first); the other copy is
  left alone (a stale copy would end the live one's open turn; what it adds later is not told).
  A profile's XDG folders (`$XDG_DATA_HOME/omp/profiles/<name>`, `$XDG_STATE_HOME/...`) lie
  outside the home and without its `agent/` level: not read.

What a transcript's entries say and how they become events is `pi_transcript`'s, with
`Shared`, what the files of one home tell each other. Neither agent records approvals; pi
leaves no trace of a running process.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import ClassVar

from ...events import Event, SessionSeen, TitleSet
from ...sources.places import user_home
from ..base import (
    Defaults,
    FileKind,
    FileReader,
    Probes,
    Settings,
    TableLog,
    TerminalLookup,
    no_terminal,
)
from ..fields import home, nonempty, title_of
from .live import BREADCRUMBS, PRESENCE, BreadcrumbReader, Live, PresenceReader
from .transcript import Shared, TranscriptReader

_TRANSCRIPT = re.compile(r"^[^/]+_([0-9A-Za-z-]+)\.jsonl$")
_FOLDER = re.compile(r"^[^/]+_([0-9A-Za-z-]+)$")
_PROFILE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")  # omp's own rule for a profile's name
HISTORY = "agent/history.db"
PROMPTS = TableLog(
    table="history",
    columns=("id", "prompt", "created_at", "cwd", "session_id"),
    group="session_id",
    seq="id",
)


class _PiFamily(Defaults):
    """The reader both agents share; subclasses say where the transcripts lie."""

    name: ClassVar[str]
    home_flag: ClassVar[str]
    sessions: ClassVar[tuple[str, ...]]  # the path of the sessions folder below the home
    watch_dirs: ClassVar[tuple[str, ...]]
    holder_names: ClassVar[tuple[str, ...]] = ()  # both append with one open() per entry
    history: ClassVar[bool] = False
    subagents: ClassVar[bool] = False  # `<session basename>/<Name>.jsonl`
    profiles: ClassVar[bool] = False  # `profiles/<name>/` roots of the same layout

    def __init__(self) -> None:
        self.shared = Shared(self.history)

    def split(self, rel: PurePosixPath) -> tuple[str, PurePosixPath]:
        """(the root of `rel`: "" or `profiles/<name>`, `rel` below that root)."""
        parts = rel.parts
        if self.profiles and len(parts) > 2 and parts[0] == "profiles" and profile(parts[1]):
            return f"profiles/{parts[1]}", PurePosixPath(*parts[2:])
        return "", rel

    def match(self, rel: PurePosixPath) -> FileKind | None:
        return self._match(self.split(rel)[1])

    def _match(self, rel: PurePosixPath) -> FileKind | None:
        if self.history and rel.as_posix() == HISTORY:
            return "sqlite"
        if self.shared.live is not None:
            if PRESENCE.match(rel.as_posix()):
                return "doc"
            if rel.parts[:-1] == BREADCRUMBS:
                return "text"  # plain text, read whole
        parts, depth = rel.parts, len(self.sessions)
        if parts[:depth] != self.sessions or not parts[-1].endswith(".jsonl"):
            return None
        if len(parts) == depth + 2 and _TRANSCRIPT.match(parts[-1]):
            return "jsonl"
        if self.subagents and len(parts) == depth + 3 and _FOLDER.match(parts[-2]):
            return "jsonl"
        return None

    def reader(self, rel: PurePosixPath) -> FileReader:
        root, inner = self.split(rel)
        if inner.as_posix() == HISTORY:
            return HistoryReader(self.shared)
        if self.shared.live is not None and PRESENCE.match(inner.as_posix()):
            return PresenceReader(self.shared.live, rel, root)
        if self.shared.live is not None and inner.parts[:-1] == BREADCRUMBS:
            return BreadcrumbReader(self.shared.live, rel, root)
        folder = _FOLDER.match(inner.parts[-2])
        if folder is None or len(inner.parts) != len(self.sessions) + 3:
            return TranscriptReader(self.shared, rel, origin=root)
        return TranscriptReader(
            self.shared, rel, root=folder.group(1), subagent=inner.stem, origin=root
        )


class Pi(_PiFamily):
    name: ClassVar[str] = "pi"
    home_flag: ClassVar[str] = "pi.home"
    sessions: ClassVar[tuple[str, ...]] = ("sessions",)
    watch_dirs: ClassVar[tuple[str, ...]] = ("sessions",)

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        return home(environ, "PI_CODING_AGENT_DIR", ".pi", "agent")  # pi's own: its agent folder


class OhMyPi(_PiFamily):
    name: ClassVar[str] = "oh-my-pi"
    home_flag: ClassVar[str] = "omp.home"
    sessions: ClassVar[tuple[str, ...]] = ("agent", "sessions")
    watch_dirs: ClassVar[tuple[str, ...]] = (
        "agent/sessions",
        HISTORY,
        f"{HISTORY}-wal",
        "run/daemons",
        "/".join(BREADCRUMBS),
        "profiles",  # whole, recursively: a profile created later is found as it appears
    )
    history: ClassVar[bool] = True
    subagents: ClassVar[bool] = True
    profiles: ClassVar[bool] = True

    def __init__(self, terminal: TerminalLookup = no_terminal) -> None:
        """`terminal`: a running process's terminal and start time (the I/O of liveness,
        done by `sources`; by default none is known: a history read offline)."""
        self.shared = Shared(self.history, live=Live(terminal))

    @classmethod
    def made(cls, settings: Settings, probes: Probes) -> OhMyPi:
        return cls(probes.terminal)

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        return user_home(environ) / (environ.get("PI_CONFIG_DIR") or ".omp")  # omp's own rule


def profile(name: str) -> bool:
    """A name omp accepts for a profile (`default` is the home's own root)."""
    return bool(_PROFILE.match(name)) and not name.endswith(".") and name != "default"


class HistoryReader:
    """oh-my-pi's `agent/history.db`: each row a prompt typed in the TUI."""

    log: ClassVar[TableLog] = PROMPTS

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def feed(self, record: object) -> list[Event]:
        row = record if isinstance(record, dict) else {}
        session, prompt = nonempty(row.get("session_id")), nonempty(row.get("prompt"))
        at = row.get("created_at")
        if session is None or not isinstance(at, int) or session in self.shared.interactive:
            return []
        self.shared.interactive.add(session)
        live: list[Event] = []  # oh-my-pi: a prompt before the first write is a running turn
        if self.shared.live is not None:
            self.shared.live.prompted[session] = float(at)
            live = self.shared.live.showing(session)
        seen = SessionSeen(
            session_id=session,
            at=float(at),
            cwd=nonempty(row.get("cwd")),
            kind="interactive",
            main=session in self.shared.seen,  # a transcript read before: only the kind
        )
        if prompt is None:
            return [seen, *live]
        title = title_of(prompt)
        return [seen, TitleSet(session_id=session, title=title, source="prompt"), *live]


__all__ = ["HistoryReader", "OhMyPi", "Pi"]

"""Grok Build: `~/.grok` (or `$GROK_HOME`).

Written against the files Grok Build 0.2.111 writes (`fixtures/grok/0.2.111/`, recorded from
the real binary; `docs/agents.md` lists where the documented layout was wrong). Files read;
everything else under the home is left alone (`auth.json`, `*.lock`, `*.tmp`, the search
database, the shared log, `system_prompt.txt`, `terminal/`):

- `active_sessions.json`: the live index, an array of `{session_id, pid, cwd, opened_at}`
  (`[]` when no session is open; a print run lists itself only with `GROK_TRACK_HEADLESS`); one
  pid can hold several sessions. Each session becomes one `LiveIndexRead` (its own `source`), a
  session that left the array a `LiveIndexRemoved`.
- `sessions/<encoded cwd>/<session id>/`: the session's own files, read by `grok_session`'s
  and `grok_updates`' readers (`grok_session` also says how the live status is made of the
  index and the phase log, `grok_turns` how a turn is made of two files).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar
from urllib.parse import unquote

from ...events import Event, LiveIndexRead, LiveIndexRemoved
from ..base import Defaults, FileKind, FileReader
from ..fields import home, timestamp
from .session import (
    ChatHistoryReader,
    EventsReader,
    PromptContextReader,
    Shared,
    SummaryReader,
)
from .subagents import MetaReader
from .updates import UpdatesReader

INDEX = "active_sessions.json"
_SESSION_FILES: dict[str, FileKind] = {
    "events.jsonl": "jsonl",
    "updates.jsonl": "jsonl",
    "chat_history.jsonl": "jsonl",
    "summary.json": "doc",
    "prompt_context.json": "doc",
}


class Grok(Defaults):
    name: ClassVar[str] = "grok"
    home_flag: ClassVar[str] = "grok.home"
    watch_dirs: ClassVar[tuple[str, ...]] = ("sessions", INDEX)
    holder_names: ClassVar[tuple[str, ...]] = ()  # the live index says who runs

    def __init__(self) -> None:
        self.shared: dict[str, Shared] = {}

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        return home(environ, "GROK_HOME", ".grok")

    def match(self, rel: PurePosixPath) -> FileKind | None:
        parts = rel.parts
        if parts == (INDEX,):
            return "doc"
        if len(parts) == 4 and parts[0] == "sessions":
            return _SESSION_FILES.get(parts[3])
        if len(parts) == 6 and parts[0] == "sessions" and parts[3] == "subagents":
            return "doc" if parts[5] == "meta.json" else None
        return None

    def reader(self, rel: PurePosixPath) -> FileReader:
        parts = rel.parts
        if parts == (INDEX,):
            return IndexReader(self)
        session_id = parts[2]
        shared = self.of(session_id)
        if len(parts) == 6:
            return MetaReader(session_id, parts[4], self.mark_child)
        if parts[3] == "events.jsonl":
            return EventsReader(session_id, decode_cwd(parts[1]), shared)
        if parts[3] == "updates.jsonl":
            return UpdatesReader(session_id, shared, self.mark_child)
        if parts[3] == "summary.json":
            return SummaryReader(session_id, shared, self.mark_child)
        if parts[3] == "prompt_context.json":
            return PromptContextReader(session_id, shared)
        return ChatHistoryReader(session_id, shared)

    def mark_child(self, session_id: str, parent: str | None, background: bool | None) -> None:
        """A sub-agent's own session folder (of `parent`, run in the `background`, if known):
        its readers read only its tool calls (and, background, its usage) from now on."""
        shared = self.of(session_id)
        shared.child = True
        shared.parent = parent or shared.parent
        if shared.parent is not None:
            shared.lead = self.of(shared.parent)
        shared.background = shared.background if background is None else background

    def of(self, session_id: str) -> Shared:
        found = self.shared.get(session_id)
        if found is None:
            found = self.shared[session_id] = Shared()
        return found


def decode_cwd(name: str) -> str | None:
    """A session folder's parent: the cwd URL-encoded (Rust `urlencoding`), or, for a cwd too long
    for a file name, `{slug}-{hash}` (the cwd is then in a `.cwd` file; it comes from
    `summary.json` instead)."""
    return unquote(name) if name.startswith("%") else None


class IndexReader:
    """`active_sessions.json`, rewritten (tmp, then rename) whenever a session opens or closes."""

    def __init__(self, harness: Grok) -> None:
        self.harness = harness
        self.listed: set[str] = set()

    def feed(self, record: object) -> list[Event]:
        if record is None:
            record = []
        if not isinstance(record, list):
            return []  # a torn write: nothing changes until the next one
        entries = [e for e in record if isinstance(e, dict) and _valid(e)]
        first: dict[int, float] = {}  # each pid's earliest registration: closest to its start
        for e in entries:
            opened = timestamp(e.get("opened_at"))
            if opened is not None:
                first[e["pid"]] = min(first.get(e["pid"], opened), opened)
        events: list[Event] = []
        listed: set[str] = set()
        for e in entries:
            session_id = e["session_id"]
            listed.add(session_id)
            shared = self.harness.of(session_id)
            shared.entry = LiveIndexRead(
                pid=e["pid"],
                session_id=session_id,
                started_at=first.get(e["pid"]),
                status=None,
                cwd=e["cwd"],
                source=f"{INDEX}#{session_id}",
                opened_after_start=True,
            )
            events += shared.live()
        for session_id in sorted(self.listed - listed):
            self.harness.of(session_id).entry = None
            events.append(LiveIndexRemoved(source=f"{INDEX}#{session_id}"))
        self.listed = listed
        return events


def _valid(entry: Mapping[str, Any]) -> bool:
    pid = entry.get("pid")
    return (
        isinstance(entry.get("session_id"), str)
        and bool(entry["session_id"])
        and isinstance(pid, int)
        and not isinstance(pid, bool)
        and pid > 0
        and isinstance(entry.get("cwd"), str)
        and bool(entry["cwd"])
        and timestamp(entry.get("opened_at")) is not None  # no registration time: no proof
    )

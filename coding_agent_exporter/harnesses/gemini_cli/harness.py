"""Gemini CLI: `$GEMINI_CLI_HOME/.gemini`, else `~/.gemini`.

Files read (everything else under the home is left alone: settings, OAuth credentials, tool
outputs, shell history):

- `tmp/<project slug>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl`: one session, a log of
  UPDATES. Line 1 is a header `{sessionId, projectHash, startTime, lastUpdated, kind}`; then
  message records `{id, timestamp, type: user|gemini|info|warning|error, content, ...}` upserted
  by `id` (a `gemini` record is written when its stream ends, again with `toolCalls` once its
  tools finished), `{"$set": {...}}` patches (`lastUpdated`, `summary`, `messages` = the whole
  list replaced) and `{"$rewindTo": id}`.
- `tmp/<slug>/chats/<parent id>/<child id>.jsonl`: a sub-agent (`kind: "subagent"`), started by
  the parent's `invoke_agent` call (`agentId` = the child's id).
- `tmp/<slug>/logs.json`: the TUI's prompt log; a session listed there is interactive.
- `projects.json`: `{"projects": {<abs path>: <slug>}}`, the cwd when a session does not say.

What a chat file's records say and how they become events is `gemini_chat`'s, with `Shared`,
what the files of one home tell each other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import ClassVar

from ...events import Event, SessionSeen
from ...sources.places import user_home
from ..base import Defaults, FileKind, FileReader
from ..fields import nonempty, timestamp
from .chat import ChatReader, Shared

_SESSION = re.compile(r"^session-\d{4}-\d\d-\d\dT\d\d-\d\d-[0-9A-Za-z_-]+\.jsonl$")
_CHILD = re.compile(r"^([0-9A-Za-z_-]+)\.jsonl$")


class GeminiCli(Defaults):
    name: ClassVar[str] = "gemini-cli"
    home_flag: ClassVar[str] = "gemini.home"
    watch_dirs: ClassVar[tuple[str, ...]] = ("tmp", "projects.json")
    holder_names: ClassVar[tuple[str, ...]] = ()  # the CLI opens its file per write only

    def __init__(self) -> None:
        self.shared = Shared()

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        configured = environ.get("GEMINI_CLI_HOME")  # the CLI's own stand-in for $HOME
        if configured:
            return Path(configured) / ".gemini"
        return user_home(environ) / ".gemini"

    def match(self, rel: PurePosixPath) -> FileKind | None:
        parts = rel.parts
        if parts == ("projects.json",):
            return "doc"
        if len(parts) < 3 or parts[0] != "tmp":
            return None
        if len(parts) == 3 and parts[2] == "logs.json":
            return "doc"
        if len(parts) == 4 and parts[2] == "chats" and _SESSION.match(parts[3]):
            return "jsonl"
        if len(parts) == 5 and parts[2] == "chats" and _CHILD.match(parts[4]):
            return "jsonl"
        return None

    def read_with(self, rel: PurePosixPath) -> tuple[str, ...]:
        """The files read together with a chat at `rel`: the index of projects and the TUI's
        log, which says the session is interactive (`Harness`: a session's turns replayed)."""
        parts = rel.parts
        return ("projects.json", f"tmp/{parts[1]}/logs.json") if len(parts) > 2 else ()

    def reader(self, rel: PurePosixPath) -> FileReader:
        parts = rel.parts
        if parts == ("projects.json",):
            return ProjectsReader(self.shared)
        if parts[-1] == "logs.json":
            return LogsReader(self.shared)
        parent = parts[3] if len(parts) == 5 else None
        return ChatReader(self.shared, parts[1], parent)


class ProjectsReader:
    """`projects.json`: project roots by slug, for sessions that do not name their workspace."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def feed(self, record: object) -> list[Event]:
        projects = record.get("projects") if isinstance(record, dict) else None
        for root, slug in projects.items() if isinstance(projects, dict) else []:
            if isinstance(root, str) and isinstance(slug, str) and root and slug:
                self.shared.roots[slug] = root
        return []


class LogsReader:
    """`tmp/<slug>/logs.json`, written by the TUI only: its sessions are interactive."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    def feed(self, record: object) -> list[Event]:
        events: list[Event] = []
        for entry in record if isinstance(record, list) else []:
            session = nonempty(entry.get("sessionId")) if isinstance(entry, dict) else None
            if session is None or session in self.shared.interactive:
                continue
            self.shared.interactive.add(session)
            at = timestamp(entry.get("timestamp"))
            if session in self.shared.seen and at is not None:  # read before this file
                events.append(SessionSeen(session_id=session, at=at, kind="interactive"))
        return events

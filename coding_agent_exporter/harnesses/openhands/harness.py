"""OpenHands CLI (PyPI `openhands`, 1.x, on `openhands-sdk`): its persistence folder,
`$OPENHANDS_PERSISTENCE_DIR`, else `~/.openhands` (Python's `expanduser`: `HOME`, on Windows
`USERPROFILE`; the same layout on Linux, macOS and Windows). `$OPENHANDS_CONVERSATIONS_DIR`
moves the conversations elsewhere: point `--openhands.home` at its parent then (the folder
must be named `conversations`).

Files read (see README.md beside this file); everything else is left alone:
`agent_settings.json` (the LLM settings, its API key included), `cli_config.json`, `mcp.json`,
`cache/`, `.eventlog.lock`:

- `conversations/<id>/base_state.json`: the conversation's state, rewritten whole
  (`StateReader`): work dir, model, tokens per model call.
- `conversations/<id>/events/`: one file per event, followed as ONE stream per folder
  (`doc_folder`, `sources.docfolder`; `EventsReader`): thousands of event files cost one
  follower and one reader, never one per file.
- the same two under `conversations/<id>/subagents/<sub id>/`: a sub-agent run by the `task`
  tool, counted under its lead.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import ClassVar

from ..base import Defaults, FileKind, FileReader
from ..fields import home
from .shared import Shared
from .state_doc import StateReader
from .stream import EventsReader

CONVERSATIONS, SUBAGENTS, EVENTS, STATE = "conversations", "subagents", "events", "base_state.json"


class OpenHands(Defaults):
    name: ClassVar[str] = "openhands"
    home_flag: ClassVar[str] = "openhands.home"
    watch_dirs: ClassVar[tuple[str, ...]] = (CONVERSATIONS,)
    holder_names: ClassVar[tuple[str, ...]] = ()  # it holds no file open between writes

    def __init__(self) -> None:
        self.shared = Shared()

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        return home(environ, "OPENHANDS_PERSISTENCE_DIR", ".openhands")

    def match(self, rel: PurePosixPath) -> FileKind | None:
        folder = _folder(rel.parts[:-1])
        return "doc" if folder is not None and rel.name == STATE else None

    def doc_folder(self, rel: PurePosixPath) -> bool:
        """A conversation's `events` folder: read as one stream (see `Harness`)."""
        return rel.name == EVENTS and _folder(rel.parts[:-1]) is not None

    def reader(self, rel: PurePosixPath) -> FileReader:
        parts = rel.parts[:-1]
        lead, sub = _folder(parts) or ("", None)
        conversation = "/".join(parts)
        session = _dashed(lead)
        subagent = _dashed(sub) if sub is not None else None
        if rel.name == EVENTS:
            return EventsReader(self.shared, conversation, session, subagent)
        return StateReader(self.shared, conversation, session, subagent)

    def read_with(self, rel: PurePosixPath) -> tuple[str, ...]:
        """A conversation's state document and events folder are read together (`Harness`)."""
        folder = "/".join(rel.parts[:-1])
        return (f"{folder}/{STATE}", f"{folder}/{EVENTS}")


def _folder(parts: tuple[str, ...]) -> tuple[str, str | None] | None:
    """(lead id, sub-agent id or None) of a conversation folder's parts, None for any other."""
    if len(parts) == 2 and parts[0] == CONVERSATIONS and _hex(parts[1]):
        return parts[1], None
    if len(parts) == 4 and parts[0] == CONVERSATIONS and parts[2] == SUBAGENTS and _hex(parts[1]):
        return (parts[1], parts[3]) if _hex(parts[3]) else None
    return None


def _hex(name: str) -> bool:
    return len(name) == 32 and all(c in "0123456789abcdef" for c in name)


def _dashed(hex_id: str) -> str:
    """The conversation id as the CLI shows it (`--resume <uuid>`)."""
    return str(uuid.UUID(hex_id))

"""Claude Code: `~/.claude` (or `$CLAUDE_CONFIG_DIR`).

Files read (everything else under the home is left alone, credentials included):

- `projects/<encoded cwd>/<session id>.jsonl`: the lead journal, one JSON record a line.
- `projects/<encoded cwd>/<session id>/subagents/agent-<agent id>.jsonl` (+ `.meta.json`):
  sub-agent journals and what launched them.
- `projects/<encoded cwd>/<session id>/subagents/workflows/<run id>/agent-<agent id>.jsonl`
  (+ `.meta.json`) and `projects/<encoded cwd>/<session id>/workflows/<run id>.json`: a
  workflow's agents and its run file (`claude_workflow`, 2.1.3xx).
- `projects/<encoded cwd>/<session id>/custom-title.json`: a `/rename` (2.1.3xx).
- `sessions/<pid>.json`: the live index, one file per running process.

The journals are `claude_journal`'s; the small files (a sub-agent's meta, a custom title, the live
index) are read here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from ...events import (
    Event,
    Kind,
    LiveIndexRead,
    LiveIndexRemoved,
    SubagentStarted,
    TitleSet,
)
from ..base import Defaults, FileKind, FileReader
from ..fields import home, timestamp
from .journal import JournalReader
from .schema import Record
from .workflow import RunReader

_PID_FILE = re.compile(r"^(\d+)\.json$")
_AGENT_FILE = re.compile(r"^agent-([A-Za-z0-9_-]+)\.(jsonl|meta\.json)$")


class ClaudeCode(Defaults):
    name: ClassVar[str] = "claude-code"
    home_flag: ClassVar[str] = "claude.home"
    watch_dirs: ClassVar[tuple[str, ...]] = ("projects", "sessions")
    live_dirs: ClassVar[tuple[str, ...]] = ("sessions",)  # the live index: read first
    holder_names: ClassVar[tuple[str, ...]] = ()  # the live index says who runs
    lean: ClassVar[type[Record]] = Record

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        return home(environ, "CLAUDE_CONFIG_DIR", ".claude")

    def match(self, rel: PurePosixPath) -> FileKind | None:
        parts = rel.parts
        if len(parts) == 2 and parts[0] == "sessions":
            return "doc" if _PID_FILE.match(parts[1]) else None
        if len(parts) < 3 or parts[0] != "projects":
            return None
        if len(parts) == 3:
            return "jsonl" if parts[2].endswith(".jsonl") else None
        if len(parts) == 4 and parts[3] == "custom-title.json":
            return "doc"
        if _run_file(parts):
            return "doc"
        if "subagents" in parts[3:-1]:
            found = _AGENT_FILE.match(parts[-1])
            if found:
                return "jsonl" if found.group(2) == "jsonl" else "doc"
        return None

    def reader(self, rel: PurePosixPath) -> FileReader:
        parts = rel.parts
        if parts[0] == "sessions":
            return LiveIndexReader(rel)
        session_id = parts[2].removesuffix(".jsonl")
        if len(parts) == 3:
            return JournalReader(session_id)
        if parts[-1] == "custom-title.json":
            return CustomTitleReader(session_id)
        if _run_file(parts):
            return RunReader(session_id, parts[4].removesuffix(".json"))
        found = _AGENT_FILE.match(parts[-1])
        assert found is not None
        if found.group(2) == "jsonl":
            return JournalReader(session_id, subagent_id=found.group(1))
        in_run = parts[-3:-2] == ("workflows",) and parts[-4:-3] == ("subagents",)
        return MetaReader(session_id, found.group(1), parts[-2] if in_run else None)


def _run_file(parts: tuple[str, ...]) -> bool:
    """`projects/<cwd>/<session>/workflows/<run id>.json`, a workflow's run file."""
    return len(parts) == 5 and parts[3] == "workflows" and parts[4].endswith(".json")


class MetaReader:
    """`agent-<id>.meta.json`: what kind of sub-agent this is and which tool call started it
    (a workflow's agent: which run, `run_id`; it runs in the background of its lead)."""

    __slots__ = ("run_id", "session_id", "subagent_id")

    def __init__(self, session_id: str, subagent_id: str, run_id: str | None = None) -> None:
        self.session_id = session_id
        self.subagent_id = subagent_id
        self.run_id = run_id

    def __reduce__(self) -> tuple[Any, ...]:
        """Its three names: what the catch-up cache keeps of a sleeping `.meta.json`."""
        return MetaReader, (self.session_id, self.subagent_id, self.run_id)

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        call_id, kind = record.get("toolUseId"), record.get("agentType")
        title, parent = record.get("description"), record.get("parentAgentId")
        return [
            SubagentStarted(
                session_id=self.session_id,
                at=None,
                subagent_id=self.subagent_id,
                call_id=call_id if isinstance(call_id, str) else None,
                subagent_type=kind if isinstance(kind, str) else None,
                title=title if isinstance(title, str) else None,
                background=True
                if self.run_id or record.get("requestShape") == "background"
                else None,
                parent_id=parent if isinstance(parent, str) else None,
                run_id=self.run_id,
            )
        ]


class CustomTitleReader:
    __slots__ = ("session_id",)

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id

    def feed(self, record: object) -> list[Event]:
        title = record.get("customTitle") if isinstance(record, dict) else None
        if not isinstance(title, str) or not title:
            return []
        return [TitleSet(session_id=self.session_id, title=title, source="user")]


class LiveIndexReader:
    """`sessions/<pid>.json`, rewritten by the process on every status change."""

    __slots__ = ("pid", "source")

    def __init__(self, rel: PurePosixPath) -> None:
        self.source = str(rel)
        self.pid = int(rel.name.removesuffix(".json"))

    def feed(self, record: object) -> list[Event]:
        if record is None:
            return [LiveIndexRemoved(source=self.source)]
        if not isinstance(record, dict) or record.get("pid") != self.pid:
            return [LiveIndexRemoved(source=self.source)]
        session_id = record.get("sessionId")
        if not isinstance(session_id, str) or not session_id:
            return [LiveIndexRemoved(source=self.source)]
        return [self._entry(record, session_id)]

    def _entry(self, record: Mapping[str, Any], session_id: str) -> LiveIndexRead:
        status, reason = record.get("status"), record.get("waitingFor")
        name, cwd = record.get("name"), record.get("cwd")
        job, parked = record.get("jobId"), record.get("parkedJobId")
        return LiveIndexRead(
            pid=self.pid,
            session_id=session_id,
            started_at=timestamp(record.get("startedAt")),
            status=status if isinstance(status, str) else None,
            reason=reason if isinstance(reason, str) and status == "waiting" else None,
            status_at=timestamp(record.get("statusUpdatedAt") or record.get("updatedAt")),
            updated_at=timestamp(record.get("updatedAt")),
            name=name if isinstance(name, str) and name else None,
            cwd=cwd if isinstance(cwd, str) else None,
            kind=_index_kind(record),
            hidden=record.get("spare") is True,
            job_id=job if isinstance(job, str) else None,
            parked_job_id=parked if isinstance(parked, str) else None,
            source=self.source,
        )


def _index_kind(record: Mapping[str, Any]) -> Kind | None:
    entry, kind = record.get("entrypoint"), record.get("kind")
    if isinstance(entry, str) and entry:
        return "interactive" if entry == "cli" else "headless"
    if isinstance(kind, str) and kind:
        return "interactive" if kind == "interactive" else "headless"
    return None

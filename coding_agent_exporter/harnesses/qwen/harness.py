"""Qwen Code (`@qwen-code/qwen-code`): `~/.qwen`, or `$QWEN_HOME` (Qwen Code's own override; on
every system its home is `<user's home>/.qwen`, `os.homedir()` joined with `.qwen`).

Written against the files Qwen Code 0.24.4 writes (`fixtures/qwen-code/0.24.4/`, recorded from
the real program). Files read; everything else under the home is left alone (`settings.json`,
`installation_id`, `oauth_creds.json`, `.env`, `sessions/<pid>.json` (it holds an IPC token),
`usage/token-usage-*.jsonl` (per-call copies of the usage the chats hold), `tmp/`, `debug/`):

- `projects/<cwd slug>/chats/<session id>.jsonl`: the lead's chat (`chat`).
- `projects/<cwd slug>/chats/<session id>.runtime.json`: written by the TUI as it starts
  (`{pid, session_id, work_dir, started_at}`), left behind at exit: a live index without a
  status (`derived`: running while a turn is open, else idle; a gone pid is stale).
- `projects/<cwd slug>/subagents/<session id>/agent-<agent id>.{jsonl,meta.json}`: a
  sub-agent's transcript and state (`subagents`).
- `usage_record.jsonl`: one line per session as its process ends: it ends a turn whose last
  model call failed (`chat.Shared`).

`$QWEN_RUNTIME_DIR` (or the setting that moves the runtime folder) moves `projects/`: point
`--qwen.home` at that folder then.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import ClassVar

from ...events import Event, LiveIndexRead, LiveIndexRemoved, SessionSeen, TurnEnded
from ...sources.places import user_home
from ..base import Defaults, FileKind, FileReader
from ..fields import home, nonempty, timestamp
from .chat import ChatReader, Shared
from .subagents import MetaReader, TranscriptReader

USAGE_RECORD = "usage_record.jsonl"
RUNTIME = ".runtime.json"


class QwenCode(Defaults):
    name: ClassVar[str] = "qwen-code"
    home_flag: ClassVar[str] = "qwen.home"
    watch_dirs: ClassVar[tuple[str, ...]] = ("projects", USAGE_RECORD)
    holder_names: ClassVar[tuple[str, ...]] = ()  # appends with one open() per record

    def __init__(self) -> None:
        self.shared: dict[str, Shared] = {}

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        """`$QWEN_HOME` as Qwen Code reads it (`~` and `~/...` under the user's home), else
        `.qwen` there."""
        configured = environ.get("QWEN_HOME", "")
        if configured == "~" or configured.startswith(("~/", "~\\")):
            rest = [p for p in configured[1:].replace("\\", "/").split("/") if p]
            return user_home(environ).joinpath(*rest)
        return home(environ, "QWEN_HOME", ".qwen")

    def match(self, rel: PurePosixPath) -> FileKind | None:
        parts = rel.parts
        if parts == (USAGE_RECORD,):
            return "jsonl"
        if len(parts) == 4 and parts[0] == "projects" and parts[2] == "chats":
            if parts[3].endswith(RUNTIME):
                return "doc"
            return "jsonl" if parts[3].endswith(".jsonl") else None
        if len(parts) == 5 and parts[0] == "projects" and parts[2] == "subagents":
            if parts[4].startswith("agent-") and parts[4].endswith(".meta.json"):
                return "doc"
            return "jsonl" if parts[4].startswith("agent-") and rel.suffix == ".jsonl" else None
        return None

    def read_with(self, rel: PurePosixPath) -> tuple[str, ...]:
        """The files read together with a chat at `rel` when its turns are replayed: its
        sub-agents' and `usage_record.jsonl` (the end of a turn whose last call failed)."""
        parts = rel.parts
        if len(parts) != 4 or parts[2] != "chats":
            return ()
        session_id = parts[3].removesuffix(".jsonl").removesuffix(RUNTIME)
        return (USAGE_RECORD, f"projects/{parts[1]}/subagents/{session_id}/*")

    def reader(self, rel: PurePosixPath) -> FileReader:
        parts = rel.parts
        if parts == (USAGE_RECORD,):
            return UsageRecordReader(self)
        if parts[2] == "chats":
            if parts[3].endswith(RUNTIME):
                return RuntimeReader(parts[3].removesuffix(RUNTIME), str(rel))
            session_id = parts[3].removesuffix(".jsonl")
            return ChatReader(session_id, self.of(session_id))
        name = parts[4].removeprefix("agent-")
        if name.endswith(".meta.json"):
            return MetaReader(parts[3], name.removesuffix(".meta.json"))
        return TranscriptReader(parts[3], name.removesuffix(".jsonl"), self.of(parts[3]))

    def of(self, session_id: str) -> Shared:
        found = self.shared.get(session_id)
        if found is None:
            found = self.shared[session_id] = Shared()
        return found


class UsageRecordReader:
    """`usage_record.jsonl`: `{sessionId, timestamp, startTime, models, tools, …}` once per
    session as its process ends (the totals are not read: the chats hold every response)."""

    def __init__(self, harness: QwenCode) -> None:
        self.harness = harness

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        session_id = nonempty(record.get("sessionId"))
        end = timestamp(record.get("timestamp"))
        if session_id is None or end is None:
            return []
        failed = self.harness.of(session_id).ended(end)
        return [TurnEnded(session_id=session_id, at=at, outcome="failed") for at in failed]


class RuntimeReader:
    """`<session id>.runtime.json`: the TUI process of a session."""

    def __init__(self, session_id: str, source: str) -> None:
        self.session_id = session_id
        self.source = source
        self.listed = False

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            if record is None and self.listed:
                self.listed = False
                return [LiveIndexRemoved(source=self.source)]
            return []
        pid = record.get("pid")
        started = timestamp(record.get("started_at"))
        session_id = nonempty(record.get("session_id")) or self.session_id
        if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0 or started is None:
            return []
        self.listed = True
        cwd = nonempty(record.get("work_dir"))
        return [
            SessionSeen(session_id=session_id, at=started, cwd=cwd, kind="interactive", main=False),
            LiveIndexRead(
                pid=pid,
                session_id=session_id,
                started_at=started,
                status=None,
                cwd=cwd,
                kind="interactive",
                source=self.source,
                derived=True,
                opened_after_start=True,
            ),
        ]

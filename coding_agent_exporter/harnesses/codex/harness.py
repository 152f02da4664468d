"""OpenAI Codex (CLI, TUI, VS Code): `$CODEX_HOME`, else `~/.codex`.

Files read (everything else under the home is left alone: `auth.json`, the SQLite stores, logs):

- `sessions/YYYY/MM/DD/rollout-<UTC stamp>-<thread id>[_<rollout id>].jsonl`, also compressed
  (`.jsonl.zst`) and under `archived_sessions/`: one file per thread, records
  `{timestamp, type, payload}`, `session_meta` first.
- `session_index.jsonl`: `{id, thread_name, updated_at}` lines, the newest per id wins.

Live: a thread is live while a process holds its writer lock (`writer_lock`, found in
`/proc/locks` by `sources.locks`, the lock never touched), or, without a lock file, while a
`codex` process holds its rollout open.

The rollouts are `codex_rollout`'s (which also says what a thread is and how its tokens count);
the index is read here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import ClassVar

from ...events import Event, TitleSet
from ..base import Defaults, FileKind, FileReader
from ..fields import TITLE_MAX, home, nonempty
from .rollout import RolloutReader

_ROLLOUT = re.compile(
    r"^rollout-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-([0-9a-fA-F-]{36})(?:_[0-9a-fA-F-]{36})?"
    r"\.jsonl(\.zst)?$"
)
_INDEX = "session_index.jsonl"
_LOCKS = "thread-writer-locks"


class Codex(Defaults):
    name: ClassVar[str] = "codex"
    home_flag: ClassVar[str] = "codex.home"
    watch_dirs: ClassVar[tuple[str, ...]] = ("sessions", "archived_sessions", _INDEX)
    holder_names: ClassVar[tuple[str, ...]] = ("codex",)  # no live index: who writes a thread

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        return home(environ, "CODEX_HOME", ".codex")

    def match(self, rel: PurePosixPath) -> FileKind | None:
        if rel.parts == (_INDEX,):
            return "jsonl"
        if len(rel.parts) < 2 or rel.parts[0] not in ("sessions", "archived_sessions"):
            return None
        found = _ROLLOUT.match(rel.name)
        if found is None:
            return None
        return "zstd" if found.group(2) else "jsonl"

    def writer_lock(self, rel: PurePosixPath) -> PurePosixPath | None:
        """The lock a rollout's writer holds: `thread-writer-locks/<thread>.lock` (an exclusive
        `flock` while a process writes the thread; the file is removed at a clean exit)."""
        found = _ROLLOUT.match(rel.name)
        return PurePosixPath(_LOCKS, f"{found.group(1)}.lock") if found else None

    def reader(self, rel: PurePosixPath) -> FileReader:
        if rel.parts == (_INDEX,):
            return IndexReader()
        found = _ROLLOUT.match(rel.name)
        assert found is not None
        return RolloutReader(found.group(1))


class IndexReader:
    """`session_index.jsonl`: thread names, the generated one and `/rename`s, newest last."""

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        thread, name = nonempty(record.get("id")), nonempty(record.get("thread_name"))
        if thread is None or name is None:
            return []
        return [TitleSet(session_id=thread, title=name[:TITLE_MAX], source="harness")]

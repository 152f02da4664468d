"""Cline CLI (npm `cline`, 3.x): its data folder, `$CLINE_DATA_DIR`, else `$CLINE_DIR/data`,
else `~/.cline/data` (Cline takes the user's home from `HOME`, then `USERPROFILE`, then
`HOMEDRIVE` + `HOMEPATH`: the same layout on Linux, macOS and Windows).

Files read (see README.md beside this file); everything else is left alone: `settings/` (the
provider's API key), `locks/` (the hub daemon's auth token), `db/` (SQLite copies of the
session files, and the hub's own stores), `logs/`, `cache/`:

- `sessions/<id>/<id>.json`: the session (`SessionReader`): cwd, model, title, whether it is
  interactive, and its live state: the pid of the CLI process that holds it and its `status`
  (`running`, `pending` = waiting for a tool call's approval, `idle`, then `completed` or
  `failed`). Rewritten whole on every change.
- `sessions/<id>/<id>.messages.json`: the lead's messages; `sessions/<id>/agent_<…>.messages.json`:
  a sub-agent's (`cline_messages`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from ...events import CostReported, Event, LiveIndexRead, LiveIndexRemoved, SessionSeen, TitleSet
from ...sources.places import user_home
from ..base import Defaults, FileKind, FileReader
from ..fields import nonempty, timestamp, title_of, usd
from .fields import LIVE_STATUS
from .messages import MessagesReader
from .shared import Shared

SESSIONS = "sessions"
MESSAGES = ".messages.json"


class Cline(Defaults):
    name: ClassVar[str] = "cline"
    home_flag: ClassVar[str] = "cline.home"
    watch_dirs: ClassVar[tuple[str, ...]] = (SESSIONS,)
    holder_names: ClassVar[tuple[str, ...]] = ()  # the session file names its process
    doc_limit: ClassVar[int] = 32 * 1024 * 1024
    """A messages file holds the whole conversation, every tool output included, rewritten
    after each message: a long session's passes the 1 MiB of other documents. Each rewrite is
    parsed whole (measured here: 32 MiB of 7,732 messages with 16 KB tool outputs parsed in
    0.05 s, +40 MB while parsed; its new messages then told in 0.02 s)."""

    def __init__(self) -> None:
        self.shared = Shared()

    @staticmethod
    def default_home(environ: Mapping[str, str]) -> Path:
        data = environ.get("CLINE_DATA_DIR", "").strip()
        if data:
            return Path(data)
        cline = environ.get("CLINE_DIR", "").strip()
        if cline:
            return Path(cline) / "data"
        user = environ.get("HOME") or environ.get("USERPROFILE")  # Cline's order, on every OS
        if not user and environ.get("HOMEDRIVE") and environ.get("HOMEPATH"):
            user = environ["HOMEDRIVE"] + environ["HOMEPATH"]
        return (Path(user) if user else user_home(environ)) / ".cline" / "data"

    def match(self, rel: PurePosixPath) -> FileKind | None:
        parts = rel.parts
        if len(parts) != 3 or parts[0] != SESSIONS:
            return None
        name = parts[2]
        if name == f"{parts[1]}.json" or name.endswith(MESSAGES):
            return "doc"
        return None

    def reader(self, rel: PurePosixPath) -> FileReader:
        folder, name = rel.parts[1], rel.parts[2]
        if name == f"{folder}.json":
            return SessionReader(self.shared, str(rel))
        return MessagesReader(self.shared, lead_file=name == f"{folder}{MESSAGES}")

    def read_with(self, rel: PurePosixPath) -> tuple[str, ...]:
        """The files read together with one of a session's (`Harness`: its turns replayed):
        its folder, the session file and every messages file."""
        return (f"{SESSIONS}/{rel.parts[1]}/*.json",) if len(rel.parts) == 3 else ()


class SessionReader:
    """`sessions/<id>/<id>.json`: what the session is, and whether a process holds it now."""

    def __init__(self, shared: Shared, source: str) -> None:
        self.shared = shared
        self.source = source
        self.told: tuple[object, ...] | None = None  # what was last said of the session
        self.title: str | None = None
        self.live: LiveIndexRead | None = None
        self.cost = 0.0

    def feed(self, record: object) -> list[Event]:
        if record is None:
            return self._gone()
        if not isinstance(record, dict):
            return []
        session_id = nonempty(record.get("session_id"))
        started = timestamp(record.get("started_at"))
        if session_id is None or started is None:
            return []  # a torn or foreign document: nothing changes until the next one
        metadata = record.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        events = self._seen(session_id, started, record, metadata)
        events += self._cost(session_id, record, metadata)
        usage = metadata.get("usage")
        if record.get("status") == "idle" and isinstance(usage, dict):
            spent = (usage.get("inputTokens"), usage.get("outputTokens"))
            if all(isinstance(n, int) for n in spent):
                events += self.shared.cut(session_id, (int(spent[0] or 0), int(spent[1] or 0)))
        return events + self._live(session_id, started, record)

    def _seen(
        self, session_id: str, started: float, record: Mapping[str, Any], meta: Mapping[str, Any]
    ) -> list[Event]:
        origin = meta.get("sessionHistoryOrigin")
        version = nonempty(origin.get("version")) if isinstance(origin, dict) else None
        seen = SessionSeen(
            session_id=session_id,
            at=started,
            cwd=nonempty(record.get("cwd")),
            kind="interactive" if record.get("interactive") is True else "headless",
            version=version,
            model=nonempty(record.get("model")),
        )
        events: list[Event] = []
        key = (seen.cwd, seen.kind, seen.version, seen.model)
        if key != self.told:
            self.told = key
            events.append(seen)
        title = nonempty(meta.get("title"))
        if title and title_of(title) != self.title:
            self.title = title_of(title)
            events.append(TitleSet(session_id=session_id, title=self.title, source="harness"))
        return events

    def _cost(
        self, session_id: str, record: Mapping[str, Any], meta: Mapping[str, Any]
    ) -> list[Event]:
        """What Cline says the lead's calls cost so far (`metadata.totalCost`, a running total;
        0 when it knows no price, which is no report)."""
        total = usd(meta.get("totalCost"))
        model = nonempty(record.get("model"))
        if total is None or model is None or total <= self.cost:
            return []
        self.cost = total
        return [CostReported(session_id=session_id, model=model, usd=total)]

    def _live(self, session_id: str, started: float, record: Mapping[str, Any]) -> list[Event]:
        status = LIVE_STATUS.get(str(record.get("status")))
        pid = record.get("pid")
        if status is None or not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            return self._gone()
        entry = LiveIndexRead(
            pid=pid,
            session_id=session_id,
            started_at=started,
            status=status,
            reason="approval" if status == "waiting" else None,
            name=self.title,
            cwd=nonempty(record.get("cwd")),
            kind="interactive" if record.get("interactive") is True else "headless",
            source=self.source,
            opened_after_start=True,
        )
        if entry == self.live:
            return []
        self.live = self.shared.live[session_id] = entry
        return self.shared.told(session_id)

    def _gone(self) -> list[Event]:
        if self.live is None:
            return []
        self.shared.live.pop(self.live.session_id, None)
        self.live = None
        return [LiveIndexRemoved(source=self.source)]

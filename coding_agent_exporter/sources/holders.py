"""Which running processes hold given files open: liveness for agents that keep no pid index.

Codex writes no live index; a thread is live while a Codex process holds its rollout (or its
thread lock) open. `holders(paths, names)` looks at the open files of processes whose name or
command line mentions one of `names` (so not every process on the machine is inspected) and
returns, per path, the (pid, start time) of each holder. Only the program's own name counts,
never its arguments. The exporter's own process is never
counted. Call it when a file changes, not on a timer.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

import psutil

from ..events import Event, LiveIndexRead, LiveIndexRemoved

Holder = tuple[int, float]  # pid, process start time (Unix seconds)


def holders(paths: Collection[Path], names: Iterable[str]) -> dict[Path, list[Holder]]:
    wanted = {os.path.realpath(p): p for p in paths}
    found: dict[Path, list[Holder]] = {}
    words = tuple(names)
    me = os.getpid()
    for process in psutil.process_iter(["pid", "name", "cmdline", "create_time"]):
        info = process.info
        if info["pid"] == me or not _mentions(info, words):
            continue
        try:
            open_files = process.open_files()
        except (psutil.Error, OSError):
            continue  # gone meanwhile, or not ours to look at
        for opened in open_files:
            path = wanted.get(opened.path)
            if path is not None:
                found.setdefault(path, []).append((info["pid"], float(info["create_time"] or 0)))
    return found


def _mentions(info: dict[str, object], words: tuple[str, ...]) -> bool:
    """The program itself is named so (its name, or its argv[0]); arguments do not count, so
    `tail -f ~/.codex/sessions/...` does not make a thread live."""
    cmdline = info.get("cmdline")
    program = os.path.basename(str(cmdline[0])) if isinstance(cmdline, list) and cmdline else ""
    names = (str(info.get("name") or ""), program)
    return any(word in name for word in words for name in names)


SHARED_RECENT = 16
"""Sessions of one shared file (a database of all sessions) that a holder can make live: the
ones with the latest records."""


class HeldSessions:
    """Live-index entries made from open files, for one agent that writes no live index.

    The engine notes which session each file belongs to (from the events its reader emits: the
    first session for a journal, the `SHARED_RECENT` latest ones for a shared database) and
    calls `probe` with the files that just changed; each holding process becomes an entry
    (`derived`: its state comes from the session's turns), an entry whose file is no longer
    held is removed. A holder that exits is noticed at once (`procwatch`), or at the next
    scrape (its pid is gone).

    Kept per file of history, so small: its sessions as a tuple (one for a journal), and held
    entries only for files some process holds.
    """

    def __init__(
        self,
        names: tuple[str, ...],
        find: Callable[[Collection[Path], Iterable[str]], dict[Path, list[Holder]]] = holders,
    ) -> None:
        self.names, self.find = names, find
        self.sessions: dict[Path, tuple[str, ...]] = {}  # path → its sessions, latest last
        self._entries: dict[Path, set[str]] = {}  # path → its held entries, if any

    def note(self, path: Path, session_id: str, *, shared: bool = False) -> None:
        known = self.sessions.get(path)
        if known is None or (shared and known[-1] != session_id):
            others = () if known is None or not shared else known
            latest = (*(s for s in others if s != session_id), session_id)
            self.sessions[path] = latest[-SHARED_RECENT:]
        # else: a journal belongs to its first session

    def forget(self, path: Path) -> None:
        """A file gone from the home: nothing of it is kept (its held entries end at the next
        `probe` of the path, or when their process exits)."""
        self.sessions.pop(path, None)

    def probe(self, paths: Iterable[Path]) -> list[Event]:
        wanted = [p for p in paths if p in self.sessions or p in self._entries]
        if not wanted:
            return []
        found = self.find(wanted, self.names)
        events: list[Event] = []
        for path in wanted:
            now = {
                f"held:{pid}:{session_id}": (pid, start, session_id)
                for session_id in self.sessions.get(path, ())
                for pid, start in found.get(path, [])
            }
            for gone in self._entries.get(path, set()) - set(now):
                events.append(LiveIndexRemoved(source=gone))
            for source, (pid, start, session_id) in now.items():
                events.append(
                    LiveIndexRead(
                        pid=pid,
                        session_id=session_id,
                        started_at=start,
                        status=None,
                        source=source,
                        derived=True,
                    )
                )
            if now:
                self._entries[path] = set(now)
            else:
                self._entries.pop(path, None)
        return events

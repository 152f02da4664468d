"""oh-my-pi's running processes: which session each one shows, and whether it is working.

oh-my-pi writes no live index. Two kinds of files name a running session together (recorded with
oh-my-pi 18.2.3, see `fixtures/oh-my-pi/18.2.3/interactive-live`):

- `run/daemons/<16 hex>/clients/<pid>-<uuid>.json`, `{pid, id, projectDir}`: one per running
  process (the TUI and `-p` alike), written as it starts, removed at a clean exit, left behind by
  a SIGKILL.
- `agent/terminal-sessions/<terminal>` (`pts-3` for `/dev/pts/3`): the last session file of that
  terminal, as lines: the cwd, the session file, `fresh` while that file is not written yet, and
  `cwdstat <dev> <ino>`. Rewritten when a session starts or is switched to, never deleted.

Each oh-my-pi root (the home, and each named profile's `profiles/<name>`) has both kinds of
files; a process shows the session named by its terminal's breadcrumb in its own root (the root
of its presence file: a profile's process and the home's may have used the same terminal, and
both roots keep their breadcrumb of it). Its terminal (the one on its
standard input, which oh-my-pi names the breadcrumb after) and its start time (which tells a pid
reused by another program later) are looked up once, when its presence file is read, through
the `TerminalLookup` the harness was made with (`Probes.terminal`; the real one is
`sources.terminals.omp_terminal`): this module does no I/O. A process without a terminal
(`omp -p` fed by a pipe) or whose terminal has no breadcrumb shows no session.

The status is the session's own: `busy` while a turn is open in its transcript, or, before the
transcript's first write (oh-my-pi writes none until the first turn ends), once the prompt history
holds a prompt of that session; `idle` otherwise. oh-my-pi records no approval prompt. Whatever
changes one of these re-emits the entries of the processes showing that session, under each
process's own `source`, so `state` keeps one entry per process with its latest status; a process
whose pid is gone (killed, or exited without removing its file) is stale there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ...events import Event, LiveIndexRead, LiveIndexRemoved
from ..base import TerminalLookup

PRESENCE = re.compile(r"(?:^|/)run/daemons/[0-9a-f]{16}/clients/(\d+)-[0-9A-Za-z-]+\.json$")
BREADCRUMBS = ("agent", "terminal-sessions")
_SESSION_FILE = re.compile(r"_([0-9A-Za-z-]+)\.jsonl$")


@dataclass(frozen=True, slots=True)
class Process:
    pid: int
    started: float
    terminal: tuple[str, str]  # (its root, its terminal)
    source: str
    cwd: str | None


@dataclass(slots=True)
class Live:
    """What the files of one home say about running processes and the state of their sessions."""

    lookup: TerminalLookup
    """pid → (its terminal as breadcrumbs name it, its start time), None when it is no oh-my-pi
    process with a terminal."""
    processes: dict[str, Process] = field(default_factory=dict)  # presence file → process
    crumbs: dict[tuple[str, str], tuple[str, str | None]] = field(default_factory=dict)
    """(root, terminal) → (session, cwd) of its breadcrumb"""
    open_turns: dict[str, float] = field(default_factory=dict)  # session → since
    prompted: dict[str, float] = field(default_factory=dict)  # session → its first prompt
    activity: dict[str, float] = field(default_factory=dict)  # session → latest entry
    written: set[str] = field(default_factory=set)  # sessions whose transcript exists

    def status(self, session_id: str) -> tuple[str, float | None]:
        if session_id in self.open_turns:
            return "busy", self.open_turns[session_id]
        if session_id not in self.written and session_id in self.prompted:
            return "busy", self.prompted[session_id]  # the first turn, not written yet
        return "idle", self.activity.get(session_id)

    def entry(self, process: Process) -> list[Event]:
        crumb = self.crumbs.get(process.terminal)
        if crumb is None:
            return []
        session_id, cwd = crumb
        word, since = self.status(session_id)
        return [
            LiveIndexRead(
                pid=process.pid,
                session_id=session_id,
                started_at=process.started,
                status=word,
                status_at=since,
                updated_at=self.activity.get(session_id, since),
                cwd=cwd or process.cwd,
                source=process.source,
            )
        ]

    def showing(self, session_id: str) -> list[Event]:
        """The entries of the processes that show `session_id`, with its current status."""
        return [
            event
            for process in self.processes.values()
            if self.crumbs.get(process.terminal, ("",))[0] == session_id
            for event in self.entry(process)
        ]

    def on_terminal(self, terminal: tuple[str, str]) -> list[Process]:
        return [p for p in self.processes.values() if p.terminal == terminal]


class PresenceReader:
    """`run/daemons/<hash>/clients/<pid>-<uuid>.json`: one running oh-my-pi process."""

    def __init__(self, live: Live, rel: PurePosixPath, root: str = "") -> None:
        """`rel`: below the home; `root`: the root it lies in ("" or `profiles/<name>`)."""
        self.live, self.source, self.root = live, rel.as_posix(), root
        found = PRESENCE.search(self.source)
        self.pid = int(found.group(1)) if found else 0

    def feed(self, record: object) -> list[Event]:
        known = self.live.processes.get(self.source)
        if record is None:
            if known is None:
                return []
            del self.live.processes[self.source]
            return [LiveIndexRemoved(source=self.source)]
        if known is not None:
            return self.live.entry(known)  # rewritten: the process is the same
        if not isinstance(record, dict) or record.get("pid") != self.pid or self.pid <= 0:
            return []
        looked = self.live.lookup(self.pid)
        if looked is None:
            return []  # gone, or no terminal: it shows no session
        cwd = record.get("projectDir")
        process = Process(
            pid=self.pid,
            started=looked[1],
            terminal=(self.root, looked[0]),
            source=self.source,
            cwd=cwd if isinstance(cwd, str) and cwd else None,
        )
        self.live.processes[self.source] = process
        return self.live.entry(process)


class BreadcrumbReader:
    """`agent/terminal-sessions/<terminal>`: the session the process on that terminal shows."""

    def __init__(self, live: Live, rel: PurePosixPath, root: str = "") -> None:
        self.live, self.terminal = live, (root, rel.name)

    def feed(self, record: object) -> list[Event]:
        crumb = parse_breadcrumb(record) if isinstance(record, str) else None
        if crumb is None:
            if self.live.crumbs.pop(self.terminal, None) is None:
                return []
            return [LiveIndexRemoved(source=p.source) for p in self.live.on_terminal(self.terminal)]
        self.live.crumbs[self.terminal] = crumb
        return [event for p in self.live.on_terminal(self.terminal) for event in self.live.entry(p)]


def parse_breadcrumb(text: str) -> tuple[str, str | None] | None:
    """(session id, cwd) of a breadcrumb, None when it names no session file."""
    lines = text.splitlines()
    if len(lines) < 2:
        return None
    found = _SESSION_FILE.search(PurePosixPath(lines[1]).name)
    if found is None:
        return None
    return found.group(1), lines[0] or None


__all__ = ["BreadcrumbReader", "Live", "PresenceReader", "parse_breadcrumb"]

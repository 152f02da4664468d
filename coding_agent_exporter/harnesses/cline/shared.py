"""`Shared`: what the files of one Cline home tell each other, and the live entry of a session
made of them.

A session's live state is in its session file (`status`, `pid`), but three things of it are only
in its messages file: whether its turn is still open (a TUI going `idle` after Esc ends it:
`cut`), the time of its latest prompt (a resumed session keeps its first `started_at` under a
new process: the process had started by that prompt) and a question the agent asks the user
(`ask_question`: the session file says `running` while the TUI waits for the answer). The two
files are read in any order, so each reader keeps its part here and whichever learns something
tells the session's entry again (`entry`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ...events import Event, LiveIndexRead, TurnEnded

ASK = "ask_question"
"""The tool with which the agent asks the user a question and waits for the answer."""


@dataclass(slots=True)
class Shared:
    """Per lead session: the time of its latest prompt, its open turn, the usage of the responses
    read and the time of its latest message, its open `ask_question` call, the entry its
    session file makes; the `spawn_agent` calls and the sub-agents by task, so a call and
    its sub-agent are linked whichever file is read first."""

    prompted: dict[str, float] = field(default_factory=dict)
    turns: dict[str, float] = field(default_factory=dict)  # session → its open turn's start
    spent: dict[str, tuple[int, int]] = field(default_factory=dict)  # lead's metrics read
    last: dict[str, float] = field(default_factory=dict)  # its lead file's latest message
    asking: dict[str, str] = field(default_factory=dict)  # session → its open question's call
    live: dict[str, LiveIndexRead] = field(default_factory=dict)  # as the session file says
    calls: dict[tuple[str, str], str] = field(default_factory=dict)  # (lead, task) → call
    agents: dict[tuple[str, str], str] = field(default_factory=dict)  # (lead, task) → agent
    parents: dict[tuple[str, str], str] = field(default_factory=dict)  # … → the sub-agent
    """(lead, task) → the sub-agent whose own `spawn_agent` call gave that task (nesting)."""

    def entry(self, session_id: str) -> LiveIndexRead | None:
        """The session's live entry, None when no process holds it: its session file's, with
        the later of its start and its latest prompt as the time its process had started by,
        and `waiting` (reason `question`) while it runs with a question open."""
        found = self.live.get(session_id)
        if found is None:
            return None
        opened = max(found.started_at or 0.0, self.prompted.get(session_id, 0.0)) or None
        if found.status == "busy" and session_id in self.asking:
            return replace(found, started_at=opened, status="waiting", reason="question")
        return replace(found, started_at=opened)

    def cut(self, session_id: str, usage: tuple[int, int]) -> list[Event]:
        """The session went idle (a TUI) with its turn open, its usage totals (written at the
        turn's end) no more than the responses read: the turn ended without an answer (Esc
        while a reply streamed, which writes nothing), interrupted, at its last message. Were
        the totals more, the messages file has a response not read yet: nothing is said."""
        if session_id not in self.turns or self.spent.get(session_id, (0, 0)) != usage:
            return []
        del self.turns[session_id]
        at = self.last.get(session_id, 0.0)
        return [TurnEnded(session_id=session_id, at=at, outcome="interrupted")]

    def told(self, session_id: str) -> list[Event]:
        """The session's entry again, when it has one (a reader learnt something of it)."""
        entry = self.entry(session_id)
        return [] if entry is None else [entry]

"""`Shared`: what the files of one Cline home tell each other, and the live entry of a session
made of them.

A session's live state is in its session file (`status`, `pid`), but two things of it are only
in its messages file: the time of its latest prompt (a resumed session keeps its first
`started_at` under a new process: the process had started by that prompt) and a question the
agent asks the user (`ask_question`: the session file says `running` while the TUI waits for
the answer). The two files are read in any order, so each reader keeps its part here and
whichever learns something tells the session's entry again (`entry`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ...events import Event, LiveIndexRead

ASK = "ask_question"
"""The tool with which the agent asks the user a question and waits for the answer."""


@dataclass(slots=True)
class Shared:
    """Per lead session: the time of its latest prompt, its open `ask_question` call, the entry
    its session file makes; the `spawn_agent` calls and the sub-agents by task, so a call and
    its sub-agent are linked whichever file is read first."""

    prompted: dict[str, float] = field(default_factory=dict)
    asking: dict[str, str] = field(default_factory=dict)  # session → its open question's call
    live: dict[str, LiveIndexRead] = field(default_factory=dict)  # as the session file says
    calls: dict[tuple[str, str], str] = field(default_factory=dict)  # (lead, task) → call
    agents: dict[tuple[str, str], str] = field(default_factory=dict)  # (lead, task) → agent

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

    def told(self, session_id: str) -> list[Event]:
        """The session's entry again, when it has one (a reader learnt something of it)."""
        entry = self.entry(session_id)
        return [] if entry is None else [entry]

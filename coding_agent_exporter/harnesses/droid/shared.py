"""What a Droid session's two files must know together, and how a sub-agent's session is
linked to the one that called it.

The settings file has no time of its own; its totals count at the journal's latest record
time. Totals read before the journal (the engine reads files in any order) wait here until the
journal gives a time (its first message, after its `session_start`: so the session is seen,
with its cwd, before any of its tokens count).

A sub-agent (`Task`) is a session of its own, with its own journal and settings file, whose
`session_start` (and whose settings' `subagent` tag) names the calling session and tool call
(`callingSessionId`, `callingToolUseId`). Its work counts for the lead session under the
sub-agent's id; `registry` (every session's `Shared`, kept by the harness) finds the lead of
a sub-agent's caller when that caller is a sub-agent too.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...events import Event, Kind, Usage, UsageTotalsRead


class Shared:
    def __init__(self, session_id: str, registry: Mapping[str, Shared] | None = None) -> None:
        self.session_id = session_id
        self.registry: Mapping[str, Shared] = registry if registry is not None else {}
        self.at: float | None = None  # the latest record time of the journal
        self.model: str | None = None  # the model of the latest response
        self.held: tuple[str, Usage] | None = None  # totals (model, usage) read before a time
        self.kind: Kind | None = None  # what the settings file's tags say of how it runs
        self.calling: str | None = None  # a sub-agent's: the session that called it
        self.call_id: str | None = None  # a sub-agent's: the tool call that launched it

    def called(self, session_id: object, call_id: object) -> None:
        """This session is a sub-agent of `session_id`, launched by the call `call_id`."""
        if isinstance(session_id, str) and session_id and session_id != self.session_id:
            self.calling = session_id
            self.call_id = call_id if isinstance(call_id, str) and call_id else self.call_id

    @property
    def subagent_id(self) -> str | None:
        """This session's id when it is a sub-agent (its work counts under it), else None."""
        return self.session_id if self.calling is not None else None

    def lead(self) -> str:
        """The session this one's work counts for: itself, or the lead of the one calling it
        (a caller whose files are not read yet is taken as the lead)."""
        here, seen = self, {self.session_id}
        while here.calling is not None:
            caller = self.registry.get(here.calling)
            if caller is None or caller.session_id in seen:
                return here.calling
            seen.add(caller.session_id)
            here = caller
        return here.session_id

    def parent_id(self) -> str | None:
        """The sub-agent that called this one, when its caller is itself a sub-agent."""
        caller = self.registry.get(self.calling or "")
        return caller.session_id if caller is not None and caller.calling is not None else None

    def totals(self, model: str, usage: Usage) -> list[Event]:
        """The session's totals are now `usage`: counted now if the journal gave a time, else
        held until it does."""
        if self.at is None:
            self.held = (model, usage)
            return []
        read = UsageTotalsRead(
            session_id=self.lead(),
            at=self.at,
            model=model,
            usage=usage,
            subagent_id=self.subagent_id,
        )
        return [read]

    def timed(self, at: float) -> list[Event]:
        """The journal told a record time: totals held until then now count, at that time."""
        self.at = at if self.at is None else max(self.at, at)
        held, self.held = self.held, None
        return self.totals(*held) if held is not None else []

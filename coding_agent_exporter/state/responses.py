"""Model responses counted once per agent: each response's usage by its message id (the largest
of its copies, while recent; older ids only remembered as seen), the totals an agent states for a
session, and the tokens, cost and messages they add to a session, its sub-agent and the history
totals.

Every model response is counted once per agent however many files repeat it (`--fork-session`
copies records verbatim; sub-agent and lead journals share message ids).
"""

from __future__ import annotations

import sys

from ..events import ModelResponded, Usage, UsageTotalsRead
from .base import Base
from .session import ZERO, Counted, Session

RECENT_MESSAGES = 4096
"""Responses whose usage may still grow (their copies are written close together); older ones
are only remembered as seen, so memory does not grow with the usage of all history."""


class Responses(Base):
    """Responses, usage totals and compactions: what they add to tokens, cost and messages."""

    def _responded(self, agent: str, event: ModelResponded) -> None:
        session = self.session(agent, event.session_id)
        if event.internal:
            self._internal_response(agent, session, event)
            return
        session.touch(event.at)
        if session.counted:
            self._recently(session)
        if event.main and event.model != session.model:
            session.model = sys.intern(event.model)
        key = (agent, event.message_id)
        counted = self._usage.get(key)
        if counted is None:
            if self._seen.add(agent, "message", event.message_id):
                return  # a response of a finished session, read again from a copy
            sub = self._subagent_of(session, event.subagent_id)
            counted = self._usage[key] = Counted(ZERO, session.session_id, sub, event.at)
            if len(self._usage) > RECENT_MESSAGES:
                self._usage.popitem(last=False)
            if not event.carried:
                session.messages += 1
                if sub is not None:
                    sub.messages += 1
                self.totals.messages[(agent, event.model, session.cwd or "")] += 1
        else:
            self._usage.move_to_end(key)
        old = counted.usage
        new = counted.usage = old.max(event.usage)
        owner = session
        if counted.owner_id != session.session_id:
            owner = self.session(agent, counted.owner_id)
        else:
            self.observer.responded(owner, counted.sub, event, new)
        if new != old:
            self._grown(agent, event.model, owner, counted, old, event.cache_write_1h)
        if event.reported_cost is not None and event.reported_cost > counted.reported:
            added = event.reported_cost - counted.reported
            counted.reported = event.reported_cost
            self.spend.reported(agent, event.model, owner.cwd or "", added)
            owner.reported_cost = (owner.reported_cost or 0.0) + added

    def _totals_read(self, agent: str, event: UsageTotalsRead) -> None:
        """A session's totals are now `event.usage`: what they grew by since the last totals
        read counts, as a response's growth does (tokens, cost), never the whole again. A
        smaller total (a file put back from an older copy) counts nothing until it passes
        what was counted. Not a message: the agent's responses are counted by their records.
        One entry per session, sub-agent and model (dropped with nothing: sessions are kept)."""
        session = self.session(agent, event.session_id)
        session.touch(event.at)
        key = (agent, event.session_id, event.subagent_id or "", event.model, event.scope)
        counted = self._totals.get(key)
        if counted is None:
            sub = self._subagent_of(session, event.subagent_id)
            counted = self._totals[key] = Counted(ZERO, session.session_id, sub, event.at)
        old = counted.usage
        counted.usage = old.max(event.usage)
        if counted.usage != old:
            self._grown(agent, event.model, session, counted, old)

    def _grown(
        self,
        agent: str,
        model: str,
        owner: Session,
        counted: Counted,
        old: Usage,
        cache_write_1h: int = 0,
    ) -> None:
        """A response's (or a session's totals') usage grew from `old`: its tokens and its cost
        count for `owner`."""
        new, sub, cwd = counted.usage, counted.sub, owner.cwd or ""
        delta = new.minus(old)
        owner.tokens = owner.tokens.plus(delta)
        if sub is not None:
            sub.tokens = sub.tokens.plus(delta)
        for kind, value in delta.as_dict().items():
            if value:
                self.totals.tokens[(agent, model, cwd, kind)] += value
        grown = (old, new, min(new.cache_write, cache_write_1h), counted.cost)
        cost = self.spend.responded(agent, model, cwd, counted.first_at, grown)
        owner.cost += cost - counted.cost
        counted.cost = cost

    def _internal_response(self, agent: str, session: Session, event: ModelResponded) -> None:
        """Housekeeping the agent did on its own (a review): totals only, never repeated."""
        if self._seen.add(agent, "message", event.message_id):
            return
        cwd = session.cwd or ""
        self.totals.messages[(agent, event.model, cwd)] += 1
        for kind, value in event.usage.as_dict().items():
            if value:
                self.totals.tokens[(agent, event.model, cwd, kind)] += value
        grown = (ZERO, event.usage, min(event.usage.cache_write, event.cache_write_1h), 0.0)
        self.spend.responded(agent, event.model, cwd, event.at, grown)

    def _compacted(self, agent: str, usage: Usage | None) -> None:
        self.totals.compactions[(agent,)] += 1
        for kind, value in (usage.as_dict() if usage else {}).items():
            if value:
                self.totals.compaction_tokens[(agent, kind)] += value

"""What every part of the fold shares: the sessions, the totals, the ids already counted, the
bounded label values, the sessions read latest and those that may have open work.

`State` (`state.py`) is built on this in steps of one job each: `responses.Responses` counts
model responses and usage totals, `work.Work` follows turns, tool calls and sub-agents, and
`State` dispatches events and decides liveness.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict, deque
from collections.abc import Callable

from ..events import LiveIndexRead, ReviewEnded
from .asleep import Asleep
from .observer import NoObserver, Observer
from .seen import SeenIds
from .session import Counted, Session, Subagent
from .sessions import Sessions
from .spend import Spend
from .totals import Totals

RECENT_REVIEWS = 1000
"""Automatic reviews kept for `sessions --include-internal` (all of them are counted)."""
MAX_LABEL_VALUES = 200
"""Distinct tool / sub-agent type label values per agent before the rest become "other"."""
RECENT_SESSIONS = 200
"""Sessions with the latest records kept in order (`recent`): what a session picker offers."""
BUSY_SLACK = 1024
"""Sessions noted as maybe busy, beyond twice those found with open work, before the ones
without any are let go (a catch-up touches every session of history; a refresh, which also lets
them go, only comes after it)."""


class Base:
    """The state's records and the helpers every step of the fold uses (single inheritance:
    `Responses`, then `Work`, then `State`, each adding one job)."""

    def __init__(self, observer: Observer | None = None, pricing: str | None = None) -> None:
        self.lock = threading.RLock()
        self.observer: Observer = observer or NoObserver()
        self.traced_since: float | None = None  # turns from then on are traces: exemplars
        self._waiting: dict[tuple[str, str], tuple[str, float]] = {}  # reason, since
        self.awake: dict[tuple[str, str], Session] = {}  # sessions in full (`sessions`: all)
        self.asleep = Asleep()  # finished sessions, in columns (`doze`)
        self._born = 0  # sessions known so far (`Session.born`)
        self.files_asleep: Callable[[str], bool] | None = None  # the engine's: `doze` works
        self._applied = 0  # events since the last pass of `doze`
        self._stirred: set[tuple[str, str]] = set()  # sessions named since then
        self._drowsy: set[tuple[str, str]] = set()  # sessions that may fall asleep next time
        self._busy: set[tuple[str, str]] = set()  # sessions that may have open work
        self.touched: set[tuple[str, str]] = set()  # sessions told of since `take_touched`
        self._touched_all = False  # more than `touched` keeps: all of them
        self.recent: OrderedDict[tuple[str, str], None] = OrderedDict()  # latest read last
        self._busy_limit = BUSY_SLACK  # `_busy` is pruned beyond this size
        self.entries: dict[tuple[str, str], LiveIndexRead] = {}  # (agent, index file) → entry
        self.live: dict[tuple[str, str], LiveIndexRead] = {}  # (agent, session id) → holder
        self.totals = Totals()
        self.spend = Spend(pricing)
        self.reviews: deque[tuple[str, ReviewEnded]] = deque(maxlen=RECENT_REVIEWS)
        # (agent, message id) → what is counted of a recent response (`Counted`)
        self._usage: OrderedDict[tuple[str, str], Counted] = OrderedDict()
        # (agent, session id, sub-agent id or "", model) → what is counted of its totals
        self._totals: dict[tuple[str, str, str, str, str], Counted] = {}
        self._seen = SeenIds()
        self._labels: dict[tuple[str, str], set[str]] = {}

    @property
    def sessions(self) -> Sessions:
        """Every session, awake or asleep (read-only: a sleeping one is given as a copy)."""
        return Sessions(self.awake, self.asleep)

    def session(self, agent: str, session_id: str) -> Session:
        """The session, awake: woken if it slept, made if it is new."""
        key = (agent, session_id)
        found = self.awake.get(key)
        if found is None:
            found = self.asleep.woken(agent, session_id)
            if found is None:
                found = Session(agent=agent, session_id=session_id, born=self._born)
                self._born += 1
            self.awake[key] = found
        return found

    def _recently(self, session: Session) -> None:
        key = (session.agent, session.session_id)
        self.recent[key] = None
        self.recent.move_to_end(key)
        if len(self.recent) > 2 * RECENT_SESSIONS:
            self.recent.popitem(last=False)

    def _subagent_of(self, session: Session, agent_id: str | None) -> Subagent | None:
        if agent_id is None:
            return None
        found = session.subagent(None, agent_id)
        if found is None:
            found = Subagent(agent_id=agent_id)
            session.add_subagent(agent_id, found)
        return found

    def _bounded(self, agent: str, label: str, value: str) -> str:
        values = self._labels.setdefault((agent, label), set())
        if value in values:
            return value
        if len(values) >= MAX_LABEL_VALUES:
            return "other"
        values.add(value)
        return value


def interned(text: str | None) -> str | None:
    """One copy of a value many sessions share (a project's cwd, a version, a model)."""
    return None if text is None else sys.intern(text)

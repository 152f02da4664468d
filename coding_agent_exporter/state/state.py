"""All that the exporter knows, folded from events: sessions, live entries and history totals.

`State.apply(agent, event)` is called by the reading loop; `State.refresh(now, probe)` decides
which sessions are live and closes the work of sessions whose process is gone; views (metrics,
`sessions`, the console) read under `State.lock`. Totals are tallies keyed by label values,
kept apart from the sessions so they only ever grow (Prometheus counters) and come out the same
after a restart, because they are rebuilt from the same files.

Every model response, prompt and tool call is counted once per agent however many files repeat
it (`--fork-session` copies records verbatim; sub-agent and lead journals share message ids).

`State` is built in steps of one job each: `base.Base` (what they share), `responses.Responses`
(model responses and usage totals), `work.Work` (turns, tool calls, sub-agents); this module
dispatches the events and decides liveness.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict

from ..events import (
    ContextCompacted,
    CostReported,
    Event,
    LiveIndexRead,
    LiveIndexRemoved,
    ModelFailed,
    ModelResponded,
    ReviewEnded,
    RunLaunched,
    SessionClosed,
    SessionSeen,
    SubagentEnded,
    SubagentStarted,
    TitleSet,
    ToolCallEnded,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
    UsageTotalsRead,
)
from .asleep import Asleep
from .base import BUSY_SLACK, RECENT_SESSIONS, interned
from .labels import live_state
from .liveness import Probe, alive, holders
from .observer import NoObserver
from .session import Session
from .work import Work

DOZE_EVERY = 1024
"""Events applied between two passes of `doze`."""
MAX_TOUCHED = 2048
"""Sessions noted as told of (`touched`) before they are forgotten for "all of them": a catch-up
names every session of history, and nobody takes them unless a console is open."""
ABANDON_AFTER = 120.0
"""A session with no live process and an open turn is closed this long after its last record."""
IDLE_SETTLE = 2.0
"""A live index gone idle ends an open turn only this long after it said so: the journal's own
end, written just before, can reach the reader after the index (the two folders are watched
apart), and it is the one that counts, so a live run and a recount agree."""
HELD_QUIET = 1800.0
"""A session kept live only by a process holding its files is no longer live after this long
without a record and without an open turn."""


class State(Work):
    def apply(self, agent: str, event: Event) -> None:
        session_id = getattr(event, "session_id", None)
        if isinstance(session_id, str):  # work may open only through one of its events
            key = (agent, session_id)
            self._busy.add(key)
            self.touched.add(key)
            self._stirred.add(key)
        match event:
            case LiveIndexRead():
                self.entries[(agent, event.source)] = event
                session = self.session(agent, event.session_id)
                session.cwd = session.cwd or interned(event.cwd)
                session.kind = session.kind or event.kind
                if event.name:
                    session.set_title(event.name, "process")
            case LiveIndexRemoved():
                self.entries.pop((agent, event.source), None)
            case SessionSeen():
                self._session_seen(agent, event)
            case SessionClosed():
                session = self.session(agent, event.session_id)
                session.touch(event.at)
                session.closed = event.closed
            case TitleSet():
                self.session(agent, event.session_id).set_title(event.title, event.source)
            case ModelResponded():
                self._responded(agent, event)
            case UsageTotalsRead():
                self._totals_read(agent, event)
            case CostReported():
                session = self.session(agent, event.session_id)
                added = self.spend.reported_total(agent, event, session.cwd or "")
                session.reported_cost = (session.reported_cost or 0.0) + added
            case ModelFailed():
                session = self.session(agent, event.session_id)
                sub = self._subagent_of(session, event.subagent_id)
                self.observer.failed(session, sub, event)
            case TurnStarted():
                self._turn_started(agent, event)
            case TurnEnded():
                self._turn_ended(self.session(agent, event.session_id), event.at, event.outcome)
            case ToolCallStarted():
                self._tool_started(agent, event)
            case ToolCallEnded():
                session = self.session(agent, event.session_id)
                self._tool_ended(session, event.call_id, event.outcome, event.at, event.result)
            case SubagentStarted():
                self._subagent_started(agent, event)
            case SubagentEnded():
                session = self.session(agent, event.session_id)
                sub = session.subagent(event.call_id, event.subagent_id)
                if sub is not None:
                    self._subagent_ended(session, sub, event.outcome, event.at)
            case RunLaunched():
                self._run_launched(agent, event)
            case ReviewEnded():
                if not self._seen.add(agent, "review", event.review_id):
                    outcome = self._bounded(agent, "review_outcome", event.outcome)
                    self.totals.reviews[(agent, outcome)] += 1
                    self.reviews.append((agent, event))
            case ContextCompacted():
                if not self._seen.add(agent, "compaction", event.compaction_id):
                    self._compacted(agent, event.usage)
        if len(self._busy) > self._busy_limit:  # after the event: it may have opened work
            self._prune_busy()
        self._applied += 1
        if self._applied >= DOZE_EVERY:
            self.doze()
            if len(self.touched) > MAX_TOUCHED:  # nobody took them (no console open)
                self.touched, self._touched_all = set(), True

    def rank_recent(self) -> None:
        """`recent` made of the sessions with the latest records (a catch-up reads the files in
        the order of their paths, not of their times): once, after it."""
        latest = heapq.nlargest(
            RECENT_SESSIONS,
            (b for b in self.sessions.briefs() if b.counted and b.updated_at is not None),
            key=lambda b: (b.updated_at, b.key[1]),
        )
        self.recent = OrderedDict((b.key, None) for b in reversed(latest))

    def doze(self, *, everything: bool = False) -> None:
        """Finished sessions whose files all sleep (`files_asleep`, told by the engine) fall
        asleep (`asleep`): those quiet since the last pass, or with `everything` (the end of a
        catch-up) every awake one. Not a live one, nor one waiting, nor any while traces are
        written (spans keep their sessions). One whose files are not all asleep yet is looked at
        again at the next pass; one with open work, live or waiting when its next event names it
        (or at the end of the next catch-up): a pass costs what was read since the last."""
        self._applied = 0
        stirred, self._stirred = self._stirred, set()
        if self.files_asleep is None or type(self.observer) is not NoObserver:
            self._drowsy = set()
            return
        if everything:
            candidates, self._drowsy = set(self.awake), set()
        else:
            candidates, self._drowsy = self._drowsy - stirred, stirred
        asleep = self.files_asleep
        for key in candidates:
            session = self.awake.get(key)
            if session is None or not self._finished(key, session):
                continue
            files = session.file_names
            if all(map(asleep, files)):
                del self.awake[key]
                self.asleep.put(session)
            else:
                self._drowsy.add(key)

    def _finished(self, key: tuple[str, str], session: Session) -> bool:
        """No open work, not live, not waiting, read from files (a session only named by an
        index stays awake)."""
        if session.files is None or key in self.live or key in self._waiting:
            return False
        return Asleep.can_sleep(session)

    def waiting(self, key: tuple[str, str]) -> tuple[str, float] | None:
        """Why and since when the live session waits for the user, while it does."""
        return self._waiting.get(key)

    def take_touched(self) -> set[tuple[str, str]] | None:
        """The sessions events were applied to since the last call (for `web.live`); None: too
        many to list (`MAX_TOUCHED`), take them all as changed."""
        touched, self.touched = self.touched, set()
        if self._touched_all:
            self._touched_all = False
            return None
        return touched

    def _session_seen(self, agent: str, event: SessionSeen) -> None:
        session = self.session(agent, event.session_id)
        session.touch(event.at)
        cwd, version = interned(event.cwd), interned(event.version)  # shared by many sessions
        if event.main:
            session.cwd = cwd or session.cwd
            session.kind = event.kind or session.kind
            session.version = version or session.version
            session.model = interned(event.model) or session.model
        else:  # a sub-agent's file read before the lead's: fill in only what is missing
            session.cwd = session.cwd or cwd
            session.kind = session.kind or event.kind
            session.version = session.version or version
        if not session.counted:
            session.counted = True
            self.totals.sessions[(agent, session.cwd or "")] += 1
        self._recently(session)

    def _prune_busy(self) -> None:
        """Let go of the sessions noted as maybe busy that have no open work (a refresh would
        only skip them): what is kept stays within twice those that have, plus a margin."""
        self._keep_busy({key for key in self._busy if _has_open_work(self.awake.get(key))})

    def _keep_busy(self, busy: set[tuple[str, str]]) -> None:
        """`busy` as the sessions that may have open work, in a new set (a set emptied in place
        keeps its room), and the size it may grow to before it is pruned again."""
        self._busy = busy
        self._busy_limit = 2 * len(busy) + BUSY_SLACK

    # -- liveness ----------------------------------------------------------------------------

    def refresh(self, now: float, probe: Probe) -> None:
        """Decide which sessions are live; close the open work of those whose process is gone."""
        self.live, stale = holders(
            ((agent, entry) for (agent, _), entry in self.entries.items()), probe
        )
        self._settle_held(now, probe)
        self._note_waits(now)
        for key, entry in self.live.items():
            session = self.session(*key)
            if entry.status in ("idle", "shell") and session.turn_open_at is not None:
                at = entry.status_at or now
                settled = entry.status_at is None or now - at >= IDLE_SETTLE
                if at >= session.turn_open_at and settled:
                    self._close(session, at, foreground_only=True)
        idle = 0
        for key in list(self._busy):  # not every session of history: only those with work
            busy = self.awake.get(key)
            if busy is None or not busy.has_open_work():
                self._busy.discard(key)
                idle += 1
                continue
            if key in self.live:
                continue
            last = busy.updated_at or 0.0
            if key in stale or now - last >= ABANDON_AFTER:
                self._close(busy, last, foreground_only=False)
        if idle:
            self._keep_busy(set(self._busy))
        self.observer.settled(now)

    def _settle_held(self, now: float, probe: Probe) -> None:
        """Entries made from open files (agents without a live index): forget those whose process
        is gone; a session held open but quiet for `HELD_QUIET` is not live (Codex' app-server
        keeps a thread's files open after the TUI exits), nor one its files say was closed
        (`SessionClosed`: the holder works on another session of a shared database)."""
        for key, entry in list(self.entries.items()):
            if entry.derived and not alive(entry, probe):
                del self.entries[key]
        for key, entry in list(self.live.items()):
            session = self.session(*key)
            quiet = now - (session.updated_at or entry.started_at or now) >= HELD_QUIET
            if entry.derived and (session.closed or (session.turn_open_at is None and quiet)):
                del self.live[key]

    def status(
        self, key: tuple[str, str], entry: LiveIndexRead
    ) -> tuple[str, str | None, float | None]:
        """A live session's state, why it waits, and since when. A session whose lead is done
        while its background sub-agents run is `background` (Claude Code stays `busy` while a
        workflow runs)."""
        if not entry.derived:
            state = live_state(entry.status)
            if state == "running" and _background_only(self.awake.get(key)):
                return "background", None, entry.status_at
            return state, entry.reason, entry.status_at
        session = self.session(*key)
        if session.turn_open_at is not None:
            return "running", None, session.turn_open_at
        return "idle", None, session.updated_at

    def _note_waits(self, now: float) -> None:
        """A live session that waited for the user and stopped waiting: tell the observer."""
        for key, entry in self.live.items():
            if entry.status == "waiting" and key not in self._waiting:
                self._waiting[key] = (entry.reason or "input", entry.status_at or now)
        for key, (reason, since) in list(self._waiting.items()):
            holder = self.live.get(key)
            if holder is not None and holder.status == "waiting":
                continue
            del self._waiting[key]
            session = self.session(*key)
            end = holder.status_at if holder is not None else session.updated_at
            self.observer.waited(session, reason, since, max(since, end or since))


def _background_only(session: Session | None) -> bool:
    """No turn or tool call of its lead open, and a background sub-agent running."""
    if session is None or session.turn_open_at is not None or session.subs is None:
        return False
    if any(t.subagent is None for t in session.open_tools.values()):
        return False
    return any(s.state == "running" and s.background for s in session.subs.values())


def _has_open_work(session: Session | None) -> bool:
    return session is not None and session.has_open_work()

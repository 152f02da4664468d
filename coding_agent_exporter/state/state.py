"""All that the exporter knows, folded from events: sessions, live entries and history totals.

`State.apply(agent, event)` is called by the reading loop; `State.refresh(now, probe)` decides
which sessions are live and closes the work of sessions whose process is gone; views (metrics,
`sessions`, the console) read under `State.lock`. Totals are tallies keyed by label values,
kept apart from the sessions so they only ever grow (Prometheus counters) and come out the same
after a restart, because they are rebuilt from the same files.

Every model response, prompt and tool call is counted once per agent however many files repeat
it (`--fork-session` copies records verbatim; sub-agent and lead journals share message ids).
"""

from __future__ import annotations

import heapq
import sys
import threading
from collections import OrderedDict, deque

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
    ToolOutcome,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
    Usage,
    UsageTotalsRead,
)
from . import ids
from .labels import live_state
from .liveness import Probe, alive, holders
from .observer import NoObserver, Observer
from .seen import SeenIds
from .session import ZERO, Counted, OpenTool, Run, Session, Subagent
from .spend import Spend
from .totals import Histogram, Totals

TURN_BUCKETS = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)
TOOL_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)
ABANDON_AFTER = 120.0
"""A session with no live process and an open turn is closed this long after its last record."""
IDLE_SETTLE = 2.0
"""A live index gone idle ends an open turn only this long after it said so: the journal's own
end, written just before, can reach the reader after the index (the two folders are watched
apart), and it is the one that counts, so a live run and a recount agree."""
RECENT_MESSAGES = 4096
"""Responses whose usage may still grow (their copies are written close together); older ones
are only remembered as seen, so memory does not grow with the usage of all history."""
HELD_QUIET = 1800.0
"""A session kept live only by a process holding its files is no longer live after this long
without a record and without an open turn."""
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


def tool_label(tool: str) -> str:
    """MCP tools (`mcp__<server>__<tool>`) collapse to their server."""
    if tool.startswith("mcp__"):
        server = tool[5:].split("__", 1)[0]
        return f"mcp__{server}"
    return tool


class State:
    def __init__(self, observer: Observer | None = None, pricing: str | None = None) -> None:
        self.lock = threading.RLock()
        self.observer: Observer = observer or NoObserver()
        self.traced_since: float | None = None  # turns from then on are traces: exemplars
        self._waiting: dict[tuple[str, str], tuple[str, float]] = {}  # reason, since
        self.sessions: dict[tuple[str, str], Session] = {}
        self._busy: set[tuple[str, str]] = set()  # sessions that may have open work
        self.touched: set[tuple[str, str]] = set()  # sessions told of since `take_touched`
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

    # -- folding events -------------------------------------------------------------------

    def apply(self, agent: str, event: Event) -> None:
        session_id = getattr(event, "session_id", None)
        if isinstance(session_id, str):  # work may open only through one of its events
            key = (agent, session_id)
            self._busy.add(key)
            self.touched.add(key)
        match event:
            case LiveIndexRead():
                self.entries[(agent, event.source)] = event
                session = self.session(agent, event.session_id)
                session.cwd = session.cwd or _intern(event.cwd)
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

    def _recently(self, session: Session) -> None:
        key = (session.agent, session.session_id)
        self.recent[key] = None
        self.recent.move_to_end(key)
        if len(self.recent) > 2 * RECENT_SESSIONS:
            self.recent.popitem(last=False)

    def rank_recent(self) -> None:
        """`recent` made of the sessions with the latest records (a catch-up reads the files in
        the order of their paths, not of their times): once, after it."""
        latest = heapq.nlargest(
            RECENT_SESSIONS,
            (s for s in self.sessions.values() if s.counted and s.updated_at is not None),
            key=lambda s: (s.updated_at, s.session_id),
        )
        self.recent = OrderedDict(((s.agent, s.session_id), None) for s in reversed(latest))

    def waiting(self, key: tuple[str, str]) -> tuple[str, float] | None:
        """Why and since when the live session waits for the user, while it does."""
        return self._waiting.get(key)

    def take_touched(self) -> set[tuple[str, str]]:
        """The sessions events were applied to since the last call (for `web.live`)."""
        touched, self.touched = self.touched, set()
        return touched

    def _compacted(self, agent: str, usage: Usage | None) -> None:
        self.totals.compactions[(agent,)] += 1
        for kind, value in (usage.as_dict() if usage else {}).items():
            if value:
                self.totals.compaction_tokens[(agent, kind)] += value

    def session(self, agent: str, session_id: str) -> Session:
        key = (agent, session_id)
        found = self.sessions.get(key)
        if found is None:
            found = self.sessions[key] = Session(agent=agent, session_id=session_id)
        return found

    def _session_seen(self, agent: str, event: SessionSeen) -> None:
        session = self.session(agent, event.session_id)
        session.touch(event.at)
        cwd, version = _intern(event.cwd), _intern(event.version)  # shared by many sessions
        if event.main:
            session.cwd = cwd or session.cwd
            session.kind = event.kind or session.kind
            session.version = version or session.version
            session.model = _intern(event.model) or session.model
        else:  # a sub-agent's file read before the lead's: fill in only what is missing
            session.cwd = session.cwd or cwd
            session.kind = session.kind or event.kind
            session.version = session.version or version
        if not session.counted:
            session.counted = True
            self.totals.sessions[(agent, session.cwd or "")] += 1
        self._recently(session)

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

    def _subagent_of(self, session: Session, agent_id: str | None) -> Subagent | None:
        if agent_id is None:
            return None
        found = session.subagent(None, agent_id)
        if found is None:
            found = Subagent(agent_id=agent_id)
            session.add_subagent(agent_id, found)
        return found

    def _turn_started(self, agent: str, event: TurnStarted) -> None:
        if self._seen.add(agent, "turn", event.record_id):
            return
        session = self.session(agent, event.session_id)
        session.touch(event.at)
        session.closed = False  # a prompt: it runs again
        if session.turn_open_at is not None:
            self._turn_ended(session, event.at, "interrupted")
        session.turn_open_at = event.at
        # kept only for exemplars (`_traced`): untraced, the record id is not kept at all
        traced = self.traced_since is not None and event.at >= self.traced_since
        session.last_turn = (event.record_id, event.at) if traced else None
        self.observer.turn_started(session, event.at, event.record_id, event.prompt)

    def _turn_ended(self, session: Session, at: float, outcome: TurnOutcome) -> None:
        session.touch(at)
        if session.turn_open_at is None:  # a duplicate end (thinking + text + turn_duration),
            self.observer.turn_ended(session, at, outcome)  # or the end of work of its own
            return
        duration = max(0.0, at - session.turn_open_at)
        session.turn_open_at = None
        session.count_turn(outcome)
        self.totals.turns[(session.agent, session.cwd or "", outcome)] += 1
        histogram = self.totals.turn_durations.setdefault(session.agent, Histogram(TURN_BUCKETS))
        traced = self._traced(session)
        histogram.observe(duration, (*traced, at) if traced else None)
        if outcome != "completed":
            for call_id in [c for c, t in session.open_tools.items() if t.subagent is None]:
                self._tool_ended(session, call_id, "cancelled", at)
        self.observer.turn_ended(session, at, outcome)

    def _tool_started(self, agent: str, event: ToolCallStarted) -> None:
        if self._seen.add(agent, "tool", event.call_id):
            return
        session = self.session(agent, event.session_id)
        session.touch(event.at)
        sub = self._subagent_of(session, event.subagent_id)
        session.open_tool(event.call_id, OpenTool(event.tool, event.at, sub))
        self.observer.tool_started(session, sub, event)
        if sub is None:
            session.tool_calls += 1
        else:
            sub.tool_calls += 1

    def _tool_ended(
        self,
        session: Session,
        call_id: str,
        outcome: ToolOutcome,
        at: float,
        result: str | None = None,
    ) -> None:
        session.touch(at)
        open_tool = session.end_tool(call_id)
        if open_tool is None:
            return
        if outcome == "error" and open_tool.subagent is None:
            session.tool_errors += 1
        tool = self._bounded(session.agent, "tool", tool_label(open_tool.tool))
        self.totals.tool_calls[(session.agent, tool, outcome)] += 1
        histogram = self.totals.tool_durations.setdefault(
            (session.agent, tool), Histogram(TOOL_BUCKETS)
        )
        traced = self._traced(session)
        exemplar = (traced[0], ids.tool_span(call_id), at) if traced else None
        histogram.observe(max(0.0, at - open_tool.at), exemplar)
        ended = ToolCallEnded(
            session_id=session.session_id,
            at=at,
            call_id=call_id,
            outcome=outcome,
            result=result,
        )
        self.observer.tool_ended(session, ended)

    def _prune_busy(self) -> None:
        """Let go of the sessions noted as maybe busy that have no open work (a refresh would
        only skip them): what is kept stays within twice those that have, plus a margin."""
        self._keep_busy({key for key in self._busy if _has_open_work(self.sessions.get(key))})

    def _keep_busy(self, busy: set[tuple[str, str]]) -> None:
        """`busy` as the sessions that may have open work, in a new set (a set emptied in place
        keeps its room), and the size it may grow to before it is pruned again."""
        self._busy = busy
        self._busy_limit = 2 * len(busy) + BUSY_SLACK

    def _traced(self, session: Session) -> tuple[int, int] | None:
        """The trace id and root span id of the session's latest turn, if it was traced."""
        turn = session.last_turn
        if self.traced_since is None or turn is None or turn[1] < self.traced_since:
            return None
        return ids.turn_trace(session.agent, session.session_id, turn[0]), ids.turn_span(
            session.agent, session.session_id, turn[0]
        )

    def _subagent_started(self, agent: str, event: SubagentStarted) -> None:
        session = self.session(agent, event.session_id)
        copied = event.call_id not in session.open_tools and event.subagent_id is None
        if event.call_id and copied and session.subagent(event.call_id, None) is None:
            return  # a launch copied from another session's journal
        sub = session.subagent(event.call_id, event.subagent_id)
        if sub is None:
            sub = Subagent(call_id=event.call_id, agent_id=event.subagent_id)
            for key in (event.call_id, event.subagent_id):
                if key:
                    session.add_subagent(key, sub)
        sub.subagent_type = event.subagent_type or sub.subagent_type
        sub.run_id = event.run_id or sub.run_id
        run = session.run(sub.run_id)
        title = event.title
        if run is not None:
            sub.call_id = sub.call_id or run[0]
            title = _run_title(run, title)
        sub.title = title or sub.title
        sub.parent_id = event.parent_id or sub.parent_id
        sub.background = sub.background or bool(event.background)
        if event.at is not None and sub.started_at is None:
            sub.started_at = event.at
        self.observer.subagent_started(session, sub)

    def _run_launched(self, agent: str, event: RunLaunched) -> None:
        """The call that launched a run: its sub-agents told before it are linked to it now
        (their call id, not a key: one call launched them all)."""
        session = self.session(agent, event.session_id)
        if session.run(event.run_id) is not None:
            return
        run = (event.call_id, event.name)
        session.add_run(event.run_id, run)
        for sub in session.unique_subagents():
            if sub.run_id == event.run_id and sub.call_id is None:
                sub.call_id, sub.title = event.call_id, _run_title(run, sub.title)
                self.observer.subagent_started(session, sub)

    def _subagent_ended(self, session: Session, sub: Subagent, outcome: str, at: float) -> None:
        if sub.state != "running":
            return
        sub.state, sub.ended_at = outcome, at
        kind = self._bounded(session.agent, "subagent_type", sub.subagent_type or "unknown")
        self.totals.subagents[(session.agent, kind, outcome)] += 1
        self.observer.subagent_ended(session, sub, outcome, at)

    def _bounded(self, agent: str, label: str, value: str) -> str:
        values = self._labels.setdefault((agent, label), set())
        if value in values:
            return value
        if len(values) >= MAX_LABEL_VALUES:
            return "other"
        values.add(value)
        return value

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
            busy = self.sessions.get(key)
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
            if state == "running" and _background_only(self.sessions.get(key)):
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

    def _close(self, session: Session, at: float, *, foreground_only: bool) -> None:
        if session.turn_open_at is not None:
            tool_open = any(t.subagent is None for t in session.open_tools.values())
            finished = foreground_only and not tool_open  # went idle by itself: the turn is done
            self._turn_ended(session, at, "completed" if finished else "interrupted")
        for sub in session.unique_subagents():
            if sub.state == "running" and not (foreground_only and sub.background):
                self._subagent_ended(session, sub, "cancelled", at)
        if not foreground_only:
            for call_id in list(session.open_tools):
                self._tool_ended(session, call_id, "cancelled", at)


def _run_title(run: Run, title: str | None) -> str | None:
    """A run's sub-agent's title: the run's name, then its own label."""
    name = run[1]
    if not name or (title and title.startswith(f"{name}: ")):
        return title
    return f"{name}: {title}" if title else name


def _intern(text: str | None) -> str | None:
    """One copy of a value many sessions share (a project's cwd, a version, a model)."""
    return None if text is None else sys.intern(text)


def _background_only(session: Session | None) -> bool:
    """No turn or tool call of its lead open, and a background sub-agent running."""
    if session is None or session.turn_open_at is not None or session.subs is None:
        return False
    if any(t.subagent is None for t in session.open_tools.values()):
        return False
    return any(s.state == "running" and s.background for s in session.subs.values())


def _has_open_work(session: Session | None) -> bool:
    return session is not None and session.has_open_work()

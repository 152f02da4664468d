"""Work in a session: turns (open, ended by outcome, their durations), tool calls (open until
their result, their durations, errors) and sub-agents (started, linked to the call or run that
launched them, ended), and the closing of whatever is left open when a session stops.
"""

from __future__ import annotations

from ..events import (
    RunLaunched,
    SubagentStarted,
    ToolCallEnded,
    ToolCallStarted,
    ToolOutcome,
    TurnOutcome,
    TurnStarted,
)
from . import ids
from .responses import Responses
from .session import OpenTool, Run, Session, Subagent
from .totals import Histogram

TURN_BUCKETS = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)
TOOL_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


def tool_label(tool: str) -> str:
    """MCP tools (`mcp__<server>__<tool>`) collapse to their server."""
    if tool.startswith("mcp__"):
        server = tool[5:].split("__", 1)[0]
        return f"mcp__{server}"
    return tool


class Work(Responses):
    """Turns, tool calls and sub-agents: opened, ended, counted, closed when left open."""

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

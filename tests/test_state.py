"""Folding events: dedupe, turn ends, liveness and closing the work of dead sessions."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from coding_agent_exporter.events import (
    LiveIndexRead,
    ModelResponded,
    SessionSeen,
    SubagentEnded,
    SubagentStarted,
    TitleSet,
    ToolCallEnded,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
    Usage,
    UsageTotalsRead,
)
from coding_agent_exporter.prometheus.collectors import StateCollector
from coding_agent_exporter.state.labels import ProjectLabel
from coding_agent_exporter.state.responses import RECENT_MESSAGES
from coding_agent_exporter.state.state import ABANDON_AFTER, State
from coding_agent_exporter.state.work import tool_label

A = "claude-code"
S = "s1"


def seen(state: State, session: str = S, cwd: str = "/w") -> None:
    state.apply(A, SessionSeen(session_id=session, at=100.0, cwd=cwd))


def responded(state: State, message: str, output: int, session: str = S, **kw: object) -> None:
    usage = Usage(input=1, output=output, cache_read=10)
    state.apply(
        A,
        ModelResponded(
            session_id=session, at=101.0, message_id=message, model="m", usage=usage, **kw
        ),  # type: ignore[arg-type]
    )


def entry(pid: int = 10, status: str | None = "busy", **kw: object) -> LiveIndexRead:
    fields: dict[str, object] = {
        "pid": pid,
        "session_id": S,
        "started_at": 1000.0,
        "status": status,
        "status_at": 2000.0,
        "source": f"sessions/{pid}.json",
    }
    fields.update(kw)
    return LiveIndexRead(**fields)  # type: ignore[arg-type]


def test_usage_counted_once_per_message_keeping_the_maximum() -> None:
    state = State()
    seen(state)
    responded(state, "msg_1", 1)  # stream-start copy
    responded(state, "msg_1", 40)
    responded(state, "msg_1", 40)
    responded(state, "msg_1", 1)
    session = state.sessions[(A, S)]
    assert session.messages == 1
    assert session.tokens == Usage(input=1, output=40, cache_read=10)
    assert state.totals.tokens[(A, "m", "/w", "output")] == 40
    assert state.totals.messages[(A, "m", "/w")] == 1


def test_a_message_repeated_in_another_session_counts_for_the_first() -> None:
    state = State()
    seen(state)
    seen(state, "fork")
    responded(state, "msg_1", 40)
    responded(state, "msg_1", 40, session="fork")
    assert state.sessions[(A, "fork")].messages == 0
    assert state.totals.messages[(A, "m", "/w")] == 1


def test_subagent_tokens_count_for_the_subagent_and_the_session() -> None:
    state = State()
    seen(state)
    state.apply(A, SubagentStarted(session_id=S, at=100.0, subagent_id="a1", call_id="t1"))
    responded(state, "msg_c", 5, subagent_id="a1", main=False)
    session = state.sessions[(A, S)]
    (sub,) = session.unique_subagents()
    assert (sub.messages, sub.tokens.output, session.tokens.output) == (1, 5, 5)


def totals_read(state: State, output: int, session: str = S, **kw: object) -> None:
    usage = Usage(input=100, output=output, cache_read=10)
    event = UsageTotalsRead(session_id=session, at=102.0, model="m", usage=usage, **kw)  # type: ignore[arg-type]
    state.apply(A, event)


def test_totals_replace_the_last_totals_never_add_to_them() -> None:
    """A session's totals read again (a settings file rewritten after each call, or read anew
    after a restart) count only what they grew by; a smaller one counts nothing, and no total
    is a message."""
    state = State()
    seen(state)
    totals_read(state, 40)
    totals_read(state, 40)  # the same file read again
    totals_read(state, 70)  # after one more call
    totals_read(state, 50)  # an older copy put back: counters never go down
    session = state.sessions[(A, S)]
    assert session.tokens == Usage(input=100, output=70, cache_read=10)
    assert state.totals.tokens[(A, "m", "/w", "output")] == 70
    assert state.totals.tokens[(A, "m", "/w", "input")] == 100
    assert session.messages == 0
    assert state.totals.messages == {}


def test_totals_of_two_sessions_and_of_a_subagent_are_kept_apart() -> None:
    state = State()
    seen(state)
    seen(state, "s2")
    totals_read(state, 40)
    totals_read(state, 40, session="s2")
    totals_read(state, 5, subagent_id="a1")
    assert state.sessions[(A, S)].tokens.output == 45
    assert state.sessions[(A, "s2")].tokens.output == 40
    (sub,) = state.sessions[(A, S)].unique_subagents()
    assert (sub.tokens.output, sub.messages) == (5, 0)
    assert state.totals.tokens[(A, "m", "/w", "output")] == 85


def test_totals_outlive_the_recent_responses_window() -> None:
    """A session's totals are not a response: thousands of responses read between two of its
    totals never make the later one count whole again."""
    state = State()
    seen(state)
    totals_read(state, 40)
    for n in range(RECENT_MESSAGES + 1):
        responded(state, f"msg_{n}", 0)
    totals_read(state, 41)
    assert state.totals.tokens[(A, "m", "/w", "output")] == 41


def test_duplicate_turn_ends_count_once_first_wins() -> None:
    state = State()
    seen(state)
    state.apply(A, TurnStarted(session_id=S, at=100.0, record_id="u1"))
    state.apply(A, TurnEnded(session_id=S, at=103.0, outcome="failed"))
    state.apply(A, TurnEnded(session_id=S, at=104.0, outcome="completed"))
    assert state.sessions[(A, S)].turns == {"failed": 1}
    assert state.totals.turn_durations[A].count == 1
    assert state.totals.turn_durations[A].total == 3.0


def test_a_copied_prompt_is_not_a_second_turn() -> None:
    state = State()
    seen(state)
    seen(state, "fork")
    state.apply(A, TurnStarted(session_id=S, at=100.0, record_id="u1"))
    state.apply(A, TurnStarted(session_id="fork", at=100.0, record_id="u1"))
    assert state.sessions[(A, "fork")].turn_open_at is None


def test_interrupted_turn_cancels_open_tools() -> None:
    state = State()
    seen(state)
    state.apply(A, TurnStarted(session_id=S, at=100.0, record_id="u1"))
    state.apply(A, ToolCallStarted(session_id=S, at=101.0, call_id="t1", tool="Bash"))
    state.apply(A, TurnEnded(session_id=S, at=105.0, outcome="interrupted"))
    assert state.totals.tool_calls[(A, "Bash", "cancelled")] == 1
    state.apply(A, ToolCallEnded(session_id=S, at=106.0, call_id="t1", outcome="ok"))
    assert state.totals.tool_calls[(A, "Bash", "ok")] == 0


def test_mcp_tools_collapse_to_their_server() -> None:
    assert tool_label("mcp__github__create_issue") == "mcp__github"
    assert tool_label("Bash") == "Bash"


def test_title_precedence() -> None:
    state = State()
    session = state.session(A, S)
    for title, source in (
        ("p1", "prompt"),
        ("p2", "prompt"),
        ("name", "process"),
        ("ai", "harness"),
        ("p3", "prompt"),
        ("mine", "user"),
        ("ai2", "harness"),
    ):
        state.apply(A, TitleSet(session_id=S, title=title, source=source))  # type: ignore[arg-type]
    assert (session.title, session.title_source) == ("mine", "user")
    other = state.session(A, "s2")
    state.apply(A, TitleSet(session_id="s2", title="p1", source="prompt"))
    state.apply(A, TitleSet(session_id="s2", title="p2", source="prompt"))
    assert other.title == "p1"


def alive(pid: int) -> float | None:
    return 1000.0 if pid in (10, 11) else None


def test_live_entry_with_a_running_pid_makes_the_session_live() -> None:
    state = State()
    state.apply(A, entry(status="waiting", reason="permission prompt"))
    state.refresh(3000.0, alive)
    assert state.live[(A, S)].reason == "permission prompt"


def test_dead_pid_is_stale() -> None:
    state = State()
    state.apply(A, entry(pid=99))
    state.refresh(3000.0, alive)
    assert state.live == {}


def test_recycled_pid_is_stale() -> None:
    state = State()
    state.apply(A, entry(started_at=1000.0 + 60))
    state.refresh(3000.0, alive)
    assert state.live == {}


def test_two_processes_on_one_session_latest_start_holds_it() -> None:
    state = State()
    state.apply(A, entry(pid=10, started_at=999.0, status="idle"))
    state.apply(A, entry(pid=11, started_at=1001.0, status="busy"))
    state.refresh(3000.0, alive)
    assert state.live[(A, S)].pid == 11


def test_spare_daemon_and_parked_terminal_hold_nothing() -> None:
    state = State()
    state.apply(A, entry(pid=10, hidden=True))
    state.refresh(3000.0, alive)
    assert state.live == {}
    state = State()
    state.apply(A, entry(pid=10, parked_job_id="j1", status="idle"))
    state.apply(A, entry(pid=11, session_id="s2", job_id="j1"))
    state.refresh(3000.0, alive)
    assert set(state.live) == {(A, "s2")}


def test_index_going_idle_ends_the_open_turn_and_foreground_subagents() -> None:
    state = State()
    seen(state)
    state.apply(A, TurnStarted(session_id=S, at=1500.0, record_id="u1"))
    state.apply(A, SubagentStarted(session_id=S, at=1500.0, subagent_id="fg", call_id="t1"))
    state.apply(A, SubagentStarted(session_id=S, at=1500.0, subagent_id="bg", background=True))
    state.apply(A, entry(status="idle", status_at=1600.0))
    state.refresh(3000.0, alive)
    session = state.sessions[(A, S)]
    assert session.turns == {"completed": 1}
    states = {s.id: s.state for s in session.unique_subagents()}
    assert states == {"fg": "cancelled", "bg": "running"}


def test_killed_process_closes_the_turn_interrupted_and_cancels_tools() -> None:
    state = State()
    seen(state)
    state.apply(A, TurnStarted(session_id=S, at=100.0, record_id="u1"))
    state.apply(A, ToolCallStarted(session_id=S, at=101.0, call_id="t1", tool="Bash"))
    state.apply(A, entry(pid=99))  # left behind by kill -9
    state.refresh(102.0, alive)
    assert state.sessions[(A, S)].turns == {"interrupted": 1}
    assert state.totals.tool_calls[(A, "Bash", "cancelled")] == 1


def test_session_without_a_process_is_closed_only_after_a_grace_time() -> None:
    state = State()
    seen(state)
    state.apply(A, TurnStarted(session_id=S, at=100.0, record_id="u1"))
    state.refresh(100.0 + ABANDON_AFTER / 2, alive)
    assert state.sessions[(A, S)].turn_open_at == 100.0
    state.refresh(100.0 + ABANDON_AFTER, alive)
    assert state.sessions[(A, S)].turns == {"interrupted": 1}


def test_subagent_ends_once_and_counts_its_type() -> None:
    state = State()
    seen(state)
    state.apply(A, ToolCallStarted(session_id=S, at=100.0, call_id="t1", tool="Agent"))
    state.apply(A, SubagentStarted(session_id=S, at=100.0, call_id="t1", subagent_type="Explore"))
    state.apply(A, SubagentStarted(session_id=S, at=None, call_id="t1", subagent_id="a1"))
    state.apply(A, SubagentEnded(session_id=S, at=110.0, subagent_id="a1", outcome="completed"))
    state.apply(A, SubagentEnded(session_id=S, at=111.0, call_id="t1", outcome="failed"))
    assert state.totals.subagents == {(A, "Explore", "completed"): 1}
    (sub,) = state.sessions[(A, S)].unique_subagents()
    assert (sub.id, sub.call_id, sub.state) == ("a1", "t1", "completed")


def test_subagent_known_first_from_its_own_files_is_linked_later() -> None:
    state = State()
    seen(state)
    responded(state, "msg_c", 5, subagent_id="a1", main=False)
    state.apply(A, ToolCallStarted(session_id=S, at=100.0, call_id="t1", tool="Agent"))
    state.apply(A, SubagentStarted(session_id=S, at=100.0, call_id="t1", subagent_type="Explore"))
    state.apply(A, SubagentStarted(session_id=S, at=None, call_id="t1", subagent_id="a1"))
    (sub,) = state.sessions[(A, S)].unique_subagents()
    assert (sub.messages, sub.subagent_type) == (1, "Explore")


def test_an_entry_opened_after_its_process_started_is_not_stale() -> None:
    """Grok registers a session when it is opened (again on /resume), not at process start."""
    state = State()
    state.apply(A, entry(started_at=1000.0 + 600, opened_after_start=True))
    state.refresh(3000.0, alive)  # the process started 10 minutes before: still the same one
    assert set(state.live) == {(A, S)}
    state = State()
    state.apply(A, entry(started_at=1000.0 - 60, opened_after_start=True))
    state.refresh(3000.0, alive)  # a process started after the session was opened: recycled pid
    assert state.live == {}


def test_a_response_seen_again_after_leaving_the_recent_window_counts_once() -> None:
    """Only the latest RECENT_MESSAGES responses keep their usage; an older one read again (a
    copy of a finished session's journal, a file read anew) is found among the ids seen and
    counts nothing more."""
    state = State()
    seen(state)
    responded(state, "msg_first", 40)
    for n in range(RECENT_MESSAGES):  # pushes msg_first out of the recent window
        responded(state, f"msg_{n}", 1)
    responded(state, "msg_first", 40)
    responded(state, "msg_first", 40, session="fork")
    assert state.totals.messages[(A, "m", "/w")] == RECENT_MESSAGES + 1
    assert state.totals.tokens[(A, "m", "/w", "output")] == 40 + RECENT_MESSAGES
    assert state.sessions[(A, S)].messages == RECENT_MESSAGES + 1


def scraped(state: State, name: str, label: str) -> dict[str, float]:
    """One counter's samples for agent A as /metrics shows them, by the value of `label`."""
    registry = CollectorRegistry()
    registry.register(StateCollector(state, [A], ProjectLabel(), probe=lambda pid: None))
    found: dict[str, float] = {}
    for family in registry.collect():
        for sample in family.samples:
            if sample.name == name and sample.labels.get("agent") == A:
                key = sample.labels[label]
                found[key] = found.get(key, 0.0) + sample.value
    return found


def test_tool_and_subagent_type_labels_keep_200_values_the_rest_other_counts_kept() -> None:
    """docs/metrics.md: the tool and sub-agent type labels keep at most 200 values per agent,
    the rest read `other`. 201 tools (and types): 200 values and `other`, every call counted;
    a value kept once stays itself."""
    state = State()
    seen(state)
    for n in [*range(201), 0, 200]:  # tool_000 and tool_200 once more
        call = f"t{n}-{state.totals.tool_calls.total()}"
        state.apply(A, ToolCallStarted(session_id=S, at=100.0, call_id=call, tool=f"tool_{n:03}"))
        state.apply(A, ToolCallEnded(session_id=S, at=101.0, call_id=call, outcome="ok"))
        kind = f"type_{n:03}"
        state.apply(
            A, SubagentStarted(session_id=S, at=100.0, subagent_id=call, subagent_type=kind)
        )
        state.apply(A, SubagentEnded(session_id=S, at=101.0, subagent_id=call, outcome="completed"))
    for name, label, prefix in [
        ("coding_agent_tool_calls_total", "tool", "tool"),
        ("coding_agent_subagents_total", "subagent_type", "type"),
    ]:
        counts = scraped(state, name, label)
        assert len(counts) == 201 and counts["other"] == 2, (name, len(counts))
        assert f"{prefix}_199" in counts and f"{prefix}_200" not in counts
        assert counts[f"{prefix}_000"] == 2
        assert sum(counts.values()) == 203

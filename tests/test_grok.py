"""Grok Build: one test per file kind (records in the documented layout, as the hand-made
fixtures are), the live index diffed per session, and liveness from pid + registration time."""

from __future__ import annotations

import json
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from exporter.events import (
    Event,
    LiveIndexRead,
    LiveIndexRemoved,
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
)
from exporter.harnesses.fields import timestamp
from exporter.harnesses.grok import Grok, IndexReader, decode_cwd
from exporter.harnesses.grok_session import (
    ChatHistoryReader,
    EventsReader,
    MetaReader,
    Shared,
    SummaryReader,
    UpdatesReader,
)
from exporter.runtime.engine import Engine, Source
from exporter.state.state import State

from .conftest import FIXTURES

LIVE = FIXTURES / "grok" / "hand-made" / "live-permission" / "home" / ".grok"
SID = "01a0b546-2e0f-7b43-8a10-0000000000f6"
OTHER = "01a0b546-2e0f-7b43-8a10-000000000077"
OPENED = "2026-11-20T09:59:58.123456Z"
START = timestamp(OPENED) or 0.0


def entry(session_id: str = SID, pid: int = 37000, opened_at: str = OPENED) -> dict[str, Any]:
    return {"session_id": session_id, "pid": pid, "cwd": "/tmp/app", "opened_at": opened_at}


def ts(second: int) -> str:
    return f"2026-11-20T10:00:{second:02d}.000000Z"


def live(events: list[Event]) -> list[LiveIndexRead]:
    return [e for e in events if isinstance(e, LiveIndexRead)]


def test_layout_and_files_never_opened() -> None:
    grok = Grok()
    session = "sessions/%2Ftmp%2Fapp/" + SID
    assert grok.match(PurePosixPath("active_sessions.json")) == "doc"
    assert grok.match(PurePosixPath(f"{session}/events.jsonl")) == "jsonl"
    assert grok.match(PurePosixPath(f"{session}/updates.jsonl")) == "jsonl"
    assert grok.match(PurePosixPath(f"{session}/chat_history.jsonl")) == "jsonl"
    assert grok.match(PurePosixPath(f"{session}/summary.json")) == "doc"
    assert grok.match(PurePosixPath(f"{session}/subagents/x/meta.json")) == "doc"
    for never in (
        "auth.json",
        "active_sessions.lock",
        "active_sessions.json.tmp",
        "sessions/session_search.sqlite",
        f"{session}/summary.json.tmp",
        f"{session}/events.lock",
        f"{session}/subagents/x/output.json",
        "logs/unified.jsonl",
    ):
        assert grok.match(PurePosixPath(never)) is None, never
    assert Grok.default_home({"GROK_HOME": "/g"}) == Path("/g")
    assert Grok.default_home({"HOME": "/home/u"}) == Path("/home/u/.grok")
    assert decode_cwd("%2Ftmp%2Ffoo%28bar%29%21") == "/tmp/foo(bar)!"
    assert decode_cwd("very-long-slug-0123456789abcdef") is None  # its cwd is in summary.json


def test_one_pid_holding_two_sessions_is_two_entries() -> None:
    grok = Grok()
    events = IndexReader(grok).feed([entry(), entry(OTHER, opened_at="2026-11-20T10:00:30Z")])
    entries = live(events)
    assert [e.session_id for e in entries] == [SID, OTHER]
    assert len({e.source for e in entries}) == 2
    assert {e.pid for e in entries} == {37000}
    assert {e.started_at for e in entries} == {START}  # the pid's earliest registration
    assert {e.status for e in entries} == {"idle"}  # no phase log read yet


def test_a_session_removed_from_the_index_ends_only_its_entry() -> None:
    grok = Grok()
    reader = IndexReader(grok)
    first = live(reader.feed([entry(), entry(OTHER)]))
    events = reader.feed([entry(OTHER)])
    assert events[-1] == LiveIndexRemoved(source=first[0].source)
    assert [e.session_id for e in live(events)] == [OTHER]
    assert reader.feed({"torn": True}) == []  # not an array: a torn write changes nothing
    assert reader.feed(None) == [LiveIndexRemoved(source=first[1].source)]


def test_entries_without_proof_are_left_out() -> None:
    bad = [entry(pid=0), entry(pid=True), {**entry(), "opened_at": None}, {**entry(), "cwd": ""}]
    assert IndexReader(Grok()).feed(bad) == []


def state_of(home: Path, start: float) -> State:
    state = State()
    Engine([Source(Grok(), home)], state).catch_up()
    state.refresh(START + 60, lambda pid: start if pid == 37000 else None)
    return state


def test_live_session_waits_at_the_permission_prompt() -> None:
    state = state_of(LIVE, START - 1)
    holder = state.live[("grok", SID)]
    assert state.status(("grok", SID), holder)[:2] == ("needs_user", "run_terminal_command")
    assert state.session("grok", SID).turn_open_at is not None


def test_opened_at_before_the_process_start_is_stale() -> None:
    state = state_of(LIVE, START + 3600)  # pid 37000 now belongs to a later process
    assert ("grok", SID) not in state.live
    assert state.session("grok", SID).turns["interrupted"] == 1


def test_a_session_that_left_the_index_is_not_live(tmp_path: Path) -> None:
    home = tmp_path / ".grok"
    shutil.copytree(LIVE, home)
    state = State()
    engine = Engine([Source(Grok(), home)], state)
    engine.catch_up()
    (home / "active_sessions.json").write_text("[]")
    engine.changed([home / "active_sessions.json"])
    state.refresh(START + 60, lambda pid: START)
    assert ("grok", SID) not in state.live


def phase(second: int, word: str) -> dict[str, Any]:
    return {"ts": ts(second), "type": "phase_changed", "phase": word}


def test_phase_log_turns_tools_and_status() -> None:
    grok = Grok()
    IndexReader(grok).feed([entry()])  # listed: each status change comes as its entry
    shared = grok.of(SID)
    reader = EventsReader(SID, "/tmp/app", shared)
    events = reader.feed(
        {"ts": ts(0), "type": "turn_started", "turn_number": 0, "model_id": "x-ai/grok-4.6"}
    )
    assert isinstance(events[0], SessionSeen) and events[0].cwd == "/tmp/app"
    assert any(isinstance(e, TurnStarted) for e in events)
    assert live(events)[0].status is None  # phase cleared at turn_started: not guessed
    assert live(reader.feed(phase(1, "waiting_for_model")))[0].status == "busy"
    started = reader.feed(
        {"ts": ts(2), "type": "tool_started", "tool_name": "run_terminal_command"}
    )
    assert isinstance(started[0], ToolCallStarted)
    waiting = live(reader.feed(phase(2, "permission_prompt")))[0]
    assert (waiting.status, waiting.reason) == ("waiting", "run_terminal_command")
    resolved = {"ts": ts(4), "type": "permission_resolved", "tool_name": "run_terminal_command"}
    assert live(reader.feed({**resolved, "decision": "allow"}))[0].status == "busy"
    done = reader.feed(
        {
            "ts": ts(5),
            "type": "tool_completed",
            "tool_name": "run_terminal_command",
            "outcome": "error",
            "tool_call_id": "call-1",
        }
    )
    assert done == [
        ToolCallEnded(session_id=SID, at=done[0].at, call_id=started[0].call_id, outcome="error")
    ]
    assert reader.feed(phase(6, "compacting_somehow"))[-1].status is None  # type: ignore[union-attr]
    ended = reader.feed({"ts": ts(7), "type": "turn_ended", "outcome": "cancelled"})
    assert isinstance(ended[0], TurnEnded) and ended[0].outcome == "interrupted"
    assert live(ended)[0].status == "idle"
    assert reader.feed({"ts": ts(8), "type": "mcp_server_starting"}) == []


def test_a_denied_tool_is_rejected() -> None:
    reader = EventsReader(SID, None, Shared())
    reader.feed({"ts": ts(0), "type": "turn_started"})
    (started,) = reader.feed({"ts": ts(1), "type": "tool_started", "tool_name": "edit_file"})
    reader.feed(
        {"ts": ts(2), "type": "permission_resolved", "tool_name": "edit_file", "decision": "deny"}
    )
    (ended,) = reader.feed(
        {"ts": ts(3), "type": "tool_completed", "tool_name": "edit_file", "outcome": "error"}
    )
    assert isinstance(ended, ToolCallEnded) and ended.outcome == "rejected"
    assert isinstance(started, ToolCallStarted) and ended.call_id == started.call_id


def update(kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "method": "_x.ai/session/update",
        "params": {"update": {"sessionUpdate": kind, **fields}},
        "timestamp": 1795168810,
    }


def test_background_tasks_and_turn_usage() -> None:
    shared = Shared(entry=LiveIndexRead(pid=1, session_id=SID, started_at=None, status=None))
    reader = UpdatesReader(SID, shared)
    assert reader.feed({"method": "session/update", "params": {"update": {}}}) == []
    tasks = [{"task_id": "t1", "kind": "bash", "status": "running", "command": "sleep 60"}]
    assert live(reader.feed(update("background_tasks", tasks=tasks)))[0].status == "shell"
    done = reader.feed(update("task_completed", task_snapshot={"task_id": "t1", "exit_code": 0}))
    assert live(done)[0].status == "idle"
    usage = {"inputTokens": 1200, "outputTokens": 40, "totalTokens": 1240, "numTurns": 1}
    assert reader.feed(update("turn_completed", prompt_id="p0", usage=usage)) == []  # no model yet
    (response,) = shared.set_model(SID, "x-ai/grok-4.6")
    assert isinstance(response, ModelResponded)
    assert (response.message_id, response.usage) == (f"{SID}/p0", Usage(input=1200, output=40))
    again = reader.feed(update("turn_completed", prompt_id="p1", usage=usage))
    assert [e.message_id for e in again if isinstance(e, ModelResponded)] == [f"{SID}/p1"]


def test_summary_titles_model_and_kind() -> None:
    shared = Shared()
    reader = SummaryReader(SID, shared)
    summary = {
        "info": {"id": SID, "cwd": "/tmp/app"},
        "created_at": ts(0),
        "current_model_id": "x-ai/grok-4.6",
        "generated_title": "Fixing the build",
        "title_is_manual": True,
        "session_kind": "headless",
    }
    seen, title = reader.feed(summary)
    assert isinstance(seen, SessionSeen) and (seen.cwd, seen.kind) == ("/tmp/app", "headless")
    assert title == TitleSet(session_id=SID, title="Fixing the build", source="user")
    assert shared.model == "x-ai/grok-4.6"
    assert reader.feed({**summary, "session_kind": "subagent"}) == []  # a child, not a session


def test_chat_history_first_real_prompt_titles() -> None:
    reader = ChatHistoryReader(SID, Shared())
    records: list[dict[str, Any]] = [
        {"type": "system", "content": "…"},
        {"type": "user", "content": [{"type": "text", "text": "<user_info>x</user_info>"}]},
        {
            "type": "user",
            "content": [{"type": "text", "text": "<system-reminder>r</system-reminder>"}],
            "prompt_index": 0,
        },
        {
            "type": "user",
            "content": [{"type": "text", "text": "<user_query>\nfix   the build\n</user_query>"}],
            "prompt_index": 0,
        },
        {"type": "user", "content": "<user_query>second</user_query>", "prompt_index": 1},
    ]
    events = [e for r in records for e in reader.feed(r)]
    assert events == [TitleSet(session_id=SID, title="fix the build", source="prompt")]


def test_subagent_meta() -> None:
    meta = {
        "subagent_id": "s1",
        "subagent_type": "explore",
        "description": "look around",
        "status": "running",
        "started_at": ts(1),
    }
    (started,) = MetaReader(SID, "s1").feed(meta)
    assert isinstance(started, SubagentStarted) and started.subagent_type == "explore"
    ended = MetaReader(SID, "s1").feed({**meta, "status": "error", "completed_at": ts(9)})
    assert isinstance(ended[1], SubagentEnded) and ended[1].outcome == "failed"


def test_fixture_files_parse() -> None:
    """The hand-made fixtures are valid JSON in every line."""
    for path in (FIXTURES / "grok").rglob("*.json*"):
        text = path.read_text()
        for line in text.splitlines() if path.suffix == ".jsonl" else [text]:
            json.loads(line)

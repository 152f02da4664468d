"""OpenCode: one test per event row and part kind (rows taken from the recorded databases), the
home's default, and the database's layout."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from coding_agent_exporter.events import (
    Event,
    ModelFailed,
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
from coding_agent_exporter.harnesses.opencode.harness import OpenCode
from coding_agent_exporter.harnesses.opencode_database import DatabaseReader
from coding_agent_exporter.harnesses.opencode_fields import tool_outcome, usage_of
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.sources.processes import process_start
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.state import State

from .backends import holding
from .conftest import FIXTURES

V = FIXTURES / "opencode" / "1.18.33"
ROOT = "ses_dd400e9faffeEmDtICinENeL8Y"
CHILD = "ses_dd400dba6ffeX0ZuL40eBiZ0So"
ROOT_TUI = "ses_dd3ffa08affeUoIIeAcja3uyTE"


def rows(scenario: str) -> list[dict[str, Any]]:
    path = V / scenario / "home" / ".local" / "share" / "opencode" / "opencode.db"
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        query = "SELECT aggregate_id, seq, type, data FROM event ORDER BY rowid"
        return [
            {"aggregate_id": a, "seq": s, "type": t, "data": json.loads(d)}
            for a, s, t, d in db.execute(query)
        ]


def events(scenario: str) -> list[Event]:
    reader = DatabaseReader()
    return [event for row in rows(scenario) for event in reader.feed(row)]


def of(kind: type[Any], found: list[Event]) -> list[Any]:
    return [e for e in found if isinstance(e, kind)]


def test_session_created_and_updated() -> None:
    (seen, *_) = of(SessionSeen, events("subagent"))
    assert seen.session_id == ROOT and seen.cwd == "/home/user/work/shop-api"
    assert seen.kind == "headless" and seen.version == "1.18.33"
    models = {e.model for e in of(SessionSeen, events("subagent")) if e.main}
    assert "stub-model" in models
    (interactive, *_) = of(SessionSeen, events("interactive"))
    assert interactive.kind == "interactive"  # the TUI sets no session rules


def test_path_without_leading_slash_is_the_cwd() -> None:
    reader = DatabaseReader()
    info = {"id": "ses_x", "path": "home/user/p", "time": {"created": 1000}}
    (seen,) = reader.feed({"type": "session.created.1", "data": {"info": info}})
    assert isinstance(seen, SessionSeen) and seen.cwd == "/home/user/p"


def test_placeholder_title_is_not_a_title() -> None:
    titles = [(t.title, t.source) for t in of(TitleSet, events("subagent"))]
    assert titles == [  # "New session - <time>" is skipped; the child's title is its own
        ('"SCENARIO:subagent count the python files with a sub-agent"', "prompt"),
        ("Fake shop api session", "harness"),
    ]


def test_user_message_starts_a_turn_once() -> None:
    found = events("interactive")
    assert len(of(TurnStarted, found)) == 5  # user messages are written again: still 5 turns


def test_assistant_message_tokens_reasoning_inside_output() -> None:
    (responded,) = of(ModelResponded, events("run-answer"))
    assert responded.usage == Usage(input=2000, output=50, reasoning=16)
    assert responded.requested_at is not None and responded.requested_at < responded.at
    assert usage_of(
        {"input": 5, "output": 3, "reasoning": 2, "cache": {"read": 7, "write": 1}}
    ) == (Usage(input=5, output=5, cache_read=7, cache_write=1, reasoning=2))


def test_turn_outcomes() -> None:
    ended = [e.outcome for e in of(TurnEnded, events("interactive"))]
    assert ended == ["completed", "interrupted", "interrupted", "interrupted", "completed"]


def test_api_error_fails_the_turn() -> None:
    found = events("api-error")
    (failed,) = of(ModelFailed, found)
    assert failed.error == "APIError"
    assert [e.outcome for e in of(TurnEnded, found)] == ["failed"]
    assert of(ModelResponded, found) == []  # zero tokens: no response


def test_tool_part_lifecycle() -> None:
    found = events("run-fail")
    (started,) = of(ToolCallStarted, found)
    assert started.tool == "bash" and started.arguments  # started once it ran, with its input
    (ended,) = of(ToolCallEnded, found)
    assert ended.call_id == started.call_id and ended.outcome == "error"  # exit 2


@pytest.mark.parametrize(
    ("state", "outcome"),
    [
        ({"status": "completed", "metadata": {"exit": 0}}, "ok"),
        ({"status": "completed", "metadata": {}}, "ok"),
        ({"status": "completed", "metadata": {"exit": 2}}, "error"),
        (
            {
                "status": "completed",
                "metadata": {"exit": None},
                "output": "User aborted the command",
            },
            "cancelled",
        ),
        (
            {
                "status": "error",
                "error": "The user rejected permission to use this specific tool call.",
            },
            "rejected",
        ),
        ({"status": "error", "error": "Tool execution aborted"}, "cancelled"),
        ({"status": "error", "error": "file not found"}, "error"),
        ({"status": "running"}, None),
        ({"status": "pending"}, None),
    ],
)
def test_tool_outcome(state: dict[str, Any], outcome: str | None) -> None:
    assert tool_outcome(state) == outcome


def test_interactive_tools() -> None:
    outcomes = [e.outcome for e in of(ToolCallEnded, events("interactive"))]
    assert outcomes == ["ok", "rejected", "cancelled"]


def test_pending_tool_of_a_finished_message_still_counts() -> None:
    reader = DatabaseReader()
    feed = reader.feed
    feed({"type": "session.created.1", "data": {"info": {"id": "s", "time": {"created": 1}}}})
    user = {"id": "u", "sessionID": "s", "role": "user", "time": {"created": 1000}}
    feed({"type": "message.updated.1", "data": {"info": user}})
    reply = {
        "id": "m",
        "sessionID": "s",
        "role": "assistant",
        "parentID": "u",
        "time": {"created": 2000},
    }
    feed({"type": "message.updated.1", "data": {"info": reply}})
    part = {
        "id": "p",
        "sessionID": "s",
        "messageID": "m",
        "type": "tool",
        "callID": "c",
        "tool": "bash",
    }
    assert (
        feed(
            {
                "type": "message.part.updated.1",
                "data": {"part": {**part, "state": {"status": "pending"}}, "time": 3000},
            }
        )
        == []
    )
    aborted = {
        **reply,
        "time": {"created": 2000, "completed": 4000},
        "error": {"name": "MessageAbortedError"},
    }
    found = feed({"type": "message.updated.1", "data": {"info": aborted}})
    assert [type(e) for e in found] == [ToolCallStarted, TurnEnded]


def test_subagent_session_and_task_link() -> None:
    found = events("subagent")
    started = of(SubagentStarted, found)
    assert started[0].subagent_id == CHILD and started[0].session_id == ROOT
    assert started[0].subagent_type == "general" and started[0].call_id is None
    assert started[1].call_id == "call_stub_67e7556ea263" and started[1].subagent_id == CHILD
    (ended,) = of(SubagentEnded, found)
    assert ended.outcome == "completed" and ended.subagent_id == CHILD
    child_work = [e for e in found if getattr(e, "subagent_id", None) == CHILD]
    assert len(of(ModelResponded, child_work)) == 2 and len(of(ToolCallStarted, child_work)) == 1
    assert all(e.session_id == ROOT for e in child_work)
    assert [e.session_id for e in of(TurnStarted, found)] == [ROOT]  # the child's prompt: no turn


def test_default_home() -> None:
    assert OpenCode.default_home({"HOME": "/h"}) == Path("/h/.local/share/opencode")
    assert OpenCode.default_home({"HOME": "/h", "XDG_DATA_HOME": "/d"}) == Path("/d/opencode")
    assert OpenCode.default_home({"OPENCODE_DB": "/x/y/my.db"}) == Path("/x/y")


def test_match() -> None:
    harness = OpenCode()
    assert harness.match(PurePosixPath("opencode.db")) == "sqlite"
    for other in ("opencode.db-wal", "opencode.db-shm", "log/opencode.log", "storage/x.json"):
        assert harness.match(PurePosixPath(other)) is None


def test_a_process_holding_the_database_makes_its_recent_sessions_candidates() -> None:
    from coding_agent_exporter.runtime.engine import Engine, Source
    from coding_agent_exporter.sources.holders import HeldSessions
    from coding_agent_exporter.state.state import State

    home = V / "subagent" / "home" / ".local" / "share" / "opencode"
    held = HeldSessions(
        OpenCode.holder_names, find=lambda paths, names: {p: [(4242, 100.0)] for p in paths}
    )
    state = State()
    Engine([Source(OpenCode(), home, held)], state).catch_up()
    assert [e.session_id for e in state.entries.values()] == [ROOT]  # the child is no session
    assert all(e.derived and e.pid == 4242 for e in state.entries.values())


# -- live: the recorded rows replayed into a database an `opencode` process holds open -----------

INTERACTIVE = V / "interactive" / "home" / ".local" / "share" / "opencode" / "opencode.db"
RECORDING_END = 1796034600.0  # just after the interactive recording's last row: none is quiet


@pytest.fixture
def replay(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection, list[tuple[Any, ...]]]]:
    """The interactive recording's database emptied of its events, in WAL mode and open for
    writing (the test is OpenCode's writer), and its rows, oldest first, to write back."""
    home = tmp_path / "opencode"
    home.mkdir()
    database = home / "opencode.db"
    shutil.copyfile(INTERACTIVE, database)
    writer = sqlite3.connect(database, isolation_level=None)
    recorded = writer.execute("SELECT * FROM event ORDER BY rowid").fetchall()
    writer.execute("PRAGMA journal_mode=wal")
    writer.execute("DELETE FROM event")
    writer.execute("DELETE FROM event_sequence")
    yield database, writer, recorded
    writer.close()


def write(writer: sqlite3.Connection, row: tuple[Any, ...]) -> None:
    """One event row the way OpenCode commits it: the row and its session's sequence head."""
    columns = [c[1] for c in writer.execute("PRAGMA table_info(event)")]
    event = dict(zip(columns, row, strict=True))
    writer.execute("BEGIN")
    writer.execute(
        "INSERT INTO event_sequence (aggregate_id, seq) VALUES (?, ?) "
        "ON CONFLICT(aggregate_id) DO UPDATE SET seq = excluded.seq",
        (event["aggregate_id"], event["seq"]),
    )
    writer.execute(f"INSERT INTO event VALUES ({', '.join('?' * len(row))})", row)
    writer.execute("COMMIT")


@pytest.fixture
def opencode_process(
    replay: tuple[Path, sqlite3.Connection, list[tuple[Any, ...]]],
) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(holding(replay[0], "opencode"), stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"held\n"
    yield process
    process.kill()
    process.wait()
    process.stdout.close()


def live_states(state: State) -> list[str]:
    return [state.status(key, entry)[0] for key, entry in sorted(state.live.items())]


def test_replayed_tui_session_is_running_during_each_turn_and_idle_between(
    replay: tuple[Path, sqlite3.Connection, list[tuple[Any, ...]]],
    opencode_process: subprocess.Popen[bytes],
) -> None:
    """Every recorded row written again, one commit each, while a process named `opencode`
    holds the database: the session runs during each of its five turns (the approval dialog of
    the first one included: OpenCode writes no pending approval) and is idle between them."""
    database, writer, recorded = replay
    state = State()
    engine = Engine([Source(OpenCode(), database.parent)], state, Stats())
    engine.catch_up()
    seen: list[str] = []
    for row in recorded:
        write(writer, row)
        engine.changed([database.with_name("opencode.db-wal")])
        state.refresh(RECORDING_END, process_start)
        for word in live_states(state):
            if not seen or seen[-1] != word:
                seen.append(word)
    assert seen == ["idle"] + ["running", "idle"] * 5  # known before its first prompt
    ((key, entry),) = state.live.items()
    assert entry.pid == opencode_process.pid and key == ("opencode", ROOT_TUI)

    opencode_process.kill()
    opencode_process.wait()
    state.refresh(RECORDING_END, process_start)
    assert state.live == {}


def test_a_killed_process_ends_its_open_turn_and_tool(
    replay: tuple[Path, sqlite3.Connection, list[tuple[Any, ...]]],
    opencode_process: subprocess.Popen[bytes],
) -> None:
    database, writer, recorded = replay
    running = next(
        i for i, row in enumerate(recorded) if '"status":"running"' in row[-1] and i > 50
    )
    for row in recorded[: running + 1]:  # the last turn's `sleep 30` runs
        write(writer, row)
    state = State()
    Engine([Source(OpenCode(), database.parent)], state, Stats()).catch_up()
    state.refresh(RECORDING_END, process_start)
    assert live_states(state) == ["running"]
    session = state.session("opencode", ROOT_TUI)
    assert session.open_tools

    opencode_process.kill()
    opencode_process.wait()
    state.refresh(RECORDING_END, process_start)
    assert state.live == {}
    assert session.turn_open_at is None and not session.open_tools
    assert state.totals.turns[("opencode", "/home/user/work/shop-api", "interrupted")] >= 1

"""A session's turns for the console (`runtime.replay`): replayed from the session's own files,
they are the trees `traces` exports for it, in every recorded scenario; the recorded sub-agent
turn is the work the stub served; a live session's open turn is `running`; a replay is kept
until a file changes; `/api/sessions/<agent>/<id>/turns` serves them with trace links."""

from __future__ import annotations

import json
import shutil
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from coding_agent_exporter.runtime.app import App
from coding_agent_exporter.runtime.engine import Engine
from coding_agent_exporter.runtime.replay import Replays
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.state import State
from coding_agent_exporter.traces.sdk import recording
from coding_agent_exporter.traces.spans import SpanWriter
from coding_agent_exporter.traces.waterfall import turns
from coding_agent_exporter.web import api
from coding_agent_exporter.web.server import Server

from .conftest import FIXTURES, NOW, agent_of, app_for, expected, home_flags, source_for

SUBAGENT = FIXTURES / "claude-code" / "2.1.332" / "subagent-foreground"


def exported(home: Path, app: App) -> dict[str, list[dict[str, Any]]]:
    """What `traces --since all` makes of the whole home, as the console's turns per session."""
    tracer, kept = recording(100_000)
    writer = SpanWriter(tracer, app.config.project, since=0.0)
    state = State(observer=writer)
    Engine([source_for(home)], state, Stats()).catch_up()
    state.refresh(NOW, lambda pid: None)  # every recorded process is gone: all work ends
    assert not writer.unsent()
    traces = kept.kept.values()
    return {sid: turns(traces, (), sid) for (_, sid), s in state.sessions.items() if s.counted}


def test_a_replay_is_what_traces_export(scenario: Path) -> None:
    home = scenario / "home"
    app = app_for(home)
    want = exported(home, app)
    replays = Replays(app, clock=lambda: NOW)
    agent = agent_of(scenario)
    for session_id, turns_of in want.items():
        got = replays.turns(agent, session_id, 500)
        assert got is not None
        assert got["turns"] == turns_of, session_id
        assert got["total"] == len(turns_of)


def test_the_sub_agent_turn_is_the_work_the_stub_served() -> None:
    """From the recording's facts (expected.json, taken from the stub's log), not our output:
    the lead's tool call launched the sub-agent, whose own calls and tokens sit beneath it."""
    facts = expected(SUBAGENT)["sessions"][0]
    sub = facts["subagents"][0]
    found = Replays(app_for(SUBAGENT / "home"), clock=lambda: NOW).turns(
        "claude-code", facts["session_id"], 50
    )
    assert found is not None
    first = found["turns"][0]
    spans = {s["span_id"]: s for s in first["spans"]}

    def path(span: dict[str, Any]) -> list[str]:
        names = [span["name"]]
        while span["parent_id"] in spans:
            span = spans[span["parent_id"]]
            names.append(span["name"])
        return names[::-1]

    (launched,) = [s for s in first["spans"] if s["name"] == f"invoke_agent {sub['type']}"]
    assert path(launched) == ["invoke_agent claude-code", "execute_tool Agent", launched["name"]]
    assert launched["attributes"]["gen_ai.agent.id"] == sub["id"]
    beneath = [s for s in first["spans"] if s["parent_id"] == launched["span_id"]]
    tools = [s["attributes"]["gen_ai.tool.name"] for s in beneath if s["operation"] != "chat"]
    assert sorted(tools) == sorted(t for t, n in sub["by_tool"].items() for _ in range(n))
    assert [s["operation"] for s in beneath].count("chat") == sub["messages"]
    assert launched["tokens"] == {**sub["tokens"], "reasoning": 0}
    total = {k: sum(t["tokens"][k] for t in found["turns"]) for k in facts["tokens"]}
    assert total == facts["tokens"] and found["total"] == facts["turns"]["completed"] + 1
    assert all(s["end_ms"] >= s["start_ms"] for t in found["turns"] for s in t["spans"])


def open_turn(tmp_path: Path, **status: object) -> tuple[Path, str]:
    """The sub-agent scenario cut just after the lead called its Agent tool, with a live index
    entry of a running Claude Code (pid 4242) for it."""
    home = tmp_path / "claude"
    shutil.copytree(SUBAGENT / "home", home)
    session_id = expected(SUBAGENT)["sessions"][0]["session_id"]
    (journal,) = home.glob(f"projects/*/{session_id}.jsonl")
    journal.write_text("".join(journal.read_text().splitlines(keepends=True)[:20]))
    entry = {"pid": 4242, "sessionId": session_id, "cwd": "/home/user/work/shop-api",
             "startedAt": 0, "kind": "interactive", "status": "busy", "updatedAt": 0,
             **status}  # fmt: skip
    (home / "sessions").mkdir()
    (home / "sessions" / "4242.json").write_text(json.dumps(entry))
    return home, session_id


def test_a_live_session_s_open_turn_is_running(tmp_path: Path) -> None:
    home, session_id = open_turn(tmp_path)
    app = app_for(home, alive=frozenset({4242}))
    found = Replays(app, clock=lambda: NOW).turns("claude-code", session_id, 50)
    assert found is not None
    (turn,) = found["turns"]
    assert turn["outcome"] == "running" and turn["end_ms"] == NOW * 1000
    names = [s["name"] for s in turn["spans"]]
    assert names[0] == "invoke_agent claude-code" and "execute_tool Agent" in names


def test_a_wait_for_the_user_under_way_is_drawn_under_the_blocked_call(tmp_path: Path) -> None:
    home, session_id = open_turn(
        tmp_path,
        status="waiting",
        waitingFor="permission prompt",
        statusUpdatedAt=1_796_000_000_000,
    )
    app = app_for(home, alive=frozenset({4242}))
    found = Replays(app, clock=lambda: NOW).turns("claude-code", session_id, 50)
    assert found is not None
    (turn,) = found["turns"]
    spans = {s["span_id"]: s for s in turn["spans"]}
    (wait,) = [s for s in turn["spans"] if s["operation"] == "wait"]
    assert wait["name"] == "wait permission prompt"
    assert spans[wait["parent_id"]]["name"] == "execute_tool Agent"
    assert (wait["start_ms"], wait["end_ms"]) == (1_796_000_000_000.0, NOW * 1000)


def test_a_replay_is_kept_until_a_file_changes(tmp_path: Path) -> None:
    home, session_id = open_turn(tmp_path)
    app = app_for(home, alive=frozenset({4242}))
    replays = Replays(app, clock=lambda: NOW)
    first = replays.turns("claude-code", session_id, 50)
    assert replays.turns("claude-code", session_id, 50) == first
    assert replays.turns("claude-code", session_id, 0) == {**(first or {}), "turns": []}
    (journal,) = home.glob(f"projects/*/{session_id}.jsonl")
    whole = (SUBAGENT / "home" / journal.relative_to(home)).read_text()
    journal.write_text(whole)  # the turn went on and ended
    app.changed([journal])
    after = replays.turns("claude-code", session_id, 50)
    assert after is not None and after["turns"][0]["outcome"] == "completed"
    assert after["total"] == 2


def test_a_long_file_is_replayed_from_its_last_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last turns of a session too long to replay whole, and how much was left out."""
    from coding_agent_exporter.runtime import replay

    home = FIXTURES / "claude-code" / "2.1.332" / "interactive" / "home"
    app = app_for(home)
    (key,) = [k for k, s in app.state.sessions.items() if s.counted]
    whole = Replays(app, clock=lambda: NOW).turns(*key, 50)
    (journal,) = app.state.sessions[key].file_names
    size = Path(journal).stat().st_size
    monkeypatch.setattr(replay, "LAST_BYTES", size // 3)
    cut = Replays(app, clock=lambda: NOW).turns(*key, 50)
    assert whole is not None and cut is not None and whole["skipped_bytes"] == 0
    assert cut["skipped_bytes"] == size - size // 3
    assert 0 < len(cut["turns"]) < len(whole["turns"])
    assert cut["turns"][-1] == whole["turns"][-1]  # the last turn, whole


def test_a_replay_asked_again_reads_only_what_was_appended(tmp_path: Path) -> None:
    home, session_id = open_turn(tmp_path)
    app = app_for(home, alive=frozenset({4242}))
    replays = Replays(app, clock=lambda: NOW)
    assert replays.turns("claude-code", session_id, 50) is not None
    (journal,) = home.glob(f"projects/*/{session_id}.jsonl")
    before = journal.stat().st_size
    whole = (SUBAGENT / "home" / journal.relative_to(home)).read_bytes()
    journal.write_bytes(whole)  # the same lines, and the rest after them
    app.changed([journal])
    read = replays._kept[("claude-code", session_id)].engine.stats.bytes_read
    already = read["claude-code"]
    after = replays.turns("claude-code", session_id, 50)
    assert read["claude-code"] - already == len(whole) - before  # the new bytes alone
    assert after is not None and [t["outcome"] for t in after["turns"]] == ["completed"] * 2


def test_a_file_written_again_is_replayed_from_its_start(tmp_path: Path) -> None:
    home, session_id = open_turn(tmp_path)
    app = app_for(home, alive=frozenset({4242}))
    replays = Replays(app, clock=lambda: NOW)
    first = replays.turns("claude-code", session_id, 50)
    (journal,) = home.glob(f"projects/*/{session_id}.jsonl")
    lines = journal.read_text().splitlines(keepends=True)
    prompt = next(i for i, line in enumerate(lines) if '"type":"user"' in line)
    journal.write_text("".join(lines[: prompt + 1]))  # shorter: written again, no reply yet
    app.changed([journal])
    again = replays.turns("claude-code", session_id, 50)
    fresh = Replays(app, clock=lambda: NOW).turns("claude-code", session_id, 50)
    assert first is not None and again is not None and fresh is not None
    assert {**again, "replayed_ms": 0} == {**fresh, "replayed_ms": 0} != {**first, "replayed_ms": 0}
    lead = [s for s in again["turns"][0]["spans"] if s["parent_id"] is None or "Agent" in s["name"]]
    assert [s["name"] for s in lead] == ["invoke_agent claude-code"]  # no call, no reply yet


def test_a_session_unknown_or_only_named_is_none() -> None:
    replays = Replays(app_for(SUBAGENT / "home"), clock=lambda: NOW)
    assert replays.turns("claude-code", "no-such-session", 50) is None


def test_index_files_are_not_a_session_s_files(tmp_path: Path) -> None:
    """A live index names the session but tells none of its work: it is not replayed."""
    home, session_id = open_turn(tmp_path)
    app = app_for(home, alive=frozenset({4242}))
    files = app.state.sessions[("claude-code", session_id)].file_names
    assert files and all("/projects/" in f for f in files)
    assert len(files) == len({*files})


@pytest.fixture
def served() -> Any:
    app = app_for(SUBAGENT / "home", *home_flags(SUBAGENT / "home"))
    console = api.Api(
        app.config.project,
        api.Links(trace="http://jaeger:16686/trace/{trace_id}"),
        turns=Replays(app, clock=lambda: NOW).turns,
    )
    server = Server(
        ("127.0.0.1", 0),
        app.registry,
        "/metrics",
        threading.Event(),
        api=lambda path, query: console.answer(app.state, path, query),
    )
    server.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_turns_are_served_with_their_trace_links(served: str) -> None:
    session_id = expected(SUBAGENT)["sessions"][0]["session_id"]
    url = f"{served}/api/sessions/claude-code/{session_id}/turns?limit=1"
    with urllib.request.urlopen(url, timeout=10) as response:
        doc = json.loads(response.read())
    (turn,) = doc["turns"]  # the last one
    assert doc["total"] == 2 and doc["replayed_ms"] >= 0
    assert turn["trace_url"] == f"http://jaeger:16686/trace/{turn['trace_id']}"
    for path in (
        "/api/sessions/claude-code/nope/turns",
        f"/api/sessions/claude-code/{session_id}/x",
    ):
        try:
            urllib.request.urlopen(served + path, timeout=10)
        except urllib.error.HTTPError as error:
            assert error.code == 404
        else:
            raise AssertionError(path)

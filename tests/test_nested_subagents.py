"""Nested sub-agents (Claude Code 2.1.332: a sub-agent may start its own with the `Agent` tool):
lead → middle agent → grandchild, read right at every level.

The recordings (`fixtures/claude-code/2.1.332/subagent-nested*`, see `fixtures/record/record.py`)
hold the facts: each grandchild's `.meta.json` names its parent agent and depth; the call that
started it and its result are in the middle agent's file (which writes no `toolUseResult`); the
stub's log says what each level was sent. Expected values come from those files and that log,
never from our readers.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from coding_agent_exporter.events import SubagentEnded, SubagentStarted
from coding_agent_exporter.harnesses.claude_code.harness import ClaudeCode
from coding_agent_exporter.harnesses.claude_code.journal import JournalReader, agent_result_of
from coding_agent_exporter.runtime.app import App
from coding_agent_exporter.runtime.config import parse
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.state import State
from coding_agent_exporter.web.views import session_rows

from .conftest import app_for, home_flags
from .test_traces import spans_for

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "claude-code" / "2.1.332"
NESTED = (
    "subagent-nested",
    "subagent-nested-fails",
    "subagent-nested-running",
    "interactive-nested",
)


def rows(home: Path, **kwargs: Any) -> list[dict[str, Any]]:
    app = app_for(home, **kwargs)
    return session_rows(app.state, app.config.project, history=True)


def metas(scenario: Path) -> dict[str, dict[str, Any]]:
    """Each sub-agent's `.meta.json`, by agent id."""
    return {
        path.name.removesuffix(".meta.json").removeprefix("agent-"): json.loads(path.read_text())
        for path in (scenario / "home" / "projects").rglob("agent-*.meta.json")
    }


def stub_totals(scenario: Path) -> Counter[str]:
    """What the stub answered, summed over every request it answered 200 (all levels)."""
    total: Counter[str] = Counter()
    for line in (scenario / "stub-log.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry.get("status") == 200 and entry.get("usage"):
            usage = entry["usage"]
            total["input"] += usage["input_tokens"]
            total["output"] += usage["output_tokens"]
            total["cache_read"] += usage["cache_read_input_tokens"]
            total["cache_write"] += usage["cache_creation_input_tokens"]
    return total


@pytest.mark.parametrize("name", NESTED)
def test_every_level_is_under_its_parent_with_the_state_its_launching_call_gave(name: str) -> None:
    scenario = FIXTURES / name
    facts = {
        s["id"]: s
        for s in json.loads((scenario / "expected.json").read_text())["sessions"][0]["subagents"]
    }
    (row,) = rows(scenario / "home")
    got = {s["id"]: s for s in row["subagents"]}
    meta = metas(scenario)
    assert set(got) == set(meta) == set(facts)
    depths = {meta[a]["spawnDepth"] for a in meta}
    assert depths == {1, 2}, "the recording holds a grandchild"
    for agent_id, sub in got.items():
        assert sub["parent_id"] == meta[agent_id].get("parentAgentId"), agent_id
        want = facts[agent_id]["state"]
        if want == "running" and name.endswith("-running"):  # the agent was killed meanwhile
            want = "cancelled"
        assert sub["state"] == want, agent_id
        assert {k: sub["tokens"][k] for k in facts[agent_id]["tokens"]} == facts[agent_id]["tokens"]


def test_the_grandchild_of_the_recorded_run_completed_and_failed_as_the_stub_answered() -> None:
    """Literal facts of the two finished recordings: the stub answered the grandchild of
    `subagent-nested` (scenario `child`: 200 twice) and refused that of `-fails` (400 every
    time); the middle agent's file has the call's result (ok, or an error)."""
    states = {}
    for name in ("subagent-nested", "subagent-nested-fails"):
        scenario = FIXTURES / name
        (row,) = rows(scenario / "home")
        grandchild = next(s for s in row["subagents"] if s["parent_id"] is not None)
        states[name] = grandchild["state"]
    assert states == {"subagent-nested": "completed", "subagent-nested-fails": "failed"}


@pytest.mark.parametrize("name", NESTED)
def test_the_whole_tree_counts_each_response_once_as_the_stub_sent_it(name: str) -> None:
    scenario = FIXTURES / name
    (row,) = rows(scenario / "home")
    sent = stub_totals(scenario)
    assert {k: row["tokens"][k] for k in sent} == dict(sent)
    body = generate_latest(app_for(scenario / "home").registry).decode()
    labels = 'agent="claude-code",model="claude-opus-5-5",project="~/work/shop-api"'
    for kind, value in sent.items():
        assert f'coding_agent_tokens_total{{{labels},type="{kind}"}} {float(value)}' in body


def test_subagents_total_counts_every_level() -> None:
    body = generate_latest(app_for(FIXTURES / "subagent-nested-fails" / "home").registry).decode()
    for outcome in ("completed", "failed"):  # the middle agent, its grandchild
        labels = f'agent="claude-code",outcome="{outcome}",subagent_type="general-purpose"'
        assert f"coding_agent_subagents_total{{{labels}}} 1.0" in body


@pytest.mark.parametrize("name", NESTED)
def test_each_levels_span_sits_under_the_call_that_started_it(name: str) -> None:
    scenario = FIXTURES / name
    spans = spans_for(scenario / "home")
    meta = metas(scenario)
    by_id = {s.context.span_id: s for s in spans}
    agents = {
        s.attributes["gen_ai.agent.id"]: s
        for s in spans
        if s.name.startswith("invoke_agent") and s.attributes and "gen_ai.agent.id" in s.attributes
    }
    assert set(agents) == set(meta)
    for agent_id, span in agents.items():
        call = by_id[span.parent.span_id]  # type: ignore[union-attr]
        assert call.name == "execute_tool Agent", agent_id
        parent_agent = meta[agent_id].get("parentAgentId")
        above = by_id[call.parent.span_id]  # type: ignore[union-attr]
        if parent_agent is None:
            assert above.name == "invoke_agent claude-code"
        else:
            assert above is agents[parent_agent], agent_id


def test_a_running_grandchild_of_a_live_session_is_running_at_every_level(tmp_path: Path) -> None:
    """The files as the recording left them while the grandchild ran `sleep 30`, with the live
    index's process alive: both levels run, and `coding_agent_subagents_running` counts both."""
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "subagent-nested-running" / "home", home)
    (index,) = (home / "sessions").glob("*.json")
    pid = int(index.stem)
    started = json.loads(index.read_text())["startedAt"] / 1000
    config = parse(["metrics", *home_flags(home)], {"HOME": "/home/user"})
    probe = lambda p: started if p == pid else None  # noqa: E731 - the live index's process
    app = App(config, process_metrics=False, clock=lambda: started + 5, probe=probe)
    app.catch_up()
    (row,) = session_rows(app.state, app.config.project, history=True)
    assert row["live"] is True
    assert sorted(s["state"] for s in row["subagents"]) == ["running", "running"]
    body = generate_latest(app.registry).decode()
    assert (
        'coding_agent_subagents_running{agent="claude-code",subagent_type="general-purpose"} 2.0'
        in body
    )


def test_a_subagents_journal_ends_its_grandchild_by_the_calls_result_text() -> None:
    """Unit: a middle agent's journal names the grandchild only in the result's text."""
    assert agent_result_of("Async agent launched successfully.\nagentId: a1 (internal)") == {
        "agentId": "a1",
        "status": "async_launched",
    }
    assert agent_result_of("report\nagentId: b2 (use SendMessage)") == {
        "agentId": "b2",
        "status": "completed",
    }
    assert agent_result_of("Agent terminated early due to an API error") == {"status": "completed"}
    reader = JournalReader("s", subagent_id="mid")
    call = {
        "type": "tool_use",
        "id": "c1",
        "name": "Agent",
        "input": {"description": "d", "prompt": "p"},
    }
    reader.feed(
        {
            "type": "assistant",
            "timestamp": "2026-01-01T00:00:00Z",
            "message": {"id": "m", "model": "claude-opus-5-5", "content": [call]},
        }
    )
    failed = {
        "type": "tool_result",
        "tool_use_id": "c1",
        "is_error": True,
        "content": "Agent terminated early",
    }
    events = reader.feed(
        {"type": "user", "timestamp": "2026-01-01T00:00:01Z", "message": {"content": [failed]}}
    )
    assert [e for e in events if isinstance(e, SubagentEnded)] == [
        SubagentEnded(session_id="s", at=events[0].at, outcome="failed", call_id="c1")
    ]
    assert not [e for e in events if isinstance(e, SubagentStarted)]


def test_engine_reads_the_nested_recording_with_no_running_leftover() -> None:
    engine = Engine([Source(ClaudeCode(), FIXTURES / "subagent-nested" / "home")], State(), Stats())
    engine.catch_up()
    (session,) = engine.state.sessions.values()
    assert all(s.state == "completed" for s in session.unique_subagents())


CODEX = FIXTURES.parent.parent / "codex" / "0.171.0" / "subagent-nested"


def test_codex_child_threads_that_spawn_are_read_under_their_parent_thread() -> None:
    """Codex 0.171 with `[agents] max_depth = 2`: the lead spawns a child thread, which spawns
    its own. Each thread's parent, state and tokens are the recording's facts (from the stub's
    log and each rollout's `parent_thread_id`); its span sits under the spawn call."""
    facts = json.loads((CODEX / "expected.json").read_text())
    (session,) = facts["sessions"]
    (row,) = rows(CODEX / "home")
    got = {s["id"]: s for s in row["subagents"]}
    assert set(got) == {s["id"] for s in session["subagents"]}
    for sub in session["subagents"]:
        parent = None if sub["parent"] == session["session_id"] else sub["parent"]
        assert got[sub["id"]]["parent_id"] == parent, sub["id"]
        assert got[sub["id"]]["state"] == sub["state"]
        assert got[sub["id"]]["tokens"] == sub["tokens"]
    assert [s["parent"] != session["session_id"] for s in session["subagents"]].count(True) == 1
    assert row["tokens"] == facts["home"]["tokens"]
    spans = spans_for(CODEX / "home")
    by_id = {s.context.span_id: s for s in spans}
    agents = {
        s.attributes["gen_ai.agent.id"]: s
        for s in spans
        if s.name == "invoke_agent subagent" and s.attributes
    }
    for sub in session["subagents"]:
        call = by_id[agents[sub["id"]].parent.span_id]  # type: ignore[union-attr]
        assert call.name == "execute_tool multi_agent_v1.spawn_agent"
        above = by_id[call.parent.span_id]  # type: ignore[union-attr]
        if sub["parent"] != session["session_id"]:
            assert above is agents[sub["parent"]]


CLINE = FIXTURES.parent.parent / "cline" / "3.0.65" / "subagent-nested"


def test_cline_sub_agents_that_spawn_are_read_under_the_sub_agent_that_spawned_them() -> None:
    """Cline 3.0.65 offers a sub-agent `spawn_agent`; the grandchild's file names only the lead
    (`origin.parentThreadId`), so its parent is the sub-agent whose call gave its task. Facts:
    the stub's log (which request made which call, each sub-agent's tokens)."""
    facts = json.loads((CLINE / "expected.json").read_text())
    (session,) = facts["sessions"]
    by_task = {s["task"]: s for s in session["subagents"]}
    (row,) = rows(CLINE / "home")
    got = {s["id"]: s for s in row["subagents"]}
    assert set(got) == {s["id"] for s in session["subagents"]}
    nested = [s for s in session["subagents"] if s["parent_task"] is not None]
    assert len(nested) == 1
    for sub in session["subagents"]:
        parent = by_task[sub["parent_task"]]["id"] if sub["parent_task"] else None
        assert got[sub["id"]]["parent_id"] == parent, sub["id"]
        assert got[sub["id"]]["state"] == sub["state"]
        assert {k: got[sub["id"]]["tokens"][k] for k in sub["tokens"]} == sub["tokens"]
    assert {k: row["tokens"][k] for k in session["tokens"]} == session["tokens"]

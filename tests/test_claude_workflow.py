"""Claude Code workflows (2.1.3xx): the `Workflow` tool's run, its agents and how they ended."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

from coding_agent_exporter.events import (
    LiveIndexRead,
    RunLaunched,
    SubagentEnded,
    SubagentStarted,
    TurnEnded,
    TurnStarted,
)
from coding_agent_exporter.harnesses.claude_code.harness import ClaudeCode, MetaReader
from coding_agent_exporter.harnesses.claude_code.journal import JournalReader
from coding_agent_exporter.harnesses.claude_code.workflow import RunReader
from coding_agent_exporter.harnesses.fields import timestamp
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.state import State
from coding_agent_exporter.web.views import session_rows

from .conftest import app_for
from .test_claude_code import SID, kinds, user
from .test_traces import spans_for

RUN = "wf_43455262-abe"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "claude-code" / "2.1.332"
META = {
    "agentType": "workflow-subagent",
    "description": "count:a",
    "requestShape": "foreground",
    "inWorkflowRun": True,
}


def agent(agent_id: str, state: str, **extra: object) -> dict[str, object]:
    return {
        "type": "workflow_agent",
        "label": f"count:{agent_id}",
        "agentId": agent_id,
        "state": state,
        "startedAt": 1796167570241,
        **extra,
    }


def run_file(status: str, *agents: dict[str, object]) -> dict[str, object]:
    return {
        "runId": RUN,
        "timestamp": "2026-12-01T23:26:10.755Z",
        "workflowName": "count-files",
        "status": status,
        "workflowProgress": list(agents),
    }


def test_match_knows_the_workflow_files_and_leaves_the_rest() -> None:
    cc = ClaudeCode()
    run = f"projects/-p/abc/subagents/workflows/{RUN}"
    assert cc.match(PurePosixPath(f"{run}/agent-a2cab99.jsonl")) == "jsonl"
    assert cc.match(PurePosixPath(f"{run}/agent-a2cab99.meta.json")) == "doc"
    assert cc.match(PurePosixPath(f"projects/-p/abc/workflows/{RUN}.json")) == "doc"
    assert cc.match(PurePosixPath(f"{run}/journal.jsonl")) is None
    assert cc.match(PurePosixPath(f"projects/-p/abc/workflows/scripts/x-{RUN}.js")) is None
    reader = cc.reader(PurePosixPath(f"projects/-p/abc/workflows/{RUN}.json"))
    assert isinstance(reader, RunReader) and reader.run_id == RUN
    meta = cc.reader(PurePosixPath(f"{run}/agent-a2cab99.meta.json"))
    assert isinstance(meta, MetaReader) and meta.run_id == RUN


def test_workflow_result_names_the_run_its_call_launched() -> None:
    events = JournalReader(SID).feed(
        user(
            [{"type": "tool_result", "tool_use_id": "toolu_w", "content": "Workflow launched"}],
            toolUseResult={
                "status": "async_launched",
                "taskType": "local_workflow",
                "workflowName": "count-files",
                "runId": RUN,
            },
        )
    )
    assert kinds(events) == ["SessionSeen", "ToolCallEnded", "RunLaunched"]
    launched = events[-1]
    assert isinstance(launched, RunLaunched)
    assert (launched.call_id, launched.run_id, launched.name) == ("toolu_w", RUN, "count-files")


def test_a_workflow_agents_meta_names_its_run_and_the_background() -> None:
    (started,) = MetaReader(SID, "a1", RUN).feed(META)
    assert isinstance(started, SubagentStarted)
    assert (started.run_id, started.background, started.call_id) == (RUN, True, None)
    assert (started.subagent_type, started.title) == ("workflow-subagent", "count:a")


def test_run_file_tells_how_each_agent_ended() -> None:
    events = RunReader(SID, RUN).feed(
        run_file(
            "killed",
            agent("a", "done", durationMs=500),
            agent("b", "error", durationMs=360),
            agent("c", "start"),
        )
    )
    ended = {
        e.subagent_id: (e.outcome, round(e.at, 3)) for e in events if isinstance(e, SubagentEnded)
    }
    assert ended == {
        "a": ("completed", 1796167570.741),
        "b": ("failed", 1796167570.601),
        "c": ("cancelled", 1796167570.755),
    }
    started = [e for e in events if isinstance(e, SubagentStarted)]
    assert {(e.run_id, e.subagent_type, e.background) for e in started} == {
        (RUN, "workflow-subagent", True)
    }


def test_an_agent_of_a_run_still_going_has_not_ended() -> None:
    events = RunReader(SID, RUN).feed(run_file("running", agent("c", "start")))
    assert kinds(events) == ["SubagentStarted"]


def test_workflow_agents_are_background_subagents_of_the_workflow_call() -> None:
    state = State()
    for agent_id in ("a", "b"):  # told before the call that launched their run
        state.apply("claude-code", MetaReader(SID, agent_id, RUN).feed(META)[0])
    state.apply(
        "claude-code",
        RunLaunched(session_id=SID, at=1.0, call_id="toolu_w", run_id=RUN, name="count-files"),
    )
    subs = state.session("claude-code", SID).unique_subagents()
    assert [(s.id, s.call_id, s.title, s.background) for s in subs] == [
        ("a", "toolu_w", "count-files: count:a", True),
        ("b", "toolu_w", "count-files: count:a", True),
    ]
    assert "toolu_w" not in state.session("claude-code", SID).subagents  # one call, many agents


def test_the_workflow_span_holds_one_invoke_agent_span_per_agent() -> None:
    spans = spans_for(FIXTURES / "workflow-parallel" / "home")
    (workflow,) = [s for s in spans if s.name == "execute_tool Workflow"]
    agents = [s for s in spans if s.parent and s.parent.span_id == workflow.context.span_id]
    assert [s.name for s in agents] == ["invoke_agent workflow-subagent"] * 2
    for each in agents:
        beneath = sorted(
            s.name for s in spans if s.parent and s.parent.span_id == each.context.span_id
        )
        assert beneath == ["chat claude-opus-5-5", "chat claude-opus-5-5", "execute_tool Bash"]


def test_a_saved_project_workflow_run_by_its_name_titles_its_agents() -> None:
    app = app_for(FIXTURES / "workflow-named" / "home")
    (row,) = session_rows(app.state, app.config.project, history=True)
    subs = row["subagents"]
    assert sorted(s["title"] for s in subs) == ["count-project: count:a", "count-project: count:b"]
    assert {(s["type"], s["state"], s["background"]) for s in subs} == {
        ("workflow-subagent", "completed", True)
    }


def test_a_run_still_going_after_its_leads_turn_keeps_the_session_background() -> None:
    state = State()
    busy = LiveIndexRead(
        pid=10, session_id=SID, started_at=1.0, status="busy", status_at=2.0, source="s/10.json"
    )
    state.apply("claude-code", busy)
    state.apply("claude-code", MetaReader(SID, "a", RUN).feed(META)[0])
    key = ("claude-code", SID)
    assert state.status(key, busy)[0] == "background"
    state.apply("claude-code", TurnStarted(session_id=SID, at=3.0, record_id="u1", prompt="go"))
    assert state.status(key, busy)[0] == "running"  # the lead works again
    state.apply("claude-code", TurnEnded(session_id=SID, at=4.0, outcome="completed"))
    state.apply(
        "claude-code", RunReader(SID, RUN).feed(run_file("completed", agent("a", "done")))[1]
    )
    assert state.status(key, busy)[0] == "running"  # the run ended: busy is the lead's again


def test_the_recorded_run_keeps_the_session_background_after_its_leads_turn(
    tmp_path: Path,
) -> None:
    """The files as they were 1 s after the lead's turn ended while the workflow ran (the
    records written by then; the run file comes at the run's end), and the live index then."""
    scenario = FIXTURES / "interactive-workflow"
    lead = next((scenario / "home" / "projects").glob("*/*.jsonl"))
    ended = [json.loads(line) for line in lead.read_text().splitlines()]
    cutoff = timestamp(next(r for r in ended if r.get("subtype") == "turn_duration")["timestamp"])
    assert cutoff is not None
    for path in (scenario / "home" / "projects").rglob("*.json*"):
        kept = _written_by(path, cutoff + 1.0)
        if kept is not None:
            (tmp_path / path.relative_to(scenario / "home")).parent.mkdir(
                parents=True, exist_ok=True
            )
            (tmp_path / path.relative_to(scenario / "home")).write_text(kept)
    timeline = [
        json.loads(line) for line in (scenario / "index-timeline.jsonl").read_text().splitlines()
    ]
    busy = next(c["doc"] for c in timeline if c["doc"] and c["doc"].get("status") == "busy")
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / f"{busy['pid']}.json").write_text(json.dumps(busy))
    engine = Engine([Source(ClaudeCode(), tmp_path)], State(), Stats())
    engine.catch_up()
    engine.state.refresh(cutoff + 1.0, lambda pid: busy["startedAt"] / 1000)
    ((key, entry),) = engine.state.live.items()
    assert engine.state.status(key, entry)[0] == "background"


def _written_by(path: Path, at: float) -> str | None:
    """A fixture file as it was at `at`: a journal's lines up to the first written later; a run
    file only if it was written by then."""
    text = path.read_text()
    if path.suffix == ".jsonl":
        lines = []
        for line in text.splitlines():
            written = timestamp(json.loads(line).get("timestamp"))
            if written is not None and written > at:
                break
            lines.append(line + "\n")
        return "".join(lines)
    written = timestamp(json.loads(text).get("timestamp"))
    return None if written is not None and written > at else text

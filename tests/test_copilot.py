"""GitHub Copilot CLI: the recorded journals (`fixtures/copilot/1.0.102/`, written by the real
binary against the stub) checked against the stub's own facts (`expected.json`), one test per
behaviour of the journal, and the live state replayed on the homes copied while Copilot ran
(running, needs_user, idle) and after it exited (gone)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from coding_agent_exporter.events import (
    Event,
    LiveIndexRead,
    LiveIndexRemoved,
    ModelFailed,
    ModelResponded,
    SubagentStarted,
    ToolCallEnded,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
    Usage,
)
from coding_agent_exporter.harnesses.base import RecordRejected
from coding_agent_exporter.harnesses.copilot.harness import Copilot, InUseReader
from coding_agent_exporter.harnesses.copilot.journal import EventsReader, Lock, Shared
from coding_agent_exporter.harnesses.fields import timestamp
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.state.state import State

from .conftest import FIXTURES, app_for

RECORDED = FIXTURES / "copilot" / "1.0.102"


def facts(scenario: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / scenario / "expected.json").read_text())
    return data


def journal(scenario: str, home: str = "home") -> tuple[str, list[dict[str, Any]]]:
    """The session id and records of a scenario's one session."""
    (folder,) = (RECORDED / scenario / home / ".copilot" / "session-state").glob("*-*-*-*-*")
    lines = (folder / "events.jsonl").read_text().splitlines()
    return folder.name, [json.loads(line) for line in lines]


def read(scenario: str, home: str = "home") -> list[Event]:
    session_id, records = journal(scenario, home)
    reader = EventsReader(session_id, Shared(session_id))
    return [e for r in records for e in reader.feed(r)]


def test_layout() -> None:
    copilot, sid = Copilot(), "d96f7d9d-68e4-4486-8416-5e8d0f0f47ec"
    assert copilot.match(PurePosixPath(f"session-state/{sid}/events.jsonl")) == "jsonl"
    assert copilot.match(PurePosixPath(f"session-state/{sid}/inuse.8591.lock")) == "text"
    for never in (
        f"session-state/{sid}/inuse.8591.hold",
        f"session-state/{sid}/workspace.yaml",
        f"session-state/.session-operation-locks/{sid}.lock",
        "session-store.db",
        "config.json",
        "session-state/not-a-session/events.jsonl",
    ):
        assert copilot.match(PurePosixPath(never)) is None, never
    assert Copilot.default_home({"COPILOT_HOME": "/x"}) == Path("/x")
    assert Copilot.default_home({"HOME": "/home/u"}) == Path("/home/u/.copilot")


def test_tokens_are_the_stubs_once_though_shutdown_repeats_them() -> None:
    """Every answered request is one `session.usage_record`; `session.shutdown` sums them again
    per model and per agent: the totals are the stub's, not twice the stub's."""
    for scenario in ("answer", "shell", "two-tools", "subagent", "resume", "tui-permission"):
        want = facts(scenario)["stub_truth"]
        responses = [e for e in read(scenario) if isinstance(e, ModelResponded)]
        assert len(responses) == want["answered"], scenario
        total = Usage()
        for r in responses:
            total = total.plus(r.usage)
        assert total.as_dict() == want["tokens"], scenario
        _, records = journal(scenario)
        shutdowns = [r for r in records if r["type"] == "session.shutdown"]
        metrics = shutdowns[-1]["data"]["modelMetrics"]["gpt-4o"]["usage"]
        assert metrics["outputTokens"] == want["tokens"]["output"]  # the same sums, not more


def test_input_excludes_the_cached_part() -> None:
    """`inputTokens` counts the cached input too (OpenAI's `prompt_tokens`): 3000 with 800 read
    from the cache is 2200 new input."""
    responses = [e for e in read("shell") if isinstance(e, ModelResponded)]
    assert [r.usage.input for r in responses] == [2000, 2200]
    assert [r.usage.cache_read for r in responses] == [0, 800]


def test_output_includes_the_reasoning() -> None:
    """The stub sent `completion_tokens` 50 of which `reasoning_tokens` 16: Copilot's
    `outputTokens` is the 50 (OpenAI's split), `reasoningTokens` the 16 (part of it)."""
    (response,) = [e for e in read("answer") if isinstance(e, ModelResponded)]
    want = facts("answer")["stub_truth"]["tokens"]
    assert (response.usage.output, response.usage.reasoning) == (want["output"], 16) == (50, 16)


def test_a_failing_command_is_an_error() -> None:
    (end,) = [e for e in read("failing-shell") if isinstance(e, ToolCallEnded)]
    assert end.outcome == "error" and facts("failing-shell")["sessions"][0]["tool_calls"]["error"]


def test_a_command_that_exits_non_zero_is_an_error() -> None:
    """Copilot writes `success: true` for a command that ran and exited 3; its exit code says
    otherwise (`shellExecution.exitCode`)."""
    ends = [e for e in read("two-tools") if isinstance(e, ToolCallEnded)]
    assert sorted(e.outcome for e in ends) == ["error", "ok"]
    want = facts("two-tools")["sessions"][0]["tool_calls"]
    assert (want["ok"], want["error"]) == (1, 1)


def test_a_subagent_runs_in_its_leads_journal() -> None:
    """The `task` call's id names the sub-agent; its records carry it as `parentToolCallId`,
    its usage records through the turn start they follow."""
    want = facts("subagent")["sessions"][0]["subagents"][0]
    events = read("subagent")
    (started,) = [e for e in events if isinstance(e, SubagentStarted)]
    assert started.subagent_id == started.call_id == want["id"]
    assert started.subagent_type == want["type"] and started.background is False
    mine = [e for e in events if isinstance(e, ModelResponded) and e.subagent_id == want["id"]]
    assert len(mine) == want["messages"]
    total = Usage()
    for r in mine:
        total = total.plus(r.usage)
    assert total.as_dict() == want["tokens"]
    row = app_for(RECORDED / "subagent" / "home")
    (session,) = row.state.sessions.values()
    assert session.subagents[want["id"]].tool_calls == want["tool_calls"] == 1


def test_a_background_subagent_and_the_runtimes_own_call() -> None:
    """`mode: background`: the lead answers and its turn ends; when the sub-agent is done,
    Copilot's runtime calls `read_agent` itself (an `assistant.message` without `apiCallId`)
    and asks the model again: that call is not counted, the model call is."""
    want = facts("subagent-background")["sessions"][0]
    events = read("subagent-background")
    (started,) = [e for e in events if isinstance(e, SubagentStarted)]
    assert started.background is True and want["subagents"][0]["background"] is True
    lead = [e for e in events if isinstance(e, ToolCallStarted) and e.subagent_id is None]
    assert [e.tool for e in lead] == ["task"] and want["tool_calls"]["total"] == 1
    _, records = journal("subagent-background")
    assert any(
        r["type"] == "tool.execution_start" and r["data"]["toolName"] == "read_agent"
        for r in records
    )
    responses = [e for e in events if isinstance(e, ModelResponded)]
    assert (
        len(responses) == want["messages"] == facts("subagent-background")["stub_truth"]["answered"]
    )
    assert [e.outcome for e in events if isinstance(e, TurnEnded)] == ["completed"]


def test_the_api_error_fails_the_turn_once() -> None:
    """Copilot retried the 500 five times (six requests) and wrote one `session.error`."""
    want = facts("api-error")
    assert want["stub_truth"]["http_errors"] == 6
    events = read("api-error")
    (failed,) = [e for e in events if isinstance(e, ModelFailed)]
    assert failed.error == "http_500"
    assert [e.outcome for e in events if isinstance(e, TurnEnded)] == ["failed"]
    assert not [e for e in events if isinstance(e, ModelResponded)]


def test_a_resumed_session_is_one_session_of_two_turns() -> None:
    """`--continue` appends to the same journal after a `session.resume`."""
    want = facts("resume")["sessions"]
    assert len(want) == 1 and want[0]["turns"]["completed"] == 2
    events = read("resume")
    assert len([e for e in events if isinstance(e, TurnStarted)]) == 2
    assert [e.outcome for e in events if isinstance(e, TurnEnded)] == ["completed"] * 2


def test_print_mode_and_the_tui_are_told_apart() -> None:
    for scenario, kind in (("answer", "headless"), ("tui-permission", "interactive")):
        (session,) = app_for(RECORDED / scenario / "home").state.sessions.values()
        assert session.kind == kind == facts(scenario)["sessions"][0]["kind"]


def test_a_rejection_an_escaped_question_and_an_interrupted_answer() -> None:
    """ "No, and tell Copilot what to do differently" rejects the call (`error.code` `denied`)
    and the turn goes on; Esc at the next question: `abort`, the turn interrupted, the call
    never ended (cancelled); Esc twice while an answer streams: `abort` too, and no usage
    record for the cut stream (the stub never sent its usage)."""
    events = read("tui-permission")
    ends = [e.outcome for e in events if isinstance(e, TurnEnded)]
    assert ends == ["completed", "completed", "interrupted", "interrupted"]
    calls = [e.outcome for e in events if isinstance(e, ToolCallEnded)]
    assert calls == ["ok", "rejected"]
    want = facts("tui-permission")
    session_facts = want["sessions"][0]
    assert (session_facts["tool_calls"]["rejected"], session_facts["tool_calls"]["cancelled"]) == (
        1,
        1,
    )
    responses = [e for e in events if isinstance(e, ModelResponded)]
    assert len(responses) == want["stub_truth"]["answered"] == 5  # of 6 requests
    (session,) = app_for(RECORDED / "tui-permission" / "home").state.sessions.values()
    assert dict(session.turns) == {"completed": 2, "interrupted": 2}


# ---------------------------------------------------------------- live state
def copied(scenario: str, copy: str) -> tuple[Path, dict[str, Any], tuple[str, str], float]:
    """A home copied while Copilot ran: its folder, the copy's expected facts, the session's
    key and when the session was opened."""
    home = RECORDED / scenario / copy / ".copilot"
    want = facts(scenario)["live_copies"][copy]
    session_id, records = journal(scenario, copy)
    (lock,) = (home / "session-state" / session_id).glob("inuse.*.lock")
    assert lock.read_text().strip() == str(want["pid"])  # the run's own process
    opened = timestamp(records[0]["data"]["startTime"]) or 0.0
    return home, want, ("copilot", session_id), opened


def live_state(home: Path, pid: int, started: float, now: float) -> State:
    """`home` read once, `pid` running since `started`, refreshed at `now`."""
    state = State()
    Engine([Source(Copilot(), home)], state).catch_up()
    state.refresh(now, lambda p: started if p == pid else None)
    return state


def test_a_print_run_is_live_while_its_command_runs() -> None:
    home, want, key, opened = copied("running", "home-live")
    state = live_state(home, want["pid"], opened - 0.3, opened + 1)
    assert want["turn_open"] and want["tool_calls_open"]
    assert state.status(key, state.live[key])[0] == want["state"] == "running"


def test_the_tui_waits_for_you_at_its_permission_question() -> None:
    home, want, key, opened = copied("tui-permission", "home-live")
    state = live_state(home, want["pid"], opened - 0.3, opened + 1)
    assert state.status(key, state.live[key])[:2] == (want["state"], "bash")
    assert want["state"] == "needs_user" and state.session(*key).turn_open_at is not None


def test_the_tui_idles_between_turns() -> None:
    home, want, key, opened = copied("tui-permission", "home-idle")
    state = live_state(home, want["pid"], opened - 0.3, opened + 5)
    assert state.status(key, state.live[key])[0] == want["state"] == "idle"
    assert state.session(*key).turns["completed"] == 1


def test_no_lock_after_the_exit_is_not_live() -> None:
    """The final files: Copilot removed its `inuse.<pid>.lock`; the same pid still running."""
    for scenario in ("running", "tui-permission"):
        _, want, key, opened = copied(scenario, "home-live")
        home = RECORDED / scenario / "home" / ".copilot"
        state = live_state(home, want["pid"], opened - 0.3, opened + 60)
        assert key not in state.live


def test_a_killed_run_leaves_its_lock() -> None:
    """SIGKILL while `sleep 4` ran: the lock stays. Live while that pid runs (as when the copy
    was taken); once the pid is gone the session is not live and its turn ends interrupted."""
    _, want, key, opened = copied("killed", "home-live")
    home = RECORDED / "killed" / "home" / ".copilot"
    assert list((home / "session-state" / key[1]).glob("inuse.*.lock"))
    running = live_state(home, want["pid"], opened - 0.3, opened + 1)
    assert running.status(key, running.live[key])[0] == want["state"] == "running"
    gone = live_state(home, -1, opened - 0.3, opened + 3600)
    assert key not in gone.live and gone.session(*key).turns["interrupted"] == 1


def test_a_pid_started_after_the_session_opened_is_stale() -> None:
    home, want, key, opened = copied("tui-permission", "home-live")
    state = live_state(home, want["pid"], opened + 3600, opened + 3660)  # a recycled pid
    assert key not in state.live


def test_the_lock_removed_ends_the_entry(tmp_path: Path) -> None:
    copy, _, key, opened = copied("running", "home-live")
    home = tmp_path / ".copilot"
    shutil.copytree(copy, home)
    state = State()
    engine = Engine([Source(Copilot(), home)], state)
    engine.catch_up()
    state.refresh(opened + 1, lambda pid: opened - 0.3)
    assert key in state.live
    (lock,) = (home / "session-state" / key[1]).glob("inuse.*.lock")
    lock.unlink()  # as Copilot does at its exit
    engine.changed([lock])
    state.refresh(opened + 60, lambda pid: opened - 0.3)
    assert key not in state.live


def test_a_lock_not_written_whole_is_no_proof() -> None:
    shared = Shared("s")
    reader = InUseReader(shared, Lock(41, "session-state/s/inuse.41.lock"))
    assert reader.feed("") == [] and reader.feed("4") == []
    (entry,) = reader.feed("41\n")
    assert isinstance(entry, LiveIndexRead) and entry.pid == 41 and entry.status == "idle"
    assert reader.feed(None) == [LiveIndexRemoved(source="session-state/s/inuse.41.lock")]
    assert reader.feed(None) == []


def test_the_status_follows_the_journal_under_each_lock() -> None:
    """A journal record that changes the status re-emits every lock's entry."""
    session_id, records = journal("tui-permission")
    shared = Shared(session_id)
    InUseReader(shared, Lock(7, "a")).feed("7")
    reader = EventsReader(session_id, shared)
    statuses = [
        (e.status, e.reason)
        for r in records
        for e in reader.feed(r)
        if isinstance(e, LiveIndexRead)
    ]
    assert statuses[:4] == [("busy", None), ("waiting", "bash"), ("busy", None), ("idle", None)]


# ---------------------------------------------------------------- one record at a time
def rec(kind: str, data: dict[str, Any], second: int, rid: str = "", parent: str = "") -> dict:
    return {
        "type": kind,
        "data": data,
        "id": rid or f"r{second}",
        "timestamp": f"2026-12-03T18:00:{second:02d}.000Z",
        "parentId": parent or None,
    }


def prompt(second: int, text: str = "do it") -> dict[str, Any]:
    return rec("user.message", {"content": text, "messageId": f"m{second}"}, second)


def test_a_prompt_while_a_turn_is_open_interrupts_it() -> None:
    reader = EventsReader("s", Shared("s"))
    events = [e for r in (prompt(1), prompt(5)) for e in reader.feed(r)]
    ended = [e for e in events if isinstance(e, TurnEnded)]
    assert [(e.outcome, e.at) for e in ended] == [
        ("interrupted", timestamp(prompt(5)["timestamp"]))
    ]
    assert len([e for e in events if isinstance(e, TurnStarted)]) == 2


def test_a_resume_ends_the_turn_the_last_process_left_open() -> None:
    reader = EventsReader("s", Shared("s"))
    reader.feed(prompt(1))
    resumed = rec("session.resume", {"resumeTime": "2026-12-03T18:00:09.000Z"}, 9)
    assert [e.outcome for e in reader.feed(resumed) if isinstance(e, TurnEnded)] == ["interrupted"]


def test_a_subagents_prompt_starts_no_turn() -> None:
    reader = EventsReader("s", Shared("s"))
    child = rec("user.message", {"content": "count", "source": "agent-s"}, 2)
    assert reader.feed(child) == []


def test_a_usage_record_is_the_agent_of_the_record_it_follows() -> None:
    reader = EventsReader("s", Shared("s"))
    reader.feed(rec("assistant.turn_start", {"turnId": "0", "parentToolCallId": "call_1"}, 1, "t"))
    usage = {"model": "gpt-4o", "inputTokens": 10, "outputTokens": 2, "apiCallId": "c1"}
    (response,) = reader.feed(rec("session.usage_record", {"usage": usage}, 2, "u", parent="t"))
    assert isinstance(response, ModelResponded) and response.subagent_id == "call_1"
    (lead,) = reader.feed(
        rec("session.usage_record", {"usage": {**usage, "apiCallId": "c2"}}, 3, "v", "x")
    )
    assert isinstance(lead, ModelResponded) and lead.subagent_id is None and lead.main


def test_a_usage_record_without_a_count_is_rejected() -> None:
    reader = EventsReader("s", Shared("s"))
    usage = {"model": "gpt-4o", "inputTokens": "many", "apiCallId": "c1"}
    with pytest.raises(RecordRejected):
        reader.feed(rec("session.usage_record", {"usage": usage}, 2))


def test_records_of_no_known_shape_are_left_alone() -> None:
    reader = EventsReader("s", Shared("s"))
    for odd in (
        None,
        [],
        {"type": "user.message"},
        {"type": "user.message", "data": {}, "timestamp": "yesterday"},
        rec("tool.execution_start", {"toolName": "bash"}, 1),
        rec("session.usage_record", {"usage": {"inputTokens": 3}}, 2),
        rec("assistant.fusion_phase_started", {}, 3),
    ):
        assert reader.feed(odd) == []

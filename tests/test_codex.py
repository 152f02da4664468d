"""Codex: one test per rollout record kind (lines taken from the recorded fixtures), the file
layout (compressed, archived and index files), and the reviews each fixture expects."""

from __future__ import annotations

import json
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import zstandard

from coding_agent_exporter.events import (
    ContextCompacted,
    Event,
    ModelFailed,
    ModelResponded,
    ReviewEnded,
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
from coding_agent_exporter.harnesses.codex.harness import Codex, IndexReader
from coding_agent_exporter.harnesses.codex.rollout import RolloutReader
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.sources.holders import HeldSessions
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.state import State
from coding_agent_exporter.state.work import tool_label
from coding_agent_exporter.web.views import session_rows

from .conftest import FIXTURES, expected, scenario_id, scenarios

V171 = FIXTURES / "codex" / "0.171.0"
ROOT = "01a22bda-b052-7312-b320-777c29333212"
CHILD = "01a22bda-b1ad-7b00-9da1-0a01f1ba3346"


def rollout(scenario: str, thread: str) -> list[dict[str, Any]]:
    (path,) = (V171 / scenario / "home" / ".codex" / "sessions").rglob(f"*{thread}.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def records(scenario: str, thread: str, *wanted: str) -> list[dict[str, Any]]:
    """The first record of each wanted kind (`type` or `type/payload.type`), in file order."""
    found: list[dict[str, Any]] = []
    lines = rollout(scenario, thread)
    for want in wanted:
        for line in lines:
            kind = f"{line['type']}/{line['payload'].get('type')}"
            if want in (line["type"], kind) and line not in found:
                found.append(line)
                break
    return found


def feed(reader: RolloutReader, lines: list[dict[str, Any]]) -> list[Event]:
    return [event for line in lines for event in reader.feed(line)]


def thread_of(scenario: str) -> str:
    (path,) = (V171 / scenario / "home" / ".codex" / "sessions").rglob("*.jsonl")
    return path.name[-42:-6]


# -- one test per record kind ------------------------------------------------------------------


def test_session_meta_of_a_root_is_a_session() -> None:
    (meta,) = records("exec-shell", thread_of("exec-shell"), "session_meta")
    (seen,) = RolloutReader("x").feed(meta)
    assert isinstance(seen, SessionSeen)
    assert (seen.session_id, seen.cwd, seen.kind, seen.version, seen.main) == (
        meta["payload"]["id"],
        "/home/user/work/shop-api",
        "headless",
        "0.171.0",
        True,
    )


def test_session_meta_of_a_child_starts_a_subagent_of_the_root() -> None:
    (meta,) = records("subagent", CHILD, "session_meta")
    seen, started = RolloutReader(CHILD).feed(meta)
    assert isinstance(seen, SessionSeen) and seen.session_id == ROOT and not seen.main
    assert started == SubagentStarted(
        session_id=ROOT,
        at=started.at,
        subagent_id=CHILD,
        subagent_type="subagent",
        title="Lovelace",
    )


def test_settings_give_the_model_before_any_response() -> None:
    lines = records("exec-api-error", thread_of("exec-api-error"), "session_meta", "turn_context")
    events = feed(RolloutReader("x"), lines)
    assert isinstance(events[-1], SessionSeen) and events[-1].model == "gpt-5.5"


def test_task_started_and_complete_are_a_turn() -> None:
    thread = thread_of("exec-answer")
    lines = records("exec-answer", thread, "event_msg/task_started", "event_msg/task_complete")
    started, ended = feed(RolloutReader(thread), lines)
    assert isinstance(started, TurnStarted)
    assert started.record_id == lines[0]["payload"]["turn_id"]
    assert isinstance(ended, TurnEnded) and ended.outcome == "completed"


def test_task_complete_with_an_error_fails_the_turn_and_the_request() -> None:
    thread = thread_of("exec-api-error")
    lines = records("exec-api-error", thread, "event_msg/task_started", "event_msg/task_complete")
    _, failed, ended = feed(RolloutReader(thread), lines)
    assert isinstance(failed, ModelFailed) and failed.error == "other"
    assert isinstance(ended, TurnEnded) and ended.outcome == "failed"


def test_turn_aborted_interrupts_the_turn() -> None:
    thread = thread_of("tui")
    lines = records("tui", thread, "event_msg/task_started", "event_msg/turn_aborted")
    _, ended = feed(RolloutReader(thread), lines)
    assert isinstance(ended, TurnEnded) and ended.outcome == "interrupted"


def test_token_usage_record_is_one_response_with_openai_usage_mapped() -> None:
    thread = thread_of("exec-shell")
    lines = records(
        "exec-shell", thread, "turn_context", "response_item/function_call", "token_usage_record"
    )
    reader = RolloutReader(thread)
    (response,) = [e for e in feed(reader, lines) if isinstance(e, ModelResponded)]
    assert response.message_id == "resp_stub_0858a324594b"
    assert response.model == "gpt-5.5"
    assert response.usage == Usage(input=2000, output=50, cache_read=0, reasoning=16)
    assert response.finish_reason == "tool_calls" and response.requested_at is not None


def test_cached_input_is_cache_read_not_input() -> None:
    lines = [r for r in rollout("exec-shell", thread_of("exec-shell"))]
    last = [r for r in lines if r["type"] == "token_usage_record"][-1]
    (response,) = RolloutReader("x").feed(last)
    assert isinstance(response, ModelResponded)
    assert response.usage == Usage(input=2100, output=60, cache_read=900, reasoning=17)


def test_token_count_counts_only_without_token_usage_records() -> None:
    lines = rollout("exec-shell", thread_of("exec-shell"))
    counts = [r for r in lines if r["payload"].get("type") == "token_count"]
    old = RolloutReader("x")
    responses = [e for e in feed(old, counts) if isinstance(e, ModelResponded)]
    assert [r.usage.input for r in responses] == [2000, 2100]
    new = RolloutReader("x")
    assert not [
        e for e in feed(new, lines) if isinstance(e, ModelResponded) and "#" in e.message_id
    ]


def test_user_prompt_titles_and_injected_messages_do_not() -> None:
    lines = [
        r
        for r in rollout("subagent", ROOT)
        if r["type"] == "response_item" and r["payload"].get("role") == "user"
    ]
    titles = [e for e in feed(RolloutReader(ROOT), lines) if isinstance(e, TitleSet)]
    assert [(t.title, t.source) for t in titles] == [
        ("SCENARIO:spawn count the python files with a sub-agent", "prompt")
    ]  # not <environment_context> nor <subagent_notification>


def test_turn_aborted_message_is_not_a_prompt() -> None:
    lines = [r for r in rollout("tui", thread_of("tui")) if "<turn_aborted>" in json.dumps(r)]
    assert lines and not [e for e in feed(RolloutReader("x"), lines) if isinstance(e, TitleSet)]


@pytest.mark.parametrize(
    "scenario,outcome", [("exec-shell", "ok"), ("exec-fail", "error"), ("tui", "ok")]
)
def test_function_call_and_output_are_a_tool_call(scenario: str, outcome: str) -> None:
    thread = thread_of(scenario)
    lines = records(
        scenario, thread, "response_item/function_call", "event_msg/item_completed"
    ) + records(scenario, thread, "response_item/function_call_output")
    events = feed(RolloutReader(thread), lines)
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    ended = [e for e in events if isinstance(e, ToolCallEnded)]
    assert started[0].tool == "exec_command" and ended[0].outcome == outcome


def test_command_execution_exit_code_decides_the_outcome() -> None:
    thread = thread_of("exec-fail")
    lines = rollout("exec-fail", thread)
    events = feed(RolloutReader(thread), lines)
    (ended,) = [e for e in events if isinstance(e, ToolCallEnded)]
    assert ended.outcome == "error"  # exit 2; the turn goes on and completes
    assert [e.outcome for e in events if isinstance(e, TurnEnded)] == ["completed"]


def test_aborted_by_user_is_cancelled() -> None:
    thread = thread_of("tui")
    events = feed(RolloutReader(thread), rollout("tui", thread))
    outcomes = [e.outcome for e in events if isinstance(e, ToolCallEnded)]
    assert outcomes == ["ok", "cancelled", "cancelled"]  # a denial reads like an interrupt


def test_an_mcp_result_with_is_error_is_an_error() -> None:
    thread = thread_of("mcp")
    events = feed(RolloutReader(thread), rollout("mcp", thread))
    outcomes = [e.outcome for e in events if isinstance(e, ToolCallEnded)]
    truth = expected(V171 / "mcp")["mcp_truth"]  # what the MCP server answered
    assert [call["isError"] for call in truth] == [False, True]
    assert outcomes == ["ok", "error"]  # the output text alone says nothing of it


def test_a_refused_patch_is_an_error_and_an_applied_one_ok() -> None:
    thread = thread_of("patch")
    lines = rollout("patch", thread)
    events = feed(RolloutReader(thread), lines)
    outcomes = [e.outcome for e in events if isinstance(e, ToolCallEnded)]
    assert outcomes == ["ok", "ok", "error"]  # add, edit, a file that is not there
    assert "missing.txt" not in expected(V171 / "patch")["work_after"]


def test_an_applied_patch_without_its_file_change_item_is_still_ok() -> None:
    thread = thread_of("patch")
    lines = [line for line in rollout("patch", thread) if "FileChange" not in json.dumps(line)]
    events = feed(RolloutReader(thread), lines)
    outcomes = [e.outcome for e in events if isinstance(e, ToolCallEnded)]
    assert outcomes == ["ok", "ok", "error"]  # "Exit code: 0" opens an applied patch's output


def test_three_tools_of_one_response_end_by_their_own_call_ids() -> None:
    thread = thread_of("exec-three-tools")
    events = feed(RolloutReader(thread), rollout("exec-three-tools", thread))
    calls = [e.call_id for e in events if isinstance(e, ToolCallStarted)]
    ends = {e.call_id: e.outcome for e in events if isinstance(e, ToolCallEnded)}
    assert [ends[call] for call in calls] == ["ok", "error", "ok"]  # the 2nd exits 2, ends last


def test_a_web_search_is_a_tool_call_ended_by_its_status() -> None:
    thread = thread_of("web-search")
    events = feed(RolloutReader(thread), rollout("web-search", thread))
    tools = [e.tool for e in events if isinstance(e, ToolCallStarted)]
    outcomes = [e.outcome for e in events if isinstance(e, ToolCallEnded)]
    assert (tools, outcomes) == (["web_search", "web_search"], ["ok", "error"])
    (response,) = [e for e in events if isinstance(e, ModelResponded)]
    assert response.finish_reason == "stop"  # the API ran the searches: nothing asked back


def test_an_mcp_tool_is_named_like_claude_codes_and_labelled_by_its_server() -> None:
    thread = thread_of("mcp")
    events = feed(RolloutReader(thread), rollout("mcp", thread))
    tools = [e.tool for e in events if isinstance(e, ToolCallStarted)]
    assert tools == ["mcp__shop__lookup_price", "mcp__shop__charge_card"]
    assert {tool_label(tool) for tool in tools} == {"mcp__shop"}


def compaction_truth() -> tuple[str, Usage]:
    """The stub's compaction answer in `compact`: its response id and usage, ours mapped."""
    log = (V171 / "compact" / "stub-log.jsonl").read_text().splitlines()
    (sent,) = [r for r in map(json.loads, log) if r["kind"] == "compact"]
    usage = sent["usage"]
    cached = usage["input_tokens_details"]["cached_tokens"]
    return sent["response_id"], Usage(
        input=usage["input_tokens"] - cached, output=usage["output_tokens"], cache_read=cached
    )


def test_compacted_is_a_compaction_with_the_usage_of_its_own_request() -> None:
    thread = thread_of("compact")
    events = feed(RolloutReader(thread), rollout("compact", thread))
    (compacted,) = [e for e in events if isinstance(e, ContextCompacted)]
    response_id, usage = compaction_truth()
    assert compacted.usage == usage
    responses = {e.message_id: e.usage for e in events if isinstance(e, ModelResponded)}
    assert responses[response_id] == usage  # the request is also a response, counted once


def test_a_compaction_that_names_no_recorded_request_has_no_tokens() -> None:
    thread = thread_of("compact")
    lines = rollout("compact", thread)
    for line in lines:
        if line["type"] == "compacted":
            del line["payload"]["latest_token_usage_record"]
    (compacted,) = [
        e for e in feed(RolloutReader(thread), lines) if isinstance(e, ContextCompacted)
    ]
    assert compacted.usage is None  # never estimated


def test_a_compaction_read_twice_counts_once(tmp_path: Path) -> None:
    home = _home(tmp_path, "compact")
    (path,) = (home / "sessions").rglob("*.jsonl")
    shutil.copy(path, tmp_path / "twice.jsonl")
    state, _ = _read(home)
    (home / "archived_sessions").mkdir()
    shutil.copy(tmp_path / "twice.jsonl", home / "archived_sessions" / path.name)
    again, _ = _read(home)
    _, usage = compaction_truth()
    tokens = {("codex", k): v for k, v in usage.as_dict().items() if v}
    for totals in (state.totals, again.totals):
        assert (dict(totals.compactions), dict(totals.compaction_tokens)) == (
            {("codex",): 1},
            tokens,
        )


def test_two_threads_written_at_once_are_two_running_sessions_in_their_own_dirs() -> None:
    live = V171 / "two-threads" / "home-live" / ".codex"  # copied while both processes ran
    facts = {s["session_id"]: s for s in expected(V171 / "two-threads")["home_live"]["sessions"]}
    pids = {thread: fact["writer_lock"][0]["pid"] for thread, fact in facts.items()}
    assert len(set(pids.values())) == 2  # /proc/locks then: one codex exec per thread

    def find(paths: Any, names: Any) -> dict[Path, list[tuple[int, float]]]:
        return {p: [(pids[p.name[-42:-6]], 0.0)] for p in paths if p.name[-42:-6] in pids}

    state = State()
    Engine([Source(Codex(), live, HeldSessions(("codex",), find))], state, Stats()).catch_up()
    latest = max(s.updated_at or 0.0 for s in state.sessions.values())
    state.refresh(latest, lambda pid: 0.0 if pid in pids.values() else None)
    assert {key[1]: (state.status(key, e)[0], e.pid) for key, e in state.live.items()} == {
        thread: ("running", pid) for thread, pid in pids.items()
    }
    assert {k[1]: s.cwd for k, s in state.sessions.items()} == {
        thread: fact["cwd"] for thread, fact in facts.items()
    }  # shop-api and shop-web


def test_a_child_whose_model_call_fails_ends_failed_and_its_parent_goes_on() -> None:
    (sub,) = expected(V171 / "subagent-fails")["sessions"][0]["subagents"]
    assert sub["state"] == "failed" and sub["messages"] == 0
    events = feed(RolloutReader(sub["id"]), rollout("subagent-fails", sub["id"]))
    (failed,) = [e for e in events if isinstance(e, ModelFailed)]
    assert (failed.session_id, failed.subagent_id) == (sub["parent"], sub["id"])
    assert [e.outcome for e in events if isinstance(e, SubagentEnded)] == ["failed"]
    parent = feed(RolloutReader(sub["parent"]), rollout("subagent-fails", sub["parent"]))
    assert [e.outcome for e in parent if isinstance(e, TurnEnded)] == ["completed"]


def test_namespaced_spawn_links_the_call_to_the_child_thread() -> None:
    events = feed(RolloutReader(ROOT), rollout("subagent", ROOT))
    tools = [e.tool for e in events if isinstance(e, ToolCallStarted)]
    assert tools == ["multi_agent_v1.spawn_agent", "multi_agent_v1.wait_agent"]
    links = {(e.call_id, e.subagent_id) for e in events if isinstance(e, SubagentStarted)}
    assert links == {("call_stub_547817558308", CHILD)}
    assert not [e for e in events if isinstance(e, SubagentEnded)]  # the child's file ends it


def test_child_work_carries_the_root_session_and_its_own_id() -> None:
    events = feed(RolloutReader(CHILD), rollout("subagent", CHILD))
    assert not [e for e in events if isinstance(e, TurnStarted | TurnEnded)]
    responses = [e for e in events if isinstance(e, ModelResponded)]
    assert {(e.session_id, e.subagent_id, e.main) for e in responses} == {(ROOT, CHILD, False)}
    assert [e.outcome for e in events if isinstance(e, SubagentEnded)] == ["completed"]


def test_guardian_review_is_no_turn_no_tool_and_ends_in_a_verdict() -> None:
    (path,) = [
        p
        for p in (V171 / "guardian" / "home" / ".codex" / "sessions").rglob("*.jsonl")
        if "guardian_review" in p.read_text()
    ]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    events = feed(RolloutReader("x"), lines)
    assert not [e for e in events if isinstance(e, TurnStarted | ToolCallStarted | TitleSet)]
    (review,) = [e for e in events if isinstance(e, ReviewEnded)]
    assert review.outcome == "allow" and review.session_id == lines[0]["payload"]["session_id"]
    assert all(e.internal for e in events if isinstance(e, ModelResponded))


def test_session_index_latest_line_wins() -> None:
    index = V171 / "tui" / "home" / ".codex" / "session_index.jsonl"
    reader = IndexReader()
    titles = [e for line in index.read_text().splitlines() for e in reader.feed(json.loads(line))]
    assert [(t.title, t.source) for t in titles] == [
        ("Fake shop api session", "harness"),
        ("my-shop-session", "harness"),  # /rename: the lines look the same
    ]


def test_layout() -> None:
    codex = Codex()
    name = "rollout-2026-11-30T09-48-02-01a22bda-b052-7312-b320-777c29333212"
    assert codex.match(PurePosixPath(f"sessions/2026/11/30/{name}.jsonl")) == "jsonl"
    assert codex.match(PurePosixPath(f"archived_sessions/{name}.jsonl.zst")) == "zstd"
    assert codex.match(PurePosixPath("session_index.jsonl")) == "jsonl"
    assert codex.match(PurePosixPath("auth.json")) is None
    assert codex.match(PurePosixPath("history.jsonl")) is None
    reverted = f"sessions/2026/11/30/{name}_01a22bda-0000-7000-8000-000000000000.jsonl"
    assert isinstance(codex.reader(PurePosixPath(reverted)), RolloutReader)
    reader = codex.reader(PurePosixPath(reverted))
    assert isinstance(reader, RolloutReader) and reader.thread_id == ROOT
    assert codex.default_home({"CODEX_HOME": "/c"}) == Path("/c")
    assert codex.default_home({"HOME": "/h"}) == Path("/h/.codex")


# -- file hazards ------------------------------------------------------------------------------


def _home(tmp_path: Path, scenario: str) -> Path:
    home = tmp_path / ".codex"
    shutil.copytree(V171 / scenario / "home" / ".codex", home)
    return home


def _read(home: Path) -> tuple[State, Engine]:
    state = State()
    engine = Engine([Source(Codex(), home)], state, Stats())
    engine.catch_up()
    return state, engine


def _compress(path: Path) -> Path:
    target = path.with_name(path.name + ".zst")
    target.write_bytes(zstandard.ZstdCompressor().compress(path.read_bytes()))
    return target


def test_a_compressed_rollout_reads_like_the_plain_one(tmp_path: Path) -> None:
    home = _home(tmp_path, "subagent")
    plain, _ = _read(home)
    for path in list((home / "sessions").rglob("*.jsonl")):
        _compress(path)
        path.unlink()
    compressed, engine = _read(home)
    assert compressed.totals == plain.totals
    assert engine.stats.parse_errors == {}


def test_the_plain_file_wins_over_its_compressed_twin(tmp_path: Path) -> None:
    home = _home(tmp_path, "exec-shell")
    (path,) = (home / "sessions").rglob("*.jsonl")
    _compress(path)
    state, engine = _read(home)
    assert engine.stats.files["codex"] == 1
    assert sum(state.totals.messages.values()) == 2


def test_a_damaged_compressed_file_is_a_read_error_not_a_crash(tmp_path: Path) -> None:
    home = _home(tmp_path, "exec-shell")
    (path,) = (home / "sessions").rglob("*.jsonl")
    zst = _compress(path)
    path.unlink()
    zst.write_bytes(zst.read_bytes()[:50])
    state, engine = _read(home)
    assert engine.stats.parse_errors[("codex", "read_error")] == 1
    assert not state.totals.messages


def test_an_archived_copy_counts_once(tmp_path: Path) -> None:
    home = _home(tmp_path, "subagent")
    plain, _ = _read(home)
    (home / "archived_sessions").mkdir()
    for path in (home / "sessions").rglob("*.jsonl"):
        shutil.copy(path, home / "archived_sessions" / path.name)
        _compress(home / "archived_sessions" / path.name).rename(
            home / "archived_sessions" / f"copy-{path.name}.zst"
        )
    twice, engine = _read(home)
    assert engine.stats.files["codex"] == 4
    assert twice.totals == plain.totals


def test_the_index_at_the_home_top_is_read_and_names_no_session(tmp_path: Path) -> None:
    state, engine = _read(_home(tmp_path, "guardian"))
    assert engine.stats.files["codex"] == 3  # two rollouts and session_index.jsonl
    rows = session_rows(state, lambda cwd: cwd or "", history=True)  # type: ignore[arg-type]
    assert [r["title"] for r in rows] == ["SCENARIO:approve create a marker file"]


# -- reviews -----------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", scenarios("codex"), ids=scenario_id)
def test_reviews_are_counted_by_verdict(scenario: Path) -> None:
    state, _ = _read(scenario / "home" / ".codex")
    want: dict[tuple[str, str], int] = {}
    for review in expected(scenario)["reviews"]:
        key = ("codex", review["outcome"])
        want[key] = want.get(key, 0) + 1
    assert dict(state.totals.reviews) == want

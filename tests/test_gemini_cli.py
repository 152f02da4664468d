"""Gemini CLI: one test per record shape (lines taken from the recorded fixtures), the file
layout, and a deleted session file keeping its counts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

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
from coding_agent_exporter.harnesses.gemini_cli.chat import ChatReader, Shared
from coding_agent_exporter.harnesses.gemini_cli.harness import GeminiCli, LogsReader
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.state.state import State

from .conftest import FIXTURES

V061 = FIXTURES / "gemini-cli" / "0.61.0"
PARENT = "330d4e4a-467c-40eb-a486-4545223e10a8"
CHILD = "7f6bf17b-73bc-42f9-b75b-417cbc8b1421"


def lines(scenario: str, pattern: str = "session-*.jsonl") -> list[dict[str, Any]]:
    (path,) = (V061 / scenario / "home" / ".gemini" / "tmp").rglob(pattern)
    return [json.loads(line) for line in path.read_text().splitlines()]


def feed(reader: ChatReader | LogsReader, records: list[Any]) -> list[Event]:
    return [event for record in records for event in reader.feed(record)]


def of(kind: type[Any], events: list[Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def main_reader(shared: Shared | None = None) -> ChatReader:
    return ChatReader(shared or Shared(), "shop-api", None)


# -- one test per record shape -----------------------------------------------------------------


def test_header_and_session_context_are_a_headless_session_in_its_workspace() -> None:
    header, context = lines("headless-answer")[:2]
    reader = main_reader()
    assert reader.feed(header) == []  # the workspace is named on the next line
    (seen,) = reader.feed(context)
    assert isinstance(seen, SessionSeen)
    assert (seen.session_id, seen.cwd, seen.kind, seen.main) == (
        "596f5295-d8d2-49d1-91ce-ee67c4cb611a",
        "/home/user/work/shop-api",
        "headless",
        True,
    )


def test_projects_json_names_the_cwd_when_the_session_does_not() -> None:
    harness = GeminiCli()
    projects = (V061 / "headless-answer" / "home" / ".gemini" / "projects.json").read_text()
    harness.reader(PurePosixPath("projects.json")).feed(json.loads(projects))
    chat = harness.reader(PurePosixPath("tmp/shop-api/chats/session-2026-11-30T10-26-596f.jsonl"))
    header, _, prompt = lines("headless-answer")[:3]
    (seen,) = of(SessionSeen, [e for r in (header, prompt) for e in chat.feed(r)])
    assert seen.cwd == "/home/user/work/shop-api"  # no session_context line was read


def test_logs_json_makes_a_session_interactive_whichever_file_is_read_first() -> None:
    log = json.loads((V061 / "interactive" / "home/.gemini/tmp/shop-api/logs.json").read_text())
    records = lines("interactive")[:2]
    shared = Shared()
    assert LogsReader(shared).feed(log) == []  # its session file is not read yet
    (seen,) = of(SessionSeen, feed(main_reader(shared), records))
    assert seen.kind == "interactive"

    shared = Shared()
    (first,) = of(SessionSeen, feed(main_reader(shared), records))
    (later,) = LogsReader(shared).feed(log)
    assert (first.kind, later.kind, later.session_id) == (
        "headless",
        "interactive",
        first.session_id,
    )


def test_a_prompt_starts_a_turn_and_titles_the_session() -> None:
    records = lines("headless-answer")
    events = feed(main_reader(), records[:3])
    (started,) = of(TurnStarted, events)
    (title,) = of(TitleSet, events)
    assert (started.record_id, started.prompt) == (records[2]["id"], "SCENARIO:simple say hello")
    assert (title.title, title.source) == ("SCENARIO:simple say hello", "prompt")


def test_a_response_maps_gemini_tokens_and_ends_the_turn_with_its_text() -> None:
    events = feed(main_reader(), lines("headless-answer"))
    (response,) = of(ModelResponded, events)
    assert response.usage == Usage(
        input=1000, output=42, cache_read=0, reasoning=12
    )  # 30 + 12 thoughts
    assert (response.model, response.finish_reason) == ("gemini-3.1-pro-preview", "stop")
    (ended,) = of(TurnEnded, events)
    assert ended.outcome == "completed"


def test_cached_input_is_taken_out_of_input() -> None:
    events = feed(main_reader(), lines("headless-shell"))
    last = of(ModelResponded, events)[-1]
    assert last.usage == Usage(input=1100, output=40, cache_read=400)


def test_a_rewrite_with_tool_calls_is_the_same_response_and_the_tool_runs_between() -> None:
    records = lines("headless-shell")
    events = feed(main_reader(), records)
    assert [e.message_id for e in of(ModelResponded, events)] == [
        records[4]["id"],
        records[9]["id"],
    ]
    (started,) = of(ToolCallStarted, events)
    (ended,) = of(ToolCallEnded, events)
    assert (started.tool, ended.outcome) == ("run_shell_command", "ok")
    assert started.at < ended.at  # from the response's end to the call's own timestamp
    assert of(TurnEnded, events)[0].outcome == "completed"


def test_a_failing_shell_command_is_an_error_though_its_status_is_success() -> None:
    events = feed(main_reader(), lines("headless-fail"))
    (ended,) = of(ToolCallEnded, events)
    assert ended.outcome == "error"
    assert ended.result is not None and "Exit Code: 2" in ended.result


def test_denied_then_history_copies_are_rejected_and_no_prompt() -> None:
    records = lines("interactive")
    events = feed(main_reader(), records[:27])
    assert [e.record_id for e in of(TurnStarted, events)] == [records[2]["id"], records[11]["id"]]
    assert [e.outcome for e in of(ToolCallEnded, events)] == ["ok", "rejected"]
    assert [e.outcome for e in of(TurnEnded, events)] == ["completed", "interrupted"]
    assert len(of(ModelResponded, events)) == 3  # the copies carry no tokens


def test_esc_while_a_command_runs_is_cancelled_and_interrupts_the_turn() -> None:
    events = feed(main_reader(), lines("interactive"))
    assert [e.outcome for e in of(TurnEnded, events)] == [
        "completed",
        "interrupted",
        "interrupted",
        "interrupted",
        "completed",
    ]
    assert [e.outcome for e in of(ToolCallEnded, events)] == ["ok", "rejected", "cancelled"]
    late = of(ToolCallStarted, events)[-1]
    assert late.at == of(ModelResponded, events)[-2].at  # started when its response ended


def test_a_rollback_without_a_cancel_is_a_failed_request() -> None:
    events = feed(main_reader(), lines("api-error"))
    (failed,) = of(ModelFailed, events)
    (ended,) = of(TurnEnded, events)
    assert (failed.error, ended.outcome) == ("api_error", "failed")


def test_an_error_record_of_the_tui_fails_the_open_turn() -> None:
    records = lines("interactive")[:4]
    error = {"id": "e1", "timestamp": "2026-11-30T10:27:28.000Z", "type": "error", "content": "x"}
    events = feed(main_reader(), [*records, error])
    assert [e.outcome for e in of(TurnEnded, events)] == ["failed"]
    assert len(of(ModelFailed, events)) == 1


def test_a_summary_titles_the_lead_session_only() -> None:
    header, context = lines("headless-answer")[:2]
    summary = {"$set": {"summary": "Say hello"}}
    titles = of(TitleSet, feed(main_reader(), [header, context, summary]))
    assert [(t.title, t.source) for t in titles] == [("Say hello", "harness")]
    child = ChatReader(Shared(), "shop-api", PARENT)
    assert of(TitleSet, feed(child, lines("subagent", f"{CHILD}.jsonl"))) == []


def test_a_child_file_is_a_subagent_of_its_parent_folder() -> None:
    events = feed(ChatReader(Shared(), "shop-api", PARENT), lines("subagent", f"{CHILD}.jsonl"))
    seen, started = events[:2]
    assert isinstance(seen, SessionSeen) and isinstance(started, SubagentStarted)
    assert (seen.session_id, seen.main, seen.cwd) == (PARENT, False, "/home/user/work/shop-api")
    assert (started.subagent_id, started.call_id) == (CHILD, None)
    assert {e.subagent_id for e in of(ModelResponded, events)} == {CHILD}
    assert [e.tool for e in of(ToolCallStarted, events)] == ["run_shell_command", "complete_task"]
    assert of(TurnStarted, events) == [] and of(SubagentEnded, events) == []


def test_invoke_agent_links_the_child_and_ends_it() -> None:
    events = feed(main_reader(), lines("subagent"))
    (linked,) = of(SubagentStarted, events)
    (ended,) = of(SubagentEnded, events)
    assert (linked.subagent_id, linked.subagent_type) == (CHILD, "generalist")
    assert linked.call_id == ended.call_id == "invoke_agent__invoke_agent_1796034436606_0"
    assert ended.outcome == "completed"


# -- layout ------------------------------------------------------------------------------------


def test_layout_and_home() -> None:
    harness = GeminiCli()
    assert harness.match(PurePosixPath("tmp/p/chats/session-2026-11-30T10-26-596f5295.jsonl"))
    assert harness.match(PurePosixPath(f"tmp/p/chats/{PARENT}/{CHILD}.jsonl")) == "jsonl"
    assert harness.match(PurePosixPath("tmp/p/logs.json")) == "doc"
    assert harness.match(PurePosixPath("projects.json")) == "doc"
    for other in ("settings.json", "oauth_creds.json", "tmp/p/shell_history", "tmp/p/x.jsonl"):
        assert harness.match(PurePosixPath(other)) is None
    assert GeminiCli.default_home({"GEMINI_CLI_HOME": "/h"}) == Path("/h/.gemini")
    assert GeminiCli.default_home({"HOME": "/home/u"}) == Path("/home/u/.gemini")


def test_a_deleted_session_file_keeps_what_was_counted(tmp_path: Path) -> None:
    home = tmp_path / ".gemini"
    shutil.copytree(V061 / "headless-shell" / "home" / ".gemini", home)
    state = State()
    engine = Engine([Source(GeminiCli(), home)], state)
    engine.catch_up()
    (path,) = home.rglob("session-*.jsonl")
    path.unlink()
    engine.changed([path])
    assert sum(state.totals.messages.values()) == 2
    assert sum(state.totals.tool_calls.values()) == 1
    assert sum(state.totals.sessions.values()) == 1

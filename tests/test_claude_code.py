"""Record → event mappings of the Claude Code harness, one test per record shape."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from coding_agent_exporter.events import (
    LiveIndexRead,
    LiveIndexRemoved,
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
from coding_agent_exporter.harnesses.claude_code.harness import (
    ClaudeCode,
    LiveIndexReader,
    MetaReader,
)
from coding_agent_exporter.harnesses.claude_code.journal import JournalReader

from .conftest import app_for

SID = "0cb4ee5f-eeae-463f-9990-9f1af99a8fd0"
T0 = "2026-11-30T09:15:04.490Z"


def user(content: object, **extra: object) -> dict[str, object]:
    return {
        "type": "user",
        "uuid": extra.pop("uuid", "u1"),
        "sessionId": SID,
        "timestamp": extra.pop("timestamp", T0),
        "cwd": "/home/user/work/shop-api",
        "entrypoint": "sdk-cli",
        "version": "2.1.197",
        "message": {"role": "user", "content": content},
        **extra,
    }


def assistant(*content: dict[str, object], **message: object) -> dict[str, object]:
    return {
        "type": "assistant",
        "uuid": "a1",
        "sessionId": SID,
        "timestamp": T0,
        "cwd": "/home/user/work/shop-api",
        "message": {
            "id": "msg_1",
            "model": "claude-opus-4-8",
            "content": list(content),
            "usage": {
                "input_tokens": 3,
                "output_tokens": 40,
                "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 20,
            },
            "stop_reason": "tool_use",
            **message,
        },
    }


def kinds(events: list[object]) -> list[str]:
    return [type(e).__name__ for e in events]


def test_match_knows_each_file_and_leaves_the_rest() -> None:
    cc = ClaudeCode()
    assert cc.match(PurePosixPath("projects/-p/abc.jsonl")) == "jsonl"
    assert cc.match(PurePosixPath("projects/-p/abc/subagents/agent-a1b2.jsonl")) == "jsonl"
    assert cc.match(PurePosixPath("projects/-p/abc/subagents/agent-a1b2.meta.json")) == "doc"
    assert cc.match(PurePosixPath("projects/-p/abc/custom-title.json")) == "doc"
    assert cc.match(PurePosixPath("sessions/4242.json")) == "doc"
    assert cc.match(PurePosixPath("sessions/4242.abcdef.key")) is None
    assert cc.match(PurePosixPath("projects/-p/abc/tool-results/x.txt")) is None
    assert cc.match(PurePosixPath("history.jsonl")) is None
    assert cc.match(PurePosixPath(".credentials.json")) is None


def test_default_home_honours_claude_config_dir() -> None:
    assert str(ClaudeCode.default_home({"CLAUDE_CONFIG_DIR": "/x"})) == "/x"
    assert str(ClaudeCode.default_home({"HOME": "/home/u"})) == "/home/u/.claude"


def test_prompt_starts_a_turn_and_titles_the_session() -> None:
    events = JournalReader(SID).feed(user("fix   the\nbug"))
    assert kinds(events) == ["SessionSeen", "TurnStarted", "TitleSet"]
    seen, _, title = events
    assert isinstance(seen, SessionSeen) and seen.kind == "headless"
    assert seen.cwd == "/home/user/work/shop-api"
    assert title == TitleSet(session_id=SID, title="fix the bug", source="prompt")


def test_plumbing_user_records_are_not_prompts() -> None:
    reader = JournalReader(SID)
    reader.feed(user("first"))
    for record in (
        user("<system-reminder>x</system-reminder>"),
        user("<command-name>/rename</command-name>"),
        user("<local-command-stdout>ok</local-command-stdout>"),
        user("summary", isCompactSummary=True),
        user("meta", isMeta=True),
        user("<task-notification><tool-use-id>t9</tool-use-id></task-notification>"),
    ):
        assert not [e for e in reader.feed(record) if isinstance(e, TurnStarted)]


def test_interrupt_marker_ends_the_turn_interrupted() -> None:
    events = JournalReader(SID).feed(
        user([{"type": "text", "text": "[Request interrupted by user]"}])
    )
    assert next(e for e in events if isinstance(e, TurnEnded)).outcome == "interrupted"


def test_one_record_per_content_block_reports_the_response_with_usage() -> None:
    events = JournalReader(SID).feed(
        assistant({"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}})
    )
    responded = [e for e in events if isinstance(e, ModelResponded)]
    assert responded == [
        ModelResponded(
            session_id=SID,
            at=responded[0].at,
            message_id="msg_1",
            model="claude-opus-4-8",
            usage=Usage(input=3, output=40, cache_read=100, cache_write=20),
            finish_reason="tool_use",
        )
    ]
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [(s.call_id, s.tool) for s in started] == [("toolu_1", "Bash")]


def test_a_response_was_requested_when_the_record_before_it_was_written() -> None:
    reader = JournalReader(SID)
    reader.feed(user("go", timestamp="2026-11-30T09:15:04.000Z"))
    first = assistant({"type": "thinking", "thinking": "hm"})
    first["timestamp"] = "2026-11-30T09:15:06.000Z"
    second = assistant({"type": "text", "text": "ok"})
    second["timestamp"] = "2026-11-30T09:15:07.000Z"
    copies = [e for r in (first, second) for e in reader.feed(r) if isinstance(e, ModelResponded)]
    assert [c.requested_at for c in copies] == [copies[0].at - 2, copies[0].at - 2]


def test_api_error_is_a_failed_request() -> None:
    record = assistant({"type": "text", "text": "API Error: 400"}, model="<synthetic>")
    record.update(isApiErrorMessage=True, apiErrorStatus=400)
    (failed,) = [e for e in JournalReader(SID).feed(record) if isinstance(e, ModelFailed)]
    assert failed.error == "400"


def test_end_turn_ends_the_turn_completed_once_the_next_record_comes() -> None:
    reader = JournalReader(SID)
    held = reader.feed(assistant({"type": "text", "text": "done"}, stop_reason="end_turn"))
    assert not [e for e in held if isinstance(e, TurnEnded)]
    after = reader.feed({"type": "last-prompt", "lastPrompt": "x"})
    assert [e.outcome for e in after if isinstance(e, TurnEnded)] == ["completed"]


def test_a_cut_stream_retried_in_the_same_turn_is_not_its_end() -> None:
    reader = JournalReader(SID)
    reader.feed(assistant({"type": "text", "text": "par"}, stop_reason="end_turn"))
    nudge = reader.feed(user("Your response above was cut off", isMeta=True, turnCompanion=True))
    error = assistant({"type": "text", "text": "API Error"}, model="<synthetic>")
    error["isApiErrorMessage"] = True
    failed = reader.feed(error)
    ends = [e.outcome for e in nudge + failed if isinstance(e, TurnEnded)]
    assert ends == ["failed"]


def test_synthetic_api_error_fails_the_turn_and_is_no_response() -> None:
    record = assistant({"type": "text", "text": "API Error: 400"}, model="<synthetic>")
    record["isApiErrorMessage"] = True
    events = JournalReader(SID).feed(record)
    assert not [e for e in events if isinstance(e, ModelResponded)]
    assert [e.outcome for e in events if isinstance(e, TurnEnded)] == ["failed"]


def test_thinking_tokens_are_reasoning() -> None:
    record = assistant({"type": "thinking", "thinking": "hm"})
    record["message"]["usage"]["output_tokens_details"] = {"thinking_tokens": 7}  # type: ignore[index]
    (responded,) = [e for e in JournalReader(SID).feed(record) if isinstance(e, ModelResponded)]
    assert responded.usage.reasoning == 7


def test_tool_results_ok_error_rejected() -> None:
    reader = JournalReader(SID)
    ok = reader.feed(user([{"type": "tool_result", "tool_use_id": "t1", "content": "hi"}]))
    err = reader.feed(
        user([{"type": "tool_result", "tool_use_id": "t2", "is_error": True, "content": "Exit 3"}])
    )
    denied = reader.feed(
        user(
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "t3",
                    "is_error": True,
                    "content": "The user doesn't want to proceed with this tool use.",
                }
            ],
            toolUseResult="User rejected tool use",
        )
    )
    outcomes = [e.outcome for e in ok + err + denied if isinstance(e, ToolCallEnded)]
    assert outcomes == ["ok", "error", "rejected"]


def test_agent_tool_use_starts_a_subagent() -> None:
    events = JournalReader(SID).feed(
        assistant(
            {
                "type": "tool_use",
                "id": "toolu_a",
                "name": "Agent",
                "input": {
                    "description": "Count files",
                    "subagent_type": "Explore",
                    "run_in_background": True,
                },
            }
        )
    )
    (started,) = [e for e in events if isinstance(e, SubagentStarted)]
    assert (started.call_id, started.subagent_type, started.title, started.background) == (
        "toolu_a",
        "Explore",
        "Count files",
        True,
    )


def test_foreground_agent_result_links_and_ends_the_subagent() -> None:
    events = JournalReader(SID).feed(
        user(
            [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "3 files"}],
            toolUseResult={"status": "completed", "agentId": "a1234"},
        )
    )
    assert kinds(events)[-3:] == ["ToolCallEnded", "SubagentStarted", "SubagentEnded"]
    ended = events[-1]
    assert isinstance(ended, SubagentEnded) and ended.outcome == "completed"


def test_async_launch_does_not_end_the_subagent() -> None:
    events = JournalReader(SID).feed(
        user(
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_a",
                    "content": "Async agent launched successfully.",
                }
            ],
            toolUseResult={"status": "async_launched", "isAsync": True, "agentId": "a1234"},
        )
    )
    assert not [e for e in events if isinstance(e, SubagentEnded)]
    (linked,) = [e for e in events if isinstance(e, SubagentStarted)]
    assert linked.subagent_id == "a1234" and linked.background


def test_task_notification_ends_a_background_subagent_in_both_forms() -> None:
    text = (
        "<task-notification><task-id>a1234</task-id><tool-use-id>toolu_a</tool-use-id>"
        "<status>killed</status></task-notification>"
    )
    as_user = JournalReader(SID).feed(user(text, origin={"kind": "task-notification"}))
    queued = JournalReader(SID).feed(
        {
            "type": "attachment",
            "timestamp": T0,
            "attachment": {
                "type": "queued_command",
                "prompt": text,
                "commandMode": "task-notification",
            },
        }
    )
    for events in (as_user, queued):
        (ended,) = [e for e in events if isinstance(e, SubagentEnded)]
        assert (ended.call_id, ended.outcome) == ("toolu_a", "cancelled")


def test_handback_peer_message_ends_the_subagent() -> None:
    record = user(
        '<agent-message from="a1234">report</agent-message>',
        isMeta=True,
        origin={"kind": "peer", "from": "a1234", "handback": True},
    )
    (ended,) = [e for e in JournalReader(SID).feed(record) if isinstance(e, SubagentEnded)]
    assert (ended.subagent_id, ended.outcome) == ("a1234", "completed")


def test_subagent_journal_reports_work_but_no_turns() -> None:
    reader = JournalReader(SID, subagent_id="a1234")
    events = reader.feed(user("do the sub task")) + reader.feed(
        assistant({"type": "text", "text": "done"}, stop_reason="end_turn")
    )
    assert kinds(events) == ["ModelResponded"]
    assert isinstance(events[0], ModelResponded) and events[0].subagent_id == "a1234"
    assert not events[0].main


def test_fork_copies_older_than_the_journal_start_are_skipped() -> None:
    reader = JournalReader(SID)
    reader.feed({"type": "queue-operation", "timestamp": "2026-11-30T09:15:19.794Z"})
    copied = reader.feed(user("old prompt", timestamp="2026-11-30T09:15:14.921Z"))
    fresh = reader.feed(user("new prompt", uuid="u2", timestamp="2026-11-30T09:15:19.849Z"))
    assert kinds(copied) == ["TitleSet"]  # the fork's first prompt still titles it
    assert "TurnStarted" in kinds(fresh)


def test_titles_from_records() -> None:
    reader = JournalReader(SID)
    assert reader.feed({"type": "custom-title", "customTitle": "mine"}) == [
        TitleSet(session_id=SID, title="mine", source="user")
    ]
    assert reader.feed({"type": "ai-title", "aiTitle": "theirs"})[0] == TitleSet(
        session_id=SID, title="theirs", source="harness"
    )


def test_meta_json_describes_the_subagent() -> None:
    (started,) = MetaReader(SID, "a1234").feed(
        {
            "agentType": "general-purpose",
            "description": "Count",
            "toolUseId": "toolu_a",
            "requestShape": "background",
        }
    )
    assert isinstance(started, SubagentStarted)
    assert (started.subagent_id, started.call_id, started.background) == ("a1234", "toolu_a", True)


def test_live_index_entry() -> None:
    reader = LiveIndexReader(PurePosixPath("sessions/4242.json"))
    (entry,) = reader.feed(
        {
            "pid": 4242,
            "sessionId": SID,
            "cwd": "/w",
            "startedAt": 1700000000000,
            "kind": "interactive",
            "entrypoint": "cli",
            "name": "shop",
            "status": "waiting",
            "waitingFor": "permission prompt",
            "statusUpdatedAt": 1700000005000,
        }
    )
    assert isinstance(entry, LiveIndexRead)
    assert (entry.status, entry.reason, entry.kind) == (
        "waiting",
        "permission prompt",
        "interactive",
    )
    assert entry.started_at == 1700000000.0 and entry.status_at == 1700000005.0


def test_live_index_of_another_pid_or_removed_file_is_no_entry() -> None:
    reader = LiveIndexReader(PurePosixPath("sessions/4242.json"))
    assert reader.feed({"pid": 1, "sessionId": SID}) == [
        LiveIndexRemoved(source="sessions/4242.json")
    ]
    assert reader.feed(None) == [LiveIndexRemoved(source="sessions/4242.json")]


def test_print_mode_index_is_headless() -> None:
    reader = LiveIndexReader(PurePosixPath("sessions/7.json"))
    (entry,) = reader.feed(
        {"pid": 7, "sessionId": SID, "kind": "interactive", "entrypoint": "sdk-cli"}
    )
    assert isinstance(entry, LiveIndexRead) and entry.kind == "headless" and entry.status is None


def test_odd_records_are_ignored() -> None:
    reader = JournalReader(SID)
    for odd in (
        None,
        3,
        "x",
        [],
        {"type": "assistant", "message": "x"},
        {"type": "user"},
        {"type": "future-record-type", "x": 1},
    ):
        assert reader.feed(odd) == []


def test_a_clock_that_went_back_mid_session_is_no_fork_copy() -> None:
    reader = JournalReader(SID)
    reader.feed(user("first", timestamp="2026-11-30T09:15:19.000Z"))
    later = reader.feed(user("second", uuid="u2", timestamp="2026-11-30T09:10:00.000Z"))
    assert "TurnStarted" in kinds(later)


def test_mcp_tools_collapse_to_their_server_and_an_is_error_result_is_an_error() -> None:
    """Recorded: a stdio MCP server's ok call and its isError call (2.1.332, mcp-tools)."""
    home = Path(__file__).parent.parent / "fixtures" / "claude-code" / "2.1.332" / "mcp-tools"
    calls = app_for(home / "home").state.totals.tool_calls
    assert {k: v for k, v in calls.items() if k[1].startswith("mcp")} == {
        ("claude-code", "mcp__shop", "ok"): 1,
        ("claude-code", "mcp__shop", "error"): 1,
    }

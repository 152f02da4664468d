"""Qwen Code: one test per behaviour of each file kind, on records Qwen Code 0.24.4 wrote
(`fixtures/qwen-code/0.24.4/`), checked against the stub's facts (`expected.json`): usage per
response counted once (not again from the per-call telemetry), tool outcomes, the sub-agent
under its `agent` call, the failed turn after the last retry whichever file is read first, the
resumed session, and the live state of the homes copied while Qwen Code ran."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

from coding_agent_exporter.events import (
    Event,
    LiveIndexRead,
    ModelFailed,
    ModelResponded,
    SubagentEnded,
    SubagentStarted,
    ToolCallEnded,
    TurnEnded,
    Usage,
)
from coding_agent_exporter.harnesses.qwen import QwenCode
from coding_agent_exporter.harnesses.qwen.chat import ChatReader, Shared
from coding_agent_exporter.harnesses.qwen.harness import RuntimeReader, UsageRecordReader
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.state.state import State
from coding_agent_exporter.web.views import session_rows

from .conftest import FIXTURES, app_for

RECORDED = FIXTURES / "qwen-code" / "0.24.4"
AGENT = "qwen-code"


def facts(scenario: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / scenario / "expected.json").read_text())
    return data


def chat_file(scenario: str, home: str = "home") -> Path:
    (found,) = (RECORDED / scenario / home / ".qwen").glob("projects/*/chats/*.jsonl")
    return found


def reader_of(path: Path) -> ChatReader:
    """A chat reader of the session `path` holds (its name is the session id)."""
    return ChatReader(path.stem, Shared())


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def fed(reader: Any, recs: list[Any]) -> list[Event]:
    return [e for r in recs for e in reader.feed(r)]


def row(scenario: str) -> dict[str, Any]:
    app = app_for(RECORDED / scenario / "home")
    (only,) = session_rows(app.state, app.config.project, history=True)
    return only


def test_layout_and_files_never_opened() -> None:
    qwen = QwenCode()
    chats = "projects/-home-user-work-shop-api/chats"
    subs = "projects/-home-user-work-shop-api/subagents/s1"
    assert qwen.match(PurePosixPath(f"{chats}/s1.jsonl")) == "jsonl"
    assert qwen.match(PurePosixPath(f"{chats}/s1.runtime.json")) == "doc"
    assert qwen.match(PurePosixPath(f"{subs}/agent-general-purpose-call_1.jsonl")) == "jsonl"
    assert qwen.match(PurePosixPath(f"{subs}/agent-general-purpose-call_1.meta.json")) == "doc"
    assert qwen.match(PurePosixPath("usage_record.jsonl")) == "jsonl"
    for never in (
        "settings.json",
        "oauth_creds.json",
        ".env",
        "installation_id",
        "sessions/24730.json",  # the TUI's registry: it holds an IPC token
        "usage/token-usage-2026-12.jsonl",  # per-call copies of the chats' usage
        "tmp/abc/logs.json",
        f"{chats}/notes.txt",
    ):
        assert qwen.match(PurePosixPath(never)) is None, never


def test_home_is_qwen_home_or_dot_qwen() -> None:
    assert QwenCode.default_home({"QWEN_HOME": "/srv/q"}) == Path("/srv/q")
    assert QwenCode.default_home({"HOME": "/home/u"}) == Path("/home/u/.qwen")
    # Qwen Code's own reading of the variable: `~` and `~/…` (or `~\…`) under the home
    assert QwenCode.default_home({"QWEN_HOME": "~", "HOME": "/home/u"}) == Path("/home/u")
    assert QwenCode.default_home({"QWEN_HOME": "~/q/h", "HOME": "/home/u"}) == Path("/home/u/q/h")


def test_usage_per_response_counted_once() -> None:
    """Each response's usage is in its assistant record AND in a telemetry record of the same
    chat AND in `usage/token-usage-*.jsonl`: the home's tokens equal the stub's, once; the
    memory extractor Qwen Code ran on its own (run-answer, resume) counts in the totals only."""
    for scenario in ("run-answer", "run-shell", "subagent", "resume"):
        want = facts(scenario)["home"]
        app = app_for(RECORDED / scenario / "home")
        totals = app.state.totals
        assert sum(totals.messages.values()) == want["messages"], scenario
        for kind, value in want["tokens"].items():
            got = sum(v for k, v in totals.tokens.items() if k[3] == kind)
            assert got == value, (scenario, kind)
    memory = facts("run-answer")["stub"]["requests"].get("memory", 0)
    assert facts("run-answer")["home"]["messages"] == row("run-answer")["messages"] + memory


def test_openai_usage_mapping() -> None:
    """`promptTokenCount` holds the cached tokens, `candidatesTokenCount` the reasoning ones."""
    events = fed(reader_of(chat_file("run-answer")), records(chat_file("run-answer")))
    (response,) = [e for e in events if isinstance(e, ModelResponded) and not e.internal]
    assert response.usage == Usage(input=2000, output=50, cache_read=0, reasoning=16)
    assert response.message_id.startswith("chatcmpl-stub")  # the telemetry's response id


def test_tool_outcomes_from_the_results() -> None:
    fail = row("run-fail")
    assert fail["tool_calls"]["error"] == facts("run-fail")["sessions"][0]["tool_calls"]["error"]
    events = fed(reader_of(chat_file("tui-approval")), records(chat_file("tui-approval")))
    outcomes = [e.outcome for e in events if isinstance(e, ToolCallEnded)]
    want = facts("tui-approval")["sessions"][0]["tool_calls"]
    assert outcomes == ["ok", "rejected"] and want["ok"] == want["rejected"] == 1


def test_a_refused_call_and_an_esc_end_their_turns_interrupted() -> None:
    """The TUI: `date` allowed (completed), `rm -rf build` refused (Qwen Code asks the model
    nothing more), a slow answer cut by Esc (an assistant record of the text so far, without
    usage: the stub's usage never reached Qwen Code, so it is no message)."""
    turns = row("tui-approval")["turns"]
    want = facts("tui-approval")["sessions"][0]
    assert turns["completed"] == want["turns"]["completed"] == 1
    assert turns["interrupted"] == want["turns"]["interrupted"] == 2
    events = fed(reader_of(chat_file("tui-approval")), records(chat_file("tui-approval")))
    ends = [e.outcome for e in events if isinstance(e, TurnEnded)]
    assert ends == ["completed", "interrupted", "interrupted"]
    answered = [e for e in events if isinstance(e, ModelResponded) and not e.internal]
    assert len(answered) == want["messages"] == 3


def test_subagent_under_its_agent_call() -> None:
    (want,) = facts("subagent")["sessions"][0]["subagents"]
    (sub,) = row("subagent")["subagents"]
    assert sub["id"] == want["id"] and sub["type"] == want["type"] == "general-purpose"
    assert sub["messages"] == want["messages"] == 2
    assert sub["tool_calls"] == want["tool_calls"] == 1
    assert sub["state"] == "completed"
    assert row("subagent")["tool_calls"]["total"] == 1  # the lead's `agent` call only


def test_background_subagent_and_its_notification() -> None:
    """`run_in_background` (Qwen Code's default): the lead's call returns at once ("Background
    agent launched"), the child works on, its end comes from its `meta.json`; the
    `<task-notification>` the lead then gets (`provenance: notification`) is no turn."""
    want = facts("subagent-background")["sessions"][0]
    got = row("subagent-background")
    (sub,) = got["subagents"]
    (wanted,) = want["subagents"]
    assert sub["id"] == wanted["id"] and sub["background"] is True
    assert sub["state"] == wanted["state"] == "completed"
    assert sub["messages"] == wanted["messages"] and sub["tool_calls"] == wanted["tool_calls"]
    assert got["turns"]["completed"] == want["turns"]["completed"] == 1
    assert got["messages"] == want["messages"] == 5


def test_subagent_tool_results_without_a_status() -> None:
    """A sub-agent's `tool_result` has no `toolCallResult.status` (`{callId, durationMs}`): its
    `functionResponse` (`output` or `error`) gives the outcome."""
    qwen = QwenCode()
    home = RECORDED / "subagent" / "home" / ".qwen"
    (path,) = home.glob("projects/*/subagents/*/*.jsonl")
    rel = PurePosixPath(path.relative_to(home).as_posix())
    events = fed(qwen.reader(rel), records(path))
    (wanted,) = facts("subagent")["sessions"][0]["subagents"]
    outcomes = [e.outcome for e in events if isinstance(e, ToolCallEnded)]
    assert outcomes.count("ok") == wanted["tool_outcomes"]["ok"] == 1
    assert outcomes.count("error") == wanted["tool_outcomes"]["error"] == 0


def test_subagent_meta_links_its_call() -> None:
    qwen = QwenCode()
    (meta,) = (RECORDED / "subagent" / "home" / ".qwen").glob("projects/*/subagents/*/*.json")
    rel = PurePosixPath(meta.relative_to(RECORDED / "subagent" / "home" / ".qwen").as_posix())
    events = fed(qwen.reader(rel), [json.loads(meta.read_text())])
    started = [e for e in events if isinstance(e, SubagentStarted)]
    ended = [e for e in events if isinstance(e, SubagentEnded)]
    (want,) = facts("subagent")["sessions"][0]["subagents"]
    assert started[0].call_id == want["call_id"] and started[0].subagent_id == want["id"]
    assert [e.outcome for e in ended] == ["completed"]


def failed_turns(events: list[Event]) -> list[str]:
    return [e.outcome for e in events if isinstance(e, TurnEnded)]


def test_the_last_retry_fails_the_turn_whichever_file_comes_first() -> None:
    """Qwen Code retries a 500 (one `api_error` per attempt) and exits: no record ends the
    turn; `usage_record.jsonl`, written as it exits, does."""
    session = facts("api-error")["sessions"][0]
    chat = records(chat_file("api-error"))
    usage = records(RECORDED / "api-error" / "home" / ".qwen" / "usage_record.jsonl")
    for chat_first in (True, False):
        qwen = QwenCode()
        sid = session["session_id"]
        reader = ChatReader(sid, qwen.of(sid))
        ends = UsageRecordReader(qwen)
        first, second = (reader, ends) if chat_first else (ends, reader)
        events = fed(first, chat if chat_first else usage)
        events += fed(second, usage if chat_first else chat)
        assert failed_turns(events) == ["failed"], chat_first
        failures = [e for e in events if isinstance(e, ModelFailed)]
        assert len(failures) == session["api_errors"]
    assert row("api-error")["turns"]["failed"] == session["turns"]["failed"] == 1


def test_a_retry_that_succeeds_does_not_fail_the_turn() -> None:
    """An `api_error` followed by a response: the turn completes (the failure is counted)."""
    answer = records(chat_file("run-answer"))
    error = {
        "type": "system",
        "subtype": "ui_telemetry",
        "timestamp": answer[1]["timestamp"],
        "systemPayload": {"uiEvent": {"event.name": "qwen-code.api_error", "status_code": 429}},
    }
    events = fed(reader_of(chat_file("run-answer")), [answer[0], error, *answer[1:]])
    assert failed_turns(events) == ["completed"]
    assert [e.error for e in events if isinstance(e, ModelFailed)] == ["429"]


def test_resumed_session_is_one_session_of_two_turns() -> None:
    want = facts("resume")["sessions"][0]
    got = row("resume")
    assert got["session_id"] == want["session_id"]
    assert got["turns"]["completed"] == want["turns"]["completed"] == 2
    assert got["messages"] == want["messages"] == 3


def live_state(home: Path, pid: int | None, now: float) -> State:
    """`home` read once; `pid` running since long before; refreshed at `now`."""
    state = State()
    Engine([Source(QwenCode(), home)], state).catch_up()
    state.refresh(now, lambda p: 0.0 if p == pid else None)
    return state


def runtime(home: Path) -> dict[str, Any]:
    (found,) = home.glob("projects/*/chats/*.runtime.json")
    doc: dict[str, Any] = json.loads(found.read_text())
    return doc


def test_the_tui_is_running_while_it_asks_for_approval() -> None:
    """The copy taken while the approval question showed: the TUI's pid in `.runtime.json`,
    a turn open. Qwen Code writes nothing of the question: it reads running, not needs_user."""
    home = RECORDED / "tui-approval" / "home-live" / ".qwen"
    doc, live = runtime(home), facts("tui-approval")["live_copies"]["home-live"]
    state = live_state(home, doc["pid"], live["at"] + 1)
    key = (AGENT, doc["session_id"])
    assert state.status(key, state.live[key])[0] == live["state"] == "running"


def test_the_tui_idles_between_turns() -> None:
    home = RECORDED / "tui-approval" / "home-idle" / ".qwen"
    doc, live = runtime(home), facts("tui-approval")["live_copies"]["home-idle"]
    state = live_state(home, doc["pid"], live["at"] + 1)
    key = (AGENT, doc["session_id"])
    assert state.status(key, state.live[key])[0] == live["state"] == "idle"


def test_only_the_tui_says_it_is_interactive() -> None:
    assert row("tui-approval")["kind"] == facts("tui-approval")["sessions"][0]["kind"]
    assert facts("tui-approval")["sessions"][0]["kind"] == "interactive"
    assert facts("run-answer")["sessions"][0]["kind"] is None  # a headless chat says nothing


def test_a_gone_tui_process_is_not_live() -> None:
    """`.runtime.json` is left behind at exit: its pid gone, the session is not live."""
    home = RECORDED / "tui-approval" / "home" / ".qwen"
    doc = runtime(home)
    state = live_state(home, None, facts("tui-approval")["live_copies"]["home-idle"]["at"] + 60)
    assert (AGENT, doc["session_id"]) not in state.live


def test_runtime_file_is_a_live_index_entry() -> None:
    doc = runtime(RECORDED / "tui-approval" / "home-live" / ".qwen")
    reader = RuntimeReader(doc["session_id"], "projects/x/chats/s.runtime.json")
    (entry,) = [e for e in reader.feed(doc) if isinstance(e, LiveIndexRead)]
    assert entry.pid == doc["pid"] and entry.derived and entry.kind == "interactive"
    assert reader.feed(None)[0].source == "projects/x/chats/s.runtime.json"
    assert reader.feed({"pid": "x"}) == []


def test_a_headless_run_is_not_live_while_it_runs() -> None:
    """The copy taken while `sleep 4` ran in a headless run: its turn is open, but nothing
    names its process (no runtime file, no file held open)."""
    home = RECORDED / "live-shell" / "home-live" / ".qwen"
    live = facts("live-shell")["live_copies"]["home-live"]
    state = live_state(home, None, live["at"] + 1)
    (session,) = state.sessions.values()
    assert session.turn_open_at is not None and not state.live

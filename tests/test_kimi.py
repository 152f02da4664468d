"""Kimi CLI: one test per behaviour, on the files Kimi CLI 1.51.0 wrote (`fixtures/kimi/1.51.0/`),
checked against the stub's facts (`expected.json`): usage per response counted once (not
again from a sub-agent's own wire), tool outcomes, the sub-agent under its `Agent` call, the
failed turn and its attempts, the resumed session, the cwd from `kimi.json` and the model from
the unsent telemetry whichever file is read first, and what the copy taken while a command
ran shows."""

from __future__ import annotations

import hashlib
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
    ToolCallEnded,
    ToolCallStarted,
    TurnEnded,
    Usage,
)
from coding_agent_exporter.harnesses.kimi import Kimi
from coding_agent_exporter.harnesses.kimi.harness import folder_of
from coding_agent_exporter.web.views import session_rows

from .conftest import FIXTURES, app_for

RECORDED = FIXTURES / "kimi" / "1.51.0"
CWD = "/home/user/work/shop-api"


def facts(scenario: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / scenario / "expected.json").read_text())
    return data


def kimi_home(scenario: str, home: str = "home") -> Path:
    return RECORDED / scenario / home / ".kimi"


def wire_file(scenario: str, home: str = "home") -> Path:
    (found,) = kimi_home(scenario, home).glob("sessions/*/*/wire.jsonl")
    return found


def records(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def feed_files(kimi: Kimi, home: Path, names: list[str]) -> list[Event]:
    """The files `names` (relative to `home`) fed to their readers, in that order."""
    events: list[Event] = []
    for name in names:
        rel = PurePosixPath(name)
        reader = kimi.reader(rel)
        path = home / name
        recs = [json.loads(path.read_text())] if kimi.match(rel) == "doc" else records(path)
        events += [e for r in recs for e in reader.feed(r)]
    return events


def wire_events(scenario: str, home: str = "home") -> list[Event]:
    path = wire_file(scenario, home)
    rel = path.relative_to(kimi_home(scenario, home)).as_posix()
    return feed_files(Kimi(), kimi_home(scenario, home), [rel])


def row(scenario: str, home: str = "home", **kw: Any) -> dict[str, Any]:
    app = app_for(RECORDED / scenario / home, **kw)
    (only,) = session_rows(app.state, app.config.project, history=True)
    return only


def test_layout_and_files_never_opened() -> None:
    kimi = Kimi()
    session = "sessions/a106323557ba9e956a8654360ee98790/11cb3709-d828-483d-aa8a-aeeabe7ca53d"
    assert kimi.match(PurePosixPath(f"{session}/wire.jsonl")) == "jsonl"
    assert kimi.match(PurePosixPath("kimi.json")) == "doc"
    assert kimi.match(PurePosixPath("telemetry/failed_7aa885a5a430.jsonl")) == "jsonl"
    assert kimi.match(PurePosixPath(f"{session}/subagents/a514ff773/wire.jsonl")) == "jsonl"
    for never in (
        "config.toml",  # the providers' API keys
        "device_id",
        "logs/kimi.log",
        "credentials/kimi-code.json",
        "mcp-oauth/server.json",
        f"{session}/context.jsonl",  # `_usage` there is the context's size
        f"{session}/state.json",
        f"{session}/subagents/a514ff773/meta.json",
        f"{session}/subagents/a514ff773/context.jsonl",
        f"{session}/notifications/nc47eae77/event.json",
        f"{session}/tasks/t1/output.log",
    ):
        assert kimi.match(PurePosixPath(never)) is None, never


def test_home_is_kimi_share_dir_or_dot_kimi() -> None:
    assert Kimi.default_home({"KIMI_SHARE_DIR": "/srv/k"}) == Path("/srv/k")
    assert Kimi.default_home({"HOME": "/home/u"}) == Path("/home/u/.kimi")


def test_sessions_folder_is_the_md5_of_the_work_dir() -> None:
    """Kimi's own key (`metadata.py`), which the recorder kept when it scrubbed the paths."""
    assert wire_file("print-answer").parent.parent.name == folder_of(CWD, "local")
    digest = hashlib.md5(CWD.encode()).hexdigest()
    assert folder_of(CWD, "ssh") == f"ssh_{digest}"


def test_usage_per_response_counted_once() -> None:
    """One `StatusUpdate` per response; the sub-agent's responses are in the lead's wire (as
    `SubagentEvent`s) AND in its own `subagents/<id>/wire.jsonl`: the tokens equal the stub's."""
    for scenario in ("print-answer", "print-shell", "subagent", "resume", "live-shell"):
        want = facts(scenario)["home"]
        app = app_for(RECORDED / scenario / "home")
        totals = app.state.totals
        assert sum(totals.messages.values()) == want["messages"], scenario
        for kind, value in want["tokens"].items():
            got = sum(v for k, v in totals.tokens.items() if k[3] == kind)
            assert got == value, (scenario, kind)


def test_token_usage_mapping() -> None:
    """`input_other` excludes the cache; the reasoning the stub sent is inside `output`."""
    responses = [e for e in wire_events("print-answer") if isinstance(e, ModelResponded)]
    (response,) = responses
    assert response.usage == Usage(input=2000, output=50)
    assert facts("print-answer")["stub_truth"]["reasoning_sent"] == 16
    cached = [e for e in wire_events("print-shell") if isinstance(e, ModelResponded)][1]
    assert cached.usage == Usage(input=2200, output=60, cache_read=800)


def test_tool_outcomes_from_the_results() -> None:
    for scenario in ("print-shell", "print-fail"):
        want = facts(scenario)["sessions"][0]["tool_calls"]
        events = wire_events(scenario)
        started = [e for e in events if isinstance(e, ToolCallStarted)]
        ended = [e for e in events if isinstance(e, ToolCallEnded)]
        assert [e.tool for e in started] == list(want["by_tool"]) == ["Shell"]
        assert [e.outcome for e in ended].count("error") == want["error"], scenario
        assert [e.outcome for e in ended].count("ok") == want["ok"], scenario
        assert row(scenario)["tool_calls"] == {"total": want["total"], "error": want["error"]}


def home_events(scenario: str) -> list[Event]:
    """Every wire of the home (the lead's, then its sub-agents'), in the catch-up's order."""
    home = kimi_home(scenario)
    names = sorted(
        (p.relative_to(home).as_posix() for p in home.glob("sessions/**/wire.jsonl")),
        key=lambda name: (name.count("/"), name),
    )
    return feed_files(Kimi(), home, names)


def test_subagent_under_its_agent_call() -> None:
    """The lead's wire links the sub-agent to its call (`SubagentEvent`, then the call's
    result); its responses and calls are counted from its own wire only (the lead's
    `SubagentEvent`s repeat them)."""
    (want,) = facts("subagent")["sessions"][0]["subagents"]
    lead = wire_events("subagent")
    assert not any(isinstance(e, ModelResponded) and e.subagent_id for e in lead)
    events = home_events("subagent")
    (started, own_file) = [e for e in events if isinstance(e, SubagentStarted)]
    assert own_file.subagent_id == want["id"] and own_file.call_id is None
    assert (started.call_id, started.subagent_id) == (want["call_id"], want["id"])
    assert (started.subagent_type, started.title, started.background) == (
        "coder",
        "Count python files",
        False,
    )
    (ended,) = [e for e in events if isinstance(e, SubagentEnded)]
    assert (ended.call_id, ended.subagent_id, ended.outcome) == (
        want["call_id"],
        want["id"],
        "completed",
    )
    own = [e for e in events if isinstance(e, ModelResponded) and e.subagent_id == want["id"]]
    assert len(own) == want["messages"] and not any(e.main for e in own)
    calls = [e for e in events if isinstance(e, ToolCallStarted) and e.subagent_id == want["id"]]
    assert len(calls) == want["tool_calls"]
    (sub,) = row("subagent")["subagents"]
    assert (sub["id"], sub["state"], sub["messages"]) == (want["id"], "completed", 3)
    assert sub["tokens"] == want["tokens"]


def test_api_error_fails_the_turn_after_every_attempt() -> None:
    """Two `StepRetry`s, then `StepInterrupted` and `TurnEnd`: three failed attempts (the
    stub's HTTP 500s that were no SDK retry), one failed turn, no response."""
    want = facts("api-error")["sessions"][0]
    events = wire_events("api-error")
    failed = [e for e in events if isinstance(e, ModelFailed)]
    assert len(failed) == want["api_errors"] == 3
    assert {e.error for e in failed} == {"APIStatusError 500"}
    assert [e.outcome for e in events if isinstance(e, TurnEnded)] == ["failed"]
    assert not any(isinstance(e, ModelResponded) for e in events)
    assert row("api-error")["turns"] == {"completed": 0, "interrupted": 0, "failed": 1}


def test_resumed_session_is_one_session_of_two_turns() -> None:
    want = facts("resume")
    (session,) = want["sessions"]
    got = row("resume")
    assert got["session_id"] == session["session_id"]
    assert got["turns"]["completed"] == session["turns"]["completed"] == 2
    assert got["messages"] == session["messages"] == 3
    assert got["title"] == "SCENARIO:resume1 say something"


def test_cwd_and_model_whichever_file_is_read_first() -> None:
    """The wire names neither its work dir nor its model: `kimi.json` and the unsent
    telemetry do, read before it (shallower paths) or after it (live)."""
    home = kimi_home("print-shell")
    wire = wire_file("print-shell").relative_to(home).as_posix()
    (telemetry, *_) = sorted(p.relative_to(home).as_posix() for p in home.glob("telemetry/*"))
    before = feed_files(Kimi(), home, ["kimi.json", telemetry, wire])
    seen = [e for e in before if isinstance(e, SessionSeen)]
    assert (seen[0].cwd, seen[0].model, seen[0].kind) == (CWD, "stub-model", "headless")
    assert {e.model for e in before if isinstance(e, ModelResponded)} == {"stub-model"}
    after = feed_files(Kimi(), home, [wire, "kimi.json", telemetry])
    seen = [e for e in after if isinstance(e, SessionSeen)]
    assert seen[0].cwd is None and any(e.cwd == CWD for e in seen[1:])
    assert any(e.model == "stub-model" and e.version == "1.51.0" for e in seen[1:])
    assert {e.model for e in after if isinstance(e, ModelResponded)} == {"unknown"}


def test_copy_while_a_command_runs_shows_the_open_call_not_a_live_session() -> None:
    """Kimi CLI writes no live index and holds no session file open: the copy taken while
    `sleep 4` ran has the call without its result and the turn open, but nothing says the
    process runs (README: what it cannot tell)."""
    want = facts("live-shell")["live_copies"]["home-live"]
    assert want["state"] == "running" and want["turn_open"]
    events = wire_events("live-shell", "home-live")
    started = {e.call_id for e in events if isinstance(e, ToolCallStarted)}
    ended = {e.call_id for e in events if isinstance(e, ToolCallEnded)}
    assert sorted(started - ended) == want["tool_calls_open"]
    assert not any(isinstance(e, TurnEnded) for e in events)
    got = row("live-shell", "home-live")
    assert got["live"] is False


def test_tui_rejected_call_and_esc_end_their_turns_interrupted() -> None:
    """`[3] Reject`: the result's brief is "Rejected by user" and Kimi ends the turn; Esc while
    the answer streams: the text so far and `TurnEnd`, no response (its usage never came)."""
    want = facts("tui-approval")["sessions"][0]
    events = wire_events("tui-approval")
    outcomes = [e.outcome for e in events if isinstance(e, ToolCallEnded)]
    assert outcomes.count("rejected") == want["tool_calls"]["rejected"] == 1
    assert outcomes.count("ok") == want["tool_calls"]["ok"] == 1
    turns = [e.outcome for e in events if isinstance(e, TurnEnded)]
    assert turns == ["completed", "interrupted", "interrupted"]
    assert turns.count("interrupted") == want["turns"]["interrupted"]
    got = row("tui-approval")
    assert (got["kind"], got["messages"]) == ("interactive", want["messages"])


def test_tui_copies_show_the_waiting_call_but_not_the_question() -> None:
    """While the approval question showed (`home-live/`), the wire held the call without a
    result and the turn open (Kimi writes no approval record): read as work in progress, the
    same as a running command. After the answer (`home-idle/`) the turn is closed."""
    copies = facts("tui-approval")["live_copies"]
    assert copies["home-live"]["state"] == "needs_user"
    waiting = wire_events("tui-approval", "home-live")
    started = {e.call_id for e in waiting if isinstance(e, ToolCallStarted)}
    ended = {e.call_id for e in waiting if isinstance(e, ToolCallEnded)}
    assert sorted(started - ended) == copies["home-live"]["tool_calls_open"]
    assert not any(isinstance(e, TurnEnded) for e in waiting)
    idle = wire_events("tui-approval", "home-idle")
    assert [e.outcome for e in idle if isinstance(e, TurnEnded)] == ["completed"]
    assert copies["home-idle"]["turn_open"] is False


def test_background_subagent_from_its_own_wire_ended_by_the_notification() -> None:
    """`run_in_background`: the lead's wire holds only the call, its result (`task_id`,
    `agent_id`) and, when the task ends, a `Notification`; the sub-agent's work is only in its
    own wire. The turn Kimi starts by itself to hand the result over (`<system-reminder>`) is
    not a turn of the user's; its response is the session's."""
    facts_ = facts("subagent-background")
    (want,) = facts_["sessions"][0]["subagents"]
    events = home_events("subagent-background")
    started = [e for e in events if isinstance(e, SubagentStarted) and e.call_id]
    assert [(e.call_id, e.subagent_id, e.background) for e in started] == [
        (want["call_id"], want["id"], True)
    ]
    (ended,) = [e for e in events if isinstance(e, SubagentEnded)]
    assert (ended.subagent_id, ended.outcome) == (want["id"], "completed")
    notified = max(e.at for e in events if isinstance(e, ModelResponded) and e.subagent_id)
    assert ended.at > notified  # at the Notification, not at the call's result
    assert [e.outcome for e in events if isinstance(e, TurnEnded)] == ["completed"]
    got = row("subagent-background")
    assert got["turns"] == {"completed": 1, "interrupted": 0, "failed": 0}
    assert got["messages"] == facts_["home"]["messages"]
    (sub,) = got["subagents"]
    assert (sub["state"], sub["background"], sub["messages"]) == ("completed", True, 3)
    assert sub["tokens"] == want["tokens"]


def test_a_status_update_written_twice_counts_once(tmp_path: Path) -> None:
    """A TUI run tried by hand (not kept) wrote one response's `StatusUpdate` twice, same
    `message_id`: the copy adds nothing."""
    from coding_agent_exporter.runtime.engine import Engine, Source
    from coding_agent_exporter.state.state import State

    home = tmp_path / ".kimi"
    shutil.copytree(kimi_home("print-shell"), home)
    (wire,) = home.glob("sessions/*/*/wire.jsonl")
    lines = wire.read_text().splitlines(keepends=True)
    status = next(i for i, line in enumerate(lines) if '"StatusUpdate"' in line)
    wire.write_text("".join([*lines[: status + 1], lines[status], *lines[status + 1 :]]))
    state = State()
    Engine([Source(Kimi(), home)], state).catch_up()
    want = facts("print-shell")["home"]
    assert sum(state.totals.messages.values()) == want["messages"]
    got = sum(v for k, v in state.totals.tokens.items() if k[3] == "input")
    assert got == want["tokens"]["input"]

"""Cline CLI: one test per behaviour of its files, on what Cline 3.0.65 wrote
(`fixtures/cline/3.0.65/`), checked against the facts of the stub's log (`expected.json`):
tokens once per message, tool outcomes, turns, the sub-agent under its call in either reading
order, the resumed session, and the live state replayed on the homes copied while Cline ran
(running, needs_user) and after (gone)."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

from coding_agent_exporter.events import (
    Event,
    LiveIndexRead,
    LiveIndexRemoved,
    ModelFailed,
    ModelResponded,
    SubagentEnded,
    SubagentStarted,
    ToolCallEnded,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
    Usage,
)
from coding_agent_exporter.harnesses.cline.harness import Cline, SessionReader
from coding_agent_exporter.harnesses.cline.messages import MessagesReader, Shared
from coding_agent_exporter.harnesses.fields import timestamp
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.state.state import State
from coding_agent_exporter.web.views import session_rows

from .conftest import FIXTURES, app_for, expected

RECORDED = FIXTURES / "cline" / "3.0.65"


def data(scenario: str, copy: str = "home") -> Path:
    return RECORDED / scenario / copy / ".cline" / "data"


def folder(scenario: str, copy: str = "home") -> Path:
    (only,) = sorted(p for p in (data(scenario, copy) / "sessions").iterdir() if p.is_dir())
    return only


def doc(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def lead(scenario: str, copy: str = "home") -> tuple[dict[str, Any], dict[str, Any]]:
    """The session file and the lead's messages file of a recorded session."""
    found = folder(scenario, copy)
    return doc(found / f"{found.name}.json"), doc(found / f"{found.name}.messages.json")


def facts(scenario: str) -> dict[str, Any]:
    (session,) = expected(RECORDED / scenario)["sessions"]
    found: dict[str, Any] = session
    return found


def of(kind: type, events: list[Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def test_layout_and_files_never_opened() -> None:
    cline = Cline()
    assert cline.match(PurePosixPath("sessions/17_ab/17_ab.json")) == "doc"
    assert cline.match(PurePosixPath("sessions/17_ab/17_ab.messages.json")) == "doc"
    assert cline.match(PurePosixPath("sessions/17_ab/agent_18_cd.messages.json")) == "doc"
    for never in (
        "settings/providers.json",
        "locks/hub/production.json",
        "db/sessions.db",
        "db/sessions.db-wal",
        "logs/cline.log",
        "cache/feature-flags.json",
        "sessions/17_ab/other.json",
        "sessions/17_ab.json",
        "sessions/17_ab/x/17_ab.json",
    ):
        assert cline.match(PurePosixPath(never)) is None, never
    assert Cline.default_home({"HOME": "/home/u"}) == Path("/home/u/.cline/data")
    assert Cline.default_home({"CLINE_DIR": "/c", "HOME": "/h"}) == Path("/c/data")
    assert Cline.default_home({"CLINE_DATA_DIR": "/d", "CLINE_DIR": "/c"}) == Path("/d")
    windows = {"HOMEDRIVE": "C:", "HOMEPATH": "\\Users\\u"}
    assert Cline.default_home(windows) == Path("C:\\Users\\u") / ".cline" / "data"
    assert Cline.default_home({"USERPROFILE": "/p"}) == Path("/p/.cline/data")


def test_tokens_are_the_stub_s_once_per_message_not_the_session_totals() -> None:
    """`metrics` of each assistant message count; the session file's `usage` and
    `aggregateUsage` (the same responses again) are never added."""
    for scenario in ("answer", "shell", "two-tools", "subagent", "resume"):
        want = expected(RECORDED / scenario)["home"]
        app = app_for(data(scenario).parent.parent)
        totals = app.state.totals
        assert sum(totals.messages.values()) == want["messages"], scenario
        for kind, value in want["tokens"].items():
            got = sum(v for k, v in totals.tokens.items() if k[3] == kind)
            assert got == value, f"{scenario} {kind}"
    session, messages = lead("shell")
    reader = MessagesReader(Shared(), lead_file=True)
    first = of(ModelResponded, reader.feed(messages))
    assert [e.usage for e in first] == [
        Usage(input=2000, output=50),
        Usage(input=2200, output=60, cache_read=800),  # inputTokens 3000 includes the cached
    ]
    assert reader.feed(messages) == []  # the document rewritten: nothing told twice
    usage = session["metadata"]["usage"]
    assert usage["inputTokens"] == 5000 and usage["cacheReadTokens"] == 800  # same responses
    assert not of(ModelResponded, SessionReader(Shared(), "s").feed(session))


def test_tool_outcomes_from_their_results() -> None:
    for scenario, outcomes in (
        ("shell", ["ok"]),
        ("failing-shell", ["error"]),  # `success: false`, exit 2
        ("two-tools", ["ok", "error"]),  # exit 0, exit 3
        ("tui-approval", ["ok", "rejected"]),  # approved `date`, denied `rm -rf build`
    ):
        _, messages = lead(scenario)
        events = MessagesReader(Shared(), lead_file=True).feed(messages)
        assert [e.outcome for e in of(ToolCallEnded, events)] == outcomes, scenario
        want = facts(scenario)["tool_calls"]
        assert [outcomes.count(k) for k in ("ok", "error", "rejected")] == [
            want["ok"],
            want["error"],
            want["rejected"],
        ]


def test_a_turn_ends_at_the_answer_without_tool_calls() -> None:
    _, messages = lead("shell")
    events = MessagesReader(Shared(), lead_file=True).feed(messages)
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "TurnStarted",
        "ModelResponded",
        "ToolCallStarted",
        "ToolCallEnded",
        "ModelResponded",
        "TurnEnded",
    ]
    (turn,) = of(TurnStarted, events)
    assert turn.prompt == "SCENARIO:shell run echo hi"  # the <user_input> wrapper taken off
    assert of(TurnEnded, events)[0].outcome == "completed"


def test_an_api_error_fails_the_turn() -> None:
    """HTTP 500 to every request: Cline retries, then writes an error message and fails."""
    session, messages = lead("api-error")
    events = MessagesReader(Shared(), lead_file=True).feed(messages)
    (failed,) = of(ModelFailed, events)
    assert "500" in failed.error and failed.model == "stub-model"
    assert [e.outcome for e in of(TurnEnded, events)] == ["failed"]
    assert not of(ModelResponded, events)
    assert session["status"] == "failed" and facts("api-error")["turns"]["failed"] == 1
    assert expected(RECORDED / "api-error")["stub_truth"]["http_errors"] == 6


def subagent_events(lead_first: bool) -> list[Event]:
    found = folder("subagent")
    shared = Shared()
    (child,) = found.glob("agent_*.messages.json")
    files = [
        (MessagesReader(shared, lead_file=True), found / f"{found.name}.messages.json"),
        (MessagesReader(shared, lead_file=False), child),
    ]
    ordered = files if lead_first else files[::-1]
    return [e for reader, path in ordered for e in reader.feed(doc(path))]


def test_the_sub_agent_is_under_its_call_in_either_reading_order() -> None:
    (want,) = facts("subagent")["subagents"]
    for lead_first in (True, False):
        events = subagent_events(lead_first)
        started = of(SubagentStarted, events)
        linked = [e for e in started if e.call_id and e.subagent_id]
        assert [(e.call_id, e.subagent_id) for e in linked] == [(want["call_id"], want["id"])]
        assert {e.session_id for e in events if hasattr(e, "session_id")} == {
            facts("subagent")["session_id"]
        }
        (ended,) = of(SubagentEnded, events)
        assert ended.outcome == want["state"] == "completed"
        own = [e for e in of(ModelResponded, events) if e.subagent_id == want["id"]]
        assert len(own) == want["messages"]


def test_the_sub_agent_s_tokens_and_calls_are_its_own() -> None:
    app = app_for(data("subagent").parent.parent)
    want = facts("subagent")
    (row,) = session_rows(app.state, app.config.project, history=True)
    (sub,) = row["subagents"]
    (sub_want,) = want["subagents"]
    assert sub["id"] == sub_want["id"] and sub["state"] == "completed"
    assert sub["tokens"] == sub_want["tokens"] and sub["tool_calls"] == sub_want["tool_calls"]
    assert row["tokens"] == want["tokens"]  # the lead's and its sub-agent's
    assert row["tool_calls"]["total"] == want["tool_calls"]["total"] == 1  # spawn_agent only


def test_a_resumed_session_is_one_session_of_two_turns() -> None:
    want = facts("resume")
    app = app_for(data("resume").parent.parent)
    (row,) = session_rows(app.state, app.config.project, history=True)
    assert row["session_id"] == want["session_id"]
    assert row["turns"]["completed"] == want["turns"]["completed"] == 2
    assert row["messages"] == want["messages"] and row["tokens"] == want["tokens"]
    assert row["title"] == "SCENARIO:resume1 first prompt"


def live_copy(
    scenario: str, copy: str = "home-live"
) -> tuple[Path, dict[str, Any], tuple[str, str], float]:
    """A home copied while Cline ran: its data folder, the copy's facts, the session's key and
    its start time."""
    home = data(scenario, copy)
    copied = expected(RECORDED / scenario)["live_copies"][copy]
    session, _ = lead(scenario, copy)
    assert session["pid"] == copied["pid"]  # the session file names the agent's own process
    return home, copied, ("cline", session["session_id"]), timestamp(session["started_at"]) or 0


def live_state(home: Path, pid: int, started: float, now: float) -> State:
    state = State()
    Engine([Source(Cline(), home)], state).catch_up()
    state.refresh(now, lambda p: started if p == pid else None)
    return state


def test_a_run_is_running_while_its_command_runs() -> None:
    home, copied, key, opened = live_copy("running")
    state = live_state(home, copied["pid"], opened - 0.3, opened + 5)
    assert copied["turn_open"] and copied["tool_calls_open"]
    assert state.status(key, state.live[key])[0] == copied["state"] == "running"
    assert state.session(*key).turn_open_at is not None


def test_the_tui_waits_for_you_at_its_approval() -> None:
    home, copied, key, opened = live_copy("tui-approval")
    state = live_state(home, copied["pid"], opened - 0.3, opened + 5)
    assert state.status(key, state.live[key])[:2] == (copied["state"], "approval")
    assert copied["state"] == "needs_user" and state.session(*key).turn_open_at is not None


def test_an_ended_session_is_not_live_and_a_recycled_pid_is_not_its_process() -> None:
    for scenario in ("running", "tui-approval"):
        _, copied, key, opened = live_copy(scenario)
        state = live_state(data(scenario), copied["pid"], opened - 0.3, opened + 60)
        assert key not in state.live  # `completed`: no process holds it
    home, copied, key, opened = live_copy("running")
    state = live_state(home, copied["pid"], opened + 3600, opened + 3660)
    assert key not in state.live  # the pid now belongs to a younger process


def test_a_resumed_process_is_live_after_its_prompt() -> None:
    """`cline --id` keeps the session's first `started_at` under a new pid: a process started
    after that but before the latest prompt holds it."""
    session, messages = lead("resume")
    shared = Shared()
    reader = SessionReader(shared, "sessions/x/x.json")
    running = {**session, "status": "idle", "ended_at": None}
    (before,) = of(LiveIndexRead, reader.feed(running))
    assert before.started_at == timestamp(session["started_at"])
    MessagesReader(shared, lead_file=True).feed(messages)
    (after,) = of(LiveIndexRead, reader.feed({**running, "status": "running"}))
    prompts = [
        m["ts"]
        for m in messages["messages"]
        if m["role"] == "user" and m["content"][0]["type"] == "text"
    ]
    assert len(prompts) == 2
    assert after.started_at == timestamp(max(prompts)) and after.status == "busy"
    assert reader.feed(session) == [LiveIndexRemoved(source="sessions/x/x.json")]


def test_a_torn_or_foreign_document_changes_nothing() -> None:
    reader = SessionReader(Shared(), "s")
    assert reader.feed({"torn": True}) == [] and reader.feed([1, 2]) == []
    assert reader.feed(None) == []  # never live: nothing to remove
    messages = MessagesReader(Shared(), lead_file=True)
    assert messages.feed({"agent": "lead"}) == []  # no session id
    child = MessagesReader(Shared(), lead_file=False)
    assert child.feed({"agent": "subagent", "origin": {"parentThreadId": "p"}}) == []


def test_the_tui_idles_between_turns() -> None:
    home, copied, key, opened = live_copy("tui-approval", "home-idle")
    state = live_state(home, copied["pid"], opened - 0.3, opened + 30)
    assert state.status(key, state.live[key])[0] == copied["state"] == "idle"
    assert state.session(*key).turns["completed"] == 1


def test_esc_ends_its_turn_interrupted_at_the_next_prompt() -> None:
    """Esc while a reply streamed: Cline writes the prompt and nothing else (the usage of the
    cut stream never reached it); the next prompt ends that turn interrupted."""
    _, messages = lead("tui-approval")
    events = MessagesReader(Shared(), lead_file=True).feed(messages)
    turns = [(type(e).__name__, getattr(e, "outcome", None)) for e in events]
    turns = [t for t in turns if t[0] in ("TurnStarted", "TurnEnded")]
    assert turns[-3:] == [
        ("TurnEnded", "interrupted"),
        ("TurnStarted", None),
        ("TurnEnded", "completed"),
    ]
    want = facts("tui-approval")
    assert want["turns"]["interrupted"] == 1 and want["turns"]["completed"] == 3
    assert len(of(ModelResponded, events)) == want["messages"]


def test_a_killed_run_is_not_live_and_its_work_is_closed() -> None:
    """SIGKILL while its command ran: the call has no result. The session file said `running`
    until Cline's stale-session reconciler (the hub daemon was the only Cline process left)
    marked it `failed` 3 s later (`terminal_marker`); either way it is not live."""
    session, _ = lead("killed")
    marker = session["metadata"]
    assert session["status"] == "failed" and session["exit_code"] == 1
    assert marker["terminal_marker"] == "failed_external_process_exit"
    assert marker["terminal_marker_source"] == "stale_session_reconciler"
    key = ("cline", session["session_id"])
    opened = timestamp(session["started_at"]) or 0.0
    state = live_state(data("killed"), session["pid"], opened - 0.3, opened + 5)
    assert key not in state.live  # `failed`, though the pid were still running
    before = {**session, "status": "running", "ended_at": None}  # as the timeline saw it
    state = State()
    for event in SessionReader(Shared(), "s").feed(before):
        state.apply("cline", event)
    state.refresh(opened + 5, lambda pid: None)  # its process gone
    assert key not in state.live
    app = app_for(data("killed").parent.parent)
    (row,) = session_rows(app.state, app.config.project, history=True)
    assert row["live"] is False and row["turns"]["interrupted"] == 1
    want = facts("killed")
    assert want["turns"]["unfinished"] == 1 and want["tool_calls"]["cancelled"] == 1


def test_a_messages_file_past_a_mebibyte_is_read(tmp_path: Path) -> None:
    """A long session's conversation (tool outputs included) outgrows the 1 MiB other
    documents are held to: Cline's files are read up to `Cline.doc_limit`."""
    found = folder("shell")
    home = tmp_path / "data"
    copy = home / "sessions" / found.name
    copy.mkdir(parents=True)
    session, messages = lead("shell")
    result = messages["messages"][2]["content"][0]["content"][0]
    result["result"] = "x" * (2 * 1024 * 1024)  # a 2 MiB command output
    (copy / f"{found.name}.json").write_text(json.dumps(session))
    (copy / f"{found.name}.messages.json").write_text(json.dumps(messages))
    state = State()
    engine = Engine([Source(Cline(), home)], state)
    engine.catch_up()
    assert sum(state.totals.messages.values()) == facts("shell")["messages"] == 2
    assert not any(engine.stats.parse_errors.values())


def test_a_question_to_the_user_is_a_wait_though_the_file_says_running() -> None:
    """`ask_question`: the TUI waits for the answer while the session file says `running`;
    the open call in the messages file makes it needs_user (reason `question`), in either
    reading order, until its answer is written."""
    home, copied, key, opened = live_copy("tui-question")
    state = live_state(home, copied["pid"], opened - 0.3, opened + 5)
    assert lead("tui-question", "home-live")[0]["status"] == "running"
    assert state.status(key, state.live[key])[:2] == (copied["state"], "question")
    assert copied["state"] == "needs_user"
    session, messages = lead("tui-question", "home-live")
    for doc_first in (True, False):
        shared = Shared()
        readers = [
            (SessionReader(shared, "s"), session),
            (MessagesReader(shared, lead_file=True), messages),
        ]
        events = [e for r, d in (readers if doc_first else readers[::-1]) for e in r.feed(d)]
        assert of(LiveIndexRead, events)[-1].status == "waiting"
    _, final = lead("tui-question")
    shared = Shared()
    reader = SessionReader(shared, "s")
    reader.feed(session)
    answered = of(LiveIndexRead, MessagesReader(shared, lead_file=True).feed(final))
    assert answered[-1].status == "busy"  # answered: running again until the file says more


def test_usage_written_after_its_message_is_counted_once() -> None:
    """Not seen in 3.0.65 (a message is written whole), but the file is rewritten whole: an
    assistant message told without `metrics` gives its usage when they come, and its calls
    are not told again."""
    _, messages = lead("shell")
    early = json.loads(json.dumps(messages))
    del early["messages"][1]["metrics"]
    reader = MessagesReader(Shared(), lead_file=True)
    first = reader.feed({**early, "messages": early["messages"][:2]})
    assert not of(ModelResponded, first) and len(of(ToolCallStarted, first)) == 1
    later = reader.feed(messages)
    assert [e.usage for e in of(ModelResponded, later)] == [
        Usage(input=2000, output=50),
        Usage(input=2200, output=60, cache_read=800),
    ]
    assert not of(ToolCallStarted, later) and reader.feed(messages) == []


def test_a_tui_gone_idle_with_its_turn_open_ended_it_without_an_answer() -> None:
    """Esc while a reply streams writes nothing; the session file then says `idle`, with its
    usage totals (written at a turn's end) equal to the responses read: the turn is cut,
    interrupted. Totals above what was read mean a response not read yet: nothing is said."""
    session, messages = lead("tui-approval")
    prompts = [
        i
        for i, m in enumerate(messages["messages"])
        if m["role"] == "user" and m["content"][0]["type"] == "text"
    ]
    cut = messages["messages"][: prompts[-2] + 1]  # up to the prompt whose reply was cut
    assert "ia_slow" in cut[-1]["content"][0]["text"]
    spent = [
        sum(m.get("metrics", {}).get(k, 0) for m in cut) for k in ("inputTokens", "outputTokens")
    ]
    usage = {**session["metadata"]["usage"], "inputTokens": spent[0], "outputTokens": spent[1]}
    idle = {**session, "status": "idle", "metadata": {**session["metadata"], "usage": usage}}
    ahead = {**idle, "metadata": {**idle["metadata"], "usage": {**usage, "outputTokens": 999}}}
    for written, outcomes in ((ahead, []), (idle, ["interrupted"])):
        shared = Shared()
        reader = MessagesReader(shared, lead_file=True)
        reader.feed({**messages, "messages": cut})
        events = SessionReader(shared, "s").feed(written)
        assert [e.outcome for e in of(TurnEnded, events)] == outcomes
        rest = reader.feed(messages)  # the next prompt, answered
        ends = [e.outcome for e in of(TurnEnded, rest)]
        assert ends == (["completed"] if outcomes else ["interrupted", "completed"])  # once
    found = folder("tui-approval", "home-idle")
    for doc_first in (True, False):
        shared = Shared()
        files = [
            (SessionReader(shared, "s"), doc(found / f"{found.name}.json")),
            (MessagesReader(shared, lead_file=True), doc(found / f"{found.name}.messages.json")),
        ]
        events = [e for r, d in (files if doc_first else files[::-1]) for e in r.feed(d)]
        assert [e.outcome for e in of(TurnEnded, events)] == ["completed"]  # answered

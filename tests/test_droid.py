"""Factory Droid: the recorded sessions (`fixtures/droid/0.215.0/`, written by the real `droid
exec` against the stub) checked against the stub's own facts (`expected.json`), the settings
file's totals counted once however often it is rewritten or read, and what the files cannot
tell of a running session."""

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
    ToolCallEnded,
    TurnEnded,
    TurnStarted,
    Usage,
    UsageTotalsRead,
)
from coding_agent_exporter.harnesses.droid.harness import Droid
from coding_agent_exporter.harnesses.droid.journal import JournalReader
from coding_agent_exporter.harnesses.droid.settings import SettingsReader
from coding_agent_exporter.harnesses.droid.shared import Shared
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.state.state import ABANDON_AFTER, State

from .conftest import FIXTURES, app_for

RECORDED = FIXTURES / "droid" / "0.215.0"
A = "droid"


def facts(scenario: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / scenario / "expected.json").read_text())
    return data


def files(scenario: str, home: str = "home") -> tuple[str, Path, Path]:
    """The session id, journal and settings file of a scenario's one session."""
    (journal,) = (RECORDED / scenario / home / ".factory" / "sessions").glob("*/*.jsonl")
    session_id = journal.name.removesuffix(".jsonl")
    return session_id, journal, journal.with_name(f"{session_id}.settings.json")


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def read(scenario: str, home: str = "home", settings_first: bool = False) -> list[Event]:
    """The events of a scenario's session: its journal and its settings file, in either order."""
    session_id, journal, settings = files(scenario, home)
    shared = Shared(session_id)
    doc = json.loads(settings.read_text())
    told = SettingsReader(shared).feed(doc) if settings_first else []
    reader = JournalReader(shared)
    events = told + [e for r in records(journal) for e in reader.feed(r)]
    return events if settings_first else events + SettingsReader(shared).feed(doc)


def tokens(usage: Usage) -> dict[str, int]:
    return {k: v for k, v in usage.as_dict().items() if k != "reasoning"}


def test_layout() -> None:
    droid, sid = Droid(), "8e858d84-248d-4e34-adbe-63d9ff36293c"
    assert droid.match(PurePosixPath(f"sessions/-home-u-p/{sid}.jsonl")) == "jsonl"
    assert droid.match(PurePosixPath(f"sessions/{sid}.jsonl")) == "jsonl"
    assert droid.match(PurePosixPath(f"sessions/-home-u-p/{sid}.settings.json")) == "doc"
    for never in (
        f"sessions/-home-u-p/{sid}.settings.json.bak",
        "settings.json",
        "cache/session-discovery-index.json",
        "background-processes.json",
        "sessions/-home-u-p/notes.jsonl",
        f"logs/{sid}.jsonl",
    ):
        assert droid.match(PurePosixPath(never)) is None, never


def test_home_on_each_system() -> None:
    """Droid's home is `os.homedir()` (or `$FACTORY_HOME_OVERRIDE`, which replaces the user's
    home, not the `.factory` folder) joined with `.factory`, on every system."""
    assert Droid.default_home({"HOME": "/home/u"}) == Path("/home/u/.factory")
    override = {"FACTORY_HOME_OVERRIDE": "/srv/f", "HOME": "/home/u"}
    assert Droid.default_home(override) == Path("/srv/f/.factory")


def test_tokens_are_the_stubs_from_the_settings_totals() -> None:
    """No journal record carries usage: the settings file's totals are the session's tokens,
    and they equal what the stub sent (input without the cached part)."""
    for scenario in ("run-answer", "run-shell", "run-fail", "rate-limit", "resume", "live-shell"):
        (want,) = facts(scenario)["sessions"]
        responses = [e for e in read(scenario) if isinstance(e, ModelResponded)]
        assert len(responses) == want["messages"], scenario
        assert all(e.usage == Usage() for e in responses), scenario
        (totals,) = [e for e in read(scenario) if isinstance(e, UsageTotalsRead)]
        assert tokens(totals.usage) == want["tokens"], scenario
        assert totals.model == want["model"] == "custom:Stub-0"


def test_a_rewritten_settings_file_counts_its_totals_once() -> None:
    """Droid rewrites the settings file after each call with the totals so far: every rewrite
    the recorder's sampler caught (live-timeline.jsonl), folded in order, counts the last
    totals, not their sum."""
    session_id, journal, _ = files("run-shell")
    rewrites = [
        r["doc"]
        for r in records(RECORDED / "run-shell" / "live-timeline.jsonl")
        if r["file"].endswith(".settings.json")
    ]
    assert len(rewrites) == 3  # before the first call, after each of the two
    state, shared = State(), Shared(session_id)
    reader, settings = JournalReader(shared), SettingsReader(shared)
    for record in records(journal)[:3]:  # the session and its prompt: a time is known
        for event in reader.feed(record):
            state.apply(A, event)
    for doc in [*rewrites, rewrites[-1]]:  # and the last one read again
        for event in settings.feed({**doc, "model": "custom:Stub-0"}):
            state.apply(A, event)
    (want,) = facts("run-shell")["sessions"]
    assert tokens(state.sessions[(A, session_id)].tokens) == want["tokens"]


def test_the_last_calls_usage_is_not_every_calls() -> None:
    """Why `lastCallTokenUsage` is not read: summed over every rewrite it matches the totals
    only because the sampler saw each one; the file as a reader finds it after the run holds
    only the second call's."""
    _, _, settings = files("run-shell")
    rewrites = [
        r["doc"]
        for r in records(RECORDED / "run-shell" / "live-timeline.jsonl")
        if r["file"].endswith(".settings.json") and r["doc"]["lastCallTokenUsage"]
    ]
    summed = sum(d["lastCallTokenUsage"]["inputTokens"] for d in rewrites)
    last = json.loads(settings.read_text())["lastCallTokenUsage"]
    (want,) = facts("run-shell")["sessions"]
    assert summed == want["tokens"]["input"] == 4200
    assert last["inputTokens"] == 2200 != want["tokens"]["input"]


def test_totals_read_before_the_journal_wait_for_its_time() -> None:
    """The engine may read the settings file first: its totals (which carry no time) wait until
    the journal has said where the session runs, then count once."""
    events = read("run-shell", settings_first=True)
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("SessionSeen") < kinds.index("UsageTotalsRead")
    assert kinds.count("UsageTotalsRead") == 1
    seen = next(e for e in events if isinstance(e, SessionSeen))
    assert (seen.cwd, seen.kind) == ("/home/user/work/shop-api", "headless")


def test_a_failing_command_is_an_error() -> None:
    (want,) = facts("run-fail")["sessions"]
    ended = [e for e in read("run-fail") if isinstance(e, ToolCallEnded)]
    assert [e.outcome for e in ended] == ["error"] and want["tool_calls"]["error"] == 1
    (ok,) = [e for e in read("run-shell") if isinstance(e, ToolCallEnded)]
    assert ok.outcome == "ok"


def test_the_api_error_fails_the_turn() -> None:
    """An HTTP 400 is a `user_only` notice (`BYOK Error: 400 …`), not a prompt; the turn's
    outcome (`model_request_rejected`) fails it."""
    (want,) = facts("api-error")["sessions"]
    events = read("api-error")
    (failed,) = [e for e in events if isinstance(e, ModelFailed)]
    assert failed.error == "400" and facts("api-error")["stub"]["http_errors"] == 1
    assert len([e for e in events if isinstance(e, TurnStarted)]) == 1
    assert [e.outcome for e in events if isinstance(e, TurnEnded)] == ["failed"]
    assert want["turns"]["failed"] == 1


def test_a_rate_limit_retried_past_leaves_no_trace() -> None:
    """Droid retries a 429 and writes nothing of it: one answer, one completed turn."""
    events = read("rate-limit")
    assert not [e for e in events if isinstance(e, ModelFailed)]
    assert facts("rate-limit")["stub"]["http_errors"] == 1
    assert [e.outcome for e in events if isinstance(e, TurnEnded)] == ["completed"]


def test_a_resumed_session_is_one_session_of_two_turns() -> None:
    """`droid exec -s <id>` appends to the same journal and grows the same totals."""
    (want,) = facts("resume")["sessions"]
    app = app_for(RECORDED / "resume" / "home")
    session = app.state.sessions[(A, want["session_id"])]
    assert len(app.state.sessions) == 1
    assert session.turns == {"completed": 2} == {k: v for k, v in want["turns"].items() if v}
    assert tokens(session.tokens) == want["tokens"]
    assert session.messages == want["messages"] == 3


def test_turn_reasons_follow_droids_own_mapping() -> None:
    """completed / spec_handoff complete a turn, cancelled / process_exit interrupt it, every
    other reason fails it (Droid's own mapping of reasons to results)."""
    session_id, journal, _ = files("run-answer")
    got = {}
    for reason in ("completed", "spec_handoff", "cancelled", "process_exit", "permission_rejected"):
        reader = JournalReader(Shared(session_id))
        for record in records(journal)[:3]:
            reader.feed(record)
        (ended,) = reader.feed({"type": "agent_turn_outcome", "turnId": "t", "reason": reason})
        assert isinstance(ended, TurnEnded)
        got[reason] = ended.outcome
    assert got == {
        "completed": "completed",
        "spec_handoff": "completed",
        "cancelled": "interrupted",
        "process_exit": "interrupted",
        "permission_rejected": "failed",
    }


def test_a_notice_that_is_no_error_is_left_alone() -> None:
    reader = JournalReader(Shared("s"))
    notice = {
        "type": "message",
        "id": "n1",
        "timestamp": "2026-12-03T19:15:37.225Z",
        "message": {
            "role": "user",
            "content": [{"type": "text", "text": "Tip: try /help"}],
            "visibility": "user_only",
        },
    }
    assert not [e for e in reader.feed(notice) if not isinstance(e, SessionSeen)]


def test_a_running_session_is_never_shown_live() -> None:
    """The copy taken while `sleep 4` ran: the turn and the call are open in the files, but
    `droid exec` writes no pid or status and held no file open (the recorder looked at its
    descriptors): no process claims the session, so it is not live, and its open turn is
    closed as interrupted once its last record is ABANDON_AFTER old."""
    want = facts("live-shell")["live_copies"]["home-live"]
    assert want["state"] == "running" and want["open_files"] == []
    session_id, _, _ = files("live-shell", "home-live")
    home = RECORDED / "live-shell" / "home-live" / ".factory"
    state = State()
    Engine([Source(Droid(), home)], state).catch_up()
    key = (A, session_id)
    session = state.sessions[key]
    assert session.turn_open_at is not None and len(session.open_tools) == 1
    state.refresh(want["at"] + 1, lambda pid: 0.0)  # whatever runs: nothing names a pid
    assert key not in state.live and session.turn_open_at is not None
    state.refresh((session.updated_at or 0.0) + ABANDON_AFTER, lambda pid: 0.0)
    assert session.turns == {"interrupted": 1}


def test_the_tui_asks_and_the_files_cannot_tell_it() -> None:
    """The TUI recorded: while its approval question showed (`home-live/`), the journal ends
    with the call, as it does while a command runs; no `droid` process held a file of the home
    open then or after the answer (`home-idle/`): neither needs_user nor idle is known, and the
    session is never live. Its settings carry no `exec` tag (shown interactive)."""
    for copy, want_open in (("home-live", True), ("home-idle", False)):
        want = facts("tui-approval")["live_copies"][copy]
        assert want["open_files"] == []
        session_id, _, _ = files("tui-approval", copy)
        state = State()
        home = RECORDED / "tui-approval" / copy / ".factory"
        Engine([Source(Droid(), home)], state).catch_up()
        state.refresh(want["at"] + 1, lambda pid: 0.0)
        key = (A, session_id)
        assert key not in state.live, copy
        assert (state.sessions[key].turn_open_at is not None) is want_open, copy
        assert want["state"] == ("needs_user" if want_open else "idle")
    assert [e.kind for e in read("tui-approval") if isinstance(e, SessionSeen)] == [None]


def test_the_totals_hold_the_title_request_no_record_answers() -> None:
    """The TUI asks the model for the session's title (a request without tools): no journal
    record is its response, but Droid adds its tokens to the totals; so the session's tokens
    are the stub's for both kinds, its messages the main requests only."""
    (want,) = facts("tui-approval")["sessions"]
    assert facts("tui-approval")["stub"]["requests"]["title"] == 1
    app = app_for(RECORDED / "tui-approval" / "home")
    session = app.state.sessions[(A, want["session_id"])]
    assert tokens(session.tokens) == want["tokens"] and want["tokens"]["input"] == 4500
    assert session.messages == want["messages"] == 2
    assert session.title == want["title"] == "Fake shop api session"


def test_a_journal_written_again_counts_nothing_twice(tmp_path: Path) -> None:
    """Droid sets the title in the journal's first line (`session_start`) once it has one: the
    file is written again from its start. Read again, it changes the title and counts no
    response, turn or call a second time."""
    home = tmp_path / ".factory"
    shutil.copytree(RECORDED / "run-shell" / "home" / ".factory", home)
    (journal,) = home.glob("sessions/*/*.jsonl")
    session_id = journal.name.removesuffix(".jsonl")
    state = State()
    engine = Engine([Source(Droid(), home)], state)
    engine.catch_up()
    before = state.sessions[(A, session_id)]
    counted = (before.messages, dict(before.turns), before.tool_calls, before.tokens)
    lines = journal.read_text().splitlines(keepends=True)
    start = json.loads(lines[0]) | {"title": "A title Droid made later, longer than the prompt"}
    journal.write_text(json.dumps(start) + "\n" + "".join(lines[1:]))
    engine.changed([journal])
    after = state.sessions[(A, session_id)]
    assert (after.messages, dict(after.turns), after.tool_calls, after.tokens) == counted
    assert after.title == start["title"]
    assert sum(state.totals.messages.values()) == counted[0] == 2


def test_a_subagent_is_its_own_session_counted_under_its_lead() -> None:
    """`Task` runs a sub-agent in a session of its own (journal + settings, `callingSessionId`
    and `callingToolUseId`): one session row, the sub-agent under the call that launched it,
    its tokens from its own settings file (the lead's totals leave them out; its
    `childInclusiveTokenUsageBySessionId` is not read) and the session's tokens the stub's."""
    (want,) = facts("subagent")["sessions"]
    (sub_want,) = want["subagents"]
    app = app_for(RECORDED / "subagent" / "home")
    assert set(app.state.sessions) == {(A, want["session_id"])}
    session = app.state.sessions[(A, want["session_id"])]
    (sub,) = session.unique_subagents()
    assert (sub.agent_id, sub.call_id, sub.subagent_type, sub.state) == (
        sub_want["id"],
        sub_want["call_id"],
        "worker",
        "completed",
    )
    assert tokens(sub.tokens) == sub_want["tokens"] and sub.messages == sub_want["messages"]
    assert (sub.tool_calls, session.tool_calls) == (sub_want["tool_calls"], 1)
    assert tokens(session.tokens) == want["tokens"] and session.messages == want["messages"]
    assert session.turns == {"completed": 1}


def test_a_subagent_read_first_counts_the_same(tmp_path: Path) -> None:
    """The sub-agent's files read before the lead's (its settings before its journal too): the
    same session, sub-agent and tokens, counted under the lead's cwd."""
    (want,) = facts("subagent")["sessions"]
    found = sorted((RECORDED / "subagent" / "home" / ".factory").glob("sessions/*/*"))
    child = [p for p in found if not p.name.startswith(want["session_id"])]
    lead = [p for p in found if p.name.startswith(want["session_id"])]
    droid, state = Droid(), State()
    for path in sorted(child, reverse=True) + lead:  # the child's settings file first
        rel = PurePosixPath("sessions", path.parent.name, path.name)
        reader = droid.reader(rel)
        if droid.match(rel) == "doc":
            records_of: list[object] = [json.loads(path.read_text())]
        else:
            records_of = list(records(path))
        for record in records_of:
            for event in reader.feed(record):
                state.apply(A, event)
    session = state.sessions[(A, want["session_id"])]
    assert tokens(session.tokens) == want["tokens"]
    (sub,) = session.unique_subagents()
    assert sub.agent_id == want["subagents"][0]["id"] and sub.call_id is not None
    assert set(state.totals.tokens) == {
        (A, "custom:Stub-0", "/home/user/work/shop-api", k)
        for k in ("input", "output", "cache_read")
    }

"""OpenHands CLI: one test per behaviour, on conversations OpenHands 1.16.0 wrote
(`fixtures/openhands/1.16.0/`), checked against the stub's facts (`expected.json`): tokens per
call counted once whichever of the state document and the events is read first, a sub-agent's
calls not counted again from its lead's state, the sub-agent under its `task` call, the
events folder followed as one stream (one follower per conversation, new events read at a
change, a half-written one held back), the resumed conversation, the failed turn, and what a
copy taken while it ran says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from coding_agent_exporter.events import (
    ContextCompacted,
    Event,
    ModelResponded,
    ToolCallEnded,
    ToolCallStarted,
)
from coding_agent_exporter.harnesses.openhands import OpenHands
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.state.state import State
from coding_agent_exporter.web.views import session_rows

from .conftest import FIXTURES, app_for

RECORDED = FIXTURES / "openhands" / "1.16.0"


def facts(scenario: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / scenario / "expected.json").read_text())
    return data


def oh_home(scenario: str, home: str = "home") -> Path:
    return RECORDED / scenario / home / ".openhands"


def lead_folder(home: Path) -> Path:
    (found,) = (home / "conversations").iterdir()
    return found


def events_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((folder / "events").glob("event-*.json"))]


def state_of(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "base_state.json").read_text())
    return data


def row(scenario: str, home: str = "home") -> dict[str, Any]:
    app = app_for(RECORDED / scenario / home)
    (only,) = session_rows(app.state, app.config.project, history=True)
    return only


def read(harness: OpenHands, folder: Path, state_first: bool) -> list[Event]:
    """The events of one conversation folder's two readers, in the order asked."""
    rel = PurePosixPath("conversations", folder.name)
    state = harness.reader(rel / "base_state.json")
    stream = harness.reader(rel / "events")
    told_state = lambda: state.feed(state_of(folder))  # noqa: E731
    told_events = lambda: [e for doc in events_of(folder) for e in stream.feed(doc)]  # noqa: E731
    if state_first:
        return told_state() + told_events()
    return told_events() + told_state()


def counted(events: list[Event]) -> dict[str, dict[str, int]]:
    """Tokens per message id as the state counts them (the larger usage of an id)."""
    out: dict[str, dict[str, int]] = {}
    for e in events:
        if isinstance(e, ModelResponded):
            usage = e.usage.as_dict()
            seen = out.get(e.message_id, usage)
            out[e.message_id] = {k: max(seen[k], usage[k]) for k in usage}
    return out


def test_layout_and_files_never_opened() -> None:
    oh = OpenHands()
    lead = "conversations/" + "a" * 32
    sub = f"{lead}/subagents/" + "b" * 32
    assert oh.match(PurePosixPath(f"{lead}/base_state.json")) == "doc"
    assert oh.match(PurePosixPath(f"{sub}/base_state.json")) == "doc"
    assert oh.doc_folder(PurePosixPath(f"{lead}/events"))
    assert oh.doc_folder(PurePosixPath(f"{sub}/events"))
    for never in (
        "agent_settings.json",  # the LLM settings, with the API key
        "cli_config.json",
        "mcp.json",
        f"{lead}/events/.eventlog.lock",
        f"{lead}/events/event-00000-1234abcd.json",  # read through its folder, never alone
        "cache/skills/public-skills/README.json",
    ):
        assert oh.match(PurePosixPath(never)) is None, never
    assert not oh.doc_folder(PurePosixPath("conversations/not-an-id/events"))


def test_default_home_is_the_persistence_folder() -> None:
    assert OpenHands.default_home({"OPENHANDS_PERSISTENCE_DIR": "/srv/oh"}) == Path("/srv/oh")
    assert OpenHands.default_home({"HOME": "/home/u"}) == Path("/home/u/.openhands")


def test_tokens_per_call_once_whichever_file_is_read_first() -> None:
    """The state document has the tokens, the events the time: whichever comes second tells the
    response; each `response_id` counts once, with the stub's tokens."""
    folder = lead_folder(oh_home("run-shell"))
    want = facts("run-shell")["sessions"][0]
    for state_first in (True, False):
        per_message = counted(read(OpenHands(), folder, state_first))
        assert len(per_message) == want["messages"]
        total = {k: sum(m[k] for m in per_message.values()) for k in want["tokens"]}
        assert total == want["tokens"], state_first


def test_a_sub_agents_calls_are_not_counted_again_from_its_leads_state() -> None:
    """The lead's `usage_to_metrics` repeats the sub-agent's calls (`task:<id>`): they count
    once, under the sub-agent, from its own folder."""
    lead = lead_folder(oh_home("subagent"))
    assert any(k.startswith("task:") for k in state_of(lead)["stats"]["usage_to_metrics"])
    want = facts("subagent")["sessions"][0]
    got = row("subagent")
    assert got["messages"] == want["messages"] == facts("subagent")["stub"]["answered"]
    assert got["tokens"] == {**got["tokens"], **want["tokens"]}
    (sub,) = got["subagents"]
    (expected,) = want["subagents"]
    assert (sub["id"], sub["call_id"], sub["type"]) == (
        expected["id"],
        expected["call_id"],
        expected["type"],
    )
    assert sub["title"] == "Count python files"  # the call's description
    assert sub["state"] == expected["state"] == "completed"
    assert {k: sub["tokens"][k] for k in expected["tokens"]} == expected["tokens"]


def test_each_events_folder_is_one_follower() -> None:
    """A conversation costs two followers (its state document and its events folder), a
    sub-agent two more, whatever the number of event files."""
    home = oh_home("subagent")
    engine = Engine([Source(OpenHands(), home)], State())
    engine.catch_up()
    event_files = list(home.glob("conversations/**/events/event-*.json"))
    assert len(event_files) == 10
    assert len(engine._files) == 4


def test_new_events_read_at_a_change_and_a_half_written_one_held_back(tmp_path: Path) -> None:
    """Events written after the catch-up are read when their folder is reported changed; a
    file caught half-written is read again, whole, at its next change."""
    home = tmp_path / ".openhands"
    shutil.copytree(oh_home("run-shell"), home)
    events = sorted(lead_folder(home).glob("events/event-*.json"))
    last = events[-1].read_text()
    events[-1].write_text(last[: len(last) // 2])  # the agent is writing it
    state = State()
    engine = Engine([Source(OpenHands(), home)], state)
    engine.catch_up()
    (session,) = state.sessions.values()
    assert session.turn_open_at is not None  # the answer that ends the turn is not read yet
    events[-1].write_text(last)
    engine.changed([events[-1]])
    want = facts("run-shell")["sessions"][0]
    assert session.turn_open_at is None
    assert session.messages == want["messages"]


def test_thousands_of_event_files_cost_one_follower(tmp_path: Path) -> None:
    """A long conversation (3,000 event files: 1,000 commands) is one follower; every call and
    tool call counted."""
    home = tmp_path / ".openhands"
    folder = home / "conversations" / ("c" * 32)
    (folder / "events").mkdir(parents=True)
    calls = 1000
    write_long_conversation(folder, calls)
    state = State()
    engine = Engine([Source(OpenHands(), home)], state)
    engine.catch_up()
    assert len(engine._files) == 2
    (session,) = state.sessions.values()
    assert session.messages == calls + 1
    assert session.tool_calls == calls


def write_long_conversation(folder: Path, calls: int) -> None:
    """A conversation of `calls` terminal commands, then an answer: a prompt, then per call an
    action and its observation, each its own file (OpenHands' names and shapes)."""
    docs: list[dict[str, Any]] = [user("run them")]
    usages = []
    for n in range(calls):
        response = f"chatcmpl-{n}"
        docs.append(action(response, f"call_{n}", n))
        docs.append(observation(f"call_{n}", n))
        usages.append(usage(response))
    docs.append(answer(f"chatcmpl-{calls}", calls))
    usages.append(usage(f"chatcmpl-{calls}"))
    for i, doc in enumerate(docs):
        (folder / "events" / f"event-{i:05d}-{i:08x}-0000.json").write_text(json.dumps(doc))
    stats = {"usage_to_metrics": {"agent": {"model_name": "m", "token_usages": usages}}}
    base = {
        "agent": {"llm": {"model": "openai/m"}, "agent_context": {"current_datetime": at(0)}},
        "workspace": {"working_dir": "/w"},
        "execution_status": "finished",
        "stats": stats,
    }
    (folder / "base_state.json").write_text(json.dumps(base))


def at(n: int) -> str:
    return f"2026-01-01T00:{n // 600 % 60:02d}:{n // 10 % 60:02d}.{n % 10}00000"


def user(text: str) -> dict[str, Any]:
    message = {"role": "user", "content": [{"type": "text", "text": text}]}
    return {"id": "u", "timestamp": at(0), "source": "user", "llm_message": message,
            "kind": "MessageEvent"}  # fmt: skip


def action(response: str, call: str, n: int) -> dict[str, Any]:
    return {"id": f"a{n}", "timestamp": at(2 * n + 1), "source": "agent", "tool_name": "terminal",
            "tool_call_id": call, "action": {"command": "true"}, "llm_response_id": response,
            "kind": "ActionEvent"}  # fmt: skip


def observation(call: str, n: int) -> dict[str, Any]:
    seen = {"content": [{"type": "text", "text": ""}], "is_error": False, "exit_code": 0}
    return {"id": f"o{n}", "timestamp": at(2 * n + 2), "source": "environment",
            "tool_name": "terminal", "tool_call_id": call, "observation": seen,
            "kind": "ObservationEvent"}  # fmt: skip


def answer(response: str, n: int) -> dict[str, Any]:
    message = {"role": "assistant", "content": [{"type": "text", "text": "done"}]}
    return {"id": "z", "timestamp": at(2 * n + 1), "source": "agent", "llm_message": message,
            "llm_response_id": response, "kind": "MessageEvent"}  # fmt: skip


def usage(response: str) -> dict[str, Any]:
    return {"model": "openai/m", "prompt_tokens": 10, "completion_tokens": 2,
            "cache_read_tokens": 4, "response_id": response}  # fmt: skip


def test_tool_outcomes_from_exit_codes() -> None:
    for scenario, outcome in (("run-shell", "ok"), ("run-fail", "error")):
        folder = lead_folder(oh_home(scenario))
        ended = [e for e in read(OpenHands(), folder, True) if isinstance(e, ToolCallEnded)]
        assert [e.outcome for e in ended] == [outcome], scenario
        want = facts(scenario)["sessions"][0]["tool_calls"]
        assert want[outcome] == 1


def test_finish_tool_completes_the_turn() -> None:
    want = facts("run-finish")["sessions"][0]
    got = row("run-finish")
    assert got["turns"]["completed"] == want["turns"]["completed"] == 1
    assert got["tool_calls"]["total"] == want["tool_calls"]["total"] == 1


def test_api_error_fails_the_turn_once() -> None:
    """LiteLLM retried inside the one call (the stub saw each retry); OpenHands wrote one
    `ConversationErrorEvent`: one failed turn, no message counted."""
    want = facts("api-error")
    assert want["stub"]["http_errors"] > 1
    got = row("api-error")
    assert got["turns"]["failed"] == want["sessions"][0]["turns"]["failed"] == 1
    assert got["messages"] == 0
    assert got["model"] == want["sessions"][0]["model"]  # from its state: no call answered


def test_resumed_conversation_is_one_session_of_two_turns() -> None:
    want = facts("resume")["sessions"][0]
    got = row("resume")
    assert got["session_id"] == want["session_id"]
    assert got["turns"]["completed"] == want["turns"]["completed"] == 2
    assert got["messages"] == want["messages"] == 3


def test_copy_taken_while_a_command_ran() -> None:
    """The copy of the home while `sleep 4` ran: the call is started, not ended, the turn open
    and `execution_status` says running; no process is tied to it (OpenHands writes no pid and
    holds no file open), so it is not shown live: said in the README."""
    assert facts("live-shell")["live_copies"]["home-live"]["state"] == "running"
    folder = lead_folder(oh_home("live-shell", "home-live"))
    assert state_of(folder)["execution_status"] == "running"
    told = read(OpenHands(), folder, True)
    assert [e.tool for e in told if isinstance(e, ToolCallStarted)] == ["terminal"]
    assert not [e for e in told if isinstance(e, ToolCallEnded)]
    got = row("live-shell", "home-live")
    assert got["live"] is False


def test_copies_taken_while_the_tui_asked_and_after() -> None:
    """The TUI asking to confirm `date > stamp.txt`: `waiting_for_confirmation` written, the
    call open; after "Yes" and the answer: `finished`, the call ended ok. OpenHands writes no
    pid: neither copy is shown live (said in the README)."""
    copies = facts("tui-approval")["live_copies"]
    assert copies["home-live"]["state"] == "needs_user"
    asked = lead_folder(oh_home("tui-approval", "home-live"))
    assert state_of(asked)["execution_status"] == "waiting_for_confirmation"
    told = read(OpenHands(), asked, True)
    assert [e.tool for e in told if isinstance(e, ToolCallStarted)] == ["terminal"]
    assert not [e for e in told if isinstance(e, ToolCallEnded)]
    assert copies["home-idle"]["state"] == "idle"
    answered = lead_folder(oh_home("tui-approval", "home-idle"))
    assert state_of(answered)["execution_status"] == "finished"
    ended = [e for e in read(OpenHands(), answered, True) if isinstance(e, ToolCallEnded)]
    assert [e.outcome for e in ended] == ["ok"]
    assert row("tui-approval", "home-live")["live"] is False


def test_a_refused_call_is_rejected() -> None:
    """The TUI's "No": a `UserRejectObservation` (the model is told `Action rejected`)."""
    want = facts("tui-approval")["sessions"][0]["tool_calls"]
    got = row("tui-approval")["tool_calls"]
    assert want["rejected"] == 1
    assert got["total"] == want["total"] == 2
    folder = lead_folder(oh_home("tui-approval"))
    ended = [e for e in read(OpenHands(), folder, True) if isinstance(e, ToolCallEnded)]
    assert [e.outcome for e in ended] == ["ok", "rejected"]


def test_a_conversation_that_appears_later_is_read_from_any_path_reported(tmp_path: Path) -> None:
    """A new conversation after the catch-up: reported by its folder, or by one of its event
    files (its events folder not followed yet): read whole, once."""
    want = facts("run-shell")["sessions"][0]
    for reported in ("folder", "event"):
        home = tmp_path / reported / ".openhands"
        (home / "conversations").mkdir(parents=True)
        state = State()
        engine = Engine([Source(OpenHands(), home)], state)
        engine.catch_up()
        shutil.copytree(
            oh_home("run-shell") / "conversations", home / "conversations", dirs_exist_ok=True
        )
        folder = lead_folder(home)
        first = sorted(folder.glob("events/event-*.json"))[0]
        paths = [folder] if reported == "folder" else [first, folder / "base_state.json"]
        engine.changed(paths)
        engine.changed(paths)  # reported again: nothing read twice
        (session,) = state.sessions.values()
        assert session.messages == want["messages"], reported
        assert session.tool_calls == want["tool_calls"]["total"], reported
        assert len(engine._files) == 2, reported


def test_the_condensers_call_counts_once_with_its_compaction() -> None:
    """Past 80 events the condenser summarized the history: its call is in `usage_to_metrics`
    under `condenser` and named by the `Condensation` event: counted once, with the lead's
    calls (the stub's facts), and one compaction."""
    want = facts("condenser")
    assert want["stub"]["requests"]["condenser"] == 1
    folder = lead_folder(oh_home("condenser"))
    assert len(state_of(folder)["stats"]["usage_to_metrics"]["condenser"]["token_usages"]) == 1
    for state_first in (True, False):
        told = read(OpenHands(), folder, state_first)
        assert len(counted(told)) == want["sessions"][0]["messages"], state_first
        assert len([e for e in told if isinstance(e, ContextCompacted)]) == 1
    got = row("condenser")
    assert got["messages"] == want["sessions"][0]["messages"]
    assert got["tokens"] == {**got["tokens"], **want["sessions"][0]["tokens"]}

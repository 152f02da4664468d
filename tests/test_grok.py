"""Grok Build: one test per behaviour of each file kind, on records Grok Build 0.2.111 wrote
(`fixtures/grok/0.2.111/`); the live index diffed per session; liveness from pid + registration
time, replayed on the homes copied while Grok ran (running, needs_user, idle) and after (gone)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from coding_agent_exporter.events import (
    Event,
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
from coding_agent_exporter.harnesses.fields import timestamp
from coding_agent_exporter.harnesses.grok.harness import Grok, IndexReader, decode_cwd
from coding_agent_exporter.harnesses.grok.session import (
    ChatHistoryReader,
    EventsReader,
    PromptContextReader,
    Shared,
    SummaryReader,
)
from coding_agent_exporter.harnesses.grok.subagents import MetaReader
from coding_agent_exporter.harnesses.grok.updates import UpdatesReader
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.state import State

from .conftest import FIXTURES

RECORDED = FIXTURES / "grok" / "0.2.111"
SID = "01a0b546-2e0f-7b43-8a10-0000000000f6"
OTHER = "01a0b546-2e0f-7b43-8a10-000000000077"
OPENED = "2026-11-20T09:59:58.123456Z"
START = timestamp(OPENED) or 0.0


def entry(session_id: str = SID, pid: int = 37000, opened_at: str = OPENED) -> dict[str, Any]:
    return {"session_id": session_id, "pid": pid, "cwd": "/tmp/app", "opened_at": opened_at}


def ts(second: int) -> str:
    return f"2026-11-20T10:00:{second:02d}.000000Z"


def live(events: list[Event]) -> list[LiveIndexRead]:
    return [e for e in events if isinstance(e, LiveIndexRead)]


def test_layout_and_files_never_opened() -> None:
    grok = Grok()
    session = "sessions/%2Ftmp%2Fapp/" + SID
    assert grok.match(PurePosixPath("active_sessions.json")) == "doc"
    assert grok.match(PurePosixPath(f"{session}/events.jsonl")) == "jsonl"
    assert grok.match(PurePosixPath(f"{session}/updates.jsonl")) == "jsonl"
    assert grok.match(PurePosixPath(f"{session}/chat_history.jsonl")) == "jsonl"
    assert grok.match(PurePosixPath(f"{session}/summary.json")) == "doc"
    assert grok.match(PurePosixPath(f"{session}/prompt_context.json")) == "doc"
    assert grok.match(PurePosixPath(f"{session}/subagents/x/meta.json")) == "doc"
    for never in (
        "auth.json",
        "active_sessions.lock",
        "active_sessions.json.tmp",
        "sessions/session_search.sqlite",
        f"{session}/summary.json.tmp",
        f"{session}/events.lock",
        f"{session}/subagents/x/output.json",
        f"{session}/updates.jsonl.lock",
        f"{session}/system_prompt.txt",
        f"{session}/signals.json",
        f"{session}/terminal/call_1.log",
        "logs/unified.jsonl",
    ):
        assert grok.match(PurePosixPath(never)) is None, never
    assert Grok.default_home({"GROK_HOME": "/g"}) == Path("/g")
    assert Grok.default_home({"HOME": "/home/u"}) == Path("/home/u/.grok")
    assert decode_cwd("%2Ftmp%2Ffoo%28bar%29%21") == "/tmp/foo(bar)!"
    assert decode_cwd("very-long-slug-0123456789abcdef") is None  # its cwd is in summary.json


def test_one_pid_holding_two_sessions_is_two_entries() -> None:
    grok = Grok()
    events = IndexReader(grok).feed([entry(), entry(OTHER, opened_at="2026-11-20T10:00:30Z")])
    entries = live(events)
    assert [e.session_id for e in entries] == [SID, OTHER]
    assert len({e.source for e in entries}) == 2
    assert {e.pid for e in entries} == {37000}
    assert {e.started_at for e in entries} == {START}  # the pid's earliest registration
    assert {e.status for e in entries} == {"idle"}  # no phase log read yet


def test_a_session_removed_from_the_index_ends_only_its_entry() -> None:
    grok = Grok()
    reader = IndexReader(grok)
    first = live(reader.feed([entry(), entry(OTHER)]))
    events = reader.feed([entry(OTHER)])
    assert events[-1] == LiveIndexRemoved(source=first[0].source)
    assert [e.session_id for e in live(events)] == [OTHER]
    assert reader.feed({"torn": True}) == []  # not an array: a torn write changes nothing
    assert reader.feed(None) == [LiveIndexRemoved(source=first[1].source)]


def test_entries_without_proof_are_left_out() -> None:
    bad = [entry(pid=0), entry(pid=True), {**entry(), "opened_at": None}, {**entry(), "cwd": ""}]
    assert IndexReader(Grok()).feed(bad) == []


def copied(scenario: str, copy: str) -> tuple[Path, dict[str, Any], tuple[str, str], float]:
    """A home copied while the agent ran: its folder, its expected facts, the listed session's
    key and when the index says it was opened."""
    home = RECORDED / scenario / copy / ".grok"
    facts = json.loads((RECORDED / scenario / "expected.json").read_text())["live_copies"][copy]
    (listed,) = json.loads((home / "active_sessions.json").read_text())
    assert listed["pid"] == facts["pid"]  # the index lists the agent's own process
    return home, facts, ("grok", listed["session_id"]), timestamp(listed["opened_at"]) or 0.0


def live_state(home: Path, pid: int, started: float, now: float) -> State:
    """`home` read once, `pid` running since `started`, refreshed at `now`."""
    state = State()
    Engine([Source(Grok(), home)], state).catch_up()
    state.refresh(now, lambda p: started if p == pid else None)
    return state


def test_a_tracked_print_run_is_live_while_its_command_runs() -> None:
    """`GROK_TRACK_HEADLESS=1`: the print run lists itself; the copy taken while its `sleep 3`
    ran reads running under the run's pid."""
    home, facts, key, opened = copied("tracked-live", "home-live")
    state = live_state(home, facts["pid"], opened - 0.2, opened + 1)
    assert facts["turn_open"] and facts["tool_calls_open"]
    assert state.status(key, state.live[key])[0] == facts["state"] == "running"


def test_a_background_command_after_the_turn_reads_background() -> None:
    """`run_terminal_command` with `background: true` (`task_backgrounded`): after the turn
    ended, while `sleep 4` still ran."""
    home, facts, key, opened = copied("background-shell", "home-live")
    state = live_state(home, facts["pid"], opened - 0.2, opened + 2)
    assert not facts["turn_open"] and state.session(*key).turn_open_at is None
    assert state.status(key, state.live[key])[0] == facts["state"] == "background"


def test_the_tui_waits_for_you_at_its_permission_prompt() -> None:
    home, facts, key, opened = copied("tui-permission", "home-live")
    state = live_state(home, facts["pid"], opened - 0.2, opened + 1)
    assert state.status(key, state.live[key])[:2] == (facts["state"], "run_terminal_command")
    assert facts["state"] == "needs_user" and state.session(*key).turn_open_at is not None


def test_the_tui_idles_between_turns() -> None:
    home, facts, key, opened = copied("tui-permission", "home-idle")
    state = live_state(home, facts["pid"], opened - 0.2, opened + 5)
    assert state.status(key, state.live[key])[0] == facts["state"] == "idle"
    assert state.session(*key).turns["completed"] == 1


def test_a_session_gone_from_the_index_is_not_live() -> None:
    """The final files (`[]` in the index after the run) with the same pid still running."""
    for scenario in ("tracked-live", "tui-permission"):
        _, facts, key, opened = copied(scenario, "home-live")
        home = RECORDED / scenario / "home" / ".grok"
        state = live_state(home, facts["pid"], opened - 0.2, opened + 10)
        assert key not in state.live and state.session(*key).turns["completed"] == 1


def test_opened_at_before_the_process_start_is_stale() -> None:
    home, facts, key, opened = copied("tui-permission", "home-live")
    state = live_state(home, facts["pid"], opened + 3600, opened + 3660)  # a recycled pid
    assert key not in state.live
    assert state.session(*key).turns["interrupted"] == 1


def test_a_session_that_left_the_index_is_not_live(tmp_path: Path) -> None:
    copy, _, key, opened = copied("tui-permission", "home-live")
    home = tmp_path / ".grok"
    shutil.copytree(copy, home)
    state = State()
    engine = Engine([Source(Grok(), home)], state)
    engine.catch_up()
    state.refresh(opened + 1, lambda pid: opened - 0.2)
    assert key in state.live
    (home / "active_sessions.json").write_text("[]")  # as Grok leaves it when the session ends
    engine.changed([home / "active_sessions.json"])
    state.refresh(opened + 60, lambda pid: opened - 0.2)
    assert key not in state.live


def recorded(scenario: str, name: str, session: int = 0) -> list[dict[str, Any]]:
    """The records of one file of a recorded session (`session`: by id order)."""
    folders = sorted((FIXTURES / "grok" / "0.2.111" / scenario).glob("home/.grok/sessions/*/*/"))
    text = (folders[session] / name).read_text()
    if name.endswith(".json"):
        return [json.loads(text)]
    return [json.loads(line) for line in text.splitlines()]


def fed(reader: Any, records: list[dict[str, Any]]) -> list[Event]:
    return [e for r in records for e in reader.feed(r)]


def test_phase_log_turns_and_status() -> None:
    grok = Grok()
    IndexReader(grok).feed([entry()])  # listed: each status change comes as its entry
    reader = EventsReader(SID, "/tmp/app", grok.of(SID))
    records = recorded("shell", "events.jsonl")
    first = reader.feed(records[0])
    assert isinstance(first[0], SessionSeen) and first[0].model == "grok-build"
    assert not any(isinstance(e, TurnStarted) for e in first)  # the turns are updates.jsonl's
    assert live(first)[0].status is None  # phase cleared at turn_started: not guessed
    statuses = [(e.status, e.reason) for r in records[1:] for e in live(reader.feed(r))]
    changes = [s for i, s in enumerate(statuses) if i == 0 or statuses[i - 1] != s]
    assert changes == [
        ("busy", None),  # waiting_for_model, streaming, tool_execution
        ("waiting", "run_terminal_command"),  # permission_prompt (approved at once)
        ("busy", None),  # tool_execution again, the next model call
        ("idle", None),  # turn_ended
    ]
    assert not any(isinstance(e, ToolCallStarted) for r in records for e in reader.feed(r))


def updates(scenario: str, session: int = 0) -> tuple[UpdatesReader, Shared, list[Event]]:
    shared = Shared(model="grok-build")
    reader = UpdatesReader(SID, shared, lambda child, lead, background: None)
    return reader, shared, fed(reader, recorded(scenario, "updates.jsonl", session))


def test_tool_calls_by_their_id_and_exit_code() -> None:
    _, _, events = updates("two-tools")
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    ended = {e.call_id: e.outcome for e in events if isinstance(e, ToolCallEnded)}
    assert [e.tool for e in started] == ["run_terminal_command"] * 2
    assert [ended[e.call_id] for e in started] == ["ok", "error"]  # `echo one`, `exit 3`
    _, _, failing = updates("failing-shell")
    assert [e.outcome for e in failing if isinstance(e, ToolCallEnded)] == ["error"]  # exit 2


def test_turns_from_the_prompt_to_turn_completed() -> None:
    """The turn's records in their order: its prompt, its tool call, its usage, its end."""
    _, shared, events = updates("shell")
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "TurnStarted",
        "ToolCallStarted",
        "ToolCallEnded",
        "ModelResponded",
        "TurnEnded",
    ]
    started, response, ended = events[0], events[3], events[4]
    assert isinstance(started, TurnStarted) and started.prompt == "SCENARIO:shell run echo hi"
    assert isinstance(ended, TurnEnded) and ended.outcome == "completed"  # stop_reason end_turn
    assert isinstance(response, ModelResponded) and response.requested_at == started.at
    assert shared.turns.open_at is None  # no turn open any more
    _, _, failed = updates("api-error")
    assert [e.outcome for e in failed if isinstance(e, TurnEnded)] == ["failed"]  # "error"


def test_a_rejected_call_and_two_cancelled_turns() -> None:
    """The TUI: "No, reject" fails the call with "User rejected ..." and Grok cancels the turn;
    Esc during a stream cancels the next one (no usage: the stream was cut)."""
    _, _, events = updates("tui-permission")
    assert [e.outcome for e in events if isinstance(e, ToolCallEnded)] == ["ok", "rejected"]
    ends = [e.outcome for e in events if isinstance(e, TurnEnded)]
    assert ends == ["completed", "interrupted", "interrupted"]  # stop_reason "cancelled"
    assert len([e for e in events if isinstance(e, ModelResponded)]) == 2


def both_files(scenario: str, updates_first: bool, drop: str = "") -> list[Event]:
    """A session's phase log and updates fed in one order or the other (rows holding `drop`
    left out), as one catch-up (phase log first: its name sorts first) or a live read does."""
    shared = Shared(model="grok-build")
    phase = (EventsReader(SID, None, shared), recorded(scenario, "events.jsonl"))
    rows = [r for r in recorded(scenario, "updates.jsonl") if not drop or drop not in str(r)]
    update = (UpdatesReader(SID, shared, lambda child, lead, background: None), rows)
    first, second = (update, phase) if updates_first else (phase, update)
    return fed(*first) + fed(*second)


def test_one_end_per_turn_whichever_file_is_read_first() -> None:
    for updates_first in (False, True):
        events = both_files("tui-permission", updates_first)
        ends = [e.outcome for e in events if isinstance(e, TurnEnded)]
        assert ends == ["completed", "interrupted", "interrupted"], updates_first


def test_a_turn_whose_turn_completed_is_missing_ends_with_the_phase_log() -> None:
    """A print run can exit before writing `turn_completed`: `turn_ended` ends the turn."""
    for updates_first in (False, True):
        events = both_files("api-error", updates_first, drop="turn_completed")
        assert [type(e).__name__ for e in events if isinstance(e, (TurnStarted, TurnEnded))] == [
            "TurnStarted",
            "TurnEnded",
        ]
        assert [e.outcome for e in events if isinstance(e, TurnEnded)] == ["failed"]


def prompt_row(index: int) -> dict[str, Any]:
    """The recorded `answer` session's prompt row, as prompt number `index`."""
    (row,) = [r for r in recorded("answer", "updates.jsonl") if "user_message_chunk" in str(r)]
    update = {**row["params"]["update"], "_meta": {"promptIndex": index}}
    return {**row, "params": {**row["params"], "update": update}}


def test_a_turn_left_open_ends_at_the_next_prompt() -> None:
    """A print run can exit before `turn_completed`: the next prompt ends that turn."""
    reader, _, _ = updates("answer")
    assert [type(e).__name__ for e in reader.feed(prompt_row(1))] == ["TurnStarted"]
    assert reader.feed(prompt_row(1)) == []  # another chunk of the same prompt
    assert [type(e).__name__ for e in reader.feed(prompt_row(2))] == ["TurnEnded", "TurnStarted"]


def test_turn_usage_without_the_cached_part() -> None:
    _, _, shell = updates("shell")
    (response,) = [e for e in shell if isinstance(e, ModelResponded)]
    assert response.usage == Usage(input=4200, output=110, cache_read=800, reasoning=16)
    _, _, answer = updates("answer")  # 5000 in with 800 cached, above; 2000 with none here
    (reasoned,) = [e for e in answer if isinstance(e, ModelResponded)]
    assert reasoned.usage == Usage(input=2000, output=50, reasoning=16)


def test_usage_waits_for_the_model() -> None:
    shared = Shared()
    reader = UpdatesReader(SID, shared, lambda child, lead, background: None)
    assert not any(
        isinstance(e, ModelResponded) for e in fed(reader, recorded("answer", "updates.jsonl"))
    )
    (response,) = shared.set_model(SID, "grok-build")
    assert isinstance(response, ModelResponded) and response.message_id.startswith(f"{SID}/")


def test_an_api_error_that_ended_the_retries() -> None:
    _, _, events = updates("api-error")
    (failed,) = [e for e in events if isinstance(e, ModelFailed)]
    assert (failed.error, failed.model) == ("api", "grok-build")  # retry_state "failed"
    assert not any(isinstance(e, ModelResponded) for e in events)  # no usage on an error


def test_background_tasks() -> None:
    """`task_backgrounded` / `task_completed` as recorded; `background_tasks` as documented."""
    shared = Shared(entry=LiveIndexRead(pid=1, session_id=SID, started_at=None, status=None))
    reader = UpdatesReader(SID, shared, lambda child, lead, background: None)
    rows = recorded("background-shell", "updates.jsonl")
    kinds = [r["params"]["update"]["sessionUpdate"] for r in rows]
    backgrounded, completed = kinds.index("task_backgrounded"), kinds.index("task_completed")
    statuses = [e.status for r in rows[: completed + 1] for e in live(reader.feed(r))]
    assert statuses[:1] == ["shell"] and statuses[-1] == "idle" and backgrounded < completed
    row = {"method": "_x.ai/session/update", "timestamp": 1795168810}
    tasks = [{"task_id": "t1", "status": "running"}]
    running = {**row, "params": {"update": {"sessionUpdate": "background_tasks", "tasks": tasks}}}
    assert live(reader.feed(running))[0].status == "shell"


def test_a_subagents_own_folder_gives_its_tool_calls_only() -> None:
    """The lead's `subagent_spawned` names the child's folder: of it only the tool calls are
    read, as the lead's sub-agent's (the lead's turn usage already counts the child's)."""
    grok = Grok()
    lead, child = (recorded("subagent", "summary.json", i)[0]["info"]["id"] for i in (0, 1))
    lead_updates = grok.reader(PurePosixPath(f"sessions/x/{lead}/updates.jsonl"))
    events = fed(lead_updates, recorded("subagent", "updates.jsonl"))
    links = [e for e in events if isinstance(e, SubagentStarted)]  # spawned, SubagentCompleted
    (spawn,) = [e for e in events if isinstance(e, ToolCallStarted)]
    assert {(e.call_id, e.subagent_id) for e in links} == {(spawn.call_id, child)}
    assert links[0].background is False  # `_meta.subagentBackground`
    assert (grok.of(child).child, grok.of(child).parent) == (True, lead)
    for name in ("events.jsonl", "chat_history.jsonl", "summary.json"):
        reader = grok.reader(PurePosixPath(f"sessions/x/{child}/{name}"))
        assert fed(reader, recorded("subagent", name, 1)) == [], name
    reader = grok.reader(PurePosixPath(f"sessions/x/{child}/updates.jsonl"))
    calls = fed(reader, recorded("subagent", "updates.jsonl", 1))
    assert [type(e).__name__ for e in calls] == ["ToolCallStarted", "ToolCallEnded"]
    assert {e.session_id for e in calls if isinstance(e, (ToolCallStarted, ToolCallEnded))} == {
        lead
    }
    assert isinstance(calls[0], ToolCallStarted) and calls[0].subagent_id == child
    alone = Grok()  # the child's summary alone: a sub-agent's folder, its lead unknown
    summary = alone.reader(PurePosixPath(f"sessions/x/{child}/summary.json"))
    assert fed(summary, recorded("subagent", "summary.json", 1)) == []  # session_kind subagent
    updates_alone = alone.reader(PurePosixPath(f"sessions/x/{child}/updates.jsonl"))
    assert fed(updates_alone, recorded("subagent", "updates.jsonl", 1)) == []


def test_a_background_subagents_usage_is_its_own() -> None:
    """`background: true`: the lead's turn ended before the child ran, so its usage did not
    count the child's; the child's own `turn_completed` is read, as the sub-agent's."""
    grok = Grok()
    lead, child = (
        recorded("subagent-background", "summary.json", i)[0]["info"]["id"] for i in (0, 1)
    )
    lead_updates = grok.reader(PurePosixPath(f"sessions/x/{lead}/updates.jsonl"))
    spawned = fed(lead_updates, recorded("subagent-background", "updates.jsonl"))
    assert [e.background for e in spawned if isinstance(e, SubagentStarted)] == [True]
    reader = grok.reader(PurePosixPath(f"sessions/x/{child}/updates.jsonl"))
    (usage,) = [
        e
        for e in fed(reader, recorded("subagent-background", "updates.jsonl", 1))
        if isinstance(e, ModelResponded)
    ]
    assert (usage.session_id, usage.subagent_id, usage.main) == (lead, child, False)
    assert usage.usage == Usage(input=2900, output=85, cache_read=600)  # 3500 in, 600 cached


def test_subagent_meta() -> None:
    grok = Grok()
    meta = recorded("subagent", "summary.json")[0]["info"]["id"]
    folder = sorted(
        (FIXTURES / "grok" / "0.2.111" / "subagent").glob("home/.grok/sessions/*/*/subagents/*/")
    )[0]
    record = json.loads((folder / "meta.json").read_text())
    started, ended = MetaReader(meta, folder.name, grok.mark_child).feed(record)
    assert isinstance(started, SubagentStarted)
    assert (started.subagent_type, started.title) == ("general-purpose", "Count python files")
    assert isinstance(ended, SubagentEnded) and ended.outcome == "completed"
    assert grok.of(record["child_session_id"]).child
    error = MetaReader(meta, "s1", grok.mark_child).feed({**record, "status": "error"})
    assert isinstance(error[1], SubagentEnded) and error[1].outcome == "failed"


def test_summary_title_is_the_prompt_unless_generated() -> None:
    shared = Shared()
    fed(ChatHistoryReader(SID, shared), recorded("answer", "chat_history.jsonl"))
    assert shared.first_prompt == "SCENARIO:simple say hello"
    summary = recorded("answer", "summary.json")[0]
    seen, *rest = SummaryReader(SID, shared, lambda child, lead, background: None).feed(summary)
    assert isinstance(seen, SessionSeen) and seen.cwd == "/home/user/work/shop-api"
    assert rest == []  # generated_title is the prompt: the chat history's prompt title stands
    titled = SummaryReader(SID, shared, lambda child, lead, background: None).feed(
        {**summary, "generated_title": "Fix it"}
    )
    assert TitleSet(session_id=SID, title="Fix it", source="harness") in titled


def test_prompt_context_says_print_mode() -> None:
    (context,) = recorded("answer", "prompt_context.json")
    (seen,) = PromptContextReader(SID, Shared()).feed(context)
    assert isinstance(seen, SessionSeen) and seen.kind == "headless"
    (other,) = PromptContextReader(SID, Shared()).feed({**context, "is_non_interactive": False})
    assert isinstance(other, SessionSeen) and other.kind == "interactive"


def test_chat_history_first_real_prompt_titles() -> None:
    reader = ChatHistoryReader(SID, Shared())
    records: list[dict[str, Any]] = [
        *recorded("shell", "chat_history.jsonl")[:2],  # system, <user_info>
        {
            "type": "user",
            "content": [{"type": "text", "text": "<system-reminder>r</system-reminder>"}],
            "prompt_index": 0,
        },
        {
            "type": "user",
            "content": [{"type": "text", "text": "<user_query>\nfix   the build\n</user_query>"}],
            "prompt_index": 0,
        },
        {"type": "user", "content": "<user_query>second</user_query>", "prompt_index": 1},
    ]
    assert fed(reader, records) == [
        TitleSet(session_id=SID, title="fix the build", source="prompt")
    ]


def test_fixture_files_parse() -> None:
    """The recorded fixtures are valid JSON in every line."""
    for path in (FIXTURES / "grok").rglob("*.json*"):
        text = path.read_text()
        for line in text.splitlines() if path.suffix == ".jsonl" else [text]:
            json.loads(line)


WAITED = Path(__file__).resolve().parent.parent / "fixtures" / "grok" / "0.2.111"
WAITED = WAITED / "subagent-background-waited"


def _stub_sent(scenario: Path) -> dict[str, int]:
    """What the stub answered to the lead's and its sub-agent's requests (titles are in no file)."""
    sent = {"input": 0, "output": 0, "cache_read": 0}
    for line in (scenario / "stub-log.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry.get("kind") in ("main", "sub") and entry.get("status") == 200:
            usage = entry["usage"]
            cached = usage["prompt_tokens_details"]["cached_tokens"]
            sent["input"] += usage["prompt_tokens"] - cached
            sent["cache_read"] += cached
            sent["output"] += usage["completion_tokens"]
    return sent


def test_a_background_subagent_its_lead_waited_for_is_counted_once() -> None:
    """Recorded: the lead spawned a background sub-agent, then waited for it with
    `get_command_or_subagent_output`; the lead's `turn_completed` counts the sub-agent's calls,
    and so does the sub-agent's own. The session's tokens are the stub's, once (they were
    about 1.5x before)."""
    sent = _stub_sent(WAITED)
    assert sent == {"input": 9500, "output": 265, "cache_read": 3000}
    engine = Engine([Source(Grok(), WAITED / "home" / ".grok")], State(), Stats())
    engine.catch_up()
    (session,) = engine.state.sessions.values()
    assert {k: getattr(session.tokens, k) for k in sent} == sent


def test_the_waited_subagent_is_counted_once_when_its_rows_are_read_as_they_were_written() -> None:
    """Live, the sub-agent's `turn_completed` is written (and read) before its lead's: both
    folders' rows fed in the order of their times give the same count as a catch-up."""
    home = WAITED / "home" / ".grok"
    grok = Grok()
    rows: list[tuple[float, int, Any, dict[str, Any]]] = []
    files = sorted(home.glob("sessions/*/*/updates.jsonl")) + sorted(
        home.glob("sessions/*/*/events.jsonl")
    )
    for n, path in enumerate(files):
        reader = grok.reader(PurePosixPath(path.relative_to(home).as_posix()))
        for line in path.read_text().splitlines():
            record = json.loads(line)
            at = record.get("ts") or record["params"]["_meta"]["agentTimestampMs"] / 1000
            rows.append((timestamp(at) or 0.0, n, reader, record))
    for path in sorted(home.glob("sessions/*/*/subagents/*/meta.json")):
        grok.reader(PurePosixPath(path.relative_to(home).as_posix())).feed(
            json.loads(path.read_text())
        )
    state = State()
    for _, _, reader, record in sorted(rows, key=lambda row: (row[0], row[1])):
        for event in reader.feed(record):
            state.apply("grok", event)
    (session,) = state.sessions.values()
    sent = _stub_sent(WAITED)
    assert {k: getattr(session.tokens, k) for k in sent} == sent

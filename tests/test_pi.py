"""pi and oh-my-pi: one test per entry kind (lines taken from the recorded fixtures), the layout,
oh-my-pi's prompt history, and a rewrite of oh-my-pi's title line counting nothing twice."""

from __future__ import annotations

import json
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from exporter.engine import Engine, Source
from exporter.events import (
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
from exporter.harnesses.pi import HistoryReader, OhMyPi, Pi, Shared, TranscriptReader
from exporter.state import State

from .conftest import FIXTURES

PI = FIXTURES / "pi" / "0.73.1"
OMP = FIXTURES / "oh-my-pi" / "18.2.3"
OMP_PARENT = "01a22c03-1601-7245-8a3a-5f381a9f4ea8"
REL = PurePosixPath("sessions/--home-user-work-shop-api--/t_x.jsonl")


def lines(scenario: Path, name: str = "*.jsonl") -> list[dict[str, Any]]:
    (path,) = (scenario / "home").rglob(name)
    return [json.loads(line) for line in path.read_text().splitlines()]


def feed(reader: TranscriptReader | HistoryReader, records: list[Any]) -> list[Event]:
    return [event for record in records for event in reader.feed(record)]


def of(kind: type[Any], events: list[Event]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def pi_reader(shared: Shared | None = None) -> TranscriptReader:
    return TranscriptReader(shared or Shared(history=False), REL)


# -- one test per entry kind -------------------------------------------------------------------


def test_header_and_model_change_are_the_session_in_its_cwd_on_its_model() -> None:
    header, model_change = lines(PI / "print-answer")[:2]
    reader = pi_reader()
    (seen,) = reader.feed(header)
    assert seen == SessionSeen(
        session_id="01a22c05-10c9-761e-9166-9878180ccbfe",
        at=seen.at,
        cwd="/home/user/work/shop-api",
    )
    assert seen.kind is None  # pi's files do not say TUI or headless
    (model,) = reader.feed(model_change)
    assert isinstance(model, SessionSeen) and model.model == "stub-model"
    omp = TranscriptReader(Shared(history=True), REL)
    events = feed(omp, lines(OMP / "api-error")[:3])
    assert [e.model for e in of(SessionSeen, events)] == [None, "stub-model"]  # `stub/stub-model`
    assert of(SessionSeen, events)[0].kind == "headless"  # not in the TUI's prompt history


def test_a_prompt_starts_a_turn_scoped_to_its_session_and_titles_it() -> None:
    records = lines(PI / "print-answer")
    events = feed(pi_reader(), records[:4])
    (turn,) = of(TurnStarted, events)
    assert turn.record_id == f"{records[0]['id']}:{records[3]['id']}"  # entry ids: 8 hex
    assert turn.prompt == "SCENARIO:simple Look at this repo. "
    (title,) = of(TitleSet, events)
    assert (title.title, title.source) == ("SCENARIO:simple Look at this repo.", "prompt")


def test_a_response_copies_the_usage_and_a_tool_call_runs_until_its_result() -> None:
    events = feed(pi_reader(), lines(PI / "print-tool"))
    first, last = of(ModelResponded, events)
    assert first.message_id == "msg_stub_6314a90072ee"
    assert first.usage == Usage(input=3, output=25, cache_read=0, cache_write=2000)
    assert (first.finish_reason, last.finish_reason) == ("tool_calls", "stop")
    assert last.usage == Usage(input=4, output=35, cache_read=10000, cache_write=2100)
    (started,) = of(ToolCallStarted, events)
    (ended,) = of(ToolCallEnded, events)
    assert (started.tool, started.arguments) == ("bash", {"command": "echo hi"})
    assert (ended.call_id, ended.outcome, ended.result) == (started.call_id, "ok", "hi\n")
    assert started.at <= ended.at
    assert [e.outcome for e in of(TurnEnded, events)] == ["completed"]


def test_a_tool_result_with_is_error_is_an_error() -> None:
    (ended,) = of(ToolCallEnded, feed(pi_reader(), lines(PI / "print-tool-fail")))
    assert ended.outcome == "error"


def test_an_api_error_is_no_response_and_fails_the_turn() -> None:
    events = feed(pi_reader(), lines(PI / "api-error"))
    assert of(ModelResponded, events) == []  # no responseId, zero usage
    (failed,) = of(ModelFailed, events)
    assert (failed.error, failed.model) == ("400", "stub-model")  # the status, not the body
    assert [e.outcome for e in of(TurnEnded, events)] == ["failed"]


def test_esc_is_an_aborted_response_counted_and_an_interrupted_turn() -> None:
    events = feed(pi_reader(), lines(PI / "interactive-esc"))
    assert len(of(ModelResponded, events)) == 2  # the aborted one keeps its responseId
    assert [e.outcome for e in of(TurnEnded, events)] == ["interrupted", "completed"]


def test_a_killed_process_leaves_the_turn_and_its_tool_open() -> None:
    events = feed(pi_reader(), lines(PI / "killed-mid-turn"))
    assert len(of(TurnStarted, events)) == 1 and of(TurnEnded, events) == []
    assert len(of(ToolCallStarted, events)) == 1 and of(ToolCallEnded, events) == []


def test_session_exit_ends_a_turn_still_open_and_nothing_else() -> None:
    records = lines(OMP / "print-answer")
    exit_entry = records[-1]
    assert exit_entry["customType"] == "session_exit"
    prompt = next(r for r in records if r.get("message", {}).get("role") == "user")
    reader = TranscriptReader(Shared(history=True), REL)
    feed(reader, records[:2])
    reader.feed(prompt)
    (ended,) = reader.feed(exit_entry)
    assert ended == TurnEnded(session_id=ended.session_id, at=ended.at, outcome="interrupted")
    assert reader.feed(exit_entry) == []


def test_title_line_and_title_change_title_the_session_as_the_harness() -> None:
    records = lines(OMP / "interactive-esc")
    reader = TranscriptReader(Shared(history=True), REL)
    assert reader.feed(records[0]) == []  # line 1 comes before the session is known
    events = reader.feed(records[1])
    (title,) = of(TitleSet, events)
    assert (title.title, title.source) == ("Fake shop api session", "harness")
    change = next(r for r in records if r["type"] == "title_change")
    assert reader.feed({**change, "source": "user"})[0] == TitleSet(
        session_id=title.session_id, title="Fake shop api session", source="user"
    )
    assert TranscriptReader(Shared(history=True), REL).feed(lines(OMP / "print-answer")[0]) == []


def test_entries_without_a_meaning_here_are_ignored() -> None:
    header = lines(PI / "print-answer")[0]
    reader = pi_reader()
    reader.feed(header)
    for entry in (
        {"type": "thinking_level_change", "id": "a", "thinkingLevel": "off"},
        {"type": "compaction", "id": "b", "summary": "…", "tokensBefore": 9000},
        {"type": "branch_summary", "id": "c", "summary": "…"},
        {"type": "label", "id": "d", "label": "x"},
        {"type": "message", "id": "e", "message": {"role": "bashExecution", "command": "ls"}},
        {"type": "message", "id": "f", "message": {"role": "compactionSummary", "summary": "…"}},
        {"type": "custom", "customType": "tool_execution_start", "data": {"toolCallId": "t"}},
        {"type": "from-a-later-version"},
        "not an object",
    ):
        assert reader.feed(entry) == [], entry
    (title,) = reader.feed({"type": "session_info", "id": "g", "name": "My  work"})
    assert (title.title, title.source) == ("My work", "user")


def test_a_child_file_is_a_subagent_of_its_folder_session() -> None:
    records = lines(OMP / "subagent", "EchoChild.jsonl")
    rel = PurePosixPath(f"agent/sessions/-w/t_{OMP_PARENT}/EchoChild.jsonl")
    reader = OhMyPi().reader(rel)
    assert isinstance(reader, TranscriptReader)
    events = feed(reader, records)
    seen = of(SessionSeen, events)
    assert seen and all(not e.main and e.session_id == OMP_PARENT for e in seen)
    started = of(SubagentStarted, events)
    assert [(s.subagent_id, s.subagent_type) for s in started] == [
        ("EchoChild", None),
        ("EchoChild", "task"),  # `session_init`
    ]
    responses = of(ModelResponded, events)
    assert len(responses) == 2 and all(r.subagent_id == "EchoChild" for r in responses)
    assert all(not r.main for r in responses)
    assert of(TurnStarted, events) == []  # its assignment is not a turn of the session
    (ended,) = of(SubagentEnded, events)
    assert (ended.subagent_id, ended.outcome) == ("EchoChild", "completed")  # `yield` success


def test_the_task_call_starts_its_subagent_and_its_result_ends_it() -> None:
    events = feed(pi_reader(), lines(OMP / "subagent", f"*{OMP_PARENT}.jsonl"))
    (started,) = of(SubagentStarted, events)
    (call,) = of(ToolCallStarted, events)
    assert (started.call_id, started.subagent_id) == (call.call_id, "EchoChild")
    assert started.subagent_type == "task"
    (ended,) = of(SubagentEnded, events)
    assert (ended.subagent_id, ended.outcome) == ("EchoChild", "completed")


def test_a_task_call_with_several_tasks_names_each_without_the_call() -> None:
    reader = pi_reader()
    reader.feed(lines(PI / "print-answer")[0])
    tasks = [{"name": "A", "agent": "explore", "task": "x"}, {"name": "B", "agent": "task"}]
    call = {"type": "toolCall", "id": "c1", "name": "task", "arguments": {"tasks": tasks}}
    message = {"role": "assistant", "content": [call], "stopReason": "toolUse"}
    events = reader.feed({"type": "message", "id": "m", "message": message})
    assert [(s.call_id, s.subagent_id, s.subagent_type) for s in of(SubagentStarted, events)] == [
        (None, "A", "explore"),
        (None, "B", "task"),
    ]
    results = [{"id": "A", "exitCode": 0}, {"id": "B", "exitCode": 1, "aborted": True}]
    answer = {"role": "toolResult", "toolCallId": "c1", "details": {"results": results}}
    events = reader.feed({"type": "message", "id": "r", "message": answer})
    assert [(e.subagent_id, e.outcome) for e in of(SubagentEnded, events)] == [
        ("A", "completed"),
        ("B", "cancelled"),
    ]


def test_the_prompt_history_makes_tui_sessions_interactive_whichever_is_read_first() -> None:
    shared = Shared(history=True)
    row = {"id": 1, "prompt": "fix  it", "created_at": 1796034825, "cwd": "/w", "session_id": "s"}
    seen, title = HistoryReader(shared).feed(row)
    assert isinstance(seen, SessionSeen) and (seen.kind, seen.cwd, seen.main) == (
        "interactive",
        "/w",
        False,  # no transcript yet: it only fills in
    )
    assert isinstance(title, TitleSet) and (title.title, title.source) == ("fix it", "prompt")
    assert HistoryReader(shared).feed(row) == []  # one session, one announcement
    header = {"type": "session", "id": "s", "timestamp": "2026-11-30T10:33:19.423Z", "cwd": "/w"}
    assert TranscriptReader(shared, REL).feed(header)[0] == SessionSeen(
        session_id="s", at=1796034799.423, cwd="/w", kind="interactive"
    )
    later = Shared(history=True)
    TranscriptReader(later, REL).feed(header)
    seen, _ = HistoryReader(later).feed(row)
    assert isinstance(seen, SessionSeen) and seen.main and seen.kind == "interactive"


def test_layout_and_home() -> None:
    pi, omp = Pi(), OhMyPi()
    name = "2026-11-30T10-31-35-959Z_01a22c02-930d-7166-8f9b-bc4f1208e5f2.jsonl"
    assert pi.match(PurePosixPath(f"sessions/--home-u--/{name}")) == "jsonl"
    assert pi.match(PurePosixPath(f"sessions/--home-u--/{name[:-6]}/Child.jsonl")) is None
    assert omp.match(PurePosixPath(f"agent/sessions/-w/{name}")) == "jsonl"
    assert omp.match(PurePosixPath(f"agent/sessions/-w/{name[:-6]}/Child.jsonl")) == "jsonl"
    assert omp.match(PurePosixPath(f"agent/sessions/-w/{name[:-6]}/Child.md")) is None
    assert omp.match(PurePosixPath("agent/history.db")) == "sqlite"
    for other in ("auth.json", "models.json", "sessions/x.jsonl", "agent/agent.db"):
        assert pi.match(PurePosixPath(other)) is None
        assert omp.match(PurePosixPath(other)) is None
    assert pi.match(PurePosixPath("agent/history.db")) is None
    assert Pi.default_home({"PI_CODING_AGENT_DIR": "/p"}) == Path("/p")
    assert Pi.default_home({"HOME": "/home/u"}) == Path("/home/u/.pi/agent")
    assert OhMyPi.default_home({"HOME": "/home/u"}) == Path("/home/u/.omp")
    assert Pi.holder_names == OhMyPi.holder_names == ()  # no process holds a transcript open


def test_a_rewritten_title_line_counts_nothing_twice(tmp_path: Path) -> None:
    """The tailer reads the file again from the start after line 1 changed; the new reader
    replays silently what the old one reported, so a turn open then stays open."""
    home = tmp_path / ".omp"
    shutil.copytree(OMP / "interactive-esc" / "home", home)
    (path,) = (home / "agent" / "sessions").rglob("*.jsonl")
    state = State()
    engine = Engine([Source(OhMyPi(), home)], state)
    engine.catch_up()
    key = next(iter(state.sessions))
    before = (dict(state.totals.messages), dict(state.totals.tokens), dict(state.totals.turns))
    text = path.read_text().splitlines(keepends=True)
    prompt = next(json.loads(t) for t in text if '"role":"user"' in t)
    prompt["id"], prompt["parentId"] = "0000abcd", json.loads(text[-1])["id"]
    with path.open("a") as f:
        f.write(json.dumps(prompt) + "\n")
    engine.changed([path])
    assert state.sessions[key].turn_open_at is not None
    line1 = text[0].replace("Fake shop api session", "Renamed by hand here!")
    assert len(line1) == len(text[0])
    with path.open("r+") as f:
        f.write(line1)
    engine.changed([path])
    assert state.sessions[key].turn_open_at is not None  # the old turns' ends are not replayed
    after = (dict(state.totals.messages), dict(state.totals.tokens), dict(state.totals.turns))
    assert after == before
    assert sum(state.totals.sessions.values()) == 1
    assert state.sessions[key].title == "Renamed by hand here!"

"""pi and oh-my-pi: one test per entry kind (lines taken from the recorded fixtures), the layout,
oh-my-pi's prompt history, and a rewrite of oh-my-pi's title line counting nothing twice."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path, PurePosixPath
from typing import Any

import psutil
import pytest
from psutil import _psposix

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
from coding_agent_exporter.harnesses.pi.harness import HISTORY, HistoryReader, OhMyPi, Pi
from coding_agent_exporter.harnesses.pi.transcript import Shared, TranscriptReader
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.sources.processes import process_start
from coding_agent_exporter.sources.terminals import breadcrumb_name, omp_terminal
from coding_agent_exporter.sources.watch import Watcher
from coding_agent_exporter.state.labels import ProjectLabel
from coding_agent_exporter.state.state import State
from coding_agent_exporter.web.views import session_rows

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
    presence = PurePosixPath("run/daemons/2713688f2bb793c7/clients/41-0d23f686-55c2.json")
    assert omp.match(presence) == "doc" and pi.match(presence) is None
    assert omp.match(PurePosixPath("run/daemons/2713688f2bb793c7/broker.pid")) is None
    assert omp.match(PurePosixPath("agent/terminal-sessions/pts-0")) == "text"
    assert pi.match(PurePosixPath("agent/terminal-sessions/pts-0")) is None
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


# -- oh-my-pi's running processes -----------------------------------------------------------------


def timeline(folder: Path) -> tuple[list[dict[str, Any]], list[tuple[int, str, object]]]:
    """The recorded TUI runs and their changes in the order they happened: the presence files
    and the breadcrumbs as written, each transcript's line count, a prompt-history row per typed
    line (in the history of the run's root: the home's own, or its profile's)."""
    runs = [r for r in json.loads((folder / "runs.json").read_text())["runs"] if r["mode"] == "tui"]
    changes: list[tuple[int, str, object]] = []
    for line in (folder / "live-timeline.jsonl").read_text().splitlines():
        change = json.loads(line)
        name, (_, inner) = change["file"], OhMyPi().split(PurePosixPath(change["file"]))
        if "/clients/" in name or inner.parts[:2] == ("agent", "terminal-sessions"):
            changes.append((change["t_ms"], name, change.get("doc", change.get("text"))))
        elif inner.parts[:2] == ("agent", "sessions") and change["event"] != "gone":
            changes.append((change["t_ms"], name, change["lines"]))
    for profile in {run.get("profile") for run in runs}:
        history = f"profiles/{profile}/{HISTORY}" if profile else HISTORY
        with contextlib.closing(sqlite3.connect(folder / "home" / history)) as db:
            query = "SELECT id, prompt, created_at, cwd, session_id FROM history ORDER BY id"
            columns = ("id", "prompt", "created_at", "cwd", "session_id")
            rows = [dict(zip(columns, row, strict=True)) for row in db.execute(query)]
        typed = [
            d["t_ms"]
            for run in runs
            if run.get("profile") == profile
            for d in run["driver"]
            if (d["keys"] or "").endswith("<Enter>")
        ]
        changes += [(t, history, row) for t, row in zip(typed, rows, strict=True)]
    return runs, sorted(changes, key=lambda change: change[0])


def replay(scenario: str) -> tuple[list[str], State, list[str]]:
    """The recorded TUI runs replayed through oh-my-pi's readers, each process alive until it
    exited or was killed: the live states a scrape would have shown, each change once, and the
    sessions the live processes showed, in order."""
    folder = OMP / scenario
    runs, changes = timeline(folder)
    terminals = {r["pid"]: r["tty"].removeprefix("/dev/").replace("/", "-") for r in runs}
    ends = {
        r["pid"]: next((d["t_ms"] for d in r["driver"] if d.get("event") == "SIGKILL"), r["end_ms"])
        for r in runs
    }
    harness = OhMyPi(terminal=lambda p: (terminals[p], 1000.0) if p in terminals else None)
    readers: dict[str, Any] = {}
    written: dict[str, int] = {}
    state, seen, shown, now = State(), list[str](), list[str](), 0.0
    for t_ms, name, record in [*changes, (max(ends.values()), "", None)]:  # then all are gone
        if not name:
            state.refresh(now, lambda p: None)
            seen += [] if seen[-1] == "none" or state.live else ["none"]
            break
        reader = readers.setdefault(name, harness.reader(PurePosixPath(name)))
        records = [record]
        if name.endswith(".jsonl"):  # a transcript: the entries it had grown to by then
            lines = (folder / "home" / name).read_text().splitlines()[: int(str(record))]
            records = [json.loads(line) for line in lines[written.get(name, 0) :]]
            written[name] = len(lines)
        for event in feed(reader, records):
            state.apply("oh-my-pi", event)
        now = max((s.updated_at or 0.0 for s in state.sessions.values()), default=0.0) + 1.0
        state.refresh(now, lambda p, t=t_ms: 1000.0 if p in ends and t < ends[p] else None)
        words = [state.status(key, entry)[0] for key, entry in state.live.items()] or ["none"]
        for word in words:
            if seen[-1:] != [word] and (seen or word != "none"):
                seen.append(word)
        for _, session in state.live:
            shown += [] if shown[-1:] == [session] else [session]
    return seen, state, shown


def test_a_tui_process_shows_its_terminals_session_running_per_turn_then_none() -> None:
    """Idle from its breadcrumb on, running from the prompt (before the transcript's first
    write, from the prompt history), idle once it is written, running during the `sleep 4`
    turn, idle, and no longer live when its presence file is removed at /exit."""
    seen, state, _ = replay("interactive-live")
    assert seen == ["idle", "running", "idle", "running", "idle", "none"]  # before it exited
    assert state.entries == {}


def test_esc_ends_the_first_turn_and_the_transcript_is_then_written() -> None:
    seen, state, _ = replay("interactive-esc")
    assert seen == ["idle", "running", "idle", "none"]  # the 2nd turn: within one 100 ms sample
    assert state.entries == {}


def test_a_killed_process_leaves_its_presence_file_and_its_session_is_not_live() -> None:
    seen, state, _ = replay("killed-mid-turn")
    assert seen == ["idle", "running", "none"]  # the SIGKILL: no session_exit, no transcript
    assert state.live == {} and len(state.entries) == 1  # the file stays; its pid is gone


def test_a_process_without_a_terminal_or_breadcrumb_shows_nothing() -> None:
    doc = {"pid": 41, "id": "41-x", "projectDir": "/w"}
    rel = PurePosixPath("run/daemons/2713688f2bb793c7/clients/41-0d23f686-55c2.json")
    crumb = "/w\n/h/.omp/agent/sessions/-w/2026-11-30T10-33-19-423Z_01a22c04-273f.jsonl\nfresh\n"
    no_terminal = OhMyPi(terminal=lambda pid: None)
    no_terminal.reader(PurePosixPath("agent/terminal-sessions/pts-1")).feed(crumb)
    assert no_terminal.reader(rel).feed(doc) == []
    elsewhere = OhMyPi(terminal=lambda pid: ("pts-2", 5.0))
    elsewhere.reader(PurePosixPath("agent/terminal-sessions/pts-1")).feed(crumb)
    assert elsewhere.reader(rel).feed(doc) == []
    wrong_pid = OhMyPi(terminal=lambda pid: ("pts-1", 5.0))
    wrong_pid.reader(PurePosixPath("agent/terminal-sessions/pts-1")).feed(crumb)
    assert wrong_pid.reader(rel).feed({**doc, "pid": 42}) == []


def test_a_new_session_on_the_terminal_moves_the_process_entry() -> None:
    harness = OhMyPi(terminal=lambda pid: ("pts-1", 5.0))
    rel = PurePosixPath("run/daemons/2713688f2bb793c7/clients/41-0d23f686-55c2.json")
    crumbs = harness.reader(PurePosixPath("agent/terminal-sessions/pts-1"))
    (first,) = [
        *crumbs.feed("/w\n/h/s/-w/t_aaaa-1.jsonl\nfresh\n"),
        *harness.reader(rel).feed({"pid": 41, "id": "41-x", "projectDir": "/w"}),
    ][-1:]
    assert isinstance(first, LiveIndexRead) and first.session_id == "aaaa-1"
    assert first.status == "idle" and first.started_at == 5.0 and first.source == rel.as_posix()
    (moved,) = crumbs.feed("/w\n/h/s/-w/t_bbbb-2.jsonl\n")
    assert isinstance(moved, LiveIndexRead) and moved.session_id == "bbbb-2"
    assert moved.source == first.source  # one entry per process
    assert crumbs.feed(None) == [LiveIndexRemoved(source=first.source)]
    assert harness.reader(rel).feed(None) == [LiveIndexRemoved(source=first.source)]


def test_omp_terminal_names_a_real_processes_terminal_like_omp_does(probes: str) -> None:
    """With Linux's own probes (its standard input's link) and with the portable ones (psutil's
    controlling terminal: macOS's path, run for real here)."""
    ttys = [os.openpty() for _ in range(2)]  # one each: a terminal controls one session only
    names = [os.ttyname(secondary).removeprefix("/dev/").replace("/", "-") for _, secondary in ttys]
    started: list[subprocess.Popen[bytes]] = []
    try:
        for program, (_, secondary) in zip(("omp", "vim"), ttys, strict=True):
            command = ["setsid", "--ctty", "bash", "-c", f"exec -a {program} sleep 60"]
            started.append(subprocess.Popen(command, stdin=secondary, stdout=subprocess.DEVNULL))
        command = ["setsid", "bash", "-c", "exec -a omp sleep 60"]  # `omp -p` fed by a pipe
        started.append(subprocess.Popen(command, stdin=subprocess.PIPE))
        omp, other, piped = started
        found = wait_for(lambda: omp_terminal(omp.pid))
        assert found is not None and found[0] == names[0]
        assert abs(found[1] - psutil.Process(omp.pid).create_time()) < 0.01
        assert wait_for(lambda: controlling_terminal(other.pid)) == os.ttyname(ttys[1][1])
        assert omp_terminal(other.pid) is None  # a pid of another program
        assert wait_for(lambda: "omp" in psutil.Process(piped.pid).cmdline())
        assert omp_terminal(piped.pid) is None  # no terminal on its input: no breadcrumb
        omp.kill()
        omp.wait()
        assert omp_terminal(omp.pid) is None
    finally:
        for process in started:
            process.kill()
            process.wait()
            if process.stdin is not None:
                process.stdin.close()
        for fd in (fd for pair in ttys for fd in pair):
            os.close(fd)


def wait_for(check: Any, deadline: float = 10.0) -> Any:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    return None


def test_a_terminal_is_named_as_oh_my_pi_names_its_breadcrumb() -> None:
    assert breadcrumb_name("/dev/pts/3") == "pts-3"  # Linux (recorded: `pts-0`)
    assert breadcrumb_name("/dev/ttys003") == "ttys003"  # macOS, as psutil names it


def controlling_terminal(pid: int) -> str | None:
    """psutil's answer, its map of terminals made again: it keeps the one of its first call in
    this process, from before the terminals a test opens."""
    getattr(_psposix.get_terminal_map, "cache_clear", lambda: None)()
    found: str | None = psutil.Process(pid).terminal()
    return found


def on_its_terminal(home: Path, pid: int, terminal: int) -> None:
    """The recording's presence file and breadcrumb (oh-my-pi's `home-live` snapshot)
    rewritten for the process `pid`, whose terminal is the pty `terminal`."""
    for old in home.glob("run/daemons/*/clients/*.json"):
        old.unlink()
        doc = {"pid": pid, "id": f"{pid}-x", "projectDir": "/w"}
        (old.parent / f"{pid}-0d23f686.json").write_text(json.dumps(doc))
    (crumb,) = home.glob("agent/terminal-sessions/*")
    crumb.rename(crumb.with_name(os.ttyname(terminal).removeprefix("/dev/").replace("/", "-")))


def test_a_real_omp_process_on_a_terminal_makes_its_session_live(
    probes: str, tmp_path: Path
) -> None:
    """The live snapshot of the recording (the `sleep 4` turn open), its presence file and
    breadcrumb rewritten for a real process named omp on a fresh terminal: running, then idle
    once the rest of the transcript is written, then not live once the process is killed; with
    Linux's own probes and with the portable ones."""
    home = tmp_path / ".omp"
    shutil.copytree(OMP / "interactive-live" / "home-live", home)
    (transcript,) = home.glob("agent/sessions/*/*.jsonl")
    rest = (OMP / "interactive-live" / "home" / transcript.relative_to(home)).read_text()
    primary, secondary = os.openpty()
    command = ["setsid", "--ctty", "bash", "-c", "exec -a omp sleep 60"]
    process = subprocess.Popen(command, stdin=secondary, stdout=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: omp_terminal(process.pid)) is not None
        on_its_terminal(home, process.pid, secondary)
        state = State()
        engine = Engine([Source(OhMyPi(omp_terminal), home)], state)
        engine.catch_up()
        state.refresh(time.time(), process_start)
        assert [state.status(k, e)[0] for k, e in state.live.items()] == ["running"]
        transcript.write_text(rest)
        engine.changed([transcript])
        state.refresh(time.time(), process_start)
        assert [state.status(k, e)[0] for k, e in state.live.items()] == ["idle"]
        process.kill()
        process.wait()
        state.refresh(time.time(), process_start)
        assert state.live == {}
    finally:
        process.kill()
        process.wait()
        os.close(primary)
        os.close(secondary)


# -- oh-my-pi's named profiles: `profiles/<name>/`, each a root of the same layout ----------------


def test_each_named_profile_is_another_root_of_the_same_layout() -> None:
    omp, pi = OhMyPi(), Pi()
    name = "2026-11-30T12-22-10-693Z_01a22c67-d005-73fa-a4e7-3774f2dd8d1c.jsonl"
    for root in ("profiles/work/", "profiles/a.b_c-9/"):
        assert omp.match(PurePosixPath(f"{root}agent/sessions/-w/{name}")) == "jsonl"
        assert omp.match(PurePosixPath(f"{root}agent/sessions/-w/{name[:-6]}/C.jsonl")) == "jsonl"
        assert omp.match(PurePosixPath(f"{root}{HISTORY}")) == "sqlite"
        assert omp.match(PurePosixPath(f"{root}run/daemons/2713688f2bb793c7/clients/4-a.json"))
        assert omp.match(PurePosixPath(f"{root}agent/terminal-sessions/pts-0")) == "text"
        assert omp.match(PurePosixPath(f"{root}agent/agent.db")) is None
        assert pi.match(PurePosixPath(f"{root}sessions/-w/{name}")) is None
    for root in ("profiles/Work/", "profiles/default/", "profiles/x./", "profiles/w/profiles/w/"):
        assert omp.match(PurePosixPath(f"{root}agent/sessions/-w/{name}")) is None, root
    assert "profiles" in OhMyPi.watch_dirs and "profiles" not in Pi.watch_dirs


def test_a_profile_tui_process_shows_its_profiles_session_not_the_homes() -> None:
    """Recorded: a TUI in the home, then one with OMP_PROFILE=work on a new tmux server: both
    ran on pts-0 and both roots keep a breadcrumb `pts-0`. Each process shows its own root's."""
    facts = json.loads((OMP / "profile-live" / "expected.json").read_text())
    roots = {s.get("root"): s["session_id"] for s in facts["sessions"]}
    seen, state, shown = replay("profile-live")
    assert seen == ["idle", "running", "idle", "none"] + ["idle", "running", "idle"] * 1 + [
        "running",
        "idle",
        "none",
    ]
    assert shown == [roots[""], roots["profiles/work"]]
    (snapshot,) = facts["live_snapshot"]
    assert snapshot["session_id"] == roots["profiles/work"]
    assert state.entries == {}


def live_home(tmp_path: Path, scenario: str, presence_root: str) -> tuple[Path, int]:
    """A copy of a fixture's final home with the presence file of its first TUI run (as the
    timeline recorded it) put back below `presence_root`: that process runs again."""
    home = tmp_path / ".omp"
    shutil.copytree(OMP / scenario / "home", home)
    for line in (OMP / scenario / "live-timeline.jsonl").read_text().splitlines():
        change = json.loads(line)
        if "/clients/" in change["file"] and change["event"] == "appear":
            name = PurePosixPath(change["file"])
            path = home / presence_root / PurePosixPath(*name.parts[name.parts.index("run") :])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(change["doc"]))
            return home, int(change["doc"]["pid"])
    raise AssertionError("no presence file in the timeline")


def test_terminals_of_different_roots_do_not_collide(tmp_path: Path) -> None:
    """The home's process on pts-0 shows the home's session although the profile's breadcrumb
    of pts-0 (another session) is read after it; the same process file in the profile's root
    shows the profile's session."""
    facts = json.loads((OMP / "profile-live" / "expected.json").read_text())
    roots = {s["root"]: s["session_id"] for s in facts["sessions"]}
    for root in roots:
        home, pid = live_home(tmp_path / (root or "home"), "profile-live", root)
        state = State()
        harness = OhMyPi(terminal=lambda p, pid=pid: ("pts-0", 1000.0) if p == pid else None)
        Engine([Source(harness, home)], state).catch_up()
        state.refresh(time.time(), lambda p, pid=pid: 1000.0 if p == pid else None)
        assert [session for _, session in state.live] == [roots[root]], root


def totals(state: State) -> tuple[int, dict[str, int]]:
    tokens: dict[str, int] = {}
    for key, value in state.totals.tokens.items():
        if value:  # no reasoning on this wire
            tokens[key[3]] = tokens.get(key[3], 0) + value
    return sum(state.totals.messages.values()), tokens


def test_a_session_under_two_roots_is_counted_once_whichever_is_read_first(
    tmp_path: Path,
) -> None:
    """The sub-agent recording's sessions (a lead and its child) copied into a profile: the same
    totals and sessions as the recording, read at catch-up or with the copy appearing first."""
    facts = json.loads((OMP / "subagent" / "expected.json").read_text())
    want = (facts["home"]["messages"], facts["home"]["tokens"])
    home = tmp_path / ".omp"
    shutil.copytree(OMP / "subagent" / "home", home)
    shutil.copytree(home / "agent" / "sessions", home / "profiles" / "copy" / "agent" / "sessions")
    state = State()
    Engine([Source(OhMyPi(), home)], state).catch_up()
    assert totals(state) == want and sum(state.totals.sessions.values()) == 1
    shutil.move(home / "agent", tmp_path / "agent")  # now the profile's copy is read first
    state = State()
    engine = Engine([Source(OhMyPi(), home)], state)
    engine.catch_up()
    shutil.move(tmp_path / "agent", home / "agent")
    engine.changed([home / "agent" / "sessions"])
    assert totals(state) == want and sum(state.totals.sessions.values()) == 1
    (row,) = session_rows(state, ProjectLabel(), history=True)
    assert [sub["id"] for sub in row["subagents"]] == ["EchoChild"]
    assert row["messages"] == facts["sessions"][0]["messages"]


def test_a_stale_copy_under_another_root_does_not_end_the_open_turn(tmp_path: Path) -> None:
    """The live snapshot of `interactive-live` (its `sleep 4` turn open) in the home, and a copy
    of that transcript taken after its first turn in a profile: the copy's end of the first turn
    is not taken for the end of the open one."""
    home = tmp_path / ".omp"
    shutil.copytree(OMP / "interactive-live" / "home-live", home)
    (transcript,) = home.glob("agent/sessions/*/*.jsonl")
    entries = transcript.read_text().splitlines(keepends=True)
    first_turn = next(i for i, e in enumerate(entries) if '"stopReason":"stop"' in e) + 1
    copy = home / "profiles" / "copy" / transcript.relative_to(home)
    copy.parent.mkdir(parents=True)
    copy.write_text("".join(entries[:first_turn]))
    state = State()
    Engine([Source(OhMyPi(), home)], state).catch_up()
    (session,) = state.sessions.values()
    assert session.turn_open_at is not None
    assert dict(session.turns) == {"completed": 1}


def watched(engine: Engine, watcher: Watcher, done: Any) -> bool:
    """Feed what the watcher reports to the engine until `done()` holds (10 s at most)."""
    end = time.monotonic() + 10.0
    while not done() and time.monotonic() < end:
        engine.changed(watcher.changed(timeout=0.2))
    return bool(done())


@pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")  # see the docstring
def test_profiles_created_later_are_read_and_a_deleted_one_closes_its_sessions(
    tmp_path: Path,
) -> None:
    """Through the real watcher: `profiles/` appearing after start (its first profile), a second
    profile appearing inside it, then that profile deleted while its process runs. A tree made
    at once below a recursive watch can make watchdog warn that a folder it is adding was added
    already (from walking its parent): harmless, the same callback; as an error (this suite's
    setting) it would stop the observer thread."""
    home = tmp_path / ".omp"
    shutil.copytree(OMP / "profile-print" / "home" / "agent", home / "agent")
    live = tmp_path / "live"
    shutil.copytree(OMP / "profile-live" / "home-live" / "profiles" / "work", live)
    (presence,) = live.glob("run/daemons/*/clients/*.json")
    pid = json.loads(presence.read_text())["pid"]
    state = State()
    harness = OhMyPi(terminal=lambda p: ("pts-0", 1000.0) if p == pid else None)
    engine = Engine([Source(harness, home)], state)
    engine.catch_up()
    assert len(state.sessions) == 1
    watcher = Watcher(engine.roots)
    watcher.start()
    try:
        shutil.copytree(OMP / "profile-print" / "home" / "profiles", home / "profiles")
        assert watched(engine, watcher, lambda: len(state.sessions) == 2)
        shutil.copytree(live, home / "profiles" / "live")
        assert watched(engine, watcher, lambda: len(state.sessions) == 3 and state.entries)
        state.refresh(time.time(), lambda p: 1000.0 if p == pid else None)
        statuses = [state.status(key, entry)[0] for key, entry in state.live.items()]
        assert statuses == ["running"]  # the `sleep 4` turn of the recording is open
        shutil.rmtree(home / "profiles" / "live")
        assert watched(engine, watcher, lambda: not state.entries)
        state.refresh(time.time(), lambda p: 1000.0 if p == pid else None)
        assert state.live == {} and len(state.sessions) == 3  # what it counted stays
    finally:
        watcher.stop()

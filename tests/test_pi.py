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

from exporter.engine import Engine, Source
from exporter.events import (
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
from exporter.harnesses.pi import HistoryReader, OhMyPi, Pi, Shared, TranscriptReader
from exporter.live import process_start
from exporter.state import State
from exporter.terminals import omp_terminal

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


def timeline(folder: Path) -> tuple[dict[str, Any], list[tuple[int, str, object]]]:
    """The recorded TUI run and its changes in the order they happened: the presence file and
    the breadcrumb as written, the transcript's line count, a prompt-history row per typed line."""
    (run,) = json.loads((folder / "runs.json").read_text())["runs"]
    changes: list[tuple[int, str, object]] = []
    for line in (folder / "live-timeline.jsonl").read_text().splitlines():
        change = json.loads(line)
        name = change["file"]
        if "/clients/" in name or name.startswith("agent/terminal-sessions/"):
            changes.append((change["t_ms"], name, change.get("doc", change.get("text"))))
        elif name.startswith("agent/sessions/") and change["event"] != "gone":
            changes.append((change["t_ms"], "transcript", change["lines"]))
    with contextlib.closing(sqlite3.connect(folder / "home" / "agent" / "history.db")) as db:
        query = "SELECT id, prompt, created_at, cwd, session_id FROM history ORDER BY id"
        columns = ("id", "prompt", "created_at", "cwd", "session_id")
        rows = [dict(zip(columns, row, strict=True)) for row in db.execute(query)]
    typed = [d["t_ms"] for d in run["driver"] if (d["keys"] or "").endswith("<Enter>")]
    changes += [(t, "agent/history.db", row) for t, row in zip(typed, rows, strict=True)]
    return run, sorted(changes, key=lambda change: change[0])


def replay(scenario: str) -> tuple[list[str], State]:
    """One recorded TUI run replayed through oh-my-pi's readers, its process alive until it
    exited or was killed: the live states a scrape would have shown, each change once."""
    folder = OMP / scenario
    run, changes = timeline(folder)
    pid, terminal = run["pid"], run["tty"].removeprefix("/dev/").replace("/", "-")
    killed = [d["t_ms"] for d in run["driver"] if d.get("event") == "SIGKILL"]
    gone_at = killed[0] if killed else run["end_ms"]
    harness = OhMyPi(terminal=lambda p: (terminal, 1000.0) if p == pid else None)
    transcripts = list((folder / "home").glob("agent/sessions/*/*.jsonl"))  # none if killed
    rel = (
        PurePosixPath(transcripts[0].relative_to(folder / "home").as_posix())
        if transcripts
        else None
    )
    entries = [json.loads(line) for t in transcripts for line in t.read_text().splitlines()]
    readers: dict[str, Any] = {}
    state, seen, written, now = State(), list[str](), 0, 0.0
    for t_ms, name, record in [*changes, (gone_at, "", None)]:  # then the process is gone
        if not name:
            state.refresh(now, lambda p: None)
            seen += [] if seen[-1] == "none" or state.live else ["none"]
            break
        reader = readers.setdefault(
            name, harness.reader(rel if rel and name == "transcript" else PurePosixPath(name))
        )
        if name == "transcript":
            records, written = entries[written : int(str(record))], int(str(record))
        else:
            records = [record]
        for event in feed(reader, records):
            state.apply("oh-my-pi", event)
        now = max((s.updated_at or 0.0 for s in state.sessions.values()), default=0.0) + 1.0
        state.refresh(now, lambda p, t=t_ms: 1000.0 if p == pid and t < gone_at else None)
        words = [state.status(key, entry)[0] for key, entry in state.live.items()] or ["none"]
        for word in words:
            if seen[-1:] != [word] and (seen or word != "none"):
                seen.append(word)
    return seen, state


def test_a_tui_process_shows_its_terminals_session_running_per_turn_then_none() -> None:
    """Idle from its breadcrumb on, running from the prompt (before the transcript's first
    write, from the prompt history), idle once it is written, running during the `sleep 4`
    turn, idle, and no longer live when its presence file is removed at /exit."""
    seen, state = replay("interactive-live")
    assert seen == ["idle", "running", "idle", "running", "idle", "none"]  # before it exited
    assert state.entries == {}


def test_esc_ends_the_first_turn_and_the_transcript_is_then_written() -> None:
    seen, state = replay("interactive-esc")
    assert seen == ["idle", "running", "idle", "none"]  # the 2nd turn: within one 100 ms sample
    assert state.entries == {}


def test_a_killed_process_leaves_its_presence_file_and_its_session_is_not_live() -> None:
    seen, state = replay("killed-mid-turn")
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


def test_omp_terminal_names_a_real_processes_terminal_like_omp_does() -> None:
    ttys = [os.openpty() for _ in range(2)]  # one each: a terminal controls one session only
    names = [os.ttyname(secondary).removeprefix("/dev/").replace("/", "-") for _, secondary in ttys]
    started: list[subprocess.Popen[bytes]] = []
    try:
        for program, (_, secondary) in zip(("omp", "vim"), ttys, strict=True):
            command = ["setsid", "--ctty", "bash", "-c", f"exec -a {program} sleep 60"]
            started.append(subprocess.Popen(command, stdin=secondary, stdout=subprocess.DEVNULL))
        command = ["bash", "-c", "exec -a omp sleep 60"]  # `omp -p` fed by a pipe
        started.append(subprocess.Popen(command, stdin=subprocess.PIPE))
        omp, other, piped = started
        found = wait_for(lambda: omp_terminal(omp.pid))
        assert found is not None and found[0] == names[0]
        assert abs(found[1] - psutil.Process(omp.pid).create_time()) < 0.01
        assert wait_for(lambda: psutil.Process(other.pid).terminal()) == os.ttyname(ttys[1][1])
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


def test_a_real_omp_process_on_a_terminal_makes_its_session_live(tmp_path: Path) -> None:
    """The live snapshot of the recording (the `sleep 4` turn open), its presence file and
    breadcrumb rewritten for a real process named omp on a fresh terminal: running, then idle
    once the rest of the transcript is written, then not live once the process is killed."""
    home = tmp_path / ".omp"
    shutil.copytree(OMP / "interactive-live" / "home-live", home)
    (transcript,) = home.glob("agent/sessions/*/*.jsonl")
    rest = (OMP / "interactive-live" / "home" / transcript.relative_to(home)).read_text()
    primary, secondary = os.openpty()
    command = ["setsid", "--ctty", "bash", "-c", "exec -a omp sleep 60"]
    process = subprocess.Popen(command, stdin=secondary, stdout=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: omp_terminal(process.pid)) is not None
        for old in home.glob("run/daemons/*/clients/*.json"):
            old.unlink()
            doc = {"pid": process.pid, "id": f"{process.pid}-x", "projectDir": "/w"}
            (old.parent / f"{process.pid}-0d23f686.json").write_text(json.dumps(doc))
        (crumb,) = home.glob("agent/terminal-sessions/*")
        crumb.rename(crumb.with_name(os.ttyname(secondary).removeprefix("/dev/").replace("/", "-")))
        state = State()
        engine = Engine([Source(OhMyPi(), home)], state)
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

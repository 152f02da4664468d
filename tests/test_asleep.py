"""Finished sessions asleep in columns (`state.asleep`): every output the same as if none slept.

The differential tests read every recorded scenario twice, once as the exporter does without a
cache (no session ever sleeps) and once with sessions put to sleep as often as can be (after
every event, each woken by the next event that names it), and compare the exposition, what
`sessions --all --include-internal --json` prints, the console's page of sessions and every
session field by field; then once more through the catch-up cache, written with its sessions
asleep and read back."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from coding_agent_exporter.events import (
    Event,
    ModelResponded,
    SessionSeen,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
    Usage,
)
from coding_agent_exporter.runtime import app as app_module
from coding_agent_exporter.runtime.app import App
from coding_agent_exporter.runtime.config import parse
from coding_agent_exporter.runtime.following import Following
from coding_agent_exporter.runtime.found import Source
from coding_agent_exporter.state import asleep as asleep_module
from coding_agent_exporter.state import state as state_module
from coding_agent_exporter.state.asleep import Asleep
from coding_agent_exporter.state.observer import NoObserver
from coding_agent_exporter.state.session import OpenTool, Session, Subagent
from coding_agent_exporter.state.state import State
from coding_agent_exporter.web.views import session_page, session_rows

from .conftest import NOW, app_for, home_flags

A = "claude-code"
UUID = "7141e000-0000-4000-8000-00000000002a"


def dozing(*args: Any, **kwargs: Any) -> State:
    """A state whose sessions' files always sleep (without a cache, the engine says nothing of
    its files). Made, not subclassed: a `State` compiled by mypyc (`setup.py`) takes no
    interpreted subclass."""
    state = State(*args, **kwargs)
    state.files_asleep = lambda name: True
    return state


def doze_after_every_event(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine folds each event on its own, and the state dozes after it (around the
    engine's fold, not the state's: a compiled `State` calls its own methods directly)."""
    fold = Following._apply

    def each(self: Following, source: Source, events: list[Event], read_from: Any = None) -> None:
        for i, event in enumerate(events):
            fold(self, source, [event], read_from if i == 0 else None)
            self.state.doze(everything=True)

    monkeypatch.setattr(Following, "_apply", each)


def outputs(app: App) -> dict[str, Any]:
    state, project = app.state, app.config.project
    page = session_page(state, project, history=True, wanted={}, limit=1000)
    return {
        "exposition": generate_latest(app.registry).decode(),
        "sessions": json.dumps(session_rows(state, project, history=True, internal=True)),
        "page": json.dumps(dataclasses.asdict(page)),
        "records": list(state.sessions.items()),
        "recent": list(state.recent),
    }


@pytest.fixture
def never(scenario: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The scenario's outputs as the exporter makes them without a cache (no session sleeps);
    from then on, the exporter's state is a `dozing` one."""
    found = outputs(app_for(scenario / "home"))
    monkeypatch.setattr(app_module, "State", dozing)
    return found


@pytest.mark.parametrize("everything", [True, False], ids=["every-event", "quiet-passes"])
def test_sessions_put_to_sleep_and_woken_give_the_same_outputs(
    scenario: Path, never: dict[str, Any], everything: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if everything:
        doze_after_every_event(monkeypatch)
    monkeypatch.setattr(state_module, "DOZE_EVERY", 1)
    app = app_for(scenario / "home")
    assert outputs(app) == never
    app.state.doze(everything=True)  # all asleep: the outputs read from the columns
    assert outputs(app) == never


def test_a_cache_written_with_sessions_asleep_gives_them_back(
    scenario: Path, never: dict[str, Any], tmp_path: Path
) -> None:
    def cached() -> App:
        argv = ["metrics", *home_flags(scenario / "home"), "--state.dir", str(tmp_path)]
        config = parse(argv, {"HOME": "/home/user"})
        app = App(
            config, process_metrics=False, clock=lambda: NOW, probe=lambda _: None, cache=True
        )
        app.catch_up()
        app.engine.save_cache()
        return app

    cold = cached()
    assert outputs(cold) == never
    warm = cached()
    assert warm.engine.cache is not None and warm.engine.cache.failure is None
    assert outputs(warm) == never


def full_session() -> Session:
    """A finished session with every field set to a value other than its default."""
    sub = Subagent(call_id="c1", agent_id="a1", subagent_type="Explore", state="completed")
    values = {
        "agent": A,
        "session_id": UUID,
        "cwd": "/home/user/work",
        "kind": "headless",
        "version": "2.1.332",
        "title": "Fix the tests",
        "title_source": "user",
        "model": "claude-opus",
        "started_at": 1.7e9,
        "updated_at": 1.7e9 + 60.5,
        "messages": 7,
        "tokens": Usage(1, 2, 3, 4, 5),
        "completed": 3,
        "interrupted": 2,
        "failed": 1,
        "turn_open_at": None,  # open work: a session that has any does not sleep
        "last_turn": ("r1", 1.7e9 + 1.0),
        "tool_calls": 11,
        "tool_errors": 4,
        "tools": None,
        "subs": {"a1": sub, "c1": sub},
        "runs": {"run1": ("c1", "review")},
        "counted": True,
        "closed": True,
        "cost": 0.125,
        "reported_cost": 0.5,
        "files": ("/a.jsonl", "/b.jsonl"),
        "born": 12345,
    }
    fields = {f.name for f in dataclasses.fields(Session)}
    assert set(values) == fields, "a new Session field: give it a value here and a column"
    defaults = Session(agent="", session_id="")
    assert [n for n in fields - set(asleep_module.OPEN) if values[n] == getattr(defaults, n)] == []
    return Session(**values)


def test_every_field_of_a_session_has_its_column() -> None:
    """Each field is kept one way (a label, a float, a count, a reference, a side table ...),
    or is open work, which a sleeping session has none of."""
    kept = [
        *asleep_module.LABELS,
        *asleep_module.FLOATS,
        *asleep_module.COUNTS,
        *asleep_module.FLAGS,
        *asleep_module.REFERENCES,
        *asleep_module.EXTRAS,
        *asleep_module.OTHERS,
        *asleep_module.OPEN,
        "tokens",
    ]
    assert sorted(kept) == sorted(f.name for f in dataclasses.fields(Session))
    assert list(asleep_module.TOKENS) == [f.name for f in dataclasses.fields(Usage)]


def test_a_session_woken_is_the_session_that_fell_asleep() -> None:
    session = full_session()
    asleep = Asleep()
    asleep.put(session)
    assert len(asleep) == 1 and (A, UUID) in asleep and (A, "other") not in asleep
    assert asleep.copy(A, UUID) == session  # a copy: still asleep
    woken = asleep.woken(A, UUID)
    assert woken == session and woken is not session
    assert woken.subs is session.subs  # the very sub-agents (responses still point at them)
    assert len(asleep) == 0 and asleep.woken(A, UUID) is None and asleep.copy(A, UUID) is None


@pytest.mark.parametrize(
    "changes",
    [
        {"session_id": "not-a-uuid"},
        {"session_id": "7141E000-0000-4000-8000-00000000002A"},  # not as a UUID is printed
        {"session_id": "00000000-0000-0000-0000-000000000000"},
        {"started_at": None, "updated_at": None, "reported_cost": None, "cwd": None},
        {"tokens": Usage(), "subs": None, "runs": None, "last_turn": None, "files": "/a.jsonl"},
        {"tokens": Usage(input=2**62), "cost": 1e-300, "title": None, "files": None},
        {"title": ""},
        {"title": "caf\u00e9 \ud83d\ude00 \ud800 lone"},  # not ASCII, a lone surrogate
    ],
)
def test_values_at_the_edges_of_their_columns_come_back(changes: dict[str, Any]) -> None:
    session = dataclasses.replace(full_session(), **changes)
    asleep = Asleep()
    asleep.put(session)
    (copy,) = asleep.sessions()
    assert copy == session
    assert asleep.woken(A, session.session_id) == session


def test_rows_are_found_among_many_and_the_holes_of_woken_ones_closed() -> None:
    asleep = Asleep()
    ids = [f"7141e000-0000-4000-8000-{n:012x}" for n in range(5000)] + ["x", "y"]
    for n, sid in enumerate(ids):
        asleep.put(Session(agent=A, session_id=sid, born=n, messages=n, title=f"t{n}"))
    for sid in ids[::2]:
        assert asleep.woken(A, sid) is not None
    assert asleep.rows < 5002  # compacted: the woken rows' holes are gone
    assert len(asleep) == 2501
    for n, sid in enumerate(ids):
        copy = asleep.copy(A, sid)
        assert (copy is None) == (n % 2 == 0)
        assert copy is None or (copy.messages, copy.title, copy.born) == (n, f"t{n}", n)
    assert [s.born for s in asleep.sessions()] == list(range(1, 5002, 2))
    assert asleep.copy("codex", ids[1]) is None  # another agent's session of the same id


def fold(state: State, sid: str, at: float) -> None:
    events: Iterator[Any] = iter(
        [
            SessionSeen(session_id=sid, at=at, cwd="/w", version="1", model="m", main=True),
            TurnStarted(session_id=sid, at=at, record_id=f"p-{sid}-{at}", prompt=None),
            ModelResponded(
                session_id=sid, at=at + 1, message_id=f"m-{sid}-{at}", model="m", usage=Usage(5, 7)
            ),
            TurnEnded(session_id=sid, at=at + 2, outcome="completed"),
        ]
    )
    for event in events:
        state.apply(A, event)
        state.session(A, sid).read_from(f"/{sid}.jsonl")


def test_only_finished_quiet_sessions_whose_files_all_sleep_doze() -> None:
    state = State()
    awake_files = {"/s3.jsonl"}
    state.files_asleep = lambda name: name not in awake_files
    for n in range(5):
        fold(state, f"s{n}", 100.0 * n)
    state.apply(A, ToolCallStarted(session_id="s4", at=500.0, call_id="c", tool="Read"))
    state.doze()  # all of them named since the last pass: none is quiet yet
    assert len(state.asleep) == 0
    state.doze()
    assert sorted(k[1] for k in state.awake) == ["s3", "s4"]  # a file awake; a tool call open
    assert state.sessions[(A, "s0")].turns == {"completed": 1}
    assert len(state.sessions) == 5 and [k[1] for k in state.sessions] == [
        f"s{n}" for n in range(5)
    ]
    awake_files.clear()
    state.doze(everything=True)
    assert sorted(k[1] for k in state.awake) == ["s4"]
    fold(state, "s1", 1000.0)  # woken by its next event, counted on
    assert state.awake[(A, "s1")].turns == {"completed": 2}
    assert [k[1] for k in state.sessions] == [f"s{n}" for n in range(5)]  # listed where it was


def test_no_session_dozes_without_sleeping_files_or_while_traces_are_written() -> None:
    state = State()
    fold(state, "s0", 0.0)
    state.doze(everything=True)  # the engine said nothing of its files: no cache
    assert len(state.asleep) == 0
    traced = State(observer=_Listening())
    traced.files_asleep = lambda name: True
    fold(traced, "s0", 0.0)
    traced.doze(everything=True)
    assert len(traced.asleep) == 0


class _Listening(NoObserver):
    """An observer that may keep sessions (as spans do)."""


def test_a_session_with_open_work_cannot_sleep() -> None:
    session = full_session()
    assert Asleep.can_sleep(session)
    assert not Asleep.can_sleep(dataclasses.replace(session, turn_open_at=1.0))
    assert not Asleep.can_sleep(
        dataclasses.replace(session, tools={"c": OpenTool("Read", 1.0, None)})
    )
    running = Subagent(agent_id="a2")
    assert not Asleep.can_sleep(dataclasses.replace(session, subs={"a2": running}))


def test_the_briefs_of_a_frozen_copy_are_made_after_the_lock_and_keep_still() -> None:
    """A list of sessions copies the columns under the state's lock and reads them after it:
    the copy lists what was there when it was made, whatever sleeps or wakes since."""
    state = State()
    state.files_asleep = lambda name: True
    for n in range(4):
        fold(state, f"7141e000-0000-4000-8000-00000000000{n}", 100.0 * n)
    state.doze(everything=True)
    fold(state, "s-awake", 1000.0)
    before = list(state.sessions.briefs())
    frozen = state.sessions.frozen()
    assert list(frozen.briefs()) == before
    state.session(A, "7141e000-0000-4000-8000-000000000002")  # woken
    fold(state, "s-new", 2000.0)
    state.doze(everything=True)
    assert list(frozen.briefs()) == before != list(state.sessions.briefs())

"""Hermes Agent: its home and files, and what the exporter shows of the `state.db` files
hermes-agent 0.19.0 wrote (`fixtures/hermes/0.19.0/`) checked against the stub's own log
(tokens it sent, tool calls it asked for and the results sent back), the sub-agent under its
lead, the resumed session, live state from the copies taken while Hermes ran with a process
named `hermes` holding the database, and the totals of a database read while it grows: each
session's totals replace the last ones, never added twice."""

from __future__ import annotations

import contextlib
import random
import shutil
import sqlite3
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coding_agent_exporter.harnesses.base import RecordRejected
from coding_agent_exporter.harnesses.hermes.harness import Hermes
from coding_agent_exporter.harnesses.hermes.state_db import MESSAGES, StateReader
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.sources.processes import process_start
from coding_agent_exporter.sources.sqlite_tail import SqliteTail
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.state import State
from coding_agent_exporter.web.views import session_rows

from .backends import held as held_by
from .conftest import FIXTURES, app_for, expected
from .test_fuzz_readers import CHANGES, mutated
from .test_sqlite import writer

V = FIXTURES / "hermes" / "0.19.0"
SCENARIOS = sorted(p.parent for p in V.glob("*/expected.json"))
KINDS = ("input", "output", "cache_read", "cache_write", "reasoning")


def rows(scenario: Path) -> dict[str, dict[str, Any]]:
    app = app_for(scenario / "home")
    found = session_rows(app.state, app.config.project, history=True, internal=True)
    return {r["session_id"]: r for r in found}


def tokens(state: State) -> dict[str, int]:
    return {kind: sum(v for k, v in state.totals.tokens.items() if k[3] == kind) for kind in KINDS}


def outcomes(state: State) -> dict[str, int]:
    found: dict[str, int] = {}
    for (_, _, outcome), n in state.totals.tool_calls.items():
        found[outcome] = found.get(outcome, 0) + n
    return found


def test_default_home_per_system() -> None:
    """`hermes_constants._get_platform_default_hermes_home`: `$HERMES_HOME`, else `~/.hermes`,
    on Windows `%LOCALAPPDATA%\\hermes`."""
    assert Hermes.default_home({"HOME": "/h"}, "linux") == Path("/h/.hermes")
    assert Hermes.default_home({"HOME": "/h"}, "darwin") == Path("/h/.hermes")
    assert Hermes.default_home({"HOME": "/h", "HERMES_HOME": "/x"}, "linux") == Path("/x")
    windows = {"USERPROFILE": "C:/u", "LOCALAPPDATA": "C:/u/L"}
    assert Hermes.default_home(windows, "windows") == Path("C:/u/L/hermes")
    assert Hermes.default_home({"USERPROFILE": "C:/u"}, "windows") == Path(
        "C:/u/AppData/Local/hermes"
    )


def test_only_the_database_is_read() -> None:
    harness = Hermes()
    assert harness.match(PurePosixPath("state.db")) == "sqlite"
    for other in ("state.db-wal", "state.db-shm", "config.yaml", "auth.lock", "logs/agent.log"):
        assert harness.match(PurePosixPath(other)) is None


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_tokens_are_the_stubs(scenario: Path) -> None:
    """Every token the stub sent is counted once: the conversation's from the sessions rows'
    totals, Hermes' own calls (approval check, title) from `session_model_usage`."""
    facts = expected(scenario)
    assert tokens(app_for(scenario / "home").state) == facts["stub_truth"]["tokens"]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_responses_turns_and_tool_calls_are_the_stubs(scenario: Path) -> None:
    facts = expected(scenario)
    found = [r for r in rows(scenario).values() if r["agent"] == "hermes"]
    assert len(found) == facts["lead_sessions"] == len(facts["sessions"])
    assert sum(r["messages"] for r in found) == sum(facts["messages"].values())
    turns = [t for r in found for t, n in r["turns"].items() for _ in range(n)]
    gone = ["interrupted" if t == "unfinished" else t for t in facts["turns"]]  # no process left
    assert sorted(turns) == sorted(gone)
    asked = facts["tool_calls"]
    assert sum(r["tool_calls"]["total"] for r in found) == asked["main"]["total"]
    subs = [s for r in found for s in r["subagents"]]
    assert sum(s["tool_calls"] for s in subs) == asked["sub"]["total"]


@pytest.mark.parametrize(
    ("scenario", "outcome"),
    [("run-shell", "ok"), ("run-fail", "error"), ("tui-approval", "rejected")],
)
def test_tool_outcomes(scenario: str, outcome: str) -> None:
    """`echo hi` exits 0, `ls` of a missing folder exits 2, a command denied at the approval
    question is rejected (`BLOCKED: User denied`)."""
    assert expected(V / scenario)["tool_calls"]["main"][outcome] == 1
    assert outcomes(app_for(V / scenario / "home").state) == {outcome: 1}


def test_subagent_under_its_lead_linked_to_its_call() -> None:
    facts = expected(V / "subagent")
    (got,) = rows(V / "subagent").values()  # the child session is no session of its own
    (sub,) = got["subagents"]
    assert sub["state"] == "completed" and sub["type"] == "delegate_task"
    assert sub["call_id"] is not None and sub["tool_calls"] == facts["tool_calls"]["sub"]["total"]
    assert sub["tokens"] == facts["tokens"]["sub"] and sub["messages"] == facts["messages"]["sub"]
    lead = {k: facts["tokens"]["main"][k] + facts["tokens"]["sub"][k] for k in KINDS}
    assert got["tokens"] == lead  # a session's tokens include its sub-agents'


def test_a_background_delegation_and_the_turn_its_results_wake() -> None:
    """The TUI runs `delegate_task` in the background: its result (`"status": "dispatched"`)
    comes before the child's first row, and the child is still linked to that call; the
    message that hands its results back to the lead is a turn of the lead's (answered), not
    a prompt that names the session."""
    facts = expected(V / "tui-subagent")
    assert facts["turns"] == ["completed", "completed"] and facts["stub_truth"]["requests"]["sub"]
    (got,) = rows(V / "tui-subagent").values()
    (sub,) = got["subagents"]
    assert sub["call_id"] is not None and sub["state"] == "completed"
    assert sub["tokens"] == facts["tokens"]["sub"]
    assert got["turns"] == {"completed": 2, "interrupted": 0, "failed": 0}
    assert got["title"] == "Fake shop api session" and got["messages"] == 5


def test_a_failed_request_fails_the_turn() -> None:
    """HTTP 500: Hermes gives up at once and writes only the prompt; the session's end with no
    answer fails the turn."""
    facts = expected(V / "api-error")
    assert facts["api_errors"] == 1 and facts["turns"] == ["failed"]
    (got,) = rows(V / "api-error").values()
    assert got["turns"] == {"completed": 0, "interrupted": 0, "failed": 1} and got["messages"] == 0


def test_a_rate_limit_hermes_retried_past_leaves_no_trace() -> None:
    facts = expected(V / "api-retry")
    assert facts["stub_truth"]["http_errors"] == 2 and facts["messages"]["main"] == 1
    (got,) = rows(V / "api-retry").values()
    assert got["turns"] == {"completed": 1, "interrupted": 0, "failed": 0} and got["messages"] == 1


def test_a_resumed_session_is_one_session_of_two_turns() -> None:
    facts = expected(V / "resume")
    assert facts["lead_sessions"] == 1 and facts["turns"] == ["completed", "completed"]
    (got,) = rows(V / "resume").values()
    assert got["session_id"] == facts["session_id"]
    assert got["turns"]["completed"] == 2 and got["messages"] == 3


def test_a_killed_run_ends_its_turn_and_call_when_no_hermes_is_left() -> None:
    """SIGKILL while `sleep` ran: the session never ended in the database (no `ended_at`), the
    call has no result; with no process holding the database, the turn ends interrupted and
    the call cancelled."""
    facts = expected(V / "killed-mid-tool")
    assert facts["turns"] == ["unfinished"] and facts["tool_calls"]["main"]["cancelled"] == 1
    (got,) = rows(V / "killed-mid-tool").values()
    assert got["turns"] == {"completed": 0, "interrupted": 1, "failed": 0} and not got["live"]
    assert outcomes(app_for(V / "killed-mid-tool" / "home").state) == {"cancelled": 1}


def test_the_generated_title_wins_over_the_prompt() -> None:
    (got,) = rows(V / "tui-approval").values()
    assert (got["title"], got["title_source"]) == ("Fake shop api session", "harness")


# -- live: a copied database held open by a process named `hermes` -------------------------------


def held(database: Path) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    return held_by(database, "hermes")


def copied(home: Path, tmp_path: Path) -> Path:
    database = tmp_path / "hermes" / "state.db"
    database.parent.mkdir()
    shutil.copyfile(home / ".hermes" / "state.db", database)
    return database


def last_write(database: Path) -> float:
    """Just after the database's last row was written: no session of it is quiet yet."""
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        (at,) = db.execute("SELECT max(timestamp) FROM messages").fetchone()
    return float(at) + 1


def live_states(database: Path) -> tuple[State, list[str]]:
    state = State()
    Engine([Source(Hermes(), database.parent)], state, Stats()).catch_up()
    state.refresh(last_write(database), process_start)
    return state, [state.status(key, entry)[0] for key, entry in sorted(state.live.items())]


def test_running_while_a_command_runs_then_interrupted_when_gone(tmp_path: Path) -> None:
    (live,) = expected(V / "live-shell")["live"].values()
    assert live["turn_open"] and len(live["tool_calls_open"]) == 1
    database = copied(V / "live-shell" / "home-live", tmp_path)
    with held(database) as hermes:
        state, states = live_states(database)
        assert states == ["running"]
        ((key, entry),) = state.live.items()
        assert key == ("hermes", live["session_id"]) and entry.pid == hermes.pid
        assert state.session("hermes", live["session_id"]).open_tools
    state.refresh(last_write(database), process_start)
    assert state.live == {}


def test_waiting_for_an_approval_reads_running(tmp_path: Path) -> None:
    """The copy taken while the TUI asked about `rm -rf build`: the call is in the database
    with no result, as while a command runs; nothing says Hermes waits: running, not
    needs_user."""
    facts = expected(V / "tui-approval")["live"]
    assert facts["home-live"]["state"] == "needs_user" and facts["home-live"]["turn_open"]
    database = copied(V / "tui-approval" / "home-live", tmp_path)
    with held(database):
        assert live_states(database)[1] == ["running"]


def test_idle_after_the_answer_while_hermes_still_holds_the_database(tmp_path: Path) -> None:
    assert expected(V / "tui-approval")["live"]["home-idle"]["state"] == "idle"
    database = copied(V / "tui-approval" / "home-idle", tmp_path)
    with held(database):
        assert live_states(database)[1] == ["idle"]


def test_a_closed_session_is_not_live_while_hermes_holds_the_database(tmp_path: Path) -> None:
    """The TUI session after `/exit` (`end_reason` `cli_close`): a `hermes` process holding
    the database works on another session of it, not on this one."""
    database = copied(V / "tui-approval" / "home", tmp_path)
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        assert db.execute("SELECT end_reason FROM sessions").fetchall() == [("cli_close",)]
    with held(database):
        assert live_states(database)[1] == []


# -- a database read while it grows ---------------------------------------------------------------


def test_totals_read_while_they_grow_are_counted_once(tmp_path: Path) -> None:
    """The `subagent` database written again row by row in WAL mode, the engine reading after
    every commit; the sessions rows' totals written in two steps, as Hermes adds each call's:
    the counts equal the stub's, not the sum of what was read."""
    source = V / "subagent" / "home" / ".hermes" / "state.db"
    home = tmp_path / "hermes"
    home.mkdir()
    database = home / "state.db"
    with contextlib.closing(sqlite3.connect(source)) as old, writer(database) as db:
        for (sql,) in old.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name IN "
            "('sessions', 'messages', 'session_model_usage')"
        ):
            db.execute(sql)
        sessions = old.execute("SELECT * FROM sessions ORDER BY started_at").fetchall()
        messages = old.execute("SELECT * FROM messages ORDER BY id").fetchall()
        state = State()
        engine = Engine([Source(Hermes(), home)], state, Stats())
        engine.catch_up()

        def commit(sql: str, values: tuple[object, ...] = ()) -> None:
            db.execute("BEGIN IMMEDIATE")
            db.execute(sql, values)
            db.execute("COMMIT")
            engine.changed([home / "state.db-wal"])

        marks = ",".join("?" * len(sessions[0]))
        tokens_at = [d[0] for d in old.execute("SELECT * FROM sessions").description]
        for row in sessions:  # open, no tokens yet
            values = dict(zip(tokens_at, row, strict=True))
            values |= {"ended_at": None, "input_tokens": 0, "output_tokens": 0}
            commit(f"INSERT INTO sessions VALUES ({marks})", tuple(values.values()))
        for row in messages:
            commit(f"INSERT INTO messages VALUES ({','.join('?' * len(row))})", tuple(row))
        for row in sessions:
            values = dict(zip(tokens_at, row, strict=True))
            half = (values["input_tokens"] // 2, values["output_tokens"] // 2, values["id"])
            commit("UPDATE sessions SET input_tokens = ?, output_tokens = ? WHERE id = ?", half)
            whole = (values["input_tokens"], values["output_tokens"], values["id"])
            commit("UPDATE sessions SET input_tokens = ?, output_tokens = ? WHERE id = ?", whole)
            commit(
                "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ?",
                (values["ended_at"], values["end_reason"], values["id"]),
            )
        assert Path(f"{database}-wal").stat().st_size > 0  # read from the -wal
    facts = expected(V / "subagent")
    assert tokens(state) == facts["stub_truth"]["tokens"]
    (session,) = [s for s in state.sessions.values() if s.session_id == facts["session_id"]]
    assert session.messages == sum(facts["messages"].values())
    assert state.totals.turns[("hermes", "/home/user/work/shop-api", "completed")] == 1


# -- damaged rows ---------------------------------------------------------------------------------


def recorded_rows() -> list[dict[str, Any]]:
    """The rows the reader is fed from the `subagent` and `tui-approval` databases, in order."""
    found: list[dict[str, Any]] = []
    for scenario in ("subagent", "tui-approval"):
        database = V / scenario / "home" / ".hermes" / "state.db"
        tail = SqliteTail(database, MESSAGES)
        found += tail.read().rows
    return found


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None, max_examples=60)
@given(changes=CHANGES, seed=st.integers(0, 2**32))
def test_real_rows_made_wrong_never_escape_the_reader(
    changes: list[tuple[int, int, Any, bool]], seed: int
) -> None:
    """Recorded rows with values replaced, dropped or shuffled: a row may be refused
    (`RecordRejected`), never an exception, and the state folds what comes out."""
    batch = recorded_rows()
    for which, pick, replacement, drop in changes:
        i = which % len(batch)
        batch[i] = mutated(batch[i], pick, replacement, drop)
    random.Random(seed).shuffle(batch)
    reader, state = StateReader(), State()
    for row in batch:
        try:
            events = reader.feed(row)
        except RecordRejected:
            continue
        for event in events:
            state.apply("hermes", event)
    state.refresh(2e9, lambda pid: 1.0)

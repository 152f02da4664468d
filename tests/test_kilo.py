"""Kilo Code CLI: its home and files, and what the exporter shows of the databases Kilo 7.7.7
wrote (`fixtures/kilo-code/7.7.7/`) checked against the stub's own log (tokens it sent, tool
calls it asked for), sub-agents under their parent, the resumed session, and live state from
the copies taken while Kilo ran, with a process named `kilo` holding the database."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from coding_agent_exporter.harnesses.kilo.harness import KiloCode
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.sources.processes import process_start
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.state import State
from coding_agent_exporter.web.views import session_rows

from .backends import held as held_by
from .conftest import FIXTURES, app_for, expected

V = FIXTURES / "kilo-code" / "7.7.7"
DATA = Path(".local") / "share" / "kilo"
SCENARIOS = sorted(p.parent for p in V.glob("*/expected.json"))


def rows(scenario: Path) -> dict[str, dict[str, Any]]:
    app = app_for(scenario / "home")
    found = session_rows(app.state, app.config.project, history=True, internal=True)
    return {r["session_id"]: r for r in found}


def ours(tokens: dict[str, int]) -> dict[str, int]:
    """The stub's split (output without the reasoning) in our terms."""
    return {**tokens, "output": tokens["output"] + tokens["reasoning"]}


def test_default_home_is_xdg_data_on_every_system() -> None:
    """`xdg-basedir` (Kilo's folders): `$XDG_DATA_HOME`, else `~/.local/share`, no per-OS
    branch (Windows: `tests/test_places.py`)."""
    assert KiloCode.default_home({"HOME": "/h"}) == Path("/h/.local/share/kilo")
    assert KiloCode.default_home({"HOME": "/h", "XDG_DATA_HOME": "/d"}) == Path("/d/kilo")
    assert KiloCode.default_home({"HOME": "/h", "KILO_DB": "/x/y/my.db"}) == Path("/x/y")
    relative = {"HOME": "/h", "KILO_DB": "mine.db"}  # below the data folder: the default home
    assert KiloCode.default_home(relative) == Path("/h/.local/share/kilo")


def test_only_the_database_is_read() -> None:
    harness = KiloCode()
    assert harness.match(PurePosixPath("kilo.db")) == "sqlite"
    for other in ("kilo.db-wal", "kilo.db-shm", "auth.json", "telemetry-id", "log/opencode.log"):
        assert harness.match(PurePosixPath(other)) is None
    assert harness.match(PurePosixPath("opencode.db")) is None  # OpenCode's own harness


ABORTED = {
    "interactive": {("ia_slow", 0), ("ia_slowtool", 0)},
    "interactive-feedback": {("ia_slowtool", 0)},
    "killed-mid-tool": {("sleepy", 0)},
}
"""The steps stopped before Kilo stored their tokens (Esc during a text stream or while the
step's tool ran; SIGKILL while it ran): their messages keep 0 tokens although the stub's usage
had arrived, as in OpenCode."""


def stub_answers(scenario: Path) -> list[dict[str, Any]]:
    log = (scenario / "stub-log.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, log) if r.get("usage") and r["kind"] in ("main", "sub")]


def usage(answer: dict[str, Any]) -> Counter[str]:
    """One chat-completions usage in our terms (input without the cached part, output with the
    reasoning)."""
    u = answer["usage"]
    cached = u["prompt_tokens_details"]["cached_tokens"]
    return Counter(
        input=u["prompt_tokens"] - cached,
        output=u["completion_tokens"],
        cache_read=cached,
        reasoning=u["completion_tokens_details"]["reasoning_tokens"],
    )


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_tokens_are_the_stubs(scenario: Path) -> None:
    """Every token the stub sent is counted once (the session rows' totals are not added),
    except those of an answer stopped with Esc: lost to every reader."""
    sent: Counter[str] = Counter()
    for answer in stub_answers(scenario):
        if (answer["scenario"], answer["step"]) not in ABORTED.get(scenario.name, set()):
            sent += usage(answer)
    totals = app_for(scenario / "home").state.totals
    for kind in ("input", "output", "cache_read", "reasoning"):
        assert sum(v for k, v in totals.tokens.items() if k[3] == kind) == sent[kind], kind
    truth = expected(scenario)["stub_truth"]
    assert sum(usage(a)["input"] for a in stub_answers(scenario)) == truth["tokens"]["input"]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.name)
def test_tool_calls_are_the_ones_the_stub_asked_for(scenario: Path) -> None:
    asked = expected(scenario)["stub_truth"]["tool_calls"]
    found = rows(scenario)
    roots = [r for r in found.values() if r["agent"] == "kilo-code"]
    assert sum(r["tool_calls"]["total"] for r in roots) == asked.get("main", 0)
    subs = [s for r in roots for s in r["subagents"]]
    assert sum(s["tool_calls"] for s in subs) == asked.get("sub", 0)


def outcomes(scenario: Path) -> dict[str, int]:
    totals = app_for(scenario / "home").state.totals
    found: dict[str, int] = {}
    for (_, _, outcome), n in totals.tool_calls.items():
        found[outcome] = found.get(outcome, 0) + n
    return found


@pytest.mark.parametrize(
    ("scenario", "outcome"),
    [("run-shell", "ok"), ("run-fail", "error"), ("run-rejected", "rejected")],
)
def test_tool_outcomes(scenario: str, outcome: str) -> None:
    """`echo hi` exits 0, `ls` of a missing folder exits 2, a headless run without `--auto`
    rejects the call itself."""
    (want,) = expected(V / scenario)["sessions"]
    assert want["tool_calls"][outcome] == 1
    assert outcomes(V / scenario) == {outcome: 1}


def test_subagent_under_its_parent() -> None:
    facts = expected(V / "subagent")
    (want,) = facts["sessions"]
    (sub,) = want["subagents"]
    found = rows(V / "subagent")
    assert set(found) == {want["session_id"]}  # the child session is no session of its own
    (mine,) = found[want["session_id"]]["subagents"]
    assert mine["id"] == sub["session_id"] and mine["type"] == "general"
    assert mine["state"] == "completed" and mine["tool_calls"] == 1
    assert mine["tokens"]["input"] == sub["tokens"]["input"]


def test_a_headless_run_without_auto_rejects_the_call_and_ends_the_turn() -> None:
    facts = expected(V / "run-rejected")
    (want,) = facts["sessions"]
    (got,) = rows(V / "run-rejected").values()
    assert want["turns"]["interrupted"] == 1
    assert got["tool_calls"]["total"] == 1 and got["turns"]["interrupted"] == 1


def test_api_error_fails_the_turn() -> None:
    facts = expected(V / "api-error")
    assert facts["stub_truth"]["http_errors"] >= 1 and facts["home"]["messages"] == 0
    (got,) = rows(V / "api-error").values()
    assert got["turns"]["failed"] == 1 and got["messages"] == 0


def test_a_server_error_kilo_gave_up_on_fails_the_turn_once() -> None:
    """HTTP 500 to every request: Kilo tried six times over about 70 s, then wrote one
    `APIError`; one failed turn, no response."""
    facts = expected(V / "api-error-500")
    assert facts["stub_truth"]["http_errors"] == 6 and facts["stub_truth"]["responses"] == 0
    (got,) = rows(V / "api-error-500").values()
    assert got["turns"] == {"completed": 0, "interrupted": 0, "failed": 1} and got["messages"] == 0


def test_a_rate_limit_kilo_retried_past_leaves_no_trace() -> None:
    """Two HTTP 429 answers, then the answer: Kilo retried and wrote only the answer."""
    facts = expected(V / "api-retry")["stub_truth"]
    assert facts["http_errors"] == 2 and facts["responses"] == 1
    (got,) = rows(V / "api-retry").values()
    assert got["messages"] == 1 and got["turns"] == {"completed": 1, "interrupted": 0, "failed": 0}


def test_a_resumed_session_is_one_session_of_two_turns() -> None:
    facts = expected(V / "resume")
    (want,) = facts["sessions"]
    assert facts["stub_truth"]["responses"] == 3  # echo hi (2 steps), then the answer
    (got,) = rows(V / "resume").values()
    assert got["session_id"] == want["session_id"]
    assert got["turns"]["completed"] == 2 and got["messages"] == 3
    assert got["kind"] == "headless"


# -- live: a copied database held open by a process named `kilo` --------------------------------


def held(database: Path) -> contextlib.AbstractContextManager[subprocess.Popen[bytes]]:
    return held_by(database, "kilo")


def copied(home: Path, tmp_path: Path) -> Path:
    database = tmp_path / "kilo" / "kilo.db"
    database.parent.mkdir()
    shutil.copyfile(home / DATA / "kilo.db", database)
    return database


def last_write(database: Path) -> float:
    """Just after the database's last row was written: no session of it is quiet yet."""
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        (updated,) = db.execute("SELECT max(time_updated) FROM session").fetchone()
    return float(updated) / 1000 + 1


def live_states(database: Path) -> tuple[State, list[str]]:
    state = State()
    Engine([Source(KiloCode(), database.parent)], state, Stats()).catch_up()
    state.refresh(last_write(database), process_start)
    return state, [state.status(key, entry)[0] for key, entry in sorted(state.live.items())]


def test_running_while_a_tool_runs_then_interrupted_when_killed(tmp_path: Path) -> None:
    """The copy taken while `sleep` ran in a bash call: the turn and the call are open."""
    facts = expected(V / "live-tool")["live"]
    (session,) = facts["sessions"]
    assert session["open_turns"] == 1 and session["open_tool_parts"] == [
        {"tool": "bash", "status": "running"}
    ]
    database = copied(V / "live-tool" / "home-live", tmp_path)
    with held(database) as kilo:
        state, states = live_states(database)
        assert states == ["running"]
        ((key, entry),) = state.live.items()
        assert key == ("kilo-code", session["session_id"]) and entry.pid == kilo.pid
        assert state.session("kilo-code", session["session_id"]).open_tools
    state.refresh(last_write(database), process_start)
    assert state.live == {}
    assert state.totals.turns[("kilo-code", "/home/user/work/shop-api", "interrupted")] == 1


def test_idle_after_the_turn_while_kilo_still_holds_the_database(tmp_path: Path) -> None:
    database = copied(V / "run-answer" / "home", tmp_path)
    with held(database):
        assert live_states(database)[1] == ["idle"]


def test_waiting_for_an_approval_reads_running(tmp_path: Path) -> None:
    """The copy taken while the TUI showed its approval dialog: Kilo wrote the call as
    `running` and no row of a pending approval (`permission` is empty), so needs_user cannot be
    told: the session reads running."""
    facts = expected(V / "interactive")["live"]
    assert facts["permission_rows"] == 0
    (session,) = facts["sessions"]
    assert session["open_tool_parts"] == [{"tool": "bash", "status": "running"}]
    database = copied(V / "interactive" / "home-live", tmp_path)
    with held(database):
        assert live_states(database)[1] == ["running"]


def test_the_tui_session_its_title_turns_and_calls() -> None:
    """Allowed, rejected (Reject, then Enter on the empty feedback box: the loop stops), Esc
    during a stream, Esc while `sleep 30` ran, one more prompt; the TUI asks the small model
    for a title."""
    (want,) = expected(V / "interactive")["sessions"]
    (got,) = rows(V / "interactive").values()
    assert (got["title"], got["title_source"]) == (want["title"], "harness")
    assert got["kind"] == "interactive"
    assert want["turns"] == {"completed": 2, "interrupted": 3, "failed": 0, "unfinished": 0}
    assert got["turns"] == {"completed": 2, "interrupted": 3, "failed": 0}
    assert outcomes(V / "interactive") == {"ok": 1, "rejected": 1, "cancelled": 1}


def test_a_killed_run_ends_its_turn_and_call_when_no_kilo_is_left() -> None:
    """SIGKILL while `sleep` ran: the turn has no answer and the part stays `running` in the
    file; with no process holding the database, the turn ends interrupted, the call cancelled."""
    (want,) = expected(V / "killed-mid-tool")["sessions"]
    assert want["turns"]["unfinished"] == 1 and want["open_tool_parts"] == 1
    (got,) = rows(V / "killed-mid-tool").values()
    assert got["turns"] == {"completed": 0, "interrupted": 1, "failed": 0}
    assert outcomes(V / "killed-mid-tool") == {"cancelled": 1} and not got["live"]


def test_a_rejection_with_feedback_goes_on_with_it() -> None:
    """Kilo's Reject asks what to do instead; rejected with that feedback, the call ends
    `rejected` but the loop goes on and answers it: the turn completes, it is not interrupted
    at the rejection (as a plain rejection is)."""
    (want,) = expected(V / "interactive-feedback")["sessions"]
    assert want["tool_calls"]["rejected"] == 1 and want["turns"]["completed"] == 3
    (got,) = rows(V / "interactive-feedback").values()
    assert got["turns"] == {"completed": 3, "interrupted": 1, "failed": 0}
    assert outcomes(V / "interactive-feedback") == {"ok": 1, "rejected": 1, "cancelled": 1}

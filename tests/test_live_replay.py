"""Replay each recorded live-index timeline (every rewrite the real CLI made, in order) through
the reader, as if the process were running, and check the states a scrape would have shown.

The expected states come from the recording (`expected.json`: the status words the CLI wrote,
in order) and a table written out here (docs/metrics.md: `busy` is running, `waiting` needs the
user, `shell` is a background shell), never from `live_state`, the mapping under test."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from coding_agent_exporter.events import LiveIndexRead
from coding_agent_exporter.harnesses.claude_code.harness import ClaudeCode
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.state import State

from .conftest import expected, scenario_id, scenarios

TIMELINES = [s for s in scenarios() if "index_states" in expected(s)]
TWO_PROCESSES = [s for s in scenarios() if "index_states_by_file" in expected(s)]


SHOWN = {"idle": "idle", "busy": "running", "waiting": "needs_user", "shell": "background"}
"""Each status word Claude Code wrote in these recordings → the state /metrics shows for it."""


def word(state: str) -> str:
    status, _, reason = state.partition(":")
    return SHOWN[status] + (f":{reason}" if reason else "")


def shown(engine: Engine, key: tuple[str, str], entry: LiveIndexRead) -> str:
    """The state and reason a scrape shows of a live session (`State.status`, as the collector
    and the console ask it)."""
    state, reason, _ = engine.state.status(key, entry)
    return state + (f":{reason}" if reason else "")


@pytest.mark.parametrize("scenario", TIMELINES, ids=scenario_id)
def test_replayed_index_gives_the_recorded_states(scenario: Path, tmp_path: Path) -> None:
    seen: list[str] = []
    for engine in _replayed(scenario, tmp_path):
        for key, entry in engine.state.live.items():
            state = shown(engine, key, entry)
            if state != "unknown" and (not seen or seen[-1] != state):
                seen.append(state)
    assert seen == [word(s) for s in expected(scenario)["index_states"]]


@pytest.mark.parametrize("scenario", TWO_PROCESSES, ids=scenario_id)
def test_two_processes_at_once_each_give_their_recorded_states(
    scenario: Path, tmp_path: Path
) -> None:
    """Two TUIs in one project (recorded): one waits on its permission prompt while the other
    runs, and each live session shows its own state."""
    seen: dict[str, list[str]] = {}
    together: set[tuple[str, ...]] = set()
    for engine in _replayed(scenario, tmp_path):
        now = []
        for key, entry in engine.state.live.items():
            state = shown(engine, key, entry)
            mine = seen.setdefault(entry.source.removeprefix("sessions/"), [])
            if state != "unknown" and (not mine or mine[-1] != state):
                mine.append(state)
            now.append(state)
        together.add(tuple(sorted(now)))
    wanted = expected(scenario)["index_states_by_file"]
    assert seen == {name: [word(s) for s in states] for name, states in wanted.items()}
    assert ("needs_user:permission prompt", "running") in together


def _replayed(scenario: Path, tmp_path: Path) -> Iterator[Engine]:
    """The engine after each recorded rewrite of the live index, its processes alive; at the
    end none is left, and no work stays open."""
    shutil.copytree(scenario / "home" / "projects", tmp_path / "projects")
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    engine = Engine([Source(ClaudeCode(), tmp_path)], State(), Stats())
    engine.catch_up()
    started: dict[int, float] = {}
    for line in (scenario / "index-timeline.jsonl").read_text().splitlines():
        change = json.loads(line)
        path = sessions / change["file"]
        if change["doc"] is None:
            path.unlink()
        else:
            path.write_text(json.dumps(change["doc"]))
            started[change["doc"]["pid"]] = change["doc"]["startedAt"] / 1000
        engine.changed([path])
        engine.state.refresh(2e9, started.get)
        yield engine
    engine.state.refresh(2e9, lambda pid: None)  # the recording is over: no process is left
    assert engine.state.live == {}
    for session in engine.state.sessions.values():
        assert session.turn_open_at is None and not session.open_tools

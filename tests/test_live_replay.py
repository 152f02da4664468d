"""Replay each recorded live-index timeline (every rewrite the real CLI made, in order) through
the reader, as if the process were running, and check the states a scrape would have shown."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from exporter.harnesses.claude_code import ClaudeCode
from exporter.runtime.engine import Engine, Source
from exporter.state.health import Stats
from exporter.state.labels import live_state
from exporter.state.state import State

from .conftest import expected, scenario_id, scenarios

TIMELINES = [s for s in scenarios() if "index_states" in expected(s)]


def word(state: str) -> str:
    status, _, reason = state.partition(":")
    return live_state(status) + (f":{reason}" if reason else "")


@pytest.mark.parametrize("scenario", TIMELINES, ids=scenario_id)
def test_replayed_index_gives_the_recorded_states(scenario: Path, tmp_path: Path) -> None:
    shutil.copytree(scenario / "home" / "projects", tmp_path / "projects")
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    engine = Engine([Source(ClaudeCode(), tmp_path)], State(), Stats())
    engine.catch_up()
    started: dict[int, float] = {}
    seen: list[str] = []
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
        for entry in engine.state.live.values():
            state = live_state(entry.status) + (f":{entry.reason}" if entry.reason else "")
            if state != "unknown" and (not seen or seen[-1] != state):
                seen.append(state)
    assert seen == [word(s) for s in expected(scenario)["index_states"]]
    engine.state.refresh(2e9, lambda pid: None)  # the recording is over: no process is left
    assert engine.state.live == {}
    for session in engine.state.sessions.values():
        assert session.turn_open_at is None and not session.open_tools

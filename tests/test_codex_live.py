"""Codex writes no live index: a thread is live while a Codex process holds its rollout open.
Real processes, real /proc, a recorded rollout replayed as if it were being written now."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from exporter.events import LiveIndexRead
from exporter.harnesses.codex import Codex
from exporter.runtime.engine import Engine, Source
from exporter.sources.processes import process_start
from exporter.state.health import Stats
from exporter.state.state import HELD_QUIET, State

from .backends import holding
from .conftest import FIXTURES

RECORDED = FIXTURES / "codex" / "0.171.0" / "exec-shell" / "home" / ".codex"


def now_lines(rollout: Path) -> list[str]:
    """The recorded records with their timestamps moved to now."""
    records = [json.loads(line) for line in rollout.read_text().splitlines()]
    first = min(datetime.fromisoformat(r["timestamp"]).timestamp() for r in records)
    shift = time.time() - first
    for record in records:
        moved = datetime.fromisoformat(record["timestamp"]).timestamp() + shift
        record["timestamp"] = datetime.fromtimestamp(moved, UTC).isoformat()
    return [json.dumps(r) for r in records]


@pytest.fixture
def rollout(tmp_path: Path) -> tuple[Path, list[str]]:
    (recorded,) = RECORDED.glob("sessions/*/*/*/rollout-*.jsonl")
    target = tmp_path / "codex" / recorded.relative_to(RECORDED)
    target.parent.mkdir(parents=True)
    lines = now_lines(recorded)
    ended = next(i for i, line in enumerate(lines) if '"task_complete"' in line)
    target.write_text("\n".join(lines[:ended]) + "\n")  # the turn is still running
    return target, lines[ended:]


@pytest.fixture
def codex_process(rollout: tuple[Path, list[str]]) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(holding(rollout[0], "codex"), stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"held\n"
    yield process
    process.kill()
    process.wait()
    process.stdout.close()


def test_held_rollout_is_live_running_then_idle_then_gone(
    tmp_path: Path, rollout: tuple[Path, list[str]], codex_process: subprocess.Popen[bytes]
) -> None:
    path, rest = rollout
    state = State()
    engine = Engine([Source(Codex(), tmp_path / "codex")], state, Stats())
    engine.catch_up()
    state.refresh(time.time(), process_start)
    ((key, entry),) = state.live.items()
    assert entry.pid == codex_process.pid and entry.derived
    assert state.status(key, entry)[0] == "running"

    with path.open("a") as f:
        f.write("\n".join(rest) + "\n")  # the turn ends
    engine.changed([path])
    state.refresh(time.time(), process_start)
    assert state.status(key, state.live[key])[0] == "idle"

    codex_process.kill()
    codex_process.wait()
    state.refresh(time.time(), process_start)
    assert state.live == {} and state.entries == {}


def test_a_process_that_does_not_look_like_codex_does_not_count(
    tmp_path: Path, rollout: tuple[Path, list[str]]
) -> None:
    process = subprocess.Popen(holding(rollout[0], "editor"), stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"held\n"
        state = State()
        Engine([Source(Codex(), tmp_path / "codex")], state, Stats()).catch_up()
        state.refresh(time.time(), process_start)
        assert state.live == {}
    finally:
        process.kill()
        process.wait()
        assert process.stdout is not None
        process.stdout.close()


def test_a_quiet_held_session_is_not_live() -> None:
    """Codex' app-server keeps a thread's files open after the TUI exits."""
    state = State()
    entry = LiveIndexRead(
        pid=7, session_id="t1", started_at=0.0, status=None, source="held:7:t1", derived=True
    )
    state.apply("codex", entry)
    state.session("codex", "t1").touch(1000.0)
    state.refresh(1000.0 + HELD_QUIET / 2, lambda pid: 0.0)
    assert set(state.live) == {("codex", "t1")}
    state.refresh(1000.0 + HELD_QUIET, lambda pid: 0.0)
    assert state.live == {}

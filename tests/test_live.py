"""`/api/events`: the rows that changed, as server-sent events: what a publish sends (only rows
that differ, merged per stream), resets, the cap on streams, and a real `serve` pushing a
change of a live index. How fast it comes is measured by `bench/latency.py`, not here."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from coding_agent_exporter.events import LiveIndexRead, SessionSeen
from coding_agent_exporter.state import state as state_module
from coding_agent_exporter.state.labels import ProjectLabel
from coding_agent_exporter.state.state import State
from coding_agent_exporter.web import live
from coding_agent_exporter.web.live import Feed

from .backends import run_exporter, write_index
from .conftest import FIXTURES, expected

A = "claude-code"
DEADLINE = 30.0
"""How long a real `serve` may take to push a change (it takes milliseconds; the machine may be
loaded). Each read of the stream is bounded too: the socket's own timeout."""


def seen(state: State, session: str, at: float = 100.0) -> None:
    state.apply(A, SessionSeen(session_id=session, at=at, cwd="/home/u/app"))


def event(chunk: bytes) -> tuple[str, dict[str, Any]]:
    lines = chunk.decode().strip().splitlines()
    name = next(line.removeprefix("event: ") for line in lines if line.startswith("event: "))
    data = next(line.removeprefix("data: ") for line in lines if line.startswith("data: "))
    return name, json.loads(data)


@pytest.fixture
def fed() -> tuple[State, Feed, Generator[bytes, None, None]]:
    state, feed = State(), Feed(ProjectLabel())
    feed.publish(state, reset=True, ready=True)  # the catch-up
    stream = feed.stream()
    assert stream is not None
    name, hello = event(next(stream))
    assert (name, hello) == ("hello", {"generation": 1, "ready": True})
    return state, feed, stream


def test_a_changed_row_is_sent_once(fed: tuple[State, Feed, Any]) -> None:
    state, feed, stream = fed
    seen(state, "s1")
    feed.publish(state)
    name, doc = event(next(stream))
    assert name == "rows" and [r["session_id"] for r in doc["rows"]] == ["s1"]
    feed.publish(state)  # nothing new
    seen(state, "s1")  # told again, the row is the same
    feed.publish(state)
    assert feed.generation == doc["generation"]
    seen(state, "s1", at=200.0)  # its last activity moved
    feed.publish(state)
    name, doc = event(next(stream))
    assert doc["rows"][0]["updated_at"].startswith("1970-01-01T00:03:20")


def test_publishes_a_stream_missed_come_as_one_event(fed: tuple[State, Feed, Any]) -> None:
    state, feed, stream = fed
    for session in ("a", "b", "c"):
        seen(state, session)
        feed.publish(state)
    name, doc = event(next(stream))
    assert name == "rows" and sorted(r["session_id"] for r in doc["rows"]) == ["a", "b", "c"]


def test_a_live_session_that_changes_state_is_sent(fed: tuple[State, Feed, Any]) -> None:
    state, feed, stream = fed
    seen(state, "s1")
    for status in ("busy", "waiting"):
        state.apply(
            A,
            LiveIndexRead(
                pid=10, session_id="s1", started_at=50.0, status=status, status_at=120.0,
                reason="permission prompt" if status == "waiting" else None, source="s/10.json",
            ),
        )  # fmt: skip
        state.refresh(130.0, lambda pid: 50.0)
        feed.publish(state)
        (row,) = event(next(stream))[1]["rows"]
        assert row["state"] == ("running" if status == "busy" else "needs_user")
    state.refresh(130.0, lambda pid: None)  # its process is gone: nothing read, still a change
    feed.publish(state)
    assert event(next(stream))[1]["rows"][0]["state"] == "ended"


def test_a_stream_too_far_behind_or_a_new_state_is_reset(fed: tuple[State, Feed, Any]) -> None:
    state, feed, stream = fed
    for n in range(live.KEEP + 1):
        seen(state, f"s{n}")
        feed.publish(state)
    assert event(next(stream))[0] == "reset"
    feed.publish(State())  # a state rebuilt from the files (`App.rebuild`)
    assert event(next(stream))[0] == "reset"


def test_more_sessions_told_of_than_are_kept_apart_is_a_reset(
    fed: tuple[State, Feed, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catch-up names every session of history: past `MAX_TOUCHED` the state forgets which
    (it would keep a key per session while no console takes them) and the streams are reset."""
    state, feed, stream = fed
    monkeypatch.setattr(state_module, "MAX_TOUCHED", 3)
    monkeypatch.setattr(state_module, "DOZE_EVERY", 1)
    for n in range(5):
        seen(state, f"s{n}")
    assert len(state.touched) <= 4
    feed.publish(state)
    assert event(next(stream))[0] == "reset"
    seen(state, "s9")
    assert state.take_touched() == {("claude-code", "s9")}


def test_streams_are_capped_and_end_when_the_feed_closes(
    fed: tuple[State, Feed, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, feed, stream = fed
    monkeypatch.setattr(live, "MAX_STREAMS", 2)
    other = feed.stream()
    assert other is not None and feed.stream() is None
    next(other)
    feed.close()
    assert list(stream) == [] and list(other) == []
    assert feed.streams == 0


def test_nothing_is_made_while_no_stream_is_open() -> None:
    state, feed = State(), Feed(ProjectLabel())
    feed.publish(state, reset=True)
    seen(state, "s1")
    feed.publish(state)
    assert feed.generation == 1 and not state.touched


def test_serve_pushes_a_live_index_change(tmp_path: Path, probes: str) -> None:
    """A real `serve` over a recorded home: a stream open on /api/events gets the session's
    row once its live index says it waits for the user, with the reason and since when."""
    scenario = FIXTURES / "claude-code" / "2.1.332" / "print-tool"
    home = tmp_path / "claude"
    shutil.copytree(scenario / "home", home)
    (home / "sessions").mkdir(exist_ok=True)
    session = expected(scenario)["sessions"][0]["session_id"]
    agent = subprocess.Popen(["sleep", "300"])  # stands in for the agent's process
    try:
        write_index(home, agent, session, status="busy")
        with (
            run_exporter(home, tmp_path) as url,
            urllib.request.urlopen(f"{url}/api/events", timeout=20) as stream,
        ):
            assert stream.headers["Content-Type"].startswith("text/event-stream")
            assert read_event(stream) == b"retry: 2000\n\n"
            assert b"event: hello" in read_event(stream)
            write_index(home, agent, session, status="waiting", waitingFor="permission prompt")
            name, doc = wait_for_row(stream, session, "needs_user")
    finally:
        agent.kill()
        agent.wait()
    assert name == "rows"
    (row,) = (r for r in doc["rows"] if r["session_id"] == session)
    assert row["reason"] == "permission prompt" and row["state_since"] is not None


def read_event(stream: Any) -> bytes:
    chunk = b""
    while not chunk.endswith(b"\n\n"):
        line = stream.readline()
        assert line, "the stream ended"
        chunk += line
    return chunk


def wait_for_row(stream: Any, session: str, state: str) -> tuple[str, dict[str, Any]]:
    """Events until one carries `session` in `state`, for `DEADLINE` seconds at most: the
    stream's keep-alive comments (every 15 s) would keep a read loop without one going for
    ever, however long the socket's timeout."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        chunk = read_event(stream)
        if chunk.startswith(b":"):
            continue
        name, doc = event(chunk)
        rows = [r for r in doc.get("rows", []) if r["session_id"] == session]
        if rows and rows[0]["state"] == state:
            return name, doc
    raise AssertionError(f"no row of {session} in state {state} within {DEADLINE} s")

"""A live session's process killed with SIGKILL: the exporter notices the exit itself (pidfd, or
a poll where pidfds cannot be had), without waiting for a scrape. Real child processes; every
wait is a condition with a deadline."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coding_agent_exporter.events import LiveIndexRead, SessionSeen, ToolCallStarted, TurnStarted
from coding_agent_exporter.sources import platform
from coding_agent_exporter.sources.processes import process_start
from coding_agent_exporter.sources.procwatch import ProcessWatch, choose_waiter, pidfds_available
from coding_agent_exporter.state.state import State

from .backends import get, run_exporter, write_index
from .conftest import FIXTURES, missing_tool
from .otlp_sink import HttpSink

DEADLINE = 5.0
KILLED = FIXTURES / "claude-code" / "2.1.197" / "killed-mid-tool" / "home"
MODES = ["pidfd", "poll"]
"""The waiters run for real here: Linux's pidfd, and the portable look at the pids."""


def until(what: str, check: Callable[[], object], deadline: float = DEADLINE) -> None:
    """Wait on a condition that another thread makes true (no fixed sleep)."""
    done = threading.Event()
    end = time.monotonic() + deadline
    while not check():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        done.wait(0.01)


@pytest.fixture
def agent() -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in for an agent process: it runs until killed."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process
    process.kill()
    process.wait()


def killed(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait()  # the agent's parent collects it, as a shell would


class Exits:
    def __init__(self) -> None:
        self.reports: list[set[int]] = []
        self.lock = threading.Lock()

    def __call__(self, pids: set[int]) -> None:
        with self.lock:
            self.reports.append(pids)

    def seen(self) -> set[int]:
        with self.lock:
            return set().union(*self.reports)


def start(process: subprocess.Popen[bytes]) -> tuple[int, float | None]:
    return process.pid, process_start(process.pid)


@pytest.mark.parametrize("waiter", MODES)
def test_a_killed_process_is_reported_once(
    waiter: str, agent: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    if waiter == "pidfd" and not pidfds_available():
        missing_tool("no pidfd on this kernel")
    exits = Exits()
    watch = ProcessWatch(exits, waiter=waiter, poll=0.05)
    watch.start()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        first, second = start(agent), start(other)
        watch.watch([first, second])
        killed(agent)
        until("the exit reported", lambda: agent.pid in exits.seen())
        watch.watch([second, first])  # the first still named by its stale index entry
        killed(other)
        until("the second exit reported", lambda: other.pid in exits.seen())
        assert exits.reports == [{agent.pid}, {other.pid}]  # each exit once
    finally:
        other.kill()
        other.wait()
        watch.stop()


def test_a_process_gone_before_it_is_watched_is_reported(
    agent: subprocess.Popen[bytes],
) -> None:
    exits = Exits()
    watch = ProcessWatch(exits)
    watch.start()
    try:
        named = start(agent)
        killed(agent)
        watch.watch([named])
        until("the exit reported", lambda: exits.seen() == {agent.pid})
    finally:
        watch.stop()


def test_a_process_no_longer_named_is_not_reported(agent: subprocess.Popen[bytes]) -> None:
    exits = Exits()
    watch = ProcessWatch(exits, poll=0.05)
    watch.start()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        watch.watch([start(agent)])
        watch.watch([start(other)])  # the agent removed its index entry: it exits normally
        killed(agent)
        killed(other)
        until("the named exit reported", lambda: other.pid in exits.seen())
        assert exits.seen() == {other.pid}
    finally:
        other.kill()
        other.wait()
        watch.stop()


@pytest.mark.parametrize(("probes", "waiter"), [("auto", "pidfd"), ("portable", "poll")])
def test_the_probes_choose_the_waiter(
    probes: str, waiter: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if probes == "auto" and not pidfds_available():
        pytest.skip("no pidfd on this kernel")
    monkeypatch.setattr(platform, "_chosen", platform.detect(probes))
    assert choose_waiter() == waiter
    for name, system in (("kqueue", "darwin"), ("win32", "win32")):
        monkeypatch.setattr(platform, "_chosen", platform.detect("auto", system))
        assert choose_waiter() == name


def test_a_zombie_is_not_a_running_process(agent: subprocess.Popen[bytes]) -> None:
    assert process_start(agent.pid) is not None
    agent.send_signal(signal.SIGKILL)
    until("a zombie", lambda: _zombie(agent.pid))
    assert process_start(agent.pid) is None
    agent.wait()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return False


@pytest.mark.parametrize("waiter", MODES)
def test_the_exit_ends_the_turn_without_a_scrape(
    waiter: str, agent: subprocess.Popen[bytes]
) -> None:
    """State level: the session is live with an open turn and tool; its process is killed; the
    watch's callback alone makes it not live, the turn interrupted, the tool cancelled."""
    state = State()
    now = time.time()
    state.apply("claude-code", SessionSeen(session_id="s", at=now, cwd="/w"))
    state.apply("claude-code", TurnStarted(session_id="s", at=now, record_id="u1"))
    state.apply("claude-code", ToolCallStarted(session_id="s", at=now, call_id="t", tool="Bash"))
    pid, started = start(agent)
    entry = LiveIndexRead(pid=pid, session_id="s", started_at=started, status="busy", source="i")
    state.apply("claude-code", entry)

    def refresh(pids: set[int]) -> None:
        with state.lock:
            state.refresh(time.time(), process_start)

    refresh(set())
    assert ("claude-code", "s") in state.live
    watch = ProcessWatch(refresh, waiter=waiter, poll=0.05)
    watch.start()
    try:
        watch.watch([(pid, started)])
        killed(agent)
        at = time.monotonic()
        until("the session not live", lambda: ("claude-code", "s") not in state.live)
        print(f"{waiter}: not live {1000 * (time.monotonic() - at):.0f} ms")
        with state.lock:
            assert state.sessions[("claude-code", "s")].turns == {"interrupted": 1}
            assert state.totals.tool_calls[("claude-code", "Bash", "cancelled")] == 1
    finally:
        watch.stop()


def now_journal(home: Path) -> str:
    """The recorded journal with its timestamps moved to now; its session id."""
    (journal,) = home.glob("projects/*/*.jsonl")
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    stamps = [datetime.fromisoformat(r["timestamp"]).timestamp() for r in records]
    shift = time.time() - min(stamps)
    for record, stamp in zip(records, stamps, strict=True):
        record["timestamp"] = datetime.fromtimestamp(stamp + shift, UTC).isoformat()
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))
    return journal.stem


def test_serve_ends_a_killed_sessions_turn_without_a_scrape(
    probes: str, agent: subprocess.Popen[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End to end: Claude Code killed mid-tool (recorded), its index entry left behind. With no
    scrape at all, the turn's trace arrives, ended interrupted with its tool cancelled; with
    Linux's own probes (pidfd) and with the portable ones (psutil's look at the pid)."""
    home = tmp_path / "claude"
    shutil.copytree(KILLED, home)
    for stale in (home / "sessions").glob("*.json"):
        stale.unlink()
    session_id = now_journal(home)
    write_index(home, agent, session_id, status="busy")
    sink = HttpSink()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    try:
        with run_exporter(home, tmp_path, "--traces.backfill", "all") as url:
            assert not any(s.name.startswith("invoke_agent") for s in sink.spans)  # turn open
            killed(agent)
            until("the turn's span", lambda: any(s.parent_id == "" for s in sink.spans))
            spans = {s.name: s for s in sink.spans}
            root = spans["invoke_agent claude-code"]
            assert root.attributes["coding_agent.turn.outcome"] == "interrupted"
            assert spans["execute_tool Bash"].attributes["error.type"] == "cancelled"
            text = get(url + "/metrics")[1]
            assert "coding_agent_session_state{" not in text
            assert 'turns_total{agent="claude-code",outcome="interrupted",' in text
            assert 'tool_calls_total{agent="claude-code",outcome="cancelled",tool="Bash"} 1' in text
    finally:
        sink.close()

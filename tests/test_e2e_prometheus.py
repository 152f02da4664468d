"""End to end: `coding-agent-exporter serve` on a recorded home, scraped by a real Prometheus.

A `sleep` process stands in for a running Claude Code: its pid and start time go into the live
index, so the liveness check sees a real process. The test then rewrites the index the way the
CLI does when a permission prompt opens, and kills the process, and reads the result back
through Prometheus' HTTP API. Needs Debian's `prometheus` package (.ci/run installs it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .backends import (
    get,
    prometheus_config,
    query,
    run_exporter,
    run_prometheus,
    wait_for,
    write_index,
)
from .conftest import FIXTURES, expected

SCENARIO = FIXTURES / "claude-code" / "2.1.332" / "subagent-background"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "claude"
    shutil.copytree(SCENARIO / "home" / "projects", home / "projects")
    (home / "sessions").mkdir()
    return home


@pytest.fixture
def agent_process() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "300"])
    yield process
    process.kill()
    process.wait()


@pytest.fixture
def exporter(home: Path, tmp_path: Path, probes: str) -> Iterator[str]:
    """`serve` with this system's own probes, then with the portable ones (macOS/Windows)."""
    with run_exporter(home, tmp_path) as url:
        yield url


@pytest.fixture
def prometheus(exporter: str, tmp_path: Path) -> Iterator[str]:
    target = exporter.removeprefix("http://")
    with run_prometheus(tmp_path, prometheus_config(target)) as url:
        yield url


def test_prometheus_sees_history_and_a_session_that_starts_waiting(
    home: Path, agent_process: subprocess.Popen[bytes], exporter: str, prometheus: str
) -> None:
    facts = expected(SCENARIO)
    session_id = facts["sessions"][0]["session_id"]

    wait_for("first scrape", lambda: query(prometheus, 'up{job="exporter"} == 1'))
    tokens = wait_for("tokens", lambda: query(prometheus, "sum(coding_agent_tokens_total)"))
    assert float(tokens[0]["value"][1]) == sum(facts["home"]["tokens"].values())
    messages = query(prometheus, "sum(coding_agent_messages_total)")
    assert float(messages[0]["value"][1]) == facts["home"]["messages"]
    assert query(prometheus, 'coding_agent_subagents_total{outcome="completed"} == 1')

    # a new session file appears, written in two pieces that split a line
    (journal,) = (FIXTURES / "claude-code" / "2.1.197" / "print-answer" / "home").glob(
        "projects/*/*.jsonl"
    )
    data = journal.read_bytes()
    target = home / "projects" / journal.parent.name / journal.name
    target.write_bytes(data[: len(data) // 2])
    with target.open("ab") as f:
        f.write(data[len(data) // 2 :])
    wait_for("second session", lambda: query(prometheus, "sum(coding_agent_sessions_total) == 2"))
    assert (
        query(prometheus, "sum(coding_agent_exporter_parse_errors_total) or vector(0)")[0]["value"][
            1
        ]
        == "0"
    )

    write_index(home, agent_process, session_id, status="busy")
    running = wait_for(
        "running session",
        lambda: query(prometheus, 'coding_agent_session_state{state="running"} == 1'),
    )
    assert running[0]["metric"]["session_id"] == session_id
    assert running[0]["metric"]["project"] == "/home/user/work/shop-api"

    write_index(home, agent_process, session_id, status="waiting", waitingFor="permission prompt")
    waiting = wait_for(
        "needs_user",
        lambda: query(prometheus, 'coding_agent_session_state{state="needs_user"} == 1'),
    )
    assert waiting[0]["metric"]["reason"] == "permission prompt"
    assert query(prometheus, 'coding_agent_sessions{state="needs_user"} == 1')

    agent_process.kill()  # the process dies without removing its index: stale, not live
    agent_process.wait()
    wait_for(
        "stale index dropped",
        lambda: query(prometheus, 'coding_agent_sessions{state="needs_user"} == 0'),
    )
    status, page = get(exporter + "/api/sessions")
    assert status == 200 and json.loads(page)["total"] == 0  # what the console lists
    status, page = get(exporter + "/")
    assert status == 200 and "<html" in page
    assert get(exporter + "/-/healthy")[0] == 200
    assert get(exporter + "/nope")[0] == 404


def test_prometheus_sees_a_live_codex_thread(tmp_path: Path) -> None:
    """A process named codex holds a rollout whose turn is open: a running Codex session; when
    the turn ends it is idle; when the process exits it is gone. History counts as well."""
    from .backends import holding
    from .test_codex_live import RECORDED, now_lines

    (recorded,) = RECORDED.glob("sessions/*/*/*/rollout-*.jsonl")
    codex_home = tmp_path / "codex"
    rollout = codex_home / recorded.relative_to(RECORDED)
    rollout.parent.mkdir(parents=True)
    lines = now_lines(recorded)
    ended = next(i for i, line in enumerate(lines) if '"task_complete"' in line)
    rollout.write_text("\n".join(lines[:ended]) + "\n")
    holder = subprocess.Popen(holding(rollout, "codex"), stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    try:
        with (
            run_exporter(tmp_path / "claude", tmp_path, codex_home=codex_home) as exporter,
            run_prometheus(tmp_path, prometheus_config(exporter.removeprefix("http://"))) as prom,
        ):
            running = 'coding_agent_session_state{agent="codex",state="running"} == 1'
            (series,) = wait_for("running codex thread", lambda: query(prom, running))
            assert series["metric"]["project"] == "/home/user/work/shop-api"
            assert query(prom, 'sum(coding_agent_tokens_total{agent="codex"}) > 0')
            with rollout.open("a") as f:
                f.write("\n".join(lines[ended:]) + "\n")
            idle = 'coding_agent_session_state{agent="codex",state="idle"} == 1'
            wait_for("idle codex thread", lambda: query(prom, idle))
            holder.kill()
            holder.wait()
            gone = 'sum(coding_agent_sessions{agent="codex"}) == 0'
            wait_for("thread no longer live", lambda: query(prom, gone))
            assert query(prom, 'coding_agent_turns_total{agent="codex",outcome="completed"} == 1')
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_prometheus_sees_a_vibe_session_wait_for_approval(tmp_path: Path) -> None:
    """The copies of a real Vibe 3.0.2 TUI session, written in order under a running exporter: an
    approval dialog is needs_user (tool bash), the next turn runs, `/exit` ends it; the session's
    lock names a live process (a `sleep` standing in for Vibe)."""
    import json
    from datetime import UTC, datetime

    from .test_vibe import VIBE, sessions_of, steps, sync

    scenario = VIBE / "3.0.2" / "tui"
    vibe_home = tmp_path / ".vibe"
    folder = vibe_home / "logs" / "session"
    folder.mkdir(parents=True)
    stand_in = subprocess.Popen(["sleep", "300"])

    def replay(step: Path) -> None:
        sync(folder, step)
        for lock in folder.glob("active/*.lock.json"):
            doc = json.loads(lock.read_text())
            doc["process_id"] = stand_in.pid
            doc["acquired_at"] = datetime.now(UTC).isoformat()
            lock.write_text(json.dumps(doc))

    try:
        with (
            run_exporter(tmp_path / "claude", tmp_path, "--vibe.home", str(vibe_home)) as exporter,
            run_prometheus(tmp_path, prometheus_config(exporter.removeprefix("http://"))) as prom,
        ):
            approval, _, running, _, final = steps(scenario)
            replay(approval)
            waiting = 'coding_agent_session_state{agent="vibe",state="needs_user"} == 1'
            (series,) = wait_for("vibe waits for approval", lambda: query(prom, waiting))
            assert series["metric"]["reason"] == "bash"
            replay(running)
            busy = 'coding_agent_session_state{agent="vibe",state="running"} == 1'
            wait_for("vibe runs the next turn", lambda: query(prom, busy))
            replay(final)
            assert final == sessions_of(scenario)
            gone = 'sum(coding_agent_sessions{agent="vibe"}) == 0'
            wait_for("vibe exited", lambda: query(prom, gone))
            facts = expected(scenario)["home"]
            total = 'sum(coding_agent_tokens_total{agent="vibe"})'
            (tokens,) = wait_for("vibe tokens", lambda: query(prom, f"{total} > 0"))
            assert float(tokens["value"][1]) == sum(facts["tokens"].values())
            turns = 'sum(coding_agent_turns_total{agent="vibe"})'
            assert float(query(prom, turns)[0]["value"][1]) == 4
    finally:
        stand_in.kill()
        stand_in.wait()

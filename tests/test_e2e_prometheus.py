"""End to end: `coding-agent-exporter serve` on a recorded home, scraped by a real Prometheus.

A `sleep` process stands in for a running Claude Code: its pid and start time go into the live
index, so the liveness check sees a real process. The test then rewrites the index the way the
CLI does when a permission prompt opens, and kills the process, and reads the result back
through Prometheus' HTTP API. Needs Debian's `prometheus` package (.ci/run installs it).
"""

from __future__ import annotations

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
def exporter(home: Path, tmp_path: Path) -> Iterator[str]:
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
    status, page = get(exporter + "/")
    assert status == 200 and "No live sessions" in page
    assert get(exporter + "/-/healthy")[0] == 200
    assert get(exporter + "/nope")[0] == 404

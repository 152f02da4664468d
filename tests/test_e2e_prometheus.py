"""End to end: `coding-agent-exporter serve` on a recorded home, scraped by a real Prometheus.

A `sleep` process stands in for a running Claude Code: its pid and start time go into the live
index, so the liveness check sees a real process. The test then rewrites the index the way the
CLI does when a permission prompt opens, and kills the process, and reads the result back
through Prometheus' HTTP API. Needs Debian's `prometheus` package (.ci/run installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from .conftest import FIXTURES, expected

SCENARIO = FIXTURES / "claude-code" / "2.1.332" / "subagent-background"
DEADLINE = 45.0  # Prometheus 2.42 takes ~6 s to its first scrape


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def wait_for(what: str, check: Callable[[], Any]) -> Any:
    """Poll until `check()` returns something truthy (a bounded wait on another process)."""
    deadline = time.monotonic() + DEADLINE
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except OSError as error:
            last = error
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


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
    port = free_port()
    log = (tmp_path / "exporter.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exporter",
            "serve",
            "--claude.home",
            str(home),
            "--web.listen-address",
            f"127.0.0.1:{port}",
            "--log.level",
            "debug",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for("exporter ready", lambda: get(url + "/-/ready")[0] == 200)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=10)
        log.close()
        assert code == 0, (tmp_path / "exporter.log").read_text()


@pytest.fixture
def prometheus(exporter: str, tmp_path: Path) -> Iterator[str]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus not found: install Debian's prometheus package (.ci/run does)"
    port = free_port()
    config = tmp_path / "prometheus.yml"
    target = exporter.removeprefix("http://")
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: exporter\n    static_configs: [{{targets: ['{target}']}}]\n"
    )
    with (tmp_path / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for("prometheus ready", lambda: get(url + "/-/ready")[0] == 200)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=20)


def query(prometheus: str, expr: str) -> list[dict[str, Any]]:
    status, body = get(prometheus + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert status == 200, body
    result: list[dict[str, Any]] = json.loads(body)["data"]["result"]
    return result


def write_index(
    home: Path, process: subprocess.Popen[bytes], session_id: str, **status: str
) -> None:
    started_ms = int(psutil.Process(process.pid).create_time() * 1000)
    doc = {
        "pid": process.pid,
        "sessionId": session_id,
        "cwd": "/home/user/work/shop-api",
        "startedAt": started_ms,
        "kind": "interactive",
        "entrypoint": "cli",
        "name": "shop-api-1",
        "updatedAt": started_ms,
        "statusUpdatedAt": started_ms,
        **status,
    }
    path = home / "sessions" / f"{process.pid}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)  # the way an agent rewrites its index


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

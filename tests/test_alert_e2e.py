"""A live "needs you" alert: exporter → Prometheus → Alertmanager → a webhook in this test.

A `sleep` process stands in for a running Claude Code on a recorded session. Its live index says
"busy", then turns to "waiting" for a permission prompt, the way the CLI rewrites it. The shipped
rule files are loaded with one change, `for: 5s` instead of `for: 1m` on CodingAgentNeedsYou, and
Alertmanager (Debian's prometheus-alertmanager) posts to a webhook server run by the test: the
alert arrives naming the agent, project, session and reason, then resolves when the process dies.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from .backends import (
    prometheus_config,
    query,
    run_alertmanager,
    run_exporter,
    run_prometheus,
    wait_for,
    write_index,
)
from .conftest import FIXTURES, ROOT, expected

SCENARIO = FIXTURES / "claude-code" / "2.1.332" / "subagent-background"
RULES = ROOT / "dashboards" / "prometheus" / "rules"
pytestmark = pytest.mark.timeout(300)  # Prometheus, Alertmanager, a `for:` and waits of 45 s each


@pytest.fixture
def webhook() -> Iterator[tuple[str, queue.Queue[dict[str, Any]]]]:
    received: queue.Queue[dict[str, Any]] = queue.Queue()

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.put(json.loads(body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/alerts", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def short_rules(tmp_path: Path) -> list[Path]:
    """The shipped rules, with CodingAgentNeedsYou waiting 5 s instead of a minute."""
    alerts = yaml.safe_load((RULES / "alerts.yml").read_text())
    (rule,) = (
        r for g in alerts["groups"] for r in g["rules"] if r.get("alert") == "CodingAgentNeedsYou"
    )
    assert rule["for"] == "1m"
    rule["for"] = "5s"
    path = tmp_path / "alerts.yml"
    path.write_text(yaml.safe_dump(alerts))
    return [RULES / "recording.yml", path]


def next_notification(received: queue.Queue[dict[str, Any]], status: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        try:
            payload = received.get(timeout=0.5)
        except queue.Empty:
            return None
        return payload if payload["status"] == status else None

    result: dict[str, Any] = wait_for(f"a {status} notification", check)
    return result


def test_needs_you_reaches_the_webhook(
    tmp_path: Path, webhook: tuple[str, queue.Queue[dict[str, Any]]]
) -> None:
    url, received = webhook
    home = tmp_path / "claude"
    shutil.copytree(SCENARIO / "home" / "projects", home / "projects")
    (home / "sessions").mkdir()
    session_id = expected(SCENARIO)["sessions"][0]["session_id"]
    am_config = (
        "route: {receiver: hook, group_by: [alertname, session_id],"
        " group_wait: 1s, group_interval: 1s, repeat_interval: 1h}\n"
        f"receivers: [{{name: hook, webhook_configs: [{{url: '{url}', send_resolved: true}}]}}]\n"
    )
    agent = subprocess.Popen(["sleep", "300"])
    try:
        with (
            run_exporter(home, tmp_path) as exporter,
            run_alertmanager(tmp_path, am_config) as alertmanager,
        ):
            config = prometheus_config(
                exporter.removeprefix("http://"),
                job="coding-agents",
                rule_files=short_rules(tmp_path),
                alertmanager=alertmanager.removeprefix("http://"),
            )
            with run_prometheus(tmp_path, config) as prometheus:
                write_index(home, agent, session_id, status="busy")
                wait_for(
                    "running session",
                    lambda: query(prometheus, 'coding_agent_session_state{state="running"}'),
                )
                assert received.empty()

                write_index(
                    home, agent, session_id, status="waiting", waitingFor="permission prompt"
                )
                firing = next_notification(received, "firing")
                (alert,) = firing["alerts"]
                labels = alert["labels"]
                assert labels["alertname"] == "CodingAgentNeedsYou"
                assert labels["severity"] == "warning"
                assert labels["session_id"] == session_id
                assert labels["reason"] == "permission prompt"
                assert labels["project"] == "/home/user/work/shop-api"
                assert alert["annotations"]["summary"] == (
                    "claude-code needs you in /home/user/work/shop-api (permission prompt)"
                )
                assert session_id in alert["annotations"]["description"]

                agent.kill()  # the session stops being live: the alert resolves
                agent.wait()
                resolved = next_notification(received, "resolved")
                assert resolved["alerts"][0]["labels"]["session_id"] == session_id
    finally:
        agent.kill()
        agent.wait()

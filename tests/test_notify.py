"""`coding-agent-exporter notify`: Alertmanager's webhook as desktop notifications. A real
Alertmanager (Debian's) posts to the command run as a process; a stand-in for `notify-send`
records what it was asked to show."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from coding_agent_exporter.web.notify import NotifyServer, alerts_of

from .backends import free_port, run_alertmanager, wait_for

FIRING = {
    "version": "4",
    "status": "firing",
    "alerts": [
        {
            "status": "firing",
            "labels": {"alertname": "CodingAgentNeedsYou", "session_id": "s1"},
            "annotations": {
                "summary": "claude-code needs you in ~/shop (permission prompt)",
                "description": "session s1 has waited 1m",
            },
        },
        {"status": "resolved", "labels": {"alertname": "CodingAgentStalled"}, "annotations": {}},
    ],
}


def test_each_alert_is_a_title_and_a_body() -> None:
    assert alerts_of(FIRING) == [
        ("claude-code needs you in ~/shop (permission prompt)", "session s1 has waited 1m"),
        ("Resolved: CodingAgentStalled", ""),
    ]
    with pytest.raises(ValueError, match="not an Alertmanager webhook payload"):
        alerts_of({"hello": 1})


def test_the_server_notifies_each_alert_and_refuses_what_is_no_payload() -> None:
    shown: list[tuple[str, str]] = []
    server = NotifyServer(("127.0.0.1", 0), lambda title, body: shown.append((title, body)))
    url = f"http://127.0.0.1:{server.server_address[1]}/alerts"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        post = urllib.request.Request(url, json.dumps(FIRING).encode(), method="POST")
        with urllib.request.urlopen(post, timeout=5) as reply:
            assert reply.status == 200
        assert shown == alerts_of(FIRING)
        bad = urllib.request.Request(url, b"[1, 2]", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(bad, timeout=5)
        assert refused.value.code == 400
        refused.value.close()
    finally:
        server.shutdown()
        server.server_close()


def test_alertmanager_reaches_the_desktop_through_notify(tmp_path: Path) -> None:
    shown = tmp_path / "shown.jsonl"
    stand_in = tmp_path / "notify-send"
    stand_in.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(shown)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    stand_in.chmod(0o755)
    port = free_port()
    log = tmp_path / "notify.log"
    with log.open("wb") as out:
        notify = subprocess.Popen(
            [
                *(sys.executable, "-m", "coding_agent_exporter", "notify"),
                *(
                    "--notify.listen-address",
                    f"127.0.0.1:{port}",
                    "--notify.command",
                    str(stand_in),
                ),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HOME": str(tmp_path)},
        )
    try:
        wait_for("notify listening", lambda: "webhook at" in log.read_text())
        config = (
            "route: {receiver: desktop, group_wait: 0s, group_interval: 1s, repeat_interval: 1h}\n"
            "receivers: [{name: desktop, webhook_configs: "
            f"[{{url: 'http://127.0.0.1:{port}/alerts', send_resolved: true}}]}}]\n"
        )
        with run_alertmanager(tmp_path, config) as alertmanager:
            alert = [
                {
                    "labels": {"alertname": "CodingAgentNeedsYou", "session_id": "s1"},
                    "annotations": {"summary": "claude-code needs you", "description": "s1"},
                }
            ]
            post = urllib.request.Request(
                alertmanager + "/api/v2/alerts",
                json.dumps(alert).encode(),
                headers={"Content-Type": "application/json"},
                method="POST",
            )
            urllib.request.urlopen(post, timeout=5).close()
            wait_for("a notification", lambda: shown.exists() and shown.read_text())
        assert json.loads(shown.read_text().splitlines()[0]) == ["claude-code needs you", "s1"]
        assert "alert: claude-code needs you — s1" in log.read_text()
    finally:
        notify.send_signal(signal.SIGTERM)
        assert notify.wait(timeout=10) == 0

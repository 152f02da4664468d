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

from coding_agent_exporter.runtime.config import parse
from coding_agent_exporter.sources import platform
from coding_agent_exporter.web.notify import (
    BODY_VARIABLE,
    TITLE_VARIABLE,
    TOAST,
    NotifyServer,
    alerts_of,
    invocation,
)

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
        first = json.loads(shown.read_text().splitlines()[0])
        assert first == ["--app-name", "coding-agent-exporter", "claude-code needs you", "s1"]
        assert "alert: claude-code needs you — s1" in log.read_text()
    finally:
        notify.send_signal(signal.SIGTERM)
        assert notify.wait(timeout=10) == 0


HOSTILE = ('He said "hi" & left; $(touch pwned) `id`', "-e do shell script \"id\"\nline 2 'q' \\")
"""A title and body that would run something if any of it were parsed by a shell, AppleScript
or PowerShell, or taken for an option."""


def test_each_system_s_notifier_gets_the_alert_as_its_own_arguments() -> None:
    title, body = HOSTILE
    argv, extra = invocation(["/usr/bin/notify-send"], title, body)
    assert argv == ["/usr/bin/notify-send", "--app-name", "coding-agent-exporter", title, body]
    assert extra == {}
    argv, extra = invocation(["/usr/bin/osascript"], title, body)
    assert argv == [
        *("/usr/bin/osascript", "-e", "on run argv"),
        *("-e", "display notification (item -1 of argv) with title (item -2 of argv)"),
        *("-e", "end run", "--", title, body),
    ]
    assert extra == {}
    shell = "C:\\Windows\\System32\\WindowsPowerShell\\v1.0\\powershell.exe"
    argv, extra = invocation([shell], title, body)
    assert argv == [shell, "-NoProfile", "-NonInteractive", "-Command", TOAST]
    assert extra == {TITLE_VARIABLE: title, BODY_VARIABLE: body}
    assert title not in TOAST and "$env:CAE_NOTIFY_TITLE" in TOAST
    assert invocation(["/opt/bin/my-notifier"], title, body) == (
        ["/opt/bin/my-notifier", title, body],
        {},
    )


@pytest.mark.parametrize(
    ("system", "command"),
    [("linux", "notify-send"), ("darwin", "osascript"), ("windows", "powershell")],
)
def test_the_default_command_is_the_system_s_own(
    system: str, command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(platform, "_chosen", platform.detect(name=system))
    assert parse(["notify"], {"HOME": str(tmp_path)}).notify_command == command
    flagged = parse(["notify", "--notify.command", "x"], {"HOME": str(tmp_path)})
    assert flagged.notify_command == "x"
    variable = {"HOME": str(tmp_path), "CODING_AGENT_EXPORTER_NOTIFY_COMMAND": ""}
    assert parse(["notify"], variable).notify_command == ""


def stand_in(folder: Path, name: str, shown: Path) -> None:
    """A program named `name` that records its argv and the toast's two variables."""
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"env = {{k: os.environ.get(k) for k in ({TITLE_VARIABLE!r}, {BODY_VARIABLE!r})}}\n"
        f"open({str(shown)!r}, 'a').write(json.dumps([sys.argv[1:], env]) + '\\n')\n"
    )
    path.chmod(0o755)


@pytest.mark.parametrize("name", ["osascript", "powershell"])
def test_the_macos_and_windows_commands_run_with_the_text_intact(name: str, tmp_path: Path) -> None:
    """`notify --notify.command osascript|powershell` as a real process, the program found on
    PATH (a stand-in recording what it got), a webhook posted to it: the alert's text arrives
    byte for byte, as arguments (osascript) or variables (PowerShell), never in a script."""
    shown = tmp_path / "shown.jsonl"
    stand_in(tmp_path / "bin", name, shown)
    port = free_port()
    log = tmp_path / "notify.log"
    path = f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"
    with log.open("wb") as out:
        notify = subprocess.Popen(
            [
                *(sys.executable, "-m", "coding_agent_exporter", "notify"),
                *("--notify.listen-address", f"127.0.0.1:{port}", "--notify.command", name),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HOME": str(tmp_path), "PATH": path},
            cwd=tmp_path,  # where `$(touch pwned)` would leave its file
        )
    try:
        wait_for("notify listening", lambda: "webhook at" in log.read_text())
        title, body = HOSTILE
        alert = {"labels": {}, "annotations": {"summary": title, "description": body}}
        payload = json.dumps({"version": "4", "alerts": [alert]}).encode()
        post = urllib.request.Request(f"http://127.0.0.1:{port}/alerts", payload, method="POST")
        urllib.request.urlopen(post, timeout=5).close()
        wait_for("a notification", lambda: shown.exists() and shown.read_text())
        argv, env = json.loads(shown.read_text().splitlines()[0])
        expected, extra = invocation([str(tmp_path / "bin" / name)], title, body)
        assert argv == expected[1:]
        assert env == {
            TITLE_VARIABLE: extra.get(TITLE_VARIABLE),
            BODY_VARIABLE: extra.get(BODY_VARIABLE),
        }
        assert not (tmp_path / "pwned").exists()
    finally:
        notify.send_signal(signal.SIGTERM)
        assert notify.wait(timeout=10) == 0

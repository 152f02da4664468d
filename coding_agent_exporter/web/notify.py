"""`coding-agent-exporter notify`: Alertmanager's webhook, turned into desktop notifications.

Alertmanager posts each group of alerts as JSON (webhook payload version 4) to a URL; this small
server takes any POST, and for every alert in it runs the notification command (`notify-send`
by default, on a Linux desktop) with the alert's summary as the title and its description as the
body ("Resolved: " before the title once it resolved), and logs one line per alert. With no
command (none found, or `--notify.command ''`), the log line is the notification. It reads
nothing else and sends nothing anywhere: the alerts' text comes from the bundled rules (agent,
project, session, reason: never a prompt). It listens on 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

log = logging.getLogger(__name__)
MAX_BODY = 1024 * 1024
TIMEOUT = 10.0
Notify = Callable[[str, str], None]


def alerts_of(payload: object) -> list[tuple[str, str]]:
    """(title, body) per alert of a webhook payload; `ValueError` if it is not one."""
    if not isinstance(payload, dict) or not isinstance(payload.get("alerts"), list):
        raise ValueError("not an Alertmanager webhook payload (no alerts list)")
    found = []
    for alert in payload["alerts"]:
        if not isinstance(alert, dict):
            continue
        labels, notes = _mapping(alert.get("labels")), _mapping(alert.get("annotations"))
        title = str(notes.get("summary") or labels.get("alertname") or "alert")
        if alert.get("status") == "resolved":
            title = f"Resolved: {title}"
        found.append((title, str(notes.get("description") or "")))
    return found


def _mapping(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def command_notifier(command: Sequence[str]) -> Notify:
    """Run `command TITLE BODY` for each alert (never through a shell)."""

    def notify(title: str, body: str) -> None:
        try:
            subprocess.run(
                [*command, title, body], check=True, timeout=TIMEOUT, capture_output=True
            )
        except (OSError, subprocess.SubprocessError) as error:
            log.warning("notify: %s failed: %s", command[0], error)

    return notify


def default_command(name: str) -> list[str] | None:
    """`notify-send` with this program's name, if it is installed; None for no command."""
    if not name:
        return None
    found = shutil.which(name)
    if found is None:
        log.warning("notify: %s not found: alerts are logged only", name)
        return None
    extra = ["--app-name", "coding-agent-exporter"] if name == "notify-send" else []
    return [found, *extra]


class NotifyServer(ThreadingHTTPServer):
    """Takes webhook POSTs on `address` and calls `notify` for each alert."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], notify: Notify | None) -> None:
        self.notify = notify
        self.lock = threading.Lock()  # one notification at a time, in arrival order
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: NotifyServer

    def do_POST(self) -> None:
        size = int(self.headers.get("Content-Length") or 0)
        if size > MAX_BODY:
            self._reply(413, "payload too large")
            return
        try:
            alerts = alerts_of(json.loads(self.rfile.read(size) or b"null"))
        except ValueError as error:
            self._reply(400, str(error))
            return
        with self.server.lock:
            for title, body in alerts:
                log.info("alert: %s%s", title, f" — {body}" if body else "")
                if self.server.notify is not None:
                    self.server.notify(title, body)
        self._reply(200, "ok")

    def _reply(self, code: int, text: str) -> None:
        data = (text + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass

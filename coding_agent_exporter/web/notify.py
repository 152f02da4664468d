"""`coding-agent-exporter notify`: Alertmanager's webhook, turned into desktop notifications.

Alertmanager posts each group of alerts as JSON (webhook payload version 4) to a URL; this small
server takes any POST, and for every alert in it shows the alert's summary as the title and its
description as the body ("Resolved: " before the title once it resolved), and logs one line per
alert. How it is shown depends on the system (`--notify.command`'s default, `DEFAULT_COMMAND`):

- Linux: `notify-send --app-name coding-agent-exporter TITLE BODY`.
- macOS: Notification Center, through `osascript`. The script is a constant that reads the title
  and body from its own arguments (`on run argv`), so no alert text is ever put inside an
  AppleScript string, and nothing could be interpolated.
- Windows: a toast, through Windows PowerShell (`powershell -NoProfile -NonInteractive
  -Command <a constant script>`). The title and body travel in two environment variables of
  that one process and become the toast's text nodes (`CreateTextNode`): never parsed as
  PowerShell, never as XML.

Any other program is run as `COMMAND TITLE BODY`. Nothing goes through a shell. With no command
(none found, or `--notify.command ''`), the log line is the notification. It reads nothing else
and sends nothing anywhere: the alerts' text comes from the bundled rules (agent, project,
session, reason: never a prompt). It listens on 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
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


DEFAULT_COMMAND = {"linux": "notify-send", "darwin": "osascript", "windows": "powershell"}
"""`--notify.command`'s default per system (`sources.platform.current().system`)."""

APP = "coding-agent-exporter"
TITLE_VARIABLE, BODY_VARIABLE = "CAE_NOTIFY_TITLE", "CAE_NOTIFY_BODY"
APPLESCRIPT = (
    "on run argv",
    "display notification (item -1 of argv) with title (item -2 of argv)",
    "end run",
)
"""`osascript -e` lines: the title and body are the script's last two arguments, never part of
its text (after `--`, so a title that starts with `-` is no option; counted from the end, so
the script reads them whether osascript passes `--` on or not)."""
TOAST_APP_ID = "{1AC14E77-02E7-4E5D-B744-2EB1AE5198B7}\\WindowsPowerShell\\v1.0\\powershell.exe"
"""The app a toast is shown as: Windows PowerShell's own id (an app must be registered to
toast; this one always is)."""
TOAST = "; ".join(
    (
        "$ErrorActionPreference = 'Stop'",
        "$m = [Windows.UI.Notifications.ToastNotificationManager, Windows.UI.Notifications,"
        " ContentType = WindowsRuntime]",
        "$x = $m::GetTemplateContent([Windows.UI.Notifications.ToastTemplateType]::ToastText02)",
        "$t = $x.GetElementsByTagName('text')",
        f"[void]$t.Item(0).AppendChild($x.CreateTextNode($env:{TITLE_VARIABLE}))",
        f"[void]$t.Item(1).AppendChild($x.CreateTextNode($env:{BODY_VARIABLE}))",
        "$n = [Windows.UI.Notifications.ToastNotification]::new($x)",
        f"$m::CreateToastNotifier('{TOAST_APP_ID}').Show($n)",
    )
)
"""The toast, in Windows PowerShell 5.1 (its WinRT type loading; PowerShell 7 has none)."""


def program(command: Sequence[str]) -> str:
    """What kind of program `command` runs: its file name, lower case, without `.exe`."""
    name = command[0].replace("\\", "/").rsplit("/", 1)[-1].lower()
    return name.removesuffix(".exe")


def invocation(command: Sequence[str], title: str, body: str) -> tuple[list[str], dict[str, str]]:
    """The argv that shows one alert with `command`, and the variables it needs set."""
    kind = program(command)
    if kind == "notify-send":
        return [*command, "--app-name", APP, title, body], {}
    if kind == "osascript":
        script = [arg for line in APPLESCRIPT for arg in ("-e", line)]
        return [*command, *script, "--", title, body], {}
    if kind == "powershell":
        run = ["-NoProfile", "-NonInteractive", "-Command", TOAST]
        return [*command, *run], {TITLE_VARIABLE: title, BODY_VARIABLE: body}
    return [*command, title, body], {}


def command_notifier(command: Sequence[str], environ: Mapping[str, str]) -> Notify:
    """Show each alert with `command` (never through a shell)."""

    def notify(title: str, body: str) -> None:
        argv, extra = invocation(command, title, body)
        try:
            subprocess.run(
                argv, check=True, timeout=TIMEOUT, capture_output=True, env={**environ, **extra}
            )
        except (OSError, subprocess.SubprocessError) as error:
            log.warning("notify: %s failed: %s", command[0], error)

    return notify


def default_command(name: str) -> list[str] | None:
    """The program `name`, found on PATH (or a path to it); None for no command."""
    if not name:
        return None
    found = shutil.which(name)
    if found is None:
        log.warning("notify: %s not found: alerts are logged only", name)
        return None
    return [found]


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

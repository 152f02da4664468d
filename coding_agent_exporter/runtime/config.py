"""Command line and environment → one frozen `Config`. Pure: argv and environ are parameters.
The flags themselves (names, variables, defaults, help, value checks) are `options`'.

Every flag has an environment variable: `CODING_AGENT_EXPORTER_` + the flag in upper snake case
(`--web.listen-address` → `CODING_AGENT_EXPORTER_WEB_LISTEN_ADDRESS`). A flag beats its variable,
a variable beats the default. An agent's own settings file is the one file read here (where its
sessions are, which model it uses: `settings`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from .. import __version__
from ..harnesses import HARNESSES
from ..harnesses.base import Settings
from ..sources.platform import current
from ..state.labels import ProjectLabel
from ..web.notify import DEFAULT_COMMAND
from .flags import Parser, Setting, Switch, command_first, fill, value_flags
from .options import (
    COMMANDS,
    DEFAULT_NOTIFY,
    duration,
    env_name,
    flags_of,
    home_shown,
    listen_address,
    service_flags,
    setting,
)
from .settings import settings_of


@dataclass(frozen=True, slots=True)
class Config:
    command: str
    host: str
    port: int
    telemetry_path: str
    settings: dict[str, Settings]  # enabled harness name → where its files are, its model
    project: ProjectLabel
    log_level: str
    log_format: str
    json: bool = False
    all: bool = False
    internal: bool = False
    traces: bool = False
    backfill: float | None = None  # seconds of history to send as traces; inf = all
    state_dir: Path | None = None
    since: float = float("inf")
    capture: bool = False
    web_config: Path | None = None
    output: Path | None = None
    notify_address: tuple[str, int] = ("127.0.0.1", 9095)
    notify_command: str = "notify-send"
    pricing: str | None = None  # the user's pricing file, read over the shipped prices
    window_limit: int | str | None = None  # tokens per 5-hour window, or "max"
    grafana_url: str | None = None  # the console links each session to its dashboard there
    trace_url: str | None = None  # a trace viewer's URL, `{trace_id}` in it
    external_url: str | None = None  # where users reach this exporter's web console
    otlp_metrics: bool = False  # push the families over OTLP too (`push` always does)
    user: str | None = None  # the OTLP resource's user.name
    allowed_hosts: tuple[str, ...] = ()  # --web.allowed-hosts
    max_connections: int = 64  # --web.max-connections
    probes: str = "auto"  # --platform.probes: the operating system's own probes, or portable
    service_action: str = "status"  # `service install|uninstall|status`
    service_for: str = "linux"  # --service.for: whose service file (linux, macos, windows)
    dry_run: bool = False  # --service.dry-run: print the file, change nothing
    wsl_rescan: float = 10.0  # --platform.wsl-rescan-interval: seconds; 0: never

    @property
    def homes(self) -> dict[str, Path]:
        """Enabled harness name → the folder its files are read from."""
        return {name: settings.home for name, settings in self.settings.items()}

    @property
    def models(self) -> dict[str, str]:
        """Harness name → the model its agent's settings name, where they name one."""
        return {name: s.model for name, s in self.settings.items() if s.model}


def parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    return _parser(environ)[0]


def _parser(
    environ: Mapping[str, str],
) -> tuple[argparse.ArgumentParser, list[Setting | Switch]]:
    common, known = flags_of(environ)
    top = Parser(
        prog="coding-agent-exporter",
        description="Prometheus metrics, OpenTelemetry traces and a live web console of the "
        "sessions that AI coding agents run on this machine, from the files they write. "
        "Read-only: agent files are never written.",
        epilog="examples:\n"
        "  coding-agent-exporter               # serve the console at http://127.0.0.1:10464/\n"
        "                                      #   and the metrics at /metrics\n"
        "  coding-agent-exporter sessions      # live sessions, waiting-for-you first\n"
        "  coding-agent-exporter sessions --all --json\n"
        "  coding-agent-exporter metrics       # print one scrape and exit\n"
        "  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 coding-agent-exporter push\n"
        "                                      # a CI job's last step: metrics and new turns\n"
        "Run `coding-agent-exporter serve --help` for every flag and its environment variable.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = top.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser(
        "serve",
        parents=[common],
        help="catch up on history, then watch and serve /metrics (the default)",
    )
    sessions = commands.add_parser("sessions", parents=[common], help="list sessions once")
    sessions.add_argument("--json", action="store_true", help="print one JSON array")
    sessions.add_argument("--all", action="store_true", help="include sessions that are not live")
    sessions.add_argument(
        "--include-internal",
        action="store_true",
        help="with --all: also the agents' own automatic reviews (Codex' guardian)",
    )
    commands.add_parser("metrics", parents=[common], help="print what a scrape would return, once")
    commands.add_parser(
        "push",
        parents=[common],
        help="send the metrics and the turns not sent yet over OTLP, once (a CI job's last step)",
    )
    traces = commands.add_parser(
        "traces",
        parents=[common],
        help="send the turns of history as traces, once (or write them to a file)",
    )
    traces.add_argument(
        "--since",
        type=duration,
        default=float("inf"),
        metavar="DURATION",
        help="only turns that started this long ago or later, e.g. 7d (default: all)",
    )
    traces.add_argument(
        "--output",
        type=Path,
        metavar="FILE",
        help="write OTLP/JSON lines (one ExportTraceServiceRequest a line) instead of sending",
    )
    notify = commands.add_parser(
        "notify",
        parents=[common],
        help="receive Alertmanager's webhook and show each alert as a desktop notification",
    )
    notify_only = frozenset({"notify"})
    setting(
        known,
        environ,
        notify,
        "--notify.listen-address",
        DEFAULT_NOTIFY,
        "Address to take Alertmanager's webhook on (its url: http://HOST:PORT/alerts).",
        commands=notify_only,
        type=listen_address,
        metavar="HOST:PORT",
    )
    setting(
        known,
        environ,
        notify,
        "--notify.command",
        DEFAULT_COMMAND[current().system],
        "Program that shows each alert: notify-send (Linux), osascript (macOS's Notification "
        "Center), powershell (a Windows toast), or any other, run as COMMAND TITLE BODY; '' "
        "to only log them.",
        commands=notify_only,
        metavar="COMMAND",
    )
    service_flags(commands, known)
    return top, known


def _home_flag(name: str, values: Mapping[str, Any]) -> str:
    """The flag that set where an agent's files are: an option of its own that names the
    folder (Vibe's --vibe.session-dir), else its home flag."""
    harness = HARNESSES[name]
    given = [o.flag for o in harness.options if o.metavar == "DIR" and values.get(o.dest)]
    return given[0] if given else harness.home_flag


def _check_home(name: str, home: Path, flag: str, fail: Callable[[str], NoReturn]) -> None:
    where = f"--{flag} (or {env_name('--' + flag)})"
    if home.exists() and not home.is_dir():
        fail(f"{name} home {home} is a file, not a folder: point {where} at the agent's folder")
    if home.exists() and not os.access(home, os.R_OK | os.X_OK):
        fail(
            f"{name} home {home} exists but cannot be read: check its permissions, "
            f"or point {where} elsewhere"
        )


def parse(argv: Sequence[str], environ: Mapping[str, str]) -> Config:
    top, known = _parser(environ)
    args = top.parse_args(command_first(list(argv), COMMANDS, value_flags(top)))
    if args.command is None:
        top.print_help()
        raise SystemExit(0)
    values = vars(args)
    fail = Parser(prog=f"{top.prog} {args.command}").error
    fill(values, known, environ, args.command, fail)
    host, port = values["web.listen_address"]
    settings = {
        name: settings_of(
            harness,
            Path(values[harness.home_flag.replace("-", "_")]).expanduser(),
            {o.flag: values[o.dest] for o in harness.options},
        )
        for name, harness in HARNESSES.items()
        if values[f"harness.{name}".replace("-", "_")]
    }
    if not settings:
        fail("every harness is disabled (--no-harness.*): there is nothing to read")
    for name, found in settings.items():
        _check_home(name, found.home, _home_flag(name, values), fail)
    return Config(
        command=args.command,
        host=host,
        port=port,
        telemetry_path=values["web.telemetry_path"],
        settings=settings,
        project=ProjectLabel(values["label.project"], home_shown(environ)),
        log_level=values["log.level"],
        log_format=values["log.format"],
        json=values.get("json", False),
        all=values.get("all", False),
        internal=values.get("include_internal", False),
        traces=values["traces.enabled"],
        backfill=values["traces.backfill"],
        state_dir=Path(values["state.dir"]).expanduser(),
        since=values.get("since", float("inf")),
        capture=values["traces.capture_content"],
        web_config=Path(values["web.config.file"]) if values["web.config.file"] else None,
        output=values.get("output"),
        notify_address=values.get("notify.listen_address", ("127.0.0.1", 9095)),
        notify_command=values.get("notify.command", DEFAULT_COMMAND[current().system]),
        pricing=values["pricing.file"] or None,
        window_limit=values["usage_window.token_limit"],
        grafana_url=values["web.grafana_url"] or None,
        trace_url=values["web.trace_url"] or None,
        external_url=values["web.external_url"] or None,
        otlp_metrics=values["otlp.metrics"],
        user=values["label.user"] or None,
        probes=values["platform.probes"],
        service_action=values.get("action", "status"),
        service_for=values["service.for"],
        dry_run=values["service.dry_run"],
        allowed_hosts=tuple(h for h in values["web.allowed_hosts"].split(",") if h.strip()),
        max_connections=values["web.max_connections"],
        wsl_rescan=values["platform.wsl_rescan_interval"],
    )

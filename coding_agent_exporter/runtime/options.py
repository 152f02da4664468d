"""Every flag of the exporter: its name, its environment variable, its default and help, and
the checks of its value (`runtime.config` parses them into one `Config`; `runtime.flags` is the
machinery every flag shares)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..harnesses import HARNESSES
from ..sources.places import state_dir, user_home
from ..sources.platform import PROBES, current
from ..state.price_file import PriceFileError, overrides
from .flags import Parser, Setting, Switch
from .service import ACTIONS, SYSTEMS

ENV_PREFIX = "CODING_AGENT_EXPORTER_"
DEFAULT_LISTEN = "127.0.0.1:10464"
DEFAULT_TELEMETRY_PATH = "/metrics"
COMMANDS = ("serve", "sessions", "metrics", "traces", "push", "notify", "service")
DEFAULT_NOTIFY = "127.0.0.1:9095"
SERVE = frozenset({"serve"})
TRACING = frozenset({"serve", "traces", "push"})
PUSHING = frozenset({"serve", "push"})
OTLP = frozenset({"serve", "traces", "push"})


def endpoint_configured(environ: Mapping[str, str]) -> bool:
    """An OTLP endpoint is set (traces default to on); here, not in `otel`, so that parsing the
    flags never imports OpenTelemetry."""
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def env_name(flag: str) -> str:
    return ENV_PREFIX + flag.lstrip("-").replace(".", "_").replace("-", "_").upper()


def listen_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:10464)")
    return host.strip("[]") or "0.0.0.0", int(port)


def duration(text: str) -> float:
    """`all`, or a number with a unit: 90s, 30m, 12h, 7d."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    if text == "all":
        return float("inf")
    number, unit = text[:-1], text[-1:]
    if unit not in units or not number.replace(".", "", 1).isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30m, 12h, 7d, or all")
    return float(number) * units[unit]


def telemetry_path(text: str) -> str:
    if not text.startswith("/") or text == "/":
        raise argparse.ArgumentTypeError(f"{text!r} must start with / and not be / itself")
    return text


def _optional(convert: Any) -> Any:
    return lambda text: convert(text) if text else None


def setting(
    known: list[Setting | Switch],
    environ: Mapping[str, str],
    group: Any,
    flag: str,
    default: str,
    text: str,
    *,
    commands: frozenset[str] | None = None,
    **kw: Any,
) -> None:
    """A flag that takes a value, with its variable (checked by `flags.fill`), into `group`."""
    env = env_name(flag)
    known.append(Setting(flag, env, default, kw.get("type"), kw.get("choices"), commands))
    shown = environ.get(env, default) or "none"
    group.add_argument(
        flag, default=argparse.SUPPRESS, help=f"{text} [env {env}] (default: {shown})", **kw
    )


def flags_of(environ: Mapping[str, str]) -> tuple[Parser, list[Setting | Switch]]:
    common = Parser(add_help=False)
    known: list[Setting | Switch] = []

    def add(flag: str, default: str, text: str, *, group: Any = common, **kw: Any) -> None:
        setting(known, environ, group, flag, default, text, **kw)

    def switch(flag: str, default: bool, text: str, *, group: Any = common, **kw: Any) -> None:
        env = env_name(flag)
        known.append(Switch(flag, env, default, kw.pop("commands", None)))
        group.add_argument(
            flag,
            action=argparse.BooleanOptionalAction,
            default=argparse.SUPPRESS,
            help=f"{text} [env {env}]",
        )

    add(
        "--web.listen-address",
        DEFAULT_LISTEN,
        "Address to serve /metrics, the web console and its /api/ on.",
        type=listen_address,
        metavar="HOST:PORT",
        commands=SERVE,
    )
    add(
        "--web.telemetry-path",
        DEFAULT_TELEMETRY_PATH,
        "Path of the metrics.",
        type=telemetry_path,
        commands=SERVE,
    )
    add(
        "--web.external-url",
        "",
        "The URL users reach the console at, when it is not the listen address (behind a "
        "proxy); shown in the log at start.",
        type=_url,
        metavar="URL",
        commands=SERVE,
    )
    add(
        "--web.grafana-url",
        "",
        "Grafana with the bundled dashboards (e.g. http://localhost:3000): the console links "
        "each session to its Session dashboard there.",
        type=_url,
        metavar="URL",
        commands=SERVE,
    )
    add(
        "--web.trace-url",
        "",
        "A trace viewer's URL with {trace_id} in it: the console links each turn to its trace "
        "(Jaeger: http://localhost:16686/trace/{trace_id}; Grafana with Tempo: see "
        "docs/configuration.md).",
        type=_trace_url,
        metavar="URL",
        commands=SERVE,
    )
    add(
        "--web.allowed-hosts",
        "",
        "More host names (comma-separated) requests may name in Host and Origin, besides "
        "the loopback names, the listen address (this machine's names and addresses when it "
        "is 0.0.0.0 or ::) and --web.external-url's; * allows any (a proxy that rewrites Host). "
        "Other hosts get 403: the defence against DNS rebinding.",
        metavar="HOSTS",
        commands=SERVE,
    )
    add(
        "--web.max-connections",
        "64",
        "Connections served at once; 8 more may still scrape /metrics and probe health, any "
        "further one is closed at once.",
        type=_positive,
        metavar="N",
        commands=SERVE,
    )
    add(
        "--web.config.file",
        "",
        "TLS and basic auth, in the format of Prometheus' "
        "exporter-toolkit web config (see docs/configuration.md).",
        metavar="FILE",
        commands=SERVE,
    )
    for name, harness in HARNESSES.items():
        switch(f"--harness.{name}", True, f"Read {name} sessions. (default: enabled)")
        home = harness.default_home(environ)
        add(f"--{harness.home_flag}", str(home), f"{name} home folder.", metavar="DIR")
        for option in harness.options:
            add(f"--{option.flag}", "", option.help, metavar=option.metavar)
    add(
        "--label.project",
        "path",
        "How a session's cwd becomes the `project` label: path "
        "(with $HOME shown as ~), basename, or none.",
        choices=["path", "basename", "none"],
    )
    traces = common.add_argument_group("OTLP traces and metrics (the endpoint: OTEL_* variables)")
    switch(
        "--traces.enabled",
        endpoint_configured(environ),
        "Send every turn as a trace over OTLP. (default: on when OTEL_EXPORTER_OTLP_ENDPOINT "
        "or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set)",
        group=traces,
        commands=PUSHING,
    )
    switch(
        "--traces.capture-content",
        False,
        "Put prompts, replies, tool arguments and tool results into spans (obvious "
        "secrets redacted). Off by default.",
        group=traces,
        commands=TRACING,
    )
    add(
        "--traces.backfill",
        "",
        "Also send turns that started this long before start-up (e.g. 7d), or all; "
        "by default only new turns are sent.",
        type=_optional(duration),
        metavar="DURATION",
        group=traces,
        commands=SERVE,
    )
    switch(
        "--otlp.metrics",
        False,
        "Also push the /metrics families over OTLP every OTEL_METRIC_EXPORT_INTERVAL "
        "(to OTEL_EXPORTER_OTLP_METRICS_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT). Off by default.",
        group=traces,
        commands=SERVE,
    )
    add(
        "--label.user",
        "",
        "The user.name resource attribute of pushed metrics and spans (default: none, or "
        "the one in OTEL_RESOURCE_ATTRIBUTES).",
        metavar="NAME",
        group=traces,
        commands=OTLP,
    )
    add(
        "--state.dir",
        str(state_dir(environ)),
        "The exporter's own state (which turns "
        "were sent as traces). Never inside an agent's folder.",
        metavar="DIR",
    )
    cost = common.add_argument_group("cost (prices: genai-prices' data, shipped with the package)")
    add(
        "--pricing.file",
        "",
        "Prices of your own, over the shipped ones: YAML or JSON, USD per million tokens "
        "per model (format in docs/cost.md).",
        type=_pricing_file,
        metavar="FILE",
        group=cost,
    )
    add(
        "--usage-window.token-limit",
        "",
        "Tokens a 5-hour usage window may use (a number, or max: the largest past window's), "
        "published as coding_agent_usage_window_limit_tokens for alerts.",
        type=_window_limit,
        metavar="TOKENS",
        group=cost,
    )
    add(
        "--platform.probes",
        "auto",
        "How the operating system is asked which files changed, which process holds a file, "
        "when a process exits: auto (Linux's /proc, inotify and pidfd on Linux; FSEvents, "
        "kqueue, psutil on macOS; ReadDirectoryChangesW, psutil on Windows) or portable (the "
        "macOS/Windows way, on any system).",
        choices=list(PROBES),
    )
    add(
        "--platform.wsl-rescan-interval",
        "10s",
        "Under WSL, how often the agent folders on a Windows drive (/mnt/<drive>: no file "
        "events come for writes made from Windows) are rescanned, as a DURATION (10s); 0s: "
        "never. Nothing else is rescanned.",
        type=duration,
        metavar="DURATION",
    )
    add("--log.level", "info", "Log level.", choices=["debug", "info", "warn", "error"])
    add("--log.format", "text", "Log format.", choices=["text", "json"])
    return common, known


def service_flags(commands: Any, known: list[Setting | Switch]) -> None:
    """`service install|uninstall|status`, `--service.for` and `--service.dry-run` (each also
    spelled short: `--for`, `--dry-run`)."""
    service = commands.add_parser(
        "service",
        help="install serve as this user's service (systemd user unit, LaunchAgent, logon task), "
        "remove it, or say whether it runs",
    )
    service.add_argument("action", choices=ACTIONS, help="install, uninstall or status")
    only = frozenset({"service"})
    here = {v: k for k, v in SYSTEMS.items()}[current().system]
    env = env_name("--service.for")
    known.append(Setting("--service.for", env, here, None, list(SYSTEMS), only))
    service.add_argument(
        "--service.for",
        "--for",
        dest="service.for",
        choices=list(SYSTEMS),
        default=argparse.SUPPRESS,
        help=f"whose service to write: linux, macos or windows [env {env}] (default: {here})",
    )
    env = env_name("--service.dry-run")
    known.append(Switch("--service.dry-run", env, False, only))
    service.add_argument(
        "--service.dry-run",
        "--dry-run",
        dest="service.dry_run",
        action=argparse.BooleanOptionalAction,
        default=argparse.SUPPRESS,
        help=f"print the file and the commands, change nothing [env {env}]",
    )


def home_shown(environ: Mapping[str, str]) -> str:
    """The home a project path is shown under as `~`: the one the agents use (`USERPROFILE` on
    Windows), only when the environment names it."""
    name = "USERPROFILE" if current().windows else "HOME"
    return str(user_home(environ)) if environ.get(name) else ""


def _positive(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)


def _url(text: str) -> str:
    """An http(s) URL, or nothing."""
    text = text.strip()
    if text and not (text.startswith(("http://", "https://")) and len(text) > 8):
        raise argparse.ArgumentTypeError(f"{text!r}: expected an http:// or https:// URL")
    return text.rstrip("/")


def _trace_url(text: str) -> str:
    text = _url(text)
    if text and "{trace_id}" not in text:
        raise argparse.ArgumentTypeError(
            f"{text!r}: put {{trace_id}} where the trace id goes, e.g. "
            "http://localhost:16686/trace/{trace_id}"
        )
    return text


def _pricing_file(text: str) -> str:
    """A pricing file that can be read and holds prices: checked at start, so a mistake stops
    the exporter with the file, the entry and the fix named."""
    if not text:
        return ""
    try:
        overrides(Path(text).expanduser().read_text(), text)
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot read {text}: {error.strerror}") from None
    except PriceFileError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return str(Path(text).expanduser().resolve())


def _window_limit(text: str) -> int | str | None:
    if not text:
        return None
    if text == "max":
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise argparse.ArgumentTypeError(f"{text!r}: expected a number of tokens, or max")

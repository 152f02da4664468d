"""The files that make `serve` start with the user's session, one per system (pure functions).

- Linux: a systemd **user** unit (`~/.config/systemd/user/coding-agent-exporter.service`),
  restarted on failure, started with the user's manager.
- macOS: a LaunchAgent (`~/Library/LaunchAgents/<LABEL>.plist`): run at load, kept alive, its
  output in the state folder's `logs`.
- Windows: a Task Scheduler task started at the user's logon (its XML, as `schtasks /Create
  /XML` takes it: UTF-16), restarted on failure, never elevated.

Neither systemd nor launchd reads a shell profile, so the variables that say where the agents'
files are and how the exporter is configured (`captured`) are written into the unit and the
plist as they are set now. Task Scheduler has no such field: a logon task sees the user's
persistent environment (`setx`), not this shell's.
"""

from __future__ import annotations

import plistlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from xml.etree import ElementTree

from ..sources.places import APP

__all__ = [
    "AGENT_VARIABLES",
    "LABEL",
    "MARK",
    "TASK_NAMESPACE",
    "captured",
    "launch_agent",
    "logon_task",
    "systemd_unit",
]

LABEL = "io.github.coding-agent-exporter"
"""The LaunchAgent's label (launchd's reverse-DNS name for it)."""
MARK = "Written by `coding-agent-exporter service install`"
"""In every file we write: `uninstall` removes only a file that carries it."""
AGENT_VARIABLES = (
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "COPILOT_HOME",
    "GEMINI_CLI_HOME",
    "OPENCODE_DB",
    "PI_CODING_AGENT_DIR",
    "PI_CONFIG_DIR",  # oh-my-pi's folder name under the home
    "VIBE_HOME",
    "GROK_HOME",
    "QWEN_HOME",
    "HERMES_HOME",
    "CLINE_DATA_DIR",  # Cline's data folder
    "CLINE_DIR",  # … or its parent
    "KILO_DB",  # Kilo Code's database, its folder the home
    "KIMI_SHARE_DIR",  # Kimi CLI's share folder
    "FACTORY_HOME_OVERRIDE",  # Factory Droid: the home its `.factory` is under
    "OPENHANDS_PERSISTENCE_DIR",  # OpenHands' persistence folder
    "XDG_DATA_HOME",  # OpenCode's and Kilo Code's data folder
    "XDG_STATE_HOME",  # our own state folder on Linux
)
"""The variables that move an agent's folder (each harness' `default_home` reads one)."""
PREFIXES = ("CODING_AGENT_EXPORTER_", "OTEL_")
TASK_NAMESPACE = "http://schemas.microsoft.com/windows/2004/02/mit/task"


def captured(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables set now that a service must be given: agents' homes, our flags', OTel's."""
    return {
        name: value
        for name, value in sorted(environ.items())
        if value and (name in AGENT_VARIABLES or name.startswith(PREFIXES))
    }


def _systemd_word(word: str) -> str:
    """One argument of `ExecStart=`, quoted the way systemd unquotes it (`%` and `$` doubled,
    as systemd expands specifiers and variables there)."""
    word = word.replace("%", "%%").replace("$", "$$")
    if re.fullmatch(r"[\w@%+=:,./$-]+", word):
        return word
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _systemd_assignment(name: str, value: str) -> str:
    text = f"{name}={value}".replace("%", "%%")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_unit(launcher: Sequence[str], environ: Mapping[str, str]) -> str:
    """The systemd user unit that runs `launcher serve`."""
    lines = [
        f"# {MARK}; remove it with `coding-agent-exporter service uninstall`.",
        "[Unit]",
        "Description=coding-agent-exporter: metrics and traces of local AI coding agents",
        "Documentation=https://github.com/coding-agent-exporter/coding-agent-exporter#readme",
        "",
        "[Service]",
        "Type=exec",
        "ExecStart=" + " ".join(_systemd_word(w) for w in [*launcher, "serve"]),
        "Restart=on-failure",
        "RestartSec=5",
    ]
    lines += [f"Environment={_systemd_assignment(k, v)}" for k, v in captured(environ).items()]
    lines += ["", "[Install]", "WantedBy=default.target", ""]
    return "\n".join(lines)


def launch_agent(launcher: Sequence[str], environ: Mapping[str, str], logs: Path) -> bytes:
    """The LaunchAgent plist that runs `launcher serve` at login and keeps it running."""
    agent: dict[str, object] = {
        "Label": LABEL,
        "Comment": MARK,
        "ProgramArguments": [*launcher, "serve"],
        "RunAtLoad": True,
        "KeepAlive": True,
        "ProcessType": "Background",
        "StandardOutPath": str(logs / f"{APP}.out.log"),
        "StandardErrorPath": str(logs / f"{APP}.err.log"),
    }
    variables = captured(environ)
    if variables:
        agent["EnvironmentVariables"] = variables
    return plistlib.dumps(agent)


def logon_task(launcher: Sequence[str], user: str) -> bytes:
    """The Task Scheduler task (UTF-16 XML) that runs `launcher serve` when `user` logs on."""
    ElementTree.register_namespace("", TASK_NAMESPACE)

    def node(parent: ElementTree.Element, tag: str, text: str | None = None) -> ElementTree.Element:
        child = ElementTree.SubElement(parent, f"{{{TASK_NAMESPACE}}}{tag}")
        child.text = text
        return child

    task = ElementTree.Element(f"{{{TASK_NAMESPACE}}}Task", version="1.2")
    info = node(task, "RegistrationInfo")
    node(info, "Description", f"coding-agent-exporter serve. {MARK}.")
    node(info, "URI", f"\\{APP}")
    logon = node(node(task, "Triggers"), "LogonTrigger")
    node(logon, "Enabled", "true")
    node(logon, "UserId", user)
    principal = node(node(task, "Principals"), "Principal")
    principal.set("id", "Author")
    node(principal, "UserId", user)
    node(principal, "LogonType", "InteractiveToken")
    node(principal, "RunLevel", "LeastPrivilege")
    settings = node(task, "Settings")
    for tag, text in (
        ("MultipleInstancesPolicy", "IgnoreNew"),
        ("DisallowStartIfOnBatteries", "false"),
        ("StopIfGoingOnBatteries", "false"),
        ("ExecutionTimeLimit", "PT0S"),  # no limit: it runs for the whole session
        ("Enabled", "true"),
    ):
        node(settings, tag, text)
    restart = node(settings, "RestartOnFailure")
    node(restart, "Interval", "PT1M")
    node(restart, "Count", "999")
    actions = node(task, "Actions")
    actions.set("Context", "Author")
    run = node(actions, "Exec")
    node(run, "Command", launcher[0])
    node(run, "Arguments", " ".join(_windows_quote(a) for a in [*launcher[1:], "serve"]))
    ElementTree.indent(task)
    xml: bytes = ElementTree.tostring(task, encoding="utf-16", xml_declaration=True)
    return xml


def _windows_quote(argument: str) -> str:
    """One argument as Windows' command-line parsing reads it back (a path with spaces)."""
    if argument and not re.search(r'[\s"]', argument):
        return argument
    return '"' + argument.replace('"', '\\"') + '"'

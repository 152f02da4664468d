"""`coding-agent-exporter service`: each system's file checked by that system's own rules where
one runs here (systemd's `systemd-analyze verify`), else parsed as that system reads it
(plistlib, the task XML), and install/uninstall/status run for real against a scratch home."""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from coding_agent_exporter.harnesses import HARNESSES
from coding_agent_exporter.runtime import service
from coding_agent_exporter.runtime.service_files import (
    AGENT_VARIABLES,
    LABEL,
    MARK,
    TASK_NAMESPACE,
    captured,
    launch_agent,
    logon_task,
    systemd_unit,
)

from .conftest import missing_tool

ENVIRONMENT = {
    "HOME": "/home/ada",
    "PATH": "/usr/bin",
    "CODEX_HOME": "/srv/codex 100%",
    "CLAUDE_CONFIG_DIR": '/home/ada/"claude"',
    "CODING_AGENT_EXPORTER_WEB_LISTEN_ADDRESS": "127.0.0.1:10465",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
    "SECRET_TOKEN": "never",
}
CAPTURED = {
    "CLAUDE_CONFIG_DIR": '/home/ada/"claude"',
    "CODEX_HOME": "/srv/codex 100%",
    "CODING_AGENT_EXPORTER_WEB_LISTEN_ADDRESS": "127.0.0.1:10465",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318",
}
CLI = [sys.executable, "-m", "coding_agent_exporter", "service"]


def test_only_the_agents_homes_and_our_and_otel_s_variables_are_captured() -> None:
    assert captured(ENVIRONMENT) == CAPTURED


@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_every_variable_that_moves_an_agent_s_folder_is_captured(name: str) -> None:
    """A harness whose folder a variable moves has that variable in `AGENT_VARIABLES` (else the
    service would read another folder than the user's shell does)."""
    default_home = HARNESSES[name].default_home
    base = default_home({"HOME": "/home/ada"})
    moved = [
        v for v in AGENT_VARIABLES if default_home({"HOME": "/home/ada", v: "/elsewhere/x"}) != base
    ]
    assert moved, f"no variable of AGENT_VARIABLES moves {name}'s home"


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        missing_tool("needs systemd-analyze (Debian's systemd; .ci/run installs it)")
    unit = tmp_path / "coding-agent-exporter.service"
    text = systemd_unit(service.launcher(), ENVIRONMENT)
    unit.write_text(text)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SYSTEMD_LOG_LEVEL": "notice"}
    verified = subprocess.run(
        ["systemd-analyze", "verify", "--user", str(unit)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )
    assert (verified.returncode, verified.stderr) == (0, ""), text  # not even a warning
    assert f"ExecStart={service.launcher()[0]} serve" in text
    assert "Restart=on-failure" in text and "WantedBy=default.target" in text
    assert 'Environment="CODEX_HOME=/srv/codex 100%%"' in text
    assert 'Environment="CLAUDE_CONFIG_DIR=/home/ada/\\"claude\\""' in text
    assert "SECRET_TOKEN" not in text and MARK in text


def test_the_launch_agent_runs_serve_at_login_with_the_environment_given(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    agent = plistlib.loads(launch_agent(["/Users/ada/.venv/bin/cae"], ENVIRONMENT, logs))
    assert agent["Label"] == LABEL
    assert agent["ProgramArguments"] == ["/Users/ada/.venv/bin/cae", "serve"]
    assert agent["RunAtLoad"] is True and agent["KeepAlive"] is True
    assert agent["StandardOutPath"] == str(logs / "coding-agent-exporter.out.log")
    assert agent["StandardErrorPath"] == str(logs / "coding-agent-exporter.err.log")
    assert agent["EnvironmentVariables"] == CAPTURED  # launchd reads no shell profile


def test_the_logon_task_runs_serve_when_this_user_logs_on() -> None:
    launcher = [
        "C:\\Users\\ada\\My Tools\\.venv\\Scripts\\python.exe",
        "-m",
        "coding_agent_exporter",
    ]
    xml = logon_task(launcher, "PC\\ada")
    assert xml.startswith(b"\xff\xfe")  # UTF-16 with its byte-order mark: what schtasks takes
    task = ElementTree.fromstring(xml)
    ns = {"t": TASK_NAMESPACE}
    assert task.tag == f"{{{TASK_NAMESPACE}}}Task"
    trigger = task.find("t:Triggers/t:LogonTrigger", ns)
    assert trigger is not None and trigger.findtext("t:UserId", namespaces=ns) == "PC\\ada"
    principal = task.find("t:Principals/t:Principal", ns)
    assert principal is not None
    assert principal.findtext("t:RunLevel", namespaces=ns) == "LeastPrivilege"  # never elevated
    assert principal.findtext("t:LogonType", namespaces=ns) == "InteractiveToken"
    run = task.find("t:Actions/t:Exec", ns)
    assert run is not None
    assert run.findtext("t:Command", namespaces=ns) == launcher[0]
    assert run.findtext("t:Arguments", namespaces=ns) == "-m coding_agent_exporter serve"
    assert task.findtext("t:Settings/t:ExecutionTimeLimit", namespaces=ns) == "PT0S"


def test_the_launcher_is_this_installation_s_own_script(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    python = tmp_path / "bin" / "python"
    assert service.launcher(str(python)) == [str(python), "-m", "coding_agent_exporter"]
    (tmp_path / "bin" / "coding-agent-exporter").touch()
    assert service.launcher(str(python)) == [str(tmp_path / "bin" / "coding-agent-exporter")]


def stand_in(folder: Path, name: str, calls: Path, says: str = "", code: int = 0) -> Path:
    """A program `name` in `folder` that records its arguments in `calls`, prints `says` and
    exits with `code`."""
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"print({says!r})\nsys.exit({code})\n"
    )
    path.chmod(0o755)
    return folder


def recorded(calls: Path) -> list[list[str]]:
    return [json.loads(line) for line in calls.read_text().splitlines()]


def cli(home: Path, path: str, *args: str, **more: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME=str(home), PATH=path, CODEX_HOME=str(home / "codex"), **more)
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, env=env, check=False, timeout=60
    )


def test_install_status_uninstall_for_real_with_systemctl_absent(tmp_path: Path) -> None:
    home, empty = tmp_path / "home", tmp_path / "empty"
    empty.mkdir()
    unit = home / ".config/systemd/user/coding-agent-exporter.service"
    dry = cli(home, str(empty), "install", "--for", "linux", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert not unit.exists() and "would run: systemctl --user enable --now" in dry.stdout
    assert "ExecStart=" in dry.stdout
    assert cli(home, str(empty), "status", "--for", "linux").returncode == 3
    done = cli(home, str(empty), "install", "--for", "linux")
    assert done.returncode == 0, done.stderr
    assert "systemctl not found: not started" in done.stdout
    assert unit.read_text() == systemd_unit(service.launcher(), {"CODEX_HOME": str(home / "codex")})
    assert unit.stat().st_mode & 0o077 == 0
    status = cli(home, str(empty), "status", "--for", "linux")
    assert status.returncode == 0 and "cannot tell whether it runs" in status.stdout
    gone = cli(home, str(empty), "uninstall", "--for", "linux")
    assert gone.returncode == 0 and not unit.exists()
    assert list(unit.parent.iterdir()) == []  # nothing else was written there


def cycle(home: Path, path: str, system: str, **more: str) -> str:
    """install, status, uninstall for `system`, each exiting 0; what status said."""
    assert cli(home, path, "install", "--for", system, **more).returncode == 0
    status = cli(home, path, "status", "--for", system, **more)
    assert status.returncode == 0, status.stdout
    assert cli(home, path, "uninstall", "--for", system, **more).returncode == 0
    return status.stdout


def test_install_and_uninstall_ask_systemctl_to_start_and_stop_it(tmp_path: Path) -> None:
    home, calls = tmp_path / "home", tmp_path / "calls.jsonl"
    path = str(stand_in(tmp_path / "bin", "systemctl", calls, says="active"))
    assert "systemd says: active" in cycle(home, path, "linux")
    assert recorded(calls) == [
        ["--user", "daemon-reload"],
        ["--user", "enable", "--now", "coding-agent-exporter.service"],
        ["--user", "is-active", "coding-agent-exporter.service"],
        ["--user", "disable", "--now", "coding-agent-exporter.service"],
        ["--user", "daemon-reload"],
    ]


def test_a_unit_the_user_wrote_is_never_replaced_or_removed(tmp_path: Path) -> None:
    home, empty = tmp_path / "home", tmp_path / "empty"
    empty.mkdir()
    unit = home / ".config/systemd/user/coding-agent-exporter.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/usr/local/bin/mine\n")
    assert cli(home, str(empty), "install", "--for", "linux").returncode == 1
    assert cli(home, str(empty), "uninstall", "--for", "linux").returncode == 1
    assert unit.read_text() == "[Service]\nExecStart=/usr/local/bin/mine\n"


def test_the_macos_and_windows_files_are_written_where_those_systems_look(tmp_path: Path) -> None:
    home, empty = tmp_path / "home", tmp_path / "empty"
    empty.mkdir()
    assert cli(home, str(empty), "install", "--for", "macos").returncode == 0
    plist = home / "Library/LaunchAgents" / f"{LABEL}.plist"
    agent = plistlib.loads(plist.read_bytes())
    assert agent["ProgramArguments"] == [*service.launcher(), "serve"]
    logs = home / "Library/Application Support/coding-agent-exporter/logs"
    assert agent["StandardErrorPath"] == str(logs / "coding-agent-exporter.err.log")
    assert logs.is_dir()  # launchd opens the log files, it makes no folder
    assert cli(home, str(empty), "uninstall", "--for", "macos").returncode == 0
    assert not plist.exists()
    shown = cli(home, str(empty), "install", "--for", "windows", "--dry-run")
    assert shown.returncode == 0 and "<LogonTrigger>" in shown.stdout
    assert "would run: schtasks /Create /XML" in shown.stdout


def test_the_flags_have_their_variables(tmp_path: Path) -> None:
    home, empty = tmp_path / "home", tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "HOME": str(home), "PATH": str(empty)}
    env |= {"CODING_AGENT_EXPORTER_SERVICE_FOR": "macos"}
    env |= {"CODING_AGENT_EXPORTER_SERVICE_DRY_RUN": "true"}
    shown = subprocess.run(
        [*CLI, "install"], capture_output=True, text=True, env=env, check=False, timeout=60
    )
    assert shown.returncode == 0 and "<key>RunAtLoad</key>" in shown.stdout
    assert not (home / "Library").exists()


def test_the_launch_agent_is_bootstrapped_into_the_user_s_gui_domain(tmp_path: Path) -> None:
    """A stand-in `launchctl` on PATH: what it is asked, in order (no launchd runs here)."""
    home, calls = tmp_path / "home", tmp_path / "calls.jsonl"
    path = str(stand_in(tmp_path / "bin", "launchctl", calls, says="\tstate = running"))
    assert "launchctl says: running" in cycle(home, path, "macos")
    plist = str(home / "Library/LaunchAgents" / f"{LABEL}.plist")
    domain = f"gui/{os.getuid()}"
    assert recorded(calls) == [
        ["bootout", f"{domain}/{LABEL}"],  # an older copy, if loaded
        ["bootstrap", domain, plist],
        ["print", f"{domain}/{LABEL}"],
        ["bootout", f"{domain}/{LABEL}"],
    ]


def test_the_logon_task_is_registered_from_its_xml_and_started(tmp_path: Path) -> None:
    """A stand-in `schtasks` on PATH (no Task Scheduler runs here)."""
    home, calls = tmp_path / "home", tmp_path / "calls.jsonl"
    path = str(stand_in(tmp_path / "bin", "schtasks", calls, says="Status: Running"))
    local = tmp_path / "local"
    user = {"LOCALAPPDATA": str(local), "USERDOMAIN": "PC", "USERNAME": "ada"}
    shown = cli(home, path, "install", "--for", "windows", "--dry-run", **user).stdout
    xml = local / "coding-agent-exporter" / "coding-agent-exporter-task.xml"
    assert f"would write {xml}:" in shown and "<UserId>PC\\ada</UserId>" in shown
    assert "schtasks says: running" in cycle(home, path, "windows", **user)
    assert not xml.exists()
    assert recorded(calls) == [
        ["/Create", "/XML", str(xml), "/TN", "coding-agent-exporter", "/F"],
        ["/Run", "/TN", "coding-agent-exporter"],
        ["/Query", "/TN", "coding-agent-exporter", "/FO", "LIST"],
        ["/End", "/TN", "coding-agent-exporter"],
        ["/Delete", "/TN", "coding-agent-exporter", "/F"],
    ]


def test_a_start_that_fails_says_so_and_how_to_start_it_later(tmp_path: Path) -> None:
    """No user manager (a container, WSL without systemd): the unit stays written, the exit
    code is 1, and the commands to start it are printed."""
    home, calls = tmp_path / "home", tmp_path / "calls.jsonl"
    path = str(
        stand_in(tmp_path / "bin", "systemctl", calls, says="Failed to connect to bus", code=1)
    )
    done = cli(home, path, "install", "--for", "linux")
    assert done.returncode == 1
    assert "daemon-reload failed (1): Failed to connect to bus" in done.stdout
    assert "written but not started; once that works, start it with: systemctl" in done.stdout
    assert (home / ".config/systemd/user/coding-agent-exporter.service").exists()
    assert recorded(calls) == [["--user", "daemon-reload"]]

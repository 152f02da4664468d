"""`coding-agent-exporter service install|uninstall|status`: `serve` as the user's own service.

One command per system, at the user's level, never root: a systemd user unit (Linux), a
LaunchAgent (macOS), a logon task (Windows); the files are `service_files`'. `install` writes
the file (or, with `--dry-run`, prints it and where it would go, and changes nothing), then asks
the system's tool to start it (`systemctl --user`, `launchctl bootstrap`, `schtasks /Create`)
when that tool is on PATH; `uninstall` stops it and removes exactly the file `install` wrote
(only a file that carries `service_files.MARK`); `status` says what is installed and whether
it runs. `--for` writes another system's file (to look at it, or to copy it).

The launcher named in the file is this installation's own `coding-agent-exporter` script (the
one beside the Python running now), else that Python with `-m coding_agent_exporter`: the
service keeps running the version that installed it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..sources.places import APP, logs_dir, state_dir, user_home
from .service_files import LABEL, MARK, launch_agent, logon_task, systemd_unit

__all__ = ["ACTIONS", "SYSTEMS", "Service", "launcher", "main", "service_for"]

ACTIONS = ("install", "uninstall", "status")
SYSTEMS = {"linux": "linux", "macos": "darwin", "windows": "windows"}
"""`--for` → the system (`sources.platform`'s name)."""
Run = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]
Out = Callable[[str], None]


def launcher(executable: str = sys.executable) -> list[str]:
    """This installation's `coding-agent-exporter` (beside `executable`, not resolved: a
    virtualenv's python is a link), else `executable -m coding_agent_exporter`."""
    folder = Path(executable).parent
    for name in (APP, f"{APP}.exe"):
        if (folder / name).is_file():
            return [str((folder / name).absolute())]
    return [str(Path(executable).absolute()), "-m", "coding_agent_exporter"]


@dataclass(frozen=True, slots=True)
class Service:
    """One system's service: its file, what it holds, and the tool calls around it."""

    system: str
    path: Path
    content: bytes
    start: list[list[str]]  # after writing the file
    stop: list[list[str]]  # before removing it (a failure is fine: it may not run)
    query: list[str]  # what the system says of it
    tool: str
    cleanup: list[list[str]] = dataclasses.field(default_factory=list)  # after removing it
    folders: tuple[Path, ...] = ()  # made before it starts (the LaunchAgent's logs)


def service_for(system: str, environ: Mapping[str, str], command: Sequence[str]) -> Service:
    """The service that runs `command serve` on `system`, for the user of `environ`."""
    home = user_home(environ, system)
    if system == "darwin":
        plist = home / "Library" / "LaunchAgents" / f"{LABEL}.plist"
        logs = logs_dir(state_dir(environ, system))
        domain = f"gui/{_uid()}"
        return Service(
            system,
            plist,
            launch_agent(command, environ, logs),
            start=[["launchctl", "bootstrap", domain, str(plist)]],
            stop=[["launchctl", "bootout", f"{domain}/{LABEL}"]],
            query=["launchctl", "print", f"{domain}/{LABEL}"],
            tool="launchctl",
            folders=(logs,),
        )
    if system == "windows":
        xml = state_dir(environ, system) / f"{APP}-task.xml"
        user = "\\".join(filter(None, (environ.get("USERDOMAIN"), environ.get("USERNAME", ""))))
        return Service(
            system,
            xml,
            logon_task(command, user),
            start=[
                ["schtasks", "/Create", "/XML", str(xml), "/TN", APP, "/F"],
                ["schtasks", "/Run", "/TN", APP],
            ],
            stop=[["schtasks", "/End", "/TN", APP], ["schtasks", "/Delete", "/TN", APP, "/F"]],
            query=["schtasks", "/Query", "/TN", APP, "/FO", "LIST"],
            tool="schtasks",
        )
    config = environ.get("XDG_CONFIG_HOME") or str(home / ".config")
    unit = Path(config) / "systemd" / "user" / f"{APP}.service"
    systemctl = ["systemctl", "--user"]
    return Service(
        system,
        unit,
        systemd_unit(command, environ).encode(),
        start=[[*systemctl, "daemon-reload"], [*systemctl, "enable", "--now", unit.name]],
        stop=[[*systemctl, "disable", "--now", unit.name]],
        query=[*systemctl, "is-active", unit.name],
        tool="systemctl",
        cleanup=[[*systemctl, "daemon-reload"]],
    )


def _uid() -> int:
    getuid = getattr(os, "getuid", None)  # none on Windows (`--for macos` there)
    return int(getuid()) if getuid is not None else 501


def _run(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)


def main(
    action: str,
    service: Service,
    *,
    dry_run: bool = False,
    run: Run = _run,
    out: Callable[[str], None] = print,
) -> int:
    """Do `action` for `service`; what was done goes to `out`. 0, or 1 when it failed."""
    has_tool = shutil.which(service.tool) is not None
    if action == "install":
        return _install(service, dry_run, has_tool, run, out)
    if action == "uninstall":
        return _uninstall(service, dry_run, has_tool, run, out)
    return _status(service, has_tool, run, out)


def _install(service: Service, dry_run: bool, has_tool: bool, run: Run, out: Out) -> int:
    if dry_run:
        out(f"would write {service.path}:")
        out(_shown(service))
        for argv in service.start:
            out("would run: " + " ".join(argv))
        return 0
    if service.path.exists() and not _ours(service.path):
        out(f"{service.path} exists and was not written by this command: left as it is")
        return 1
    for folder in (service.path.parent, *service.folders):
        folder.mkdir(parents=True, exist_ok=True)
    if has_tool and service.system == "darwin":  # bootstrap refuses a label already loaded
        _step(service.stop[0], run, out, quiet=True)
    service.path.write_bytes(service.content)
    service.path.chmod(0o600)  # it may hold OTEL_* headers (a token)
    out(f"wrote {service.path}")
    if not has_tool:
        out(f"{service.tool} not found: not started; start it with: " + _joined(service.start))
        return 0
    if _steps(service.start, run, out) != 0:
        out("written but not started; once that works, start it with: " + _joined(service.start))
        return 1
    return 0


def _uninstall(service: Service, dry_run: bool, has_tool: bool, run: Run, out: Out) -> int:
    if not service.path.exists():
        out(f"not installed: {service.path} does not exist")
        return 0
    if not _ours(service.path):
        out(f"{service.path} was not written by `service install`: left as it is")
        return 1
    if dry_run:
        out("would run: " + _joined(service.stop))
        out(f"would remove {service.path}")
        return 0
    for argv in service.stop if has_tool else ():
        _step(argv, run, out, quiet=True)  # not running is fine
    service.path.unlink()
    out(f"removed {service.path}")
    return _steps(service.cleanup, run, out) if has_tool else 0


def _status(service: Service, has_tool: bool, run: Run, out: Out) -> int:
    if not service.path.exists():
        out(f"not installed ({service.path} does not exist)")
        return 3
    out(f"installed: {service.path}" + ("" if _ours(service.path) else " (not written by us)"))
    if not has_tool:
        out(f"{service.tool} not found: cannot tell whether it runs")
        return 0
    found = run(service.query)
    said = (found.stdout or found.stderr).strip()
    if service.system == "linux":
        out(f"systemd says: {said or 'nothing'}")
        return 0 if said == "active" else 3
    running = found.returncode == 0 and "running" in said.lower()
    out(f"{service.tool} says: {'running' if running else 'not running'}")
    return 0 if running else 3


def _ours(path: Path) -> bool:
    data = path.read_bytes()
    return MARK.encode() in data or MARK.encode("utf-16-le") in data


def _shown(service: Service) -> str:
    return service.content.decode("utf-16" if service.system == "windows" else "utf-8")


def _joined(steps: Sequence[Sequence[str]]) -> str:
    return " && ".join(" ".join(argv) for argv in steps)


def _steps(steps: Sequence[Sequence[str]], run: Run, out: Out) -> int:
    for argv in steps:
        if not _step(argv, run, out):
            return 1
    return 0


def _step(argv: Sequence[str], run: Run, out: Out, quiet: bool = False) -> bool:
    try:
        done = run(argv)
    except (OSError, subprocess.SubprocessError) as error:
        out(f"{' '.join(argv)}: {error}")
        return False
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()
        out(
            f"{' '.join(argv)} failed ({done.returncode}): {said}" + (" (ignored)" if quiet else "")
        )
        return quiet
    out(f"ran: {' '.join(argv)}")
    return True

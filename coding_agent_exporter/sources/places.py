"""Where things are on this system: the user's home as the agents see it, and our own folders.

Every agent finds its folder under the user's home. On Linux and macOS that is `$HOME` (what
Node's `os.homedir()`, Python's `Path.home()` and Rust's `dirs::home_dir()` all read first). On
Windows `HOME` is usually unset, and when a shell such as Git Bash sets it, the agents still
ignore it: Node and Python read `USERPROFILE`, Rust asks for the profile known folder (the same
folder). So `user_home` reads `USERPROFILE` there and never `HOME`.

Our own state (the traces checkpoint, the catch-up cache, the spool) goes where each system keeps
an application's state: `$XDG_STATE_HOME/coding-agent-exporter` (`~/.local/state/...`) on Linux,
`~/Library/Application Support/coding-agent-exporter` on macOS (`$XDG_STATE_HOME` there too when
it is set, as platformdirs does), and
`%LOCALAPPDATA%\\coding-agent-exporter` on Windows (platformdirs asks Windows for the known
folder, so a redirected one is found). `--state.dir` (or its variable) still wins.

The answers equal platformdirs' own (`tests/test_places.py` compares them with its per-OS
classes) but are computed from the `environ` given on Linux and macOS, so that the command line
stays a pure function of argv and environ; Windows' known folder is asked of Windows itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .platform import current

__all__ = ["APP", "logs_dir", "state_dir", "user_home"]

APP = "coding-agent-exporter"
"""Our folders' name on every system (and the name of the service we install)."""


def user_home(environ: Mapping[str, str], system: str | None = None) -> Path:
    """The folder the agents call `~`: `USERPROFILE` on Windows, else `HOME` (else the
    system's own answer)."""
    system = system or current().system
    found = environ.get("USERPROFILE" if system == "windows" else "HOME")
    return Path(found) if found else Path.home()


def state_dir(environ: Mapping[str, str], system: str | None = None) -> Path:
    """Where our own state is kept by default on `system` (this one by default)."""
    system = system or current().system
    if system == "windows":
        return _windows_state(environ)
    xdg = environ.get("XDG_STATE_HOME", "").strip()  # platformdirs honours it on macOS too
    if xdg:
        return Path(xdg).expanduser() / APP
    if system == "darwin":
        return user_home(environ, system) / "Library" / "Application Support" / APP
    return user_home(environ, system) / ".local" / "state" / APP


def _windows_state(environ: Mapping[str, str]) -> Path:
    """`%LOCALAPPDATA%\\coding-agent-exporter`: from Windows itself (platformdirs: the known
    folder, or the registry), else from the variable, else under the profile."""
    from platformdirs.windows import Windows  # here: only Windows pays for it

    try:
        return Path(Windows(APP, appauthor=False, roaming=False).user_state_dir)
    except (OSError, ValueError, KeyError, AttributeError, ImportError, NotImplementedError):
        pass  # not Windows (a test, a stand-in: no ctypes.HRESULT), or neither the known
        # folder nor the registry answered
    local = environ.get("LOCALAPPDATA")
    if local:
        return Path(local) / APP
    return user_home(environ, "windows") / "AppData" / "Local" / APP


def logs_dir(state: Path) -> Path:
    """Where a service we install writes its output: the state folder's `logs`."""
    return state / "logs"

"""Our own folder where each system keeps an application's state, and the user's home as the
agents see it there: checked against platformdirs' own per-OS classes (what a Mac or Windows
user's platformdirs would answer), and Linux's path kept exactly what it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from platformdirs.macos import MacOS
from platformdirs.unix import Unix
from platformdirs.windows import Windows

from coding_agent_exporter.harnesses import HARNESSES
from coding_agent_exporter.runtime.config import parse
from coding_agent_exporter.sources.places import APP, logs_dir, state_dir, user_home

WINDOWS_LOCAL = "C:\\Users\\ada\\AppData\\Local"


def test_linux_keeps_the_xdg_state_folder_it_always_had(monkeypatch: pytest.MonkeyPatch) -> None:
    environ = {"HOME": "/home/ada"}
    assert state_dir(environ, "linux") == Path("/home/ada/.local/state/coding-agent-exporter")
    moved = {"HOME": "/home/ada", "XDG_STATE_HOME": "/srv/state"}
    assert state_dir(moved, "linux") == Path("/srv/state/coding-agent-exporter")
    monkeypatch.setenv("HOME", "/home/ada")  # platformdirs reads the process' own environment
    monkeypatch.delenv("XDG_STATE_HOME")
    assert state_dir(environ, "linux") == Path(Unix(APP, appauthor=False).user_state_dir)


def test_macos_keeps_state_in_application_support(monkeypatch: pytest.MonkeyPatch) -> None:
    found = state_dir({"HOME": "/Users/ada"}, "darwin")
    assert found == Path("/Users/ada/Library/Application Support/coding-agent-exporter")
    monkeypatch.setenv("HOME", "/Users/ada")
    monkeypatch.delenv("XDG_STATE_HOME")
    assert found == Path(MacOS(APP, appauthor=False).user_state_dir)
    monkeypatch.setenv("XDG_STATE_HOME", "/Users/ada/state")  # platformdirs honours it there
    moved = state_dir({"HOME": "/Users/ada", "XDG_STATE_HOME": "/Users/ada/state"}, "darwin")
    assert moved == Path(MacOS(APP, appauthor=False).user_state_dir)


def test_windows_keeps_state_in_local_appdata(monkeypatch: pytest.MonkeyPatch) -> None:
    """The known folder platformdirs asks Windows for (here told by its override variable, as
    no Windows answers), else `%LOCALAPPDATA%`, else the profile's `AppData\\Local`."""
    monkeypatch.setenv("WIN_PD_OVERRIDE_LOCAL_APPDATA", WINDOWS_LOCAL)
    known = Path(Windows(APP, appauthor=False).user_state_dir)
    assert state_dir({"HOME": "/ignored"}, "windows") == known == Path(WINDOWS_LOCAL) / APP
    monkeypatch.delenv("WIN_PD_OVERRIDE_LOCAL_APPDATA")
    found = state_dir({"LOCALAPPDATA": "D:\\Local"}, "windows")
    assert found == Path("D:\\Local") / APP
    found = state_dir({"USERPROFILE": "C:\\Users\\ada"}, "windows")
    assert found == Path("C:\\Users\\ada") / "AppData" / "Local" / APP


def test_a_service_logs_into_the_state_folder() -> None:
    assert logs_dir(Path("/s")) == Path("/s/logs")


def test_the_flag_and_its_variable_beat_the_default(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path), "CODING_AGENT_EXPORTER_STATE_DIR": str(tmp_path / "v")}
    assert parse(["metrics"], environ).state_dir == tmp_path / "v"
    flagged = parse(["metrics", "--state.dir", str(tmp_path / "f")], environ)
    assert flagged.state_dir == tmp_path / "f"
    assert parse(["metrics"], {"HOME": str(tmp_path)}).state_dir == state_dir(
        {"HOME": str(tmp_path)}
    )


def test_the_agents_home_is_userprofile_on_windows_and_home_elsewhere() -> None:
    """Node's os.homedir() and Python's Path.home() read USERPROFILE on Windows, never HOME
    (Git Bash sets one)."""
    environ = {"HOME": "/c/Users/ada", "USERPROFILE": "C:\\Users\\ada"}
    assert user_home(environ, "windows") == Path("C:\\Users\\ada")
    assert user_home(environ, "darwin") == Path("/c/Users/ada")
    assert user_home({}, "linux") == Path.home()


@pytest.mark.parametrize(
    ("agent", "folder"),
    [
        ("claude-code", ".claude"),
        ("codex", ".codex"),
        ("gemini-cli", ".gemini"),
        ("opencode", ".local/share/opencode"),
        ("kilo-code", ".local/share/kilo"),
        ("pi", ".pi/agent"),
        ("oh-my-pi", ".omp"),
        ("vibe", ".vibe"),
        ("grok", ".grok"),
    ],
)
def test_each_agent_s_default_home_is_under_the_user_s_home_on_windows(
    agent: str, folder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/agents.md's table: every agent keeps its folder under the home it gets from its
    runtime, on Windows too (with HOME set by a shell, it is still USERPROFILE)."""
    from coding_agent_exporter.sources import platform

    monkeypatch.setattr(platform, "_chosen", platform.detect(name="win32"))
    environ = {"HOME": "/c/Users/ada", "USERPROFILE": "C:\\Users\\ada"}
    found = HARNESSES[agent].default_home(environ)
    assert found == Path("C:\\Users\\ada").joinpath(*folder.split("/"))


def test_a_project_under_the_windows_profile_is_shown_under_tilde(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from coding_agent_exporter.sources import platform
    from coding_agent_exporter.state.labels import ProjectLabel

    label = ProjectLabel("path", "C:\\Users\\ada")
    assert label("C:\\Users\\ada\\work\\shop") == "~\\work\\shop"
    assert label("C:\\Users\\adam\\shop") == "C:\\Users\\adam\\shop"
    monkeypatch.setattr(platform, "_chosen", platform.detect(name="win32"))
    environ = {"HOME": "/c/Users/ada", "USERPROFILE": "C:\\Users\\ada"}
    assert parse(["metrics"], environ).project.home == "C:\\Users\\ada"

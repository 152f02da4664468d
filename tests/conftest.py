"""Shared helpers: the recorded fixtures and an exporter built on one of them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NoReturn

import pytest

from coding_agent_exporter.harnesses import HARNESSES, make
from coding_agent_exporter.runtime.app import PROBES, App
from coding_agent_exporter.runtime.config import parse
from coding_agent_exporter.runtime.engine import Source
from coding_agent_exporter.runtime.settings import settings_of
from coding_agent_exporter.sources import platform

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
GOLDEN = Path(__file__).resolve().parent / "golden"
NOW = 2_000_000_000.0  # long after every recording: sessions without a process are over
REQUIRE_TOOLS = "CODING_AGENT_EXPORTER_REQUIRE_TOOLS"
"""Set to 1 (`.ci/run` does), a test that would skip for a tool or kernel feature this machine
lacks fails instead: CI installs them all, so a skip there means a broken install step. Read
once here, at import: `_own_state_dir` clears every `CODING_AGENT_EXPORTER_*` variable for each
test."""
_TOOLS_REQUIRED = os.environ.get(REQUIRE_TOOLS) == "1"
AGENT_HOMES = (
    "CLAUDE_CONFIG_DIR",
    "CLINE_DATA_DIR",
    "CLINE_DIR",
    "CODEX_HOME",
    "COPILOT_HOME",
    "FACTORY_HOME_OVERRIDE",
    "GEMINI_CLI_HOME",
    "OPENCODE_DB",
    "OPENHANDS_PERSISTENCE_DIR",
    "PI_CODING_AGENT_DIR",
    "QWEN_HOME",
    "GROK_HOME",
    "HERMES_HOME",
    "KILO_DB",
    "KIMI_SHARE_DIR",
    "VIBE_HOME",
)


def missing_tool(why: str, *, module: bool = False) -> NoReturn:
    """Skip the test (or the whole module, at import) because `why`: a tool or kernel feature
    is missing. Under `CODING_AGENT_EXPORTER_REQUIRE_TOOLS=1` it fails instead. Every skip for
    a missing tool goes through here."""
    if _TOOLS_REQUIRED:
        pytest.fail(f"{why} ({REQUIRE_TOOLS}=1: a missing tool fails)", pytrace=False)
    pytest.skip(why, allow_module_level=module)


def scenarios(agent: str = "claude-code") -> list[Path]:
    """Every recorded scenario folder that has a home and its expected facts."""
    return sorted(
        p.parent
        for p in (FIXTURES / agent).glob("*/*/expected.json")
        if (p.parent / "home").is_dir()
    )


def all_scenarios() -> list[Path]:
    """The recorded scenarios of every agent that has fixtures."""
    return [path for agent in HARNESSES for path in scenarios(agent)]


def agent_of(path: Path) -> str:
    """The agent whose fixture `path` (a scenario folder or its home) belongs to."""
    found = path.relative_to(FIXTURES).parts[0] if path.is_relative_to(FIXTURES) else None
    return found if found in HARNESSES else "claude-code"


def scenario_id(path: Path) -> str:
    agent = agent_of(path)
    prefix = "" if agent == "claude-code" else f"{agent}-"
    return f"{prefix}{path.parent.name}-{path.name}"


FIXTURE_HOMES = {
    "claude-code": ".",  # a Claude fixture's `home` is Claude's own folder
    "cline": ".cline/data",  # its data folder
    "codex": ".codex",
    "copilot": ".copilot",
    "droid": ".factory",
    "gemini-cli": ".gemini",
    "grok": ".grok",
    "hermes": ".hermes",
    "kilo-code": ".local/share/kilo",  # its data folder
    "kimi": ".kimi",
    "oh-my-pi": ".",
    "opencode": ".local/share/opencode",  # its data folder
    "openhands": ".openhands",
    "pi": "agent",  # pi's home is its agent folder (`$PI_CODING_AGENT_DIR`)
    "qwen-code": ".qwen",
    "vibe": ".vibe",
}
"""Where each agent's home sits inside a fixture's `home/` (one line per agent)."""


def agent_home(home: Path) -> Path:
    """The agent's home inside a fixture's `home` (`home/.codex` for Codex, `home` for Claude)."""
    return home / FIXTURE_HOMES.get(agent_of(home), ".")


def home_flags(home: Path) -> list[str]:
    """Flags that read `home` with its own agent's harness only."""
    agent = agent_of(home)
    flags = [f"--{HARNESSES[agent].home_flag}", str(agent_home(home))]
    return flags + [f"--no-harness.{name}" for name in HARNESSES if name != agent]


def source_for(home: Path) -> Source:
    agent = agent_of(home)
    settings = settings_of(HARNESSES[agent], agent_home(home))  # Vibe's: its session folder
    return Source(make(agent, settings, PROBES), settings.home)


def expected(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((path / "expected.json").read_text())
    return data


def app_for(home: Path, *argv: str, now: float = NOW, alive: frozenset[int] = frozenset()) -> App:
    """An exporter over `home` with a fixed clock; only pids in `alive` are running processes."""
    config = parse(["metrics", *home_flags(home), *argv], {"HOME": "/home/user"})
    app = App(
        config,
        process_metrics=False,
        clock=lambda: now,
        probe=lambda pid: None if pid not in alive else 0.0,
    )
    app.catch_up()
    return app


@pytest.fixture(params=all_scenarios(), ids=scenario_id)
def scenario(request: pytest.FixtureRequest) -> Path:
    path: Path = request.param
    return path


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test (and every exporter it starts) keeps its state in its own folder and sees an
    empty home: the machine's own agent folders and OTel settings never leak into a test."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in list(os.environ):
        if name.startswith(("OTEL_", "CODING_AGENT_EXPORTER_")) or name in AGENT_HOMES:
            monkeypatch.delenv(name)


@pytest.fixture(params=["auto", "portable"])
def probes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A test that takes this runs twice: with this system's own probes (Linux's here) and with
    the portable ones (macOS's and Windows' code path), in this process and in every exporter
    process it starts; the choice before it is restored after it."""
    wanted: str = request.param
    monkeypatch.setenv("CODING_AGENT_EXPORTER_PLATFORM_PROBES", wanted)
    monkeypatch.setattr(platform, "_chosen", platform.detect(wanted))
    return wanted

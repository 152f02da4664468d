"""Shared helpers: the recorded fixtures and an exporter built on one of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from exporter.cli import App
from exporter.config import parse

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
GOLDEN = Path(__file__).resolve().parent / "golden"
NOW = 2_000_000_000.0  # long after every recording: sessions without a process are over


def scenarios(agent: str = "claude-code") -> list[Path]:
    """Every recorded scenario folder that has a home and its expected facts."""
    return sorted(
        p.parent
        for p in (FIXTURES / agent).glob("*/*/expected.json")
        if (p.parent / "home").is_dir()
    )


def scenario_id(path: Path) -> str:
    return f"{path.parent.name}-{path.name}"


def expected(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((path / "expected.json").read_text())
    return data


def app_for(home: Path, *argv: str, now: float = NOW, alive: frozenset[int] = frozenset()) -> App:
    """An exporter over `home` with a fixed clock; only pids in `alive` are running processes."""
    config = parse(["metrics", "--claude.home", str(home), *argv], {"HOME": "/home/user"})
    app = App(
        config,
        process_metrics=False,
        clock=lambda: now,
        probe=lambda pid: None if pid not in alive else 0.0,
    )
    app.catch_up()
    return app


@pytest.fixture(params=scenarios(), ids=scenario_id)
def scenario(request: pytest.FixtureRequest) -> Path:
    path: Path = request.param
    return path


@pytest.fixture(autouse=True)
def _own_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test (and every exporter it starts) keeps its state in its own folder."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg-state"))

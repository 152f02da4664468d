"""The /metrics view: golden expositions for every recorded scenario, linted by promtool."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from .conftest import FIXTURES, GOLDEN, app_for, expected, scenario_id

PROMTOOL = shutil.which("promtool")


def exposition(home: Path) -> str:
    return generate_latest(app_for(home).registry).decode()


def test_golden_exposition(scenario: Path) -> None:
    """`UPDATE_GOLDEN=1 pytest tests/test_metrics.py` rewrites them after a deliberate change."""
    golden = GOLDEN / f"{scenario_id(scenario)}.prom"
    text = exposition(scenario / "home")
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}: run with UPDATE_GOLDEN=1"
    assert text == golden.read_text()


def test_promtool_accepts_the_exposition(scenario: Path) -> None:
    assert PROMTOOL, "promtool not found: install Debian's prometheus package (.ci/run does)"
    text = exposition(scenario / "home")
    result = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_openmetrics_is_served_when_asked(scenario: Path) -> None:
    text = generate_openmetrics(app_for(scenario / "home").registry).decode()
    assert text.endswith("# EOF\n")
    if expected(scenario)["sessions"]:  # a killed legacy Vibe session leaves only its lock
        assert "coding_agent_sessions_total" in text


def test_no_prompt_text_or_title_in_any_label(scenario: Path) -> None:
    app = app_for(scenario / "home")
    text = generate_latest(app.registry).decode()
    for session in app.state.sessions.values():
        if session.title:
            assert session.title not in text


@pytest.mark.parametrize(
    "mode,label", [("path", "~/work/shop-api"), ("basename", "shop-api"), ("none", "")]
)
def test_project_label_modes(mode: str, label: str) -> None:
    home = FIXTURES / "claude-code" / "2.1.197" / "print-answer" / "home"
    app = app_for(home, "--label.project", mode)
    (key,) = {k[2] for k in app.state.totals.messages}
    assert app.config.project(key) == label
    assert f'project="{label}"' in generate_latest(app.registry).decode()


def test_recent_sessions_live_or_not_for_the_picker() -> None:
    """Sessions that are not live, each with the time of its latest record, while that is
    within 7 days; at most `RECENT_SESSIONS` of them, the latest."""
    from coding_agent_exporter.prometheus import collectors
    from coding_agent_exporter.state import state as state_module

    home = FIXTURES / "claude-code" / "2.1.332" / "resume-fork" / "home"  # two sessions, history
    app = app_for(home)
    latest = {k[1]: s.updated_at for k, s in app.state.sessions.items() if s.counted}
    newest = max(v or 0.0 for v in latest.values())

    def shown(now: float) -> dict[str, float]:
        app.collector.clock = lambda: now
        family = "coding_agent_session_activity_timestamp_seconds"
        found = [m for m in app.registry.collect() if m.name == family]
        return {s.labels["session_id"]: s.value for m in found for s in m.samples}

    assert shown(newest + 3600.0) == latest and len(latest) == 2
    assert shown(newest + collectors.RECENT_FOR + 1.0) == {}
    with app.state.lock:  # a cap of one keeps the latest
        state_module.RECENT_SESSIONS = 1
        try:
            app.state.rank_recent()
        finally:
            state_module.RECENT_SESSIONS = 200
    assert list(shown(newest + 3600.0).values()) == [newest]

"""Flags, environment variables and what the commands print."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from exporter.harnesses import HARNESSES
from exporter.runtime.cli import main
from exporter.runtime.config import env_name, parse

from .conftest import FIXTURES

HOME = {"HOME": "/home/user"}
RECORDED = FIXTURES / "claude-code" / "2.1.197" / "subagent-foreground" / "home"


def test_defaults() -> None:
    config = parse([], HOME)
    assert (config.command, config.host, config.port) == ("serve", "127.0.0.1", 10464)
    assert config.telemetry_path == "/metrics"
    assert config.homes["claude-code"] == Path("/home/user/.claude")
    assert config.homes["codex"] == Path("/home/user/.codex")
    assert config.homes["opencode"] == Path("/home/user/.local/share/opencode")


def test_every_flag_has_an_env_var_and_the_flag_wins() -> None:
    assert env_name("--web.listen-address") == "CODING_AGENT_EXPORTER_WEB_LISTEN_ADDRESS"
    env = {
        **HOME,
        "CODING_AGENT_EXPORTER_WEB_LISTEN_ADDRESS": "0.0.0.0:9000",
        "CODING_AGENT_EXPORTER_LABEL_PROJECT": "basename",
        "CODING_AGENT_EXPORTER_CLAUDE_HOME": "/elsewhere",
    }
    config = parse([], env)
    assert (config.host, config.port, config.project.mode) == ("0.0.0.0", 9000, "basename")
    assert config.homes["claude-code"] == Path("/elsewhere")
    assert parse(["--web.listen-address", "127.0.0.1:1"], env).port == 1


def test_flags_may_come_before_the_command() -> None:
    config = parse(["--log.format", "json", "sessions", "--all"], HOME)
    assert (config.command, config.log_format, config.all) == ("sessions", "json", True)


def test_claude_config_dir_is_the_default_home() -> None:
    config = parse([], {**HOME, "CLAUDE_CONFIG_DIR": "/cfg"})
    assert config.homes["claude-code"] == Path("/cfg")


def test_codex_home_is_codex_home_env_or_dot_codex() -> None:
    assert parse([], {**HOME, "CODEX_HOME": "/cx"}).homes["codex"] == Path("/cx")
    assert parse(["--codex.home", "/y"], HOME).homes["codex"] == Path("/y")
    assert "codex" not in parse(["--no-harness.codex"], HOME).homes


def test_harness_can_be_switched_off_by_flag_or_env() -> None:
    with pytest.raises(SystemExit):
        parse([f"--no-harness.{name}" for name in HARNESSES], HOME)  # nothing left to read
    with pytest.raises(SystemExit):
        parse([], {**HOME, "CODING_AGENT_EXPORTER_HARNESS_CLAUDE_CODE": "maybe"})


@pytest.mark.parametrize(
    "argv",
    [
        ["--web.listen-address", "nope"],
        ["--web.telemetry-path", "metrics"],
        ["--label.project", "full"],
        ["--bogus"],
    ],
)
def test_bad_flags_exit_with_one_clear_message(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        parse(argv, HOME)
    assert stop.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_unreadable_home_is_an_error_missing_home_is_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert parse(["--claude.home", str(tmp_path / "absent")], HOME).homes
    locked = tmp_path / "locked"
    locked.mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != locked)
    with pytest.raises(SystemExit):
        parse(["--claude.home", str(locked)], HOME)
    assert "cannot be read" in capsys.readouterr().err


def test_sessions_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "--all", "--json", "--claude.home", str(RECORDED)]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    for key in (
        "agent",
        "session_id",
        "title",
        "title_source",
        "cwd",
        "project",
        "model",
        "live",
        "pid",
        "kind",
        "state",
        "reason",
        "started_at",
        "updated_at",
        "messages",
        "turns",
        "tool_calls",
        "tokens",
        "subagents",
    ):
        assert key in row, key
    assert row["state"] == "ended" and row["live"] is False and row["kind"] == "headless"
    assert row["started_at"].endswith("Z")
    (sub,) = row["subagents"]
    for key in (
        "id",
        "type",
        "title",
        "background",
        "state",
        "parent_id",
        "messages",
        "tokens",
        "tool_calls",
    ):
        assert key in sub, key


def test_sessions_table_and_live_only_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "--claude.home", str(RECORDED)]) == 0
    assert "No live sessions" in capsys.readouterr().out
    assert main(["sessions", "--all", "--claude.home", str(RECORDED)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["STATE", "AGENT", "PROJECT"]
    assert out.splitlines()[1].startswith("ended")


def test_metrics_command_prints_one_scrape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "--claude.home", str(RECORDED)]) == 0
    out = capsys.readouterr().out
    assert "coding_agent_messages_total" in out and "process_cpu_seconds_total" in out


def test_sessions_include_internal_lists_automatic_reviews(
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = FIXTURES / "codex" / "0.171.0" / "guardian" / "home" / ".codex"
    argv = ["sessions", "--all", "--json", "--no-harness.claude-code", "--codex.home", str(home)]
    assert main(argv) == 0
    assert [r["kind"] for r in json.loads(capsys.readouterr().out)] == ["headless"]
    assert main([*argv, "--include-internal"]) == 0
    rows = json.loads(capsys.readouterr().out)
    (review,) = [r for r in rows if r["kind"] == "review"]
    assert review["outcome"] == "allow" and review["parent_session_id"] == rows[0]["session_id"]

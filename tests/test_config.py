"""Flags, environment variables and what the commands print."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from coding_agent_exporter.harnesses import HARNESSES
from coding_agent_exporter.runtime.cli import main
from coding_agent_exporter.runtime.config import parse
from coding_agent_exporter.runtime.options import env_name

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


@pytest.mark.parametrize(
    ("variable", "value", "allowed"),
    [
        ("CODING_AGENT_EXPORTER_LOG_LEVEL", "verbose", "debug, info, warn, error"),
        ("CODING_AGENT_EXPORTER_LOG_FORMAT", "xml", "text, json"),
        ("CODING_AGENT_EXPORTER_LABEL_PROJECT", "full", "path, basename, none"),
        ("CODING_AGENT_EXPORTER_HARNESS_CODEX", "maybe", "true or false"),
    ],
)
def test_a_bad_variable_is_named_with_its_value_and_what_is_allowed(
    variable: str, value: str, allowed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        parse(["sessions"], {**HOME, variable: value})
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"{variable}={value!r}" in err and allowed in err
    assert len(err.splitlines()) == 2 and "usage:" not in err and "Traceback" not in err


def test_a_variable_is_checked_only_by_the_commands_that_use_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = {
        **HOME,
        "CODING_AGENT_EXPORTER_WEB_LISTEN_ADDRESS": "garbage",
        "CODING_AGENT_EXPORTER_TRACES_CAPTURE_CONTENT": "maybe",
    }
    assert parse(["sessions"], bad).command == "sessions"  # it listens on nothing
    assert parse(["metrics"], bad).command == "metrics"
    with pytest.raises(SystemExit) as stop:
        parse(["serve"], bad)
    assert stop.value.code == 2
    assert "CODING_AGENT_EXPORTER_WEB_LISTEN_ADDRESS='garbage': " in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse(["traces"], bad)
    assert "CODING_AGENT_EXPORTER_TRACES_CAPTURE_CONTENT='maybe'" in capsys.readouterr().err


def test_a_flag_beats_a_bad_variable_and_a_good_variable_is_used() -> None:
    environ = {**HOME, "CODING_AGENT_EXPORTER_LOG_LEVEL": "verbose"}
    assert parse(["--log.level", "debug"], environ).log_level == "debug"
    assert parse([], {**HOME, "CODING_AGENT_EXPORTER_LOG_LEVEL": "WARN"}).log_level == "warn"


def test_a_mistyped_command_gets_a_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        parse(["metrix"], HOME)
    assert stop.value.code == 2
    assert "no command 'metrix' (did you mean 'metrics'?)" in capsys.readouterr().err


def test_a_flag_value_is_never_taken_for_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse(["--state.dir", "sessions"], HOME).command == "serve"
    with pytest.raises(SystemExit):
        parse(["--web.telemetry-path", "metrics"], HOME)
    assert "argument --web.telemetry-path: 'metrics' must start with /" in capsys.readouterr().err


def test_a_home_that_is_a_file_says_so_and_names_its_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    with pytest.raises(SystemExit) as stop:
        parse(["--claude.home", str(afile)], HOME)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"claude-code home {afile} is a file, not a folder" in err
    assert "--claude.home (or CODING_AGENT_EXPORTER_CLAUDE_HOME)" in err
    with pytest.raises(SystemExit):
        parse(["--vibe.session-dir", str(afile)], HOME)
    assert (
        "--vibe.session-dir (or CODING_AGENT_EXPORTER_VIBE_SESSION_DIR)" in capsys.readouterr().err
    )


def test_a_port_in_use_suggests_the_flag(capfd: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        code = main(["serve", "--web.listen-address", f"127.0.0.1:{port}"])
    assert code == 1
    (said,) = [line for line in capfd.readouterr().err.splitlines() if "cannot listen" in line]
    assert f"127.0.0.1:{port}" in said and "--web.listen-address" in said


@pytest.mark.parametrize(
    ("address", "shown", "warned"),
    [("127.0.0.1", "127.0.0.1", False), ("", "0.0.0.0", True), ("[::1]", "[::1]", False)],
)
def test_serve_says_where_it_listens_and_warns_on_every_interface(
    address: str, shown: str, warned: bool, tmp_path: Path
) -> None:
    import signal
    import socket
    import subprocess
    import sys

    if address == "[::1]" and not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")  # pragma: no cover
    from .backends import free_port, wait_for

    port = free_port()
    log = tmp_path / "log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                *(
                    sys.executable,
                    "-m",
                    "coding_agent_exporter",
                    "serve",
                    "--claude.home",
                    str(RECORDED),
                ),
                *("--web.listen-address", f"{address}:{port}", "--state.dir", str(tmp_path / "s")),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HOME": str(tmp_path)},
        )
        try:
            wait_for("listening", lambda: "listening on http://" in log.read_text())
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=10)
    text = log.read_text()
    assert f"listening on http://{shown}:{port}/metrics" in text
    assert ("listening on every network interface" in text) is warned
    assert f"claude-code: reading {RECORDED}" in text

"""A start with traces off imports no OpenTelemetry (nor `requests`, protobuf, multiprocessing):
they are a third of the import time, and a warm restart is mostly importing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FIXTURES, ROOT

HOME = FIXTURES / "claude-code" / "2.1.332" / "interactive" / "home"
ENVIRON = {"HOME": "/nonexistent", "PATH": os.environ.get("PATH", "")}
HEAVY = ("opentelemetry", "requests", "google.protobuf", "multiprocessing")


def imported(environ: dict[str, str], *, traces: bool, catch_up: bool) -> list[str]:
    """The heavy modules a fresh interpreter holds after parsing the flags (and catching up)."""
    script = f"""
import sys
from coding_agent_exporter.runtime.app import App
from coding_agent_exporter.runtime.config import parse

config = parse(["metrics", "--claude.home", {str(HOME)!r}], {environ!r})
assert config.traces is {traces}
if {catch_up}:
    App(config, process_metrics=False).catch_up()
print(" ".join(sorted({{m for m in sys.modules if m.startswith({HEAVY!r})}})))
"""
    run = [sys.executable, "-c", script]
    return subprocess.run(run, cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


def test_a_start_without_traces_imports_no_opentelemetry() -> None:
    assert imported({"HOME": "/nonexistent"}, traces=False, catch_up=True) == []


def test_an_endpoint_turns_traces_on_without_importing_opentelemetry() -> None:
    environ = {"HOME": "/nonexistent", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    assert imported(environ, traces=True, catch_up=False) == []  # the flags alone decide


@pytest.mark.parametrize("command", ["metrics", "sessions"])
def test_a_one_shot_command_writes_all_then_exits_without_the_teardown(
    command: str, tmp_path: Path
) -> None:
    """`metrics` and `sessions` end at once once their output and the cache are written: the
    interpreter's teardown (here an exit handler stands for it) would only free what the
    catch-up built. Called with its arguments (by a caller that goes on), `main` returns."""
    argv = [command, "--all", "--claude.home", str(HOME), "--state.dir", str(tmp_path)]
    argv = argv if command == "sessions" else [a for a in argv if a != "--all"]
    script = f"""
import atexit, sys
atexit.register(print, "torn down")
sys.argv = ["coding-agent-exporter", *{argv!r}]
from coding_agent_exporter.runtime.cli import main
main()
"""
    run = [sys.executable, "-c", script]
    done = subprocess.run(run, cwd=ROOT, env=ENVIRON, capture_output=True, text=True, check=True)
    assert "torn down" not in done.stdout
    expected = "coding_agent_tokens_total{" if command == "metrics" else "my-shop-session"
    assert expected in done.stdout
    assert list(tmp_path.glob("catch-up-*.cache"))  # the cache written before the exit
    returned = script.replace("main()", "print('returned', main(sys.argv[1:]))")
    run = [sys.executable, "-c", returned]
    done = subprocess.run(run, cwd=ROOT, env=ENVIRON, capture_output=True, text=True, check=True)
    assert done.stdout.rstrip().endswith("returned 0\ntorn down")

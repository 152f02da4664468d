"""A start with traces off imports no OpenTelemetry (nor `requests`, protobuf, multiprocessing):
they are a third of the import time, and a warm restart is mostly importing."""

from __future__ import annotations

import subprocess
import sys

from .conftest import FIXTURES, ROOT

HOME = FIXTURES / "claude-code" / "2.1.332" / "interactive" / "home"
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

"""Spans on the wire: `serve` sends recorded turns to a real OTLP endpoint over HTTP and gRPC."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .backends import free_port, get, wait_for
from .conftest import FIXTURES
from .otlp_sink import GrpcSink, HttpSink, Sink

SCENARIO = FIXTURES / "claude-code" / "2.1.197" / "subagent-foreground"


@pytest.fixture(params=["http/protobuf", "grpc"])
def sink(request: pytest.FixtureRequest) -> Iterator[tuple[str, Sink]]:
    protocol: str = request.param
    receiver: HttpSink | GrpcSink = HttpSink() if protocol == "http/protobuf" else GrpcSink()
    yield protocol, receiver
    receiver.close()


def serve(home: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "exporter",
                "serve",
                "--claude.home",
                str(home),
                "--web.listen-address",
                f"127.0.0.1:{port}",
                "--traces.backfill",
                "all",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    process.port = port  # type: ignore[attr-defined]
    return process


def test_serve_sends_the_turn_tree_over_otlp(sink: tuple[str, Sink], tmp_path: Path) -> None:
    protocol, receiver = sink
    home = tmp_path / "claude"
    shutil.copytree(SCENARIO / "home", home)
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_SERVICE_NAME": "cae-test",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    process = serve(home, env, tmp_path / "exporter.log")
    try:
        wait_for("spans", lambda: len(receiver.spans) >= 8)
        url = f"http://127.0.0.1:{process.port}/metrics"  # type: ignore[attr-defined]
        wait_for("span counter", lambda: "spans_exported_total 8.0" in get(url)[1])
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0, (tmp_path / "exporter.log").read_text()
    assert len(receiver.spans) == 8  # the golden tree of this scenario, each span once
    spans = {s.name: s for s in receiver.spans}
    assert {s.service for s in receiver.spans} == {"cae-test"}
    root = spans["invoke_agent claude-code"]
    agent_tool = spans["execute_tool Agent"]
    sub = spans["invoke_agent general-purpose"]
    assert root.parent_id == "" and len({s.trace_id for s in receiver.spans}) == 1
    assert agent_tool.parent_id == root.span_id and sub.parent_id == agent_tool.span_id
    assert spans["execute_tool Bash"].parent_id == sub.span_id
    assert root.attributes["gen_ai.conversation.id"] == SCENARIO_SESSION
    assert root.attributes["gen_ai.provider.name"] == "anthropic"
    assert root.attributes["coding_agent.turn.outcome"] == "completed"
    assert root.start < agent_tool.start < agent_tool.end <= root.end


SCENARIO_SESSION = next(SCENARIO.glob("home/projects/*/*.jsonl")).stem


def test_no_history_is_sent_by_default(tmp_path: Path) -> None:
    receiver = HttpSink()
    try:
        home = tmp_path / "claude"
        shutil.copytree(SCENARIO / "home", home)
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
        port = free_port()
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "exporter",
                "serve",
                "--claude.home",
                str(home),
                "--web.listen-address",
                f"127.0.0.1:{port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        wait_for("ready", lambda: get(f"http://127.0.0.1:{port}/-/ready")[0] == 200)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        assert receiver.spans == []
    finally:
        receiver.close()


def run_once(home: Path, env: dict[str, str], log: Path, *argv: str) -> None:
    """Start `serve`, let it catch up and send, stop it cleanly."""
    port = free_port()
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "exporter",
                "serve",
                "--claude.home",
                str(home),
                "--web.listen-address",
                f"127.0.0.1:{port}",
                *argv,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        wait_for("ready", lambda: get(f"http://127.0.0.1:{port}/-/ready")[0] == 200)
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0, log.read_text()


def test_a_restart_sends_no_turn_twice_and_misses_none(tmp_path: Path) -> None:
    receiver = HttpSink()
    try:
        home = tmp_path / "claude"
        shutil.copytree(SCENARIO / "home", home)
        env = {
            **os.environ,
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "CODING_AGENT_EXPORTER_STATE_DIR": str(tmp_path / "state"),
        }
        log = tmp_path / "exporter.log"
        run_once(home, env, log, "--traces.backfill", "all")
        first = sorted((s.trace_id, s.span_id) for s in receiver.spans)
        assert len(first) == 8
        assert (tmp_path / "state" / "traces-sent.json").exists()
        run_once(home, env, log)  # same files, same state folder: nothing new
        assert sorted((s.trace_id, s.span_id) for s in receiver.spans) == first
        # a turn written while the exporter was down is sent by the next start
        (later,) = (FIXTURES / "claude-code" / "2.1.197" / "print-answer" / "home").glob(
            "projects/*/*.jsonl"
        )
        shutil.copy(later, home / "projects" / later.parent.name / later.name)
        os.utime(home / "projects" / later.parent.name / later.name)
        _shift_into_the_future(home / "projects" / later.parent.name / later.name)
        run_once(home, env, log)
        names = [s.name for s in receiver.spans[len(first) :]]
        assert sorted(names) == ["chat claude-opus-4-8", "invoke_agent claude-code"]
    finally:
        receiver.close()


def _shift_into_the_future(journal: Path) -> None:
    """Move the recorded timestamps to now, as if the turn had just happened."""
    import json
    import time
    from datetime import UTC, datetime

    lines = journal.read_text().splitlines()
    stamps = [json.loads(x).get("timestamp") for x in lines]
    first = min(datetime.fromisoformat(t).timestamp() for t in stamps if t)
    shift = time.time() - first
    out = []
    for line in lines:
        record = json.loads(line)
        if record.get("timestamp"):
            moved = datetime.fromisoformat(record["timestamp"]).timestamp() + shift
            record["timestamp"] = datetime.fromtimestamp(moved, UTC).isoformat()
        out.append(json.dumps(record))
    journal.write_text("\n".join(out) + "\n")


def test_an_endpoint_outage_costs_spans_not_the_exporter(tmp_path: Path) -> None:
    """Endpoint down at start: the exporter serves, drops what overflows its queue and
    counts it, counts what failed; when the endpoint is back, new turns arrive."""
    home = tmp_path / "claude"
    shutil.copytree(SCENARIO / "home", home)
    sink_port, port = free_port(), free_port()
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{sink_port}",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
        "OTEL_BSP_MAX_QUEUE_SIZE": "3",
        "OTEL_BSP_SCHEDULE_DELAY": "3000",
    }
    log = tmp_path / "exporter.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "exporter",
                "serve",
                "--claude.home",
                str(home),
                "--web.listen-address",
                f"127.0.0.1:{port}",
                "--traces.backfill",
                "all",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    metrics = f"http://127.0.0.1:{port}/metrics"
    receiver: HttpSink | None = None
    try:
        wait_for("ready", lambda: get(f"http://127.0.0.1:{port}/-/ready")[0] == 200)
        assert "coding_agent_exporter_spans_dropped_total 5.0" in get(metrics)[1]
        wait_for("failed batch", lambda: "span_export_errors_total 3.0" in get(metrics)[1])
        receiver = HttpSink(sink_port)  # the endpoint comes back
        (later,) = (FIXTURES / "claude-code" / "2.1.197" / "print-answer" / "home").glob(
            "projects/*/*.jsonl"
        )
        journal = home / "projects" / later.parent.name / later.name
        shutil.copy(later, journal)
        _shift_into_the_future(journal)
        wait_for("new turn delivered", lambda: len(receiver.spans) == 2)
        assert "coding_agent_exporter_spans_exported_total 2.0" in get(metrics)[1]
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log.read_text()
        if receiver is not None:
            receiver.close()


def test_traces_command_writes_otlp_json(tmp_path: Path) -> None:
    from exporter.cli import main

    out = tmp_path / "spans.jsonl"
    home = str(SCENARIO / "home")
    assert main(["traces", "--claude.home", home, "--output", str(out)]) == 0
    import json

    requests = [json.loads(line) for line in out.read_text().splitlines()]
    spans = [
        span
        for request in requests
        for resource in request["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    assert len(spans) == 8
    root = next(s for s in spans if s["name"] == "invoke_agent claude-code")
    assert len(root["traceId"]) == 32 and len(root["spanId"]) == 16  # hex, as OTLP/JSON wants
    assert {s["traceId"] for s in spans} == {root["traceId"]}


def test_traces_command_needs_an_endpoint_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from exporter.cli import main

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert main(["traces", "--claude.home", str(SCENARIO / "home")]) == 2


def test_traces_command_sends_history_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from exporter.cli import main

    receiver = HttpSink()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        home = str(SCENARIO / "home")
        assert main(["traces", "--claude.home", home]) == 0
        assert len(receiver.spans) == 8
        assert main(["traces", "--claude.home", home]) == 0  # the checkpoint knows them
        assert len(receiver.spans) == 8
        assert main(["traces", "--claude.home", home, "--since", "1d"]) == 0
    finally:
        receiver.close()

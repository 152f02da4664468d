"""Spans on the wire: `serve` sends recorded turns to a real OTLP endpoint over HTTP and gRPC."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from coding_agent_exporter.runtime.cli import main

from .backends import free_port, get, run_exporter, wait_for
from .conftest import FIXTURES
from .otlp_sink import GrpcSink, HttpSink, Sink

SCENARIO = FIXTURES / "claude-code" / "2.1.197" / "subagent-foreground"
SCENARIO_SESSION = next(SCENARIO.glob("home/projects/*/*.jsonl")).stem
(LATER,) = (FIXTURES / "claude-code" / "2.1.197" / "print-answer" / "home").glob(
    "projects/*/*.jsonl"
)


@pytest.fixture(params=["http/protobuf", "grpc"])
def sink(request: pytest.FixtureRequest) -> Iterator[tuple[str, Sink]]:
    protocol: str = request.param
    receiver: HttpSink | GrpcSink = HttpSink() if protocol == "http/protobuf" else GrpcSink()
    yield protocol, receiver
    receiver.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "claude"
    shutil.copytree(SCENARIO / "home", home)
    return home


def write_later_turn(home: Path) -> None:
    """Another session, its timestamps moved to now, as if its turn had just happened."""
    lines = LATER.read_text().splitlines()
    stamps = [json.loads(x).get("timestamp") for x in lines]
    shift = time.time() - min(datetime.fromisoformat(t).timestamp() for t in stamps if t)
    out = []
    for line in lines:
        record = json.loads(line)
        if record.get("timestamp"):
            moved = datetime.fromisoformat(record["timestamp"]).timestamp() + shift
            record["timestamp"] = datetime.fromtimestamp(moved, UTC).isoformat()
        out.append(json.dumps(record))
    journal = home / "projects" / LATER.parent.name / LATER.name
    journal.write_text("\n".join(out) + "\n")


def test_serve_sends_the_turn_tree_over_otlp(
    sink: tuple[str, Sink], home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    protocol, receiver = sink
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "cae-test")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    with run_exporter(home, tmp_path, "--traces.backfill", "all") as url:
        wait_for("spans", lambda: len(receiver.spans) >= 8)
        wait_for("counter", lambda: "spans_exported_total 8.0" in get(url + "/metrics")[1])
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


def test_no_history_is_sent_by_default(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = HttpSink()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        with run_exporter(home, tmp_path):
            pass
        assert receiver.spans == []
    finally:
        receiver.close()


def test_a_restart_sends_no_turn_twice_and_misses_none(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = HttpSink()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("CODING_AGENT_EXPORTER_STATE_DIR", str(tmp_path / "state"))
        with run_exporter(home, tmp_path, "--traces.backfill", "all"):
            pass
        first = sorted((s.trace_id, s.span_id) for s in receiver.spans)
        assert len(first) == 8
        assert (tmp_path / "state" / "traces-sent.json").exists()
        with run_exporter(home, tmp_path):  # same files, same state folder: nothing new
            pass
        assert sorted((s.trace_id, s.span_id) for s in receiver.spans) == first
        write_later_turn(home)  # written while the exporter was down: sent by the next start
        with run_exporter(home, tmp_path):
            pass
        names = [s.name for s in receiver.spans[len(first) :]]
        assert sorted(names) == ["chat claude-opus-4-8", "invoke_agent claude-code"]
    finally:
        receiver.close()


def test_an_endpoint_outage_costs_spans_not_the_exporter(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Endpoint down at start: the exporter serves, drops what overflows its queue and
    counts it, counts what failed and keeps it; when the endpoint is back, what it refused
    arrives (once), and new turns too."""
    sink_port = free_port()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{sink_port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "3")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "3000")
    receiver: HttpSink | None = None
    try:
        with run_exporter(home, tmp_path, "--traces.backfill", "all") as url:
            metrics = url + "/metrics"
            assert "coding_agent_exporter_spans_dropped_total 5.0" in get(metrics)[1]
            wait_for("failed batch", lambda: "span_export_errors_total 3.0" in get(metrics)[1])
            assert "coding_agent_exporter_spans_waiting 3.0" in get(metrics)[1]
            receiver = HttpSink(sink_port)  # the endpoint comes back
            write_later_turn(home)
            wait_for("refused and new delivered", lambda: len(receiver.spans) == 5)
            wait_for("exported counted", lambda: "spans_exported_total 5.0" in get(metrics)[1])
            assert "coding_agent_exporter_spans_waiting 0.0" in get(metrics)[1]
            assert len({(s.trace_id, s.span_id) for s in receiver.spans}) == 5
    finally:
        if receiver is not None:
            receiver.close()


def test_traces_command_writes_otlp_json(tmp_path: Path) -> None:
    out = tmp_path / "spans.jsonl"
    assert main(["traces", "--claude.home", str(SCENARIO / "home"), "--output", str(out)]) == 0
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


def test_traces_command_needs_an_endpoint_or_a_file() -> None:
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in os.environ
    assert main(["traces", "--claude.home", str(SCENARIO / "home")]) == 2


def test_traces_command_sends_history_once(monkeypatch: pytest.MonkeyPatch) -> None:
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


def _serve(home: Path, workdir: Path, *argv: str) -> tuple[subprocess.Popen[bytes], str]:
    """`serve` over `home`, for a test that kills it (`run_exporter` stops it cleanly)."""
    port = free_port()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "coding_agent_exporter", "serve", "--claude.home", str(home)),
            *("--codex.home", str(workdir / "no-codex-home")),
            *("--web.listen-address", f"127.0.0.1:{port}", *argv),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    wait_for("exporter ready", lambda: get(url + "/-/ready")[0] == 200)
    return process, url


def test_an_outage_a_kill_and_restarts_lose_no_span_and_send_none_twice(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Endpoint down: every span the turns make waits in the state folder, through a SIGKILL
    and a restart while still down; the endpoint back, each arrives once, with the ids a
    receiver that was up all along got."""
    reference = HttpSink()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", reference.endpoint)
        monkeypatch.setenv("CODING_AGENT_EXPORTER_STATE_DIR", str(tmp_path / "fresh"))
        with run_exporter(home, tmp_path, "--traces.backfill", "all") as url:
            wait_for("sent", lambda: "spans_waiting 0.0" in get(url + "/metrics")[1])
        expected = sorted((s.trace_id, s.span_id) for s in reference.spans)
    finally:
        reference.close()
    assert len(expected) == 8
    port = free_port()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    monkeypatch.setenv("CODING_AGENT_EXPORTER_STATE_DIR", str(tmp_path / "state"))
    kept = f"coding_agent_exporter_spans_waiting {len(expected)}.0"
    process, killed = _serve(home, tmp_path, "--traces.backfill", "all")
    try:
        wait_for("spans kept", lambda: kept in get(killed + "/metrics")[1])
    finally:
        process.kill()
        process.wait(timeout=10)
    with run_exporter(home, tmp_path, "--traces.backfill", "all") as url:  # still down
        text = get(url + "/metrics")[1]
        assert kept in text, "the kill lost what was kept"
        wait_for(
            "a retry refused", lambda: "span_export_errors_total 8.0" in get(url + "/metrics")[1]
        )
    receiver = HttpSink(port)  # the endpoint is back
    try:
        with run_exporter(home, tmp_path, "--traces.backfill", "all") as url:
            wait_for("delivered", lambda: "spans_waiting 0.0" in get(url + "/metrics")[1])
        assert sorted((s.trace_id, s.span_id) for s in receiver.spans) == expected
    finally:
        receiver.close()

"""`coding-agent-exporter push` against real receivers: the turns to Arize Phoenix (a real
tracing backend, $PHOENIX_BIN, started as in test_phoenix.py), the metrics to the in-process
OTLP metrics receiver, in the same run; again with nothing new, with a later turn, and through
an outage of Phoenix (the turns wait in the state folder for the next push)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .backends import free_port, wait_for
from .conftest import FIXTURES
from .otlp_metric_sink import HttpMetricSink
from .test_otlp import write_later_turn
from .test_phoenix import (
    ARRIVAL,
    Phoenix,
    _Forwarder,
    _golden,
    _render,
    _spans,
    _tail,
    _without_otel,
    phoenix,
)

__all__ = ["phoenix"]  # the module's Phoenix, shared by the tests below
pytestmark = pytest.mark.timeout(300)  # Phoenix's start, then a `push` given 120 s
VERSION, OUTAGE = "2.1.197", "2.1.332"  # Phoenix keeps a span id once: one recording each


def _scenario(version: str) -> Path:
    return FIXTURES / "claude-code" / version / "subagent-foreground"


def _push(home: Path, tmp_path: Path, env: dict[str, str]) -> tuple[int, int, str]:
    """One push; its exit code, the spans it sent and its log."""
    argv = [sys.executable, "-m", "coding_agent_exporter", "push", "--claude.home", str(home)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    sent = re.search(r"pushed (\d+) spans", done.stderr)
    return done.returncode, int(sent[1]) if sent else -1, done.stderr


def _env(tmp_path: Path, traces: str, metrics: str, project: str) -> dict[str, str]:
    (tmp_path / "user").mkdir(exist_ok=True)
    return {
        **_without_otel(dict(os.environ)),
        "HOME": str(tmp_path / "user"),
        "CODING_AGENT_EXPORTER_STATE_DIR": str(tmp_path / "state"),
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": traces + "/v1/traces",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": metrics + "/v1/metrics",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "2",
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
    }


def _in_phoenix(phoenix: Phoenix, project: str, count: int) -> list[dict[str, object]]:
    try:
        found: list[dict[str, object]] = wait_for(
            f"{count} spans in phoenix project {project}",
            lambda: (s := _spans(phoenix, project)) and len(s) >= count and s,
            deadline=ARRIVAL,
        )
    except AssertionError as error:
        raise AssertionError(f"{error}\n--- phoenix log:\n{_tail(phoenix.log)}") from None
    return found


def test_push_sends_the_turns_to_phoenix_and_the_metrics_beside_them(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    home = tmp_path / "claude"
    shutil.copytree(_scenario(VERSION) / "home", home)
    receiver = HttpMetricSink()
    env = _env(tmp_path, phoenix.url, receiver.endpoint, "cae-push")
    try:
        first = _push(home, tmp_path, env)
        again = _push(home, tmp_path, env)  # nothing new: no span, the same counts
        write_later_turn(home)
        later = _push(home, tmp_path, env)
    finally:
        receiver.close()
    traces, tree = _golden(VERSION)
    assert first[:2] == (0, len(tree)), first[2]
    assert again[:2] == (0, 0), again[2]
    assert later[0] == 0 and later[1] > 0, later[2]
    spans = _in_phoenix(phoenix, "cae-push", len(tree) + later[1])
    assert len(spans) == len(tree) + later[1]  # each span once
    ours = [s for s in spans if s["context"]["trace_id"] in traces]  # type: ignore[index]
    assert _render(ours) == tree
    turns = [
        sum(p.value for p in e.points if p.name == "coding_agent_turns_total")
        for e in receiver.exports
    ]
    assert turns == [1, 1, 2]
    assert {e.resource["openinference.project.name"] for e in receiver.exports} == {"cae-push"}


def test_push_during_a_phoenix_outage_delivers_the_turns_at_the_next_push(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    port = free_port()
    receiver = HttpMetricSink()
    env = _env(tmp_path, f"http://127.0.0.1:{port}", receiver.endpoint, "cae-push-outage")
    traces, tree = _golden(OUTAGE)
    try:
        down = _push(_scenario(OUTAGE) / "home", tmp_path, env)
        assert down[0] == 1 and "failed" in down[2], down[2]  # the spans could not go
        assert list((tmp_path / "state" / "traces-spool").glob("*.json")), down[2]
        forwarder = _Forwarder(port, int(phoenix.url.rsplit(":", 1)[1]))
        try:
            up = _push(_scenario(OUTAGE) / "home", tmp_path, env)
        finally:
            forwarder.close()
    finally:
        receiver.close()
    assert up[0] == 0 and up[1] == len(tree), up[2]
    assert len(receiver.exports) == 2  # the metrics went both times
    spans = _in_phoenix(phoenix, "cae-push-outage", len(tree))
    assert len(spans) == len(tree) and _render(spans) == tree
    assert {s["context"]["trace_id"] for s in spans} == set(traces)  # type: ignore[index]
    assert not list((tmp_path / "state" / "traces-spool").glob("*.json"))

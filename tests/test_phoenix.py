"""A real tracing backend: Arize Phoenix (from PyPI, in its own virtualenv that .ci/run makes and
names in $PHOENIX_BIN) receives the turn tree from `coding-agent-exporter traces` over OTLP
HTTP/protobuf and over gRPC, and gives it back through its REST API.

Each protocol sends a different recording (span ids are derived from record ids, and Phoenix keeps
a span id once) into its own Phoenix project (resource attribute `openinference.project.name`), so
what is read back for a protocol was carried by that protocol. Phoenix does not return resource
attributes per span: `service.name` is checked by test_otlp.py's in-process receiver instead.
And an outage: Phoenix behind a port that is closed at first, through a SIGKILL, then open.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from .backends import free_port, get, wait_for
from .conftest import FIXTURES, GOLDEN
from .test_traces import SHOWN

STARTUP = 90.0  # Phoenix 20.26 answers /healthz after 12-25 s (SQLite migrations on first start)
ARRIVAL = 30.0  # Phoenix inserts received spans in batches, about once a second
pytestmark = pytest.mark.timeout(300)  # the first test waits for Phoenix's start (STARTUP)
SCENARIOS = {  # same tree shape (8 spans), different sessions: different trace and span ids
    "http/protobuf": "2.1.197",
    "grpc": "2.1.332",
}


@dataclass(frozen=True)
class Phoenix:
    url: str  # HTTP: UI, REST API and OTLP/HTTP at /v1/traces
    grpc_port: int
    log: Path


def _without_otel(environ: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if not k.startswith("OTEL_")}


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    """`phoenix serve` on two free loopback ports, working dir in a temporary folder; stopped at
    the end of the module. (Phoenix binds its gRPC port on all interfaces; it has no setting.)"""
    path = os.environ.get("PHOENIX_BIN", "")
    assert path and os.access(path, os.X_OK), (
        f"PHOENIX_BIN={path!r} is not an executable Phoenix: run the tests through .ci/run, "
        "which installs arize-phoenix into its own virtualenv and sets PHOENIX_BIN"
    )
    workdir = tmp_path_factory.mktemp("phoenix")
    http_port = free_port()
    grpc_port = free_port()
    while grpc_port == http_port:
        grpc_port = free_port()
    env = {
        **_without_otel(dict(os.environ)),
        "PHOENIX_WORKING_DIR": str(workdir / "data"),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(http_port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = workdir / "phoenix.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [path, "serve"], stdout=out, stderr=subprocess.STDOUT, env=env, cwd=workdir
        )
    url = f"http://127.0.0.1:{http_port}"

    def healthy() -> bool:
        assert process.poll() is None, f"phoenix exited with {process.returncode}:\n{_tail(log)}"
        return get(url + "/healthz")[0] == 200

    try:
        try:
            wait_for("phoenix /healthz", healthy, deadline=STARTUP)
        except AssertionError as error:
            raise AssertionError(f"{error}\n--- phoenix log:\n{_tail(log)}") from None
        yield Phoenix(url, grpc_port, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _spans(phoenix: Phoenix, project: str) -> list[dict[str, Any]]:
    status, body = get(f"{phoenix.url}/v1/projects/{project}/spans?limit=1000")
    if status == 404:  # the project appears with its first span
        return []
    assert status == 200, body
    data: list[dict[str, Any]] = json.loads(body)["data"]
    return data


def _golden(version: str) -> tuple[list[str], list[str]]:
    """The golden trace ids and span lines of the recording (see test_traces.py): the turn,
    then the lead's reply to the sub-agent's notification, a turn of its own in 2.1.3xx."""
    lines = (GOLDEN / "traces" / f"{version}-subagent-foreground.txt").read_text().splitlines()
    assert lines[0].startswith("trace "), lines[0]
    traces = [line.removeprefix("trace ") for line in lines if line.startswith("trace ")]
    return traces, [line for line in lines if not line.startswith("trace ")]


def _value(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _render(spans: list[dict[str, Any]]) -> list[str]:
    """Phoenix' spans drawn like test_traces.render: name, offset from the root, duration, and
    the attributes the golden trees show, children in start order."""
    children: dict[str | None, list[dict[str, Any]]] = {}
    for span in spans:
        children.setdefault(span["parent_id"], []).append(span)

    def order(span: dict[str, Any]) -> tuple[datetime, str]:
        return _time(span["start_time"]), span["name"]

    lines: list[str] = []

    def walk(span: dict[str, Any], depth: int, origin: datetime) -> None:
        start, end = _time(span["start_time"]), _time(span["end_time"])
        attrs = span["attributes"]
        shown = " ".join(
            f"{k.removeprefix('gen_ai.usage.')}={_value(attrs[k])}" for k in SHOWN if k in attrs
        )
        status = " ERROR" if span["status_code"] == "ERROR" else ""
        lines.append(
            f"{'  ' * depth}{span['name']} +{(start - origin).total_seconds():.3f}s "
            f"{(end - start).total_seconds():.3f}s{status} {shown}".rstrip()
        )
        for child in sorted(children.get(span["context"]["span_id"], []), key=order):
            walk(child, depth + 1, origin)

    for root in sorted(children.get(None, []), key=order):
        walk(root, 1, _time(root["start_time"]))
    return lines


@pytest.mark.parametrize("protocol", list(SCENARIOS))
def test_phoenix_receives_the_turn_tree(phoenix: Phoenix, protocol: str, tmp_path: Path) -> None:
    version = SCENARIOS[protocol]
    scenario = FIXTURES / "claude-code" / version / "subagent-foreground"
    (journal,) = scenario.glob("home/projects/*/*.jsonl")
    session_id = journal.stem
    project = "cae-" + protocol.split("/")[0]
    endpoint = (
        phoenix.url if protocol == "http/protobuf" else f"http://127.0.0.1:{phoenix.grpc_port}"
    )
    (tmp_path / "home").mkdir()  # every harness' default home is empty: only --claude.home is read
    env = {
        **_without_otel(dict(os.environ)),
        "HOME": str(tmp_path / "home"),
        "CODING_AGENT_EXPORTER_STATE_DIR": str(tmp_path / "state"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
    }
    sent = subprocess.run(
        [
            sys.executable,
            "-m",
            "coding_agent_exporter",
            "traces",
            "--claude.home",
            str(scenario / "home"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sent.returncode == 0, sent.stdout + sent.stderr

    traces, tree = _golden(version)
    try:
        spans = wait_for(
            f"{len(tree)} spans in phoenix project {project}",
            lambda: (s := _spans(phoenix, project)) and len(s) >= len(tree) and s,
            deadline=ARRIVAL,
        )
    except AssertionError as error:
        raise AssertionError(f"{error}\n--- phoenix log:\n{_tail(phoenix.log)}") from None
    assert len(spans) == len(tree), [s["name"] for s in spans]

    # the whole golden tree came back: names, parent links, timings, key attributes
    assert {s["context"]["trace_id"] for s in spans} == set(traces)
    assert _render(spans) == tree
    spans = [s for s in spans if s["context"]["trace_id"] == traces[0]]  # the turn's own

    # and spelled out: every parent id points at the right span
    by_id = {s["context"]["span_id"]: s for s in spans}
    assert len(by_id) == 8

    def parent(span: dict[str, Any]) -> str | None:
        return by_id[span["parent_id"]]["name"] if span["parent_id"] else None

    (root,) = [s for s in spans if s["parent_id"] is None]
    assert root["name"] == "invoke_agent claude-code"
    (agent_tool,) = [s for s in spans if s["name"] == "execute_tool Agent"]
    (sub,) = [s for s in spans if s["name"] == "invoke_agent general-purpose"]
    (bash,) = [s for s in spans if s["name"] == "execute_tool Bash"]
    chats = [s for s in spans if s["name"].startswith("chat ")]
    assert parent(agent_tool) == root["name"]
    assert sub["parent_id"] == agent_tool["context"]["span_id"]
    assert bash["parent_id"] == sub["context"]["span_id"]
    assert sorted(parent(c) or "" for c in chats) == [
        "invoke_agent claude-code",
        "invoke_agent claude-code",
        "invoke_agent general-purpose",
        "invoke_agent general-purpose",
    ]
    assert root["attributes"]["gen_ai.conversation.id"] == session_id
    assert root["attributes"]["gen_ai.provider.name"] == "anthropic"
    assert root["attributes"]["coding_agent.turn.outcome"] == "completed"
    assert agent_tool["attributes"]["gen_ai.tool.name"] == "Agent"
    assert bash["attributes"]["gen_ai.tool.name"] == "Bash"
    assert all(isinstance(c["attributes"]["gen_ai.usage.input_tokens"], int) for c in chats)
    assert sum(c["attributes"]["gen_ai.usage.input_tokens"] for c in chats) == 22
    assert _time(root["start_time"]) <= _time(agent_tool["start_time"])
    assert _time(agent_tool["end_time"]) <= _time(root["end_time"])


class _Forwarder:
    """A TCP port that passes every connection on to `target`: the endpoint the exporter
    knows, which stays down (nothing listens) until this starts."""

    def __init__(self, port: int, target: int) -> None:
        self.target = target
        self.server = socket.create_server(("127.0.0.1", port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()

    def close(self) -> None:
        self.server.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def test_phoenix_gets_every_turn_after_an_outage_and_a_kill(
    phoenix: Phoenix, tmp_path: Path
) -> None:
    """The endpoint (Phoenix behind a port) down: the turns wait in the state folder, through a
    SIGKILL; the endpoint up, the next start delivers them: the golden trees, read back."""
    scenario = FIXTURES / "claude-code" / "2.1.332" / "handback-auto"
    tree = [
        line
        for line in (GOLDEN / "traces" / "2.1.332-handback-auto.txt").read_text().splitlines()
        if not line.startswith("trace ")
    ]
    port = free_port()
    (tmp_path / "home").mkdir()
    env = {
        **_without_otel(dict(os.environ)),
        "HOME": str(tmp_path / "home"),
        "CODING_AGENT_EXPORTER_STATE_DIR": str(tmp_path / "state"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
        "OTEL_RESOURCE_ATTRIBUTES": "openinference.project.name=cae-outage",
    }

    def serve() -> tuple[subprocess.Popen[bytes], str]:
        listen = free_port()
        argv = [
            sys.executable,
            "-m",
            "coding_agent_exporter",
            "serve",
            "--claude.home",
            str(scenario / "home"),
        ]
        argv += ["--traces.backfill", "all", "--web.listen-address", f"127.0.0.1:{listen}"]
        process = subprocess.Popen(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        url = f"http://127.0.0.1:{listen}"
        wait_for("exporter ready", lambda: get(url + "/-/ready")[0] == 200)
        return process, url

    process, url = serve()
    kept = f"coding_agent_exporter_spans_waiting {len(tree)}.0"
    try:
        wait_for("every span kept", lambda: kept in get(url + "/metrics")[1])
    finally:
        process.kill()
        process.wait(timeout=10)
    assert _spans(phoenix, "cae-outage") == []
    forwarder = _Forwarder(port, int(phoenix.url.rsplit(":", 1)[1]))
    process, url = serve()
    try:
        spans = wait_for(
            f"{len(tree)} spans in phoenix",
            lambda: (s := _spans(phoenix, "cae-outage")) and len(s) >= len(tree) and s,
            deadline=ARRIVAL,
        )
        wait_for("nothing waits", lambda: "spans_waiting 0.0" in get(url + "/metrics")[1])
    finally:
        process.terminate()
        process.wait(timeout=10)
        forwarder.close()
    assert _render(spans) == tree

"""The HTTP side in-process: routes, content negotiation, readiness, the landing page."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from exporter.events import LiveIndexRead, SessionSeen
from exporter.labels import ProjectLabel
from exporter.metrics import StateCollector
from exporter.state import State
from exporter.views import landing_page, session_rows
from exporter.web import Server

A = "claude-code"


@pytest.fixture
def state() -> State:
    state = State()
    for pid, session, status, reason in (
        (10, "s-run", "busy", None),
        (11, "s-wait", "waiting", "permission prompt"),
    ):
        state.apply(A, SessionSeen(session_id=session, at=100.0, cwd="/home/u/app"))
        state.apply(
            A,
            LiveIndexRead(
                pid=pid,
                session_id=session,
                started_at=50.0,
                status=status,
                reason=reason,
                status_at=120.0,
                source=f"sessions/{pid}.json",
            ),
        )
    return state


@pytest.fixture
def server(state: State) -> Iterator[tuple[str, threading.Event]]:
    registry = CollectorRegistry()
    registry.register(
        StateCollector(state, [A], ProjectLabel(), clock=lambda: 200.0, probe=lambda pid: 50.0)
    )
    ready = threading.Event()

    def page() -> str:
        with state.lock:
            state.refresh(200.0, lambda pid: 50.0)
        return landing_page(
            session_rows(state, ProjectLabel(), history=False), "/m", ready.is_set()
        )

    server = Server(("127.0.0.1", 0), registry, "/m", page, ready)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", ready
    finally:
        server.shutdown()
        server.server_close()


def fetch(url: str, accept: str = "") -> tuple[int, str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read().decode()


def test_metrics_text_and_openmetrics(server: tuple[str, threading.Event]) -> None:
    url, _ = server
    status, kind, body = fetch(url + "/m")
    assert status == 200 and kind.startswith("text/plain; version=0.0.4")
    assert 'coding_agent_session_state{agent="claude-code",project="/home/u/app",reason=' in body
    status, kind, body = fetch(url + "/m", "application/openmetrics-text; version=1.0.0")
    assert kind.startswith("application/openmetrics-text") and body.endswith("# EOF\n")


def test_ready_only_after_catch_up(server: tuple[str, threading.Event]) -> None:
    url, ready = server
    assert fetch(url + "/-/ready")[0] == 503
    assert fetch(url + "/-/healthy")[0] == 200
    ready.set()
    assert fetch(url + "/-/ready")[0] == 200


def test_landing_page_lists_waiting_sessions_first(server: tuple[str, threading.Event]) -> None:
    url, _ = server
    status, kind, body = fetch(url + "/")
    assert status == 200 and kind.startswith("text/html")
    assert body.index("permission prompt") < body.index("running")
    assert 'href="/m"' in body and "Still catching up" in body


def test_unknown_path_is_404(server: tuple[str, threading.Event]) -> None:
    assert fetch(server[0] + "/metrics")[0] == 404  # the path was moved to /m


def test_html_is_escaped() -> None:
    row = {
        "state": "idle",
        "reason": None,
        "agent": "claude-code",
        "project": "<p>",
        "title": "<script>alert(1)</script>",
        "model": None,
        "updated_at": None,
    }
    page = landing_page([row], "/metrics", True)
    assert "<script>" not in page and "&lt;script&gt;" in page

"""The HTTP side in-process: routes, content negotiation, readiness, the console's files."""

from __future__ import annotations

import socket
import struct
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric

from coding_agent_exporter.events import LiveIndexRead, SessionSeen
from coding_agent_exporter.prometheus.collectors import StateCollector
from coding_agent_exporter.state.labels import ProjectLabel
from coding_agent_exporter.state.state import State
from coding_agent_exporter.web.server import MAX_FORMATS, STATIC, Server

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
    server = Server(("127.0.0.1", 0), registry, "/m", ready)
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


def test_the_console_is_served_from_the_package_with_a_strict_policy(
    server: tuple[str, threading.Event],
) -> None:
    url, _ = server
    with urllib.request.urlopen(url + "/", timeout=5) as response:
        assert response.headers["Content-Type"] == "text/html; charset=utf-8"
        policy = response.headers["Content-Security-Policy"]
        assert response.read() == (STATIC / "console.html").read_bytes()
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    for name in (p.name for p in STATIC.iterdir()):
        assert fetch(f"{url}/static/{name}")[0] == 200


def test_only_the_console_files_are_served(server: tuple[str, threading.Event]) -> None:
    url, _ = server
    for path in (
        "/static/../server.py",
        "/static/%2e%2e/server.py",
        "/static/server.py",
        "/static/",
        "/static/.hidden.js",
        "/static/sub/x.js",
        "/static/missing.js",
    ):
        assert fetch(url + path)[0] == 404, path


def test_unknown_path_is_404(server: tuple[str, threading.Event]) -> None:
    assert fetch(server[0] + "/metrics")[0] == 404  # the path was moved to /m


def test_a_client_that_resets_its_connection_is_not_reported(
    server: tuple[str, threading.Event], capfd: pytest.CaptureFixture[str]
) -> None:
    """A probe that closes its kept-alive connection with a reset (curl in a loop, a load
    balancer) cost a traceback on stderr each time."""
    url, _ = server
    host, port = url.removeprefix("http://").split(":")
    for _ in range(3):
        with socket.create_connection((host, int(port)), timeout=5) as client:
            client.sendall(b"GET /-/ready HTTP/1.1\r\nHost: x\r\n\r\n")
            assert client.recv(1024).startswith(b"HTTP/1.1 503")
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    assert fetch(url + "/-/healthy")[0] == 200  # the handlers of the resets are done
    assert "Traceback" not in capfd.readouterr().err


def test_a_scrape_builds_its_view_without_keeping_the_state_locked(state: State) -> None:
    """The reading loop folds records under the state's lock: a scrape holds it only to copy
    what it shows, not while its families are built and rendered (issue 7: scrapers back to
    back kept the lock nearly all the time and the loop fell seconds behind)."""
    collector = StateCollector(
        state, [A], ProjectLabel(), clock=lambda: 200.0, probe=lambda p: 50.0
    )
    families = collector.collect()
    next(families)  # the scrape is rendering its first family
    folded = threading.Event()

    def fold() -> None:
        with state.lock:
            state.apply(A, SessionSeen(session_id="s-new", at=150.0, cwd="/home/u/app"))
        folded.set()

    loop = threading.Thread(target=fold, daemon=True)
    loop.start()
    try:
        assert folded.wait(timeout=5.0), "the state stayed locked while the scrape rendered"
    finally:
        families.close()  # lets the lock go if it was kept
        loop.join(timeout=5.0)
    seen = [m for m in collector.collect() if m.name == "coding_agent_sessions"]
    (total,) = [m for m in seen if m.type == "counter"]  # the next scrape counts the new one
    assert [s.value for s in total.samples if s.name.endswith("_total")] == [3.0]


class _Slow:
    """A collector whose first collect waits until it is let go, counting collects."""

    def __init__(self) -> None:
        self.calls = 0
        self.started, self.release = threading.Event(), threading.Event()

    def collect(self) -> Iterator[Metric]:
        self.calls += 1
        number = self.calls
        if number == 1:
            self.started.set()
            assert self.release.wait(timeout=10.0)
        family = GaugeMetricFamily("render_number", "Which render this is.")
        family.add_metric([], number)
        yield family


def test_scrapes_arriving_during_a_render_share_the_next_one() -> None:
    """Four clients scraping while a render is under way cost one render between them, and
    none of them is answered with the render begun before it asked."""
    slow = _Slow()
    registry = CollectorRegistry()
    registry.register(slow)
    server = Server(("127.0.0.1", 0), registry, "/m", threading.Event())
    server.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/m"
    answers: dict[int, str] = {}

    def scrape(i: int) -> None:
        answers[i] = fetch(url)[2]

    first = threading.Thread(target=scrape, args=(0,))
    others = [threading.Thread(target=scrape, args=(i,)) for i in range(1, 5)]
    try:
        first.start()
        assert slow.started.wait(timeout=10.0)
        for thread in others:
            thread.start()
        deadline, pause = time.monotonic() + 10.0, threading.Event()
        while True:  # until each of the four waits for a render, or has made its own
            waiting = sum(r.waiting for r in getattr(server, "renders", {}).values())
            if waiting + slow.calls - 1 >= len(others):
                break
            assert time.monotonic() < deadline, "the scrapes never arrived"
            pause.wait(0.01)
    finally:
        slow.release.set()
        for thread in (first, *others):
            thread.join(timeout=10.0)
        server.shutdown()
        server.server_close()
    assert slow.calls == 2, "each scrape made its own render"  # the blocked one, one for four
    assert "render_number 1.0" in answers[0]
    assert all("render_number 2.0" in answers[i] for i in range(1, 5))


def test_versions_a_client_makes_up_do_not_pile_up(state: State) -> None:
    """The Accept header names the format's version: renders are shared for a few formats,
    any other is rendered for its request alone."""
    registry = CollectorRegistry()
    registry.register(StateCollector(state, [A], ProjectLabel(), probe=lambda pid: 50.0))
    server = Server(("127.0.0.1", 0), registry, "/m", threading.Event())
    server.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/m"
    try:
        for minor in range(MAX_FORMATS + 4):
            accept = f"application/openmetrics-text; version=1.{minor}.0"
            status, kind, body = fetch(url, accept)
            assert status == 200 and f"version=1.{minor}.0" in kind and body.endswith("# EOF\n")
    finally:
        server.shutdown()
        server.server_close()
    assert len(server.renders) == MAX_FORMATS

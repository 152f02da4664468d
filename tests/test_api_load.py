"""Readers not starved by API load (issue #34, point 6): 16 clients hammer `/api/sessions` of a
state of 20,000 sessions over real sockets; the reading loop's updates still land and a scrape
still answers while they do, and the API answers at most `API_AT_ONCE` at a time (503 with
`Retry-After` beyond, counted). Order and completion are asserted with generous deadlines,
never speed (the timings are in `bench/api.py --clients`)."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from coding_agent_exporter.events import SessionSeen, TitleSet
from coding_agent_exporter.prometheus.collectors import StateCollector
from coding_agent_exporter.state.labels import ProjectLabel
from coding_agent_exporter.state.state import State
from coding_agent_exporter.web.api import Api
from coding_agent_exporter.web.server import API_AT_ONCE, Server

SESSIONS = 20_000
CLIENTS = 16
DEADLINE = 120.0
AGENT = "claude-code"


def populated() -> State:
    state = State()
    for i in range(SESSIONS):
        sid = f"s{i:05d}"
        state.apply(AGENT, SessionSeen(session_id=sid, at=1e9 + i, cwd=f"/w/p{i % 500}"))
        state.apply(AGENT, TitleSet(session_id=sid, title=f"task {i}", source="user"))
    return state


@pytest.fixture
def served() -> Iterator[tuple[State, Server, str]]:
    state = populated()
    project = ProjectLabel()
    console = Api(project, agents=(AGENT,))
    registry = CollectorRegistry()
    registry.register(StateCollector(state, [AGENT], project, probe=lambda _: None))

    def answer(path: str, query: dict[str, list[str]]) -> tuple[int, object]:
        return console.answer(state, path, query)

    ready = threading.Event()
    ready.set()
    server = Server(("127.0.0.1", 0), registry, "/metrics", ready, api=answer)
    server.start()
    try:
        yield state, server, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def fetch(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=DEADLINE) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_the_reading_loop_and_a_scrape_go_on_while_the_api_is_hammered(
    served: tuple[State, Server, str],
) -> None:
    state, server, url = served
    stop = threading.Event()
    answers: Counter[int] = Counter()
    retry_after: set[str] = set()
    lock = threading.Lock()

    def hammer() -> None:
        while not stop.is_set():
            status, headers, _ = fetch(url + "/api/sessions?history=1&q=task")
            with lock:
                answers[status] += 1
                if status == 503:
                    retry_after.add(headers.get("Retry-After", ""))

    clients = [threading.Thread(target=hammer, daemon=True) for _ in range(CLIENTS)]
    for client in clients:
        client.start()
    end = time.monotonic() + DEADLINE
    while sum(answers.values()) < CLIENTS and time.monotonic() < end:
        time.sleep(0.05)
    assert answers[200] > 0, "the API answered nothing"

    updates, scraped = [], []
    for n in range(10):  # what the reading loop does with what it read: under the lock
        with state.lock:
            state.apply(AGENT, SessionSeen(session_id=f"new{n}", at=2e9 + n, cwd="/w/new"))
        updates.append(stop.is_set())
        status, _, body = fetch(url + "/metrics")
        scraped.append((status, stop.is_set(), b"coding_agent_sessions" in body))
    hammering = all(client.is_alive() for client in clients)
    stop.set()
    for client in clients:
        client.join(DEADLINE)

    assert updates == [False] * 10  # every update landed while the clients hammered
    assert scraped == [(200, False, True)] * 10  # every scrape answered while they did
    assert hammering
    assert answers[503] > 0 and retry_after == {"1"}  # beyond API_AT_ONCE: refused, not queued
    assert server.conns.refused["api_busy"] == answers[503]
    assert set(answers) <= {200, 503}
    status, _, body = fetch(url + "/api/sessions?history=1&q=new9")
    assert status == 200 and json.loads(body)["total"] == 1  # found by its id
    status, _, body = fetch(url + "/api/sessions?history=1&limit=1")
    assert json.loads(body)["total"] == SESSIONS + 10
    assert API_AT_ONCE < CLIENTS

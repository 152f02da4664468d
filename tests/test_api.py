"""`/api/sessions`: the rows of `sessions --json` as JSON over HTTP, filtered and paged, one
session by agent and id, clear errors; served by the real server over a recorded home."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from exporter.web import api
from exporter.web.server import Server
from exporter.web.views import session_rows

from .conftest import FIXTURES, app_for

HOME = FIXTURES / "claude-code" / "2.1.332" / "resume-fork" / "home"  # two sessions, history


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    app = app_for(HOME)
    rows = session_rows(app.state, app.config.project, history=True)

    def answer(path: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        return api.answer(app.state, app.config.project, path, query)

    ready = threading.Event()
    server = Server(("127.0.0.1", 0), app.registry, "/metrics", lambda: "", ready, api=answer)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", rows
    finally:
        server.shutdown()
        server.server_close()


def get(url: str) -> tuple[int, str, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            body = response.read()
            return response.status, response.headers["Content-Type"], json.loads(body)
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], json.loads(error.read())


def test_live_sessions_by_default_and_history_when_asked(served: tuple[str, Any]) -> None:
    url, rows = served
    status, kind, doc = get(f"{url}/api/sessions")
    assert (status, kind) == (200, "application/json")
    assert doc == {"total": 0, "offset": 0, "sessions": []}  # no recorded process runs here
    status, _, doc = get(f"{url}/api/sessions?history=1")
    assert status == 200 and doc["total"] == len(rows) == 2
    assert doc["sessions"] == rows  # what `sessions --all --json` prints
    assert {"cost_usd", "reported_cost_usd", "tokens", "turns"} <= set(doc["sessions"][0])


def test_filters_and_pages(served: tuple[str, Any]) -> None:
    url, rows = served
    assert get(f"{url}/api/sessions?history=1&agent=codex")[2]["total"] == 0
    assert get(f"{url}/api/sessions?history=1&agent=codex&agent=claude-code")[2]["total"] == 2
    assert get(f"{url}/api/sessions?history=1&state=ended")[2]["total"] == 2
    page = get(f"{url}/api/sessions?history=1&limit=1&offset=1")[2]
    assert page == {"total": 2, "offset": 1, "sessions": rows[1:2]}
    status, _, doc = get(f"{url}/api/sessions?limit=many")
    assert status == 400 and doc == {"error": "limit: expected a whole number, got 'many'"}


def test_one_session_and_what_is_not_there(served: tuple[str, Any]) -> None:
    url, rows = served
    first = rows[0]
    status, _, doc = get(f"{url}/api/sessions/{first['agent']}/{first['session_id']}")
    assert status == 200 and doc == first
    assert get(f"{url}/api/sessions/claude-code/no-such-session")[0] == 404
    status, _, doc = get(f"{url}/api/turns")
    assert status == 404 and "see /api/sessions" in doc["error"]

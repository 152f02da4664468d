"""`/api/`: the rows of `sessions --json` as JSON over HTTP, filtered, searched and paged with
their facets, one session by agent and id, the status and links the console draws, clear
errors; served by the real server over a recorded home."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from coding_agent_exporter.web import api
from coding_agent_exporter.web.server import Server
from coding_agent_exporter.web.views import session_rows

from .conftest import FIXTURES, app_for

HOME = FIXTURES / "claude-code" / "2.1.332" / "resume-fork" / "home"  # two sessions, history


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    app = app_for(HOME)
    rows = session_rows(app.state, app.config.project, history=True)

    links = api.Links("http://grafana:3000/", "http://jaeger/trace/{trace_id}")
    console = api.Api(app.config.project, links, agents=("claude-code",))
    for row in rows:
        console.linked(row)

    def answer(path: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        return console.answer(app.state, path, query, ready=False)

    ready = threading.Event()
    server = Server(("127.0.0.1", 0), app.registry, "/metrics", ready, api=answer)
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
    assert doc["total"] == 0 and doc["sessions"] == []  # no recorded process runs here
    assert doc["facets"] == {"agent": {}, "project": {}, "state": {}}
    status, _, doc = get(f"{url}/api/sessions?history=1")
    assert status == 200 and doc["total"] == len(rows) == 2
    assert doc["sessions"] == rows  # what `sessions --all --json` prints
    assert {"cost_usd", "reported_cost_usd", "tokens", "turns"} <= set(doc["sessions"][0])
    assert doc["facets"]["state"] == {"ended": 2} and doc["limit"] == 100
    assert doc["facets"]["agent"] == {"claude-code": 2}


def test_a_row_says_since_when_and_links_its_dashboard(served: tuple[str, Any]) -> None:
    url, _ = served
    row = get(f"{url}/api/sessions?history=1")[2]["sessions"][0]
    assert row["state_since"] == row["updated_at"]  # ended: since its last record
    tokens = row["tokens"]
    want = tokens["input"] + tokens["output"] + tokens["cache_read"] + tokens["cache_write"]
    assert row["tokens_total"] == want > 0
    assert (row["subagents_running"], row["subagents_total"]) == (0, len(row["subagents"]))
    assert row["grafana_url"] == (
        f"http://grafana:3000/d/coding-agent-session/?var-session={row['session_id']}"
    )


def test_status_names_the_links_and_readiness(served: tuple[str, Any]) -> None:
    status, _, doc = get(f"{served[0]}/api/status")
    assert status == 200 and doc["ready"] is False and doc["capture_content"] is False
    assert doc["trace_url"] == "http://jaeger/trace/{trace_id}"
    assert doc["agents"] == ["claude-code"] and doc["telemetry_path"] == "/metrics"


def test_text_search_in_title_or_id(served: tuple[str, Any]) -> None:
    url, rows = served
    first = rows[0]
    word = (first["title"] or "").split()[0].upper()  # any case
    found = get(f"{url}/api/sessions?history=1&q={word}")[2]
    assert first["session_id"] in [r["session_id"] for r in found["sessions"]]
    assert get(f"{url}/api/sessions?history=1&q={first['session_id'][:8]}")[2]["total"] >= 1
    nothing = get(f"{url}/api/sessions?history=1&q=zz-no-such-words")[2]
    assert nothing["total"] == 0 and nothing["facets"]["agent"] == {"claude-code": 2}


def test_filters_and_pages(served: tuple[str, Any]) -> None:
    url, rows = served
    assert get(f"{url}/api/sessions?history=1&agent=codex")[2]["total"] == 0
    assert get(f"{url}/api/sessions?history=1&agent=codex&agent=claude-code")[2]["total"] == 2
    assert get(f"{url}/api/sessions?history=1&state=ended")[2]["total"] == 2
    page = get(f"{url}/api/sessions?history=1&limit=1&offset=1")[2]
    assert (page["total"], page["offset"], page["sessions"]) == (2, 1, rows[1:2])
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


def test_a_session_found_by_its_id_alone(served: tuple[str, Any]) -> None:
    """A link that knows only the id (a Grafana dashboard of a session not live in its range)."""
    url, rows = served
    first = rows[0]
    status, _, doc = get(f"{url}/api/sessions//{first['session_id']}")
    assert status == 200 and doc == first
    assert get(f"{url}/api/sessions//no-such-session")[0] == 404
    quoted = "/api/sessions/claude%2Dcode/" + first["session_id"].replace("-", "%2D")
    assert get(url + quoted)[2] == first  # parts are unquoted


@pytest.mark.parametrize("at", [253402300800.0, 1e300, float("nan")])
def test_a_time_no_date_has_is_shown_as_the_nearest_date(at: float) -> None:
    """One session whose file says the year 10000 costs its own odd times, never the list."""
    from coding_agent_exporter.events import SessionSeen
    from coding_agent_exporter.state.labels import ProjectLabel
    from coding_agent_exporter.state.state import State

    state = State()
    state.apply("claude-code", SessionSeen(session_id="odd", at=at, cwd="/w"))
    state.apply("claude-code", SessionSeen(session_id="fine", at=1e9, cwd="/w"))
    status, doc = api.Api(ProjectLabel()).answer(state, "/api/sessions", {"history": ["1"]})
    assert status == 200 and doc["total"] == 2
    times = {r["session_id"]: r["updated_at"] for r in doc["sessions"]}
    assert times["fine"] == "2001-09-09T01:46:40.000Z" and times["odd"][:4] in ("9999", "0001")

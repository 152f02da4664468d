"""JSON under `/api/`: the sessions the console and `sessions --json` show, for scripts too.

    GET /api/status                        version, readiness, the links the console may draw
    GET /api/sessions                      live sessions, waiting-for-you first
        ?history=1                         with the ones that are not live
        &agent=claude-code&state=needs_user&project=~/work/shop-api   (each repeatable)
        &q=refactor                        text in the title or the session id (any case)
        &limit=100&offset=0                a page of them (limit at most 1000; default 100)
    GET /api/sessions/<agent>/<session id> one session, live or not (404: none such); with no
                                           agent (`sessions//<id>`), the one with that id
    GET /api/sessions/<agent>/<session id>/turns?limit=50   its turns as span trees (`turns`)
    GET /api/events                        rows as they change: server-sent events (`live`)

A list answers `{"total": N, "offset": O, "limit": L, "sessions": [rows], "facets": {...}}`;
a row is what `sessions --json` prints (tokens, cost, turns, tool calls, sub-agents) and the
session's Grafana dashboard when `--web.grafana-url` is set; `facets` counts the sessions by
agent, project and state before the filters, for the console's menus. Behind the same TLS and
basic auth as every other path. Pure: `Api.answer` is handed the state and the request, the
server sends the JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlencode

from .. import __version__
from ..state.labels import ProjectLabel
from ..state.state import State
from .views import FACETS, session_page, session_row

PAGE = 100
MAX_PAGE = 1000
TURNS = 50
MAX_TURNS = 500
SESSION_DASHBOARD = "coding-agent-session"
"""The uid of the bundled Session dashboard (dashboards/grafana/dashboards/session.json)."""
Query = Mapping[str, Sequence[str]]
Turns = Callable[[str, str, int], dict[str, Any] | None]
"""(agent, session id, how many) → the session's last turns as span trees (`turns`)."""


@dataclass(frozen=True, slots=True)
class Links:
    """Where the console may point: Grafana, a trace viewer (`{trace_id}` in the template),
    the console's own address as users reach it."""

    grafana: str | None = None
    trace: str | None = None
    external: str | None = None

    def session(self, session_id: str) -> str | None:
        if not self.grafana:
            return None
        query = urlencode({"var-session": session_id})
        return f"{self.grafana.rstrip('/')}/d/{SESSION_DASHBOARD}/?{query}"

    def trace_of(self, trace_id: str) -> str | None:
        return self.trace.replace("{trace_id}", quote(trace_id)) if self.trace else None


@dataclass(frozen=True, slots=True)
class Api:
    project: ProjectLabel
    links: Links = Links()
    telemetry_path: str = "/metrics"
    capture: bool = False
    agents: tuple[str, ...] = ()
    turns: Turns | None = None

    def answer(
        self, state: State, path: str, query: Query, *, ready: bool = True
    ) -> tuple[int, Any]:
        """(HTTP status, JSON document) for `path` (below `/api/`) and its query string."""
        parts = [unquote(p) for p in path.removeprefix("/api/").rstrip("/").split("/")]
        if len(parts) > 2 and parts[0] == "sessions" and not parts[1]:
            parts[1] = self._agent_of(state, parts[2])  # `sessions//<id>`: by id alone
        if parts == ["status"]:
            return 200, self.status(ready)
        if parts[:1] != ["sessions"] or len(parts) not in (1, 3, 4):
            return 404, {"error": f"no such resource: {path} (see /api/sessions)"}
        try:
            limit, offset = _number(query, "limit", PAGE), _number(query, "offset", 0)
        except ValueError as error:
            return 400, {"error": str(error)}
        if len(parts) == 4:
            return self._turns(parts, limit if "limit" in query else None)
        if len(parts) == 3:
            row = session_row(state, self.project, parts[1], parts[2])
            if row is None:
                return 404, {"error": f"no session {parts[2]} of {parts[1]}"}
            return 200, self.linked(row)
        return 200, self._list(state, query, min(limit, MAX_PAGE), offset)

    def _agent_of(self, state: State, session_id: str) -> str:
        """The agent of the session with this id (ids are the agents' own: one agent's, in
        practice); "" when none has it."""
        with state.lock:
            agents = self.agents or tuple(sorted({a for a, _ in state.sessions}))
            return next((a for a in agents if (a, session_id) in state.sessions), "")

    def status(self, ready: bool) -> dict[str, Any]:
        return {
            "version": __version__,
            "ready": ready,
            "capture_content": self.capture,
            "grafana_url": self.links.grafana,
            "trace_url": self.links.trace,
            "external_url": self.links.external,
            "telemetry_path": self.telemetry_path,
            "agents": list(self.agents),
        }

    def linked(self, row: dict[str, Any]) -> dict[str, Any]:
        row["grafana_url"] = self.links.session(row["session_id"])
        return row

    def _list(self, state: State, query: Query, limit: int, offset: int) -> dict[str, Any]:
        page = session_page(
            state,
            self.project,
            history=_flag(query, "history"),
            wanted={name: set(query.get(name, ())) for name in FACETS},
            text=query.get("q", [""])[-1].strip(),
            offset=offset,
            limit=limit,
        )
        return {
            "total": page.total,
            "offset": offset,
            "limit": limit,
            "sessions": [self.linked(r) for r in page.rows],
            "facets": page.facets,
        }

    def _turns(self, parts: list[str], limit: int | None) -> tuple[int, Any]:
        if parts[3] != "turns" or self.turns is None:
            return 404, {"error": f"no such resource: /api/{'/'.join(parts)}"}
        found = self.turns(parts[1], parts[2], min(limit or TURNS, MAX_TURNS))
        if found is None:
            return 404, {"error": f"no session {parts[2]} of {parts[1]}"}
        for turn in found["turns"]:
            turn["trace_url"] = self.links.trace_of(turn["trace_id"])
        return 200, found


def _flag(query: Query, name: str) -> bool:
    return query.get(name, ["0"])[-1] in ("1", "true", "yes")


def _number(query: Query, name: str, default: int) -> int:
    text = query.get(name, [str(default)])[-1]
    if not text.isdigit():
        raise ValueError(f"{name}: expected a whole number, got {text!r}")
    return int(text)

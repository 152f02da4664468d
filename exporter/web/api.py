"""JSON under `/api/`: the sessions the landing page and `sessions --json` show, for scripts.

    GET /api/sessions                      live sessions, waiting-for-you first
        ?history=1                         with the ones that are not live
        &agent=claude-code&state=needs_user&project=~/work/shop-api   (each repeatable)
        &limit=100&offset=0                a page of them (limit at most 1000; default 100)
    GET /api/sessions/<agent>/<session id> one session, live or not (404: none such)

A list answers `{"total": N, "offset": O, "sessions": [rows]}`; a row is what `sessions --json`
prints (tokens, cost, turns, tool calls, sub-agents). Behind the same TLS and basic auth as
every other path. Pure: `answer` is handed the state and the request, the server sends the JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..state.labels import ProjectLabel
from ..state.state import State
from .views import session_row, session_rows

PAGE = 100
MAX_PAGE = 1000
FILTERS = ("agent", "state", "project")


def answer(
    state: State, project: ProjectLabel, path: str, query: Mapping[str, Sequence[str]]
) -> tuple[int, Any]:
    """(HTTP status, JSON document) for `path` (below `/api/`) and its query string."""
    parts = [p for p in path.removeprefix("/api/").split("/") if p]
    if parts[:1] != ["sessions"] or len(parts) not in (1, 3):
        return 404, {"error": f"no such resource: {path} (see /api/sessions)"}
    if len(parts) == 3:
        row = session_row(state, project, parts[1], parts[2])
        return (200, row) if row is not None else (404, {"error": f"no session {parts[2]}"})
    try:
        limit, offset = _number(query, "limit", PAGE), _number(query, "offset", 0)
    except ValueError as error:
        return 400, {"error": str(error)}
    rows = session_rows(state, project, history=_flag(query, "history"))
    for name in FILTERS:
        wanted = set(query.get(name, ()))
        rows = [r for r in rows if not wanted or r[name] in wanted]
    page = rows[offset : offset + min(limit, MAX_PAGE)]
    return 200, {"total": len(rows), "offset": offset, "sessions": page}


def _flag(query: Mapping[str, Sequence[str]], name: str) -> bool:
    return query.get(name, ["0"])[-1] in ("1", "true", "yes")


def _number(query: Mapping[str, Sequence[str]], name: str, default: int) -> int:
    text = query.get(name, [str(default)])[-1]
    if not text.isdigit():
        raise ValueError(f"{name}: expected a whole number, got {text!r}")
    return int(text)

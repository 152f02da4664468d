"""Sessions as rows: the `sessions` command (table or JSON) and the console's JSON (`api`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..events import LiveIndexRead, ReviewEnded, Usage
from ..state.labels import STATES, ProjectLabel
from ..state.session import Session, Subagent
from ..state.sessions import Brief
from ..state.state import State
from ..state.times import utc

_ORDER = {
    state: i
    for i, state in enumerate(("needs_user", *[s for s in STATES if s != "needs_user"], "ended"))
}


def iso(at: float | None) -> str | None:
    if at is None:
        return None
    return utc(at).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def session_rows(
    state: State, project: ProjectLabel, *, history: bool, internal: bool = False
) -> list[dict[str, Any]]:
    """One dict per session (live ones only unless `history`), waiting-for-you first; with
    `internal`, the agents' own automatic reviews too."""
    listed = _listed(state, project, history)
    rows = []
    with state.lock:
        if history and internal:
            rows += [_review(agent, r, state, project) for agent, r in state.reviews]
        rows += [_row_of(state, state.sessions[item[4]], project) for item in listed]
    rows.sort(key=lambda r: (_ORDER[r["state"]], -(r["_updated"] or 0.0)))
    for row in rows:
        del row["_updated"]
    return rows


@dataclass(frozen=True, slots=True)
class Page:
    """A page of sessions: how many matched, the rows of the page, and the sessions counted by
    agent, project and state before any filter."""

    total: int
    rows: list[dict[str, Any]]
    facets: dict[str, dict[str, int]]


FACETS = ("agent", "project", "state")


def session_page(
    state: State,
    project: ProjectLabel,
    *,
    history: bool,
    wanted: Mapping[str, Collection[str]],
    text: str = "",
    offset: int = 0,
    limit: int = 100,
) -> Page:
    """Sessions as `session_rows` lists them, those `wanted` (facet → values, empty: any) with
    `text` in their title or id (any case), a page of them; only the page's rows are made, so
    a page of 10,000 sessions costs what sorting them does. The state's lock is held to copy
    the sessions' index and to make the page's rows, not to filter, count or sort: the reading
    loop and a scrape never wait for a page of 150,000 sessions to be sorted."""
    text = text.casefold()
    listed = _listed(state, project, history)
    facets: dict[str, Counter[str]] = {
        name: Counter(str(item[i]) for item in listed) for i, name in enumerate(FACETS)
    }
    checks = [(i, wanted[name]) for i, name in enumerate(FACETS) if wanted.get(name)]
    matched = [
        item
        for item in listed
        if all(item[i] in values for i, values in checks)
        and (not text or text in f"{item[5] or ''}\n{item[4][1]}".casefold())
    ]
    matched.sort(key=lambda item: (_ORDER[item[2]], -item[3]))
    with state.lock:
        window = matched[offset : offset + limit]
        rows = [_row_of(state, state.sessions[item[4]], project) for item in window]
    for row in rows:
        del row["_updated"]
    counts = {name: dict(found.most_common()) for name, found in facets.items()}
    return Page(len(matched), rows, counts)


_Listed = tuple[str, str, str, float, tuple[str, str], str | None]
"""agent, project, state, last activity, key, title: what a list is filtered and sorted by."""


def _listed(state: State, project: ProjectLabel, history: bool) -> list[_Listed]:
    """The sessions a list holds, without their rows: what each is listed by (`Brief`: sleeping
    sessions are read from their columns, copied under the state's lock, no `Session` made) and
    the live ones' states (a few); the page's rows are made under the lock again."""
    with state.lock:
        sessions = state.sessions
        frozen = sessions.frozen() if history else None
        live = {key: (entry, state.status(key, entry)[0]) for key, entry in state.live.items()}
        if not history:
            briefs = [_brief(s) for key in live if (s := sessions.get(key)) is not None]
    if frozen is not None:  # read after the lock is let go (an awake one's field: a moment old)
        briefs = list(frozen.briefs())
    projects: dict[str | None, str] = {}
    listed = []
    for brief in briefs:
        entry, status = live.get(brief.key, (None, "ended"))
        if entry is None and (not history or not brief.counted):
            continue  # not live; or only named in a title index, never read itself
        cwd = brief.cwd or (entry.cwd if entry else None)
        label = projects.get(cwd)
        if label is None:
            label = projects[cwd] = project(cwd)
        at = (brief.updated_at, entry.updated_at if entry else None)
        updated = max(filter(None, at), default=0.0)
        listed.append((brief.key[0], label, status, updated, brief.key, brief.title))
    return listed


def _brief(session: Session) -> Brief:
    key = (session.agent, session.session_id)
    return Brief(key, session.counted, session.cwd, session.updated_at, session.title)


def session_row(
    state: State, project: ProjectLabel, agent: str, session_id: str
) -> dict[str, Any] | None:
    """One session's row, live or not; None when the state knows no such session (or only its
    name, from a title index)."""
    return rows_of(state, project, [(agent, session_id)])[(agent, session_id)]


def rows_of(
    state: State, project: ProjectLabel, keys: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], dict[str, Any] | None]:
    """The rows of the sessions `keys` names (None for one the state does not know)."""
    found: dict[tuple[str, str], dict[str, Any] | None] = {}
    with state.lock:
        for key in keys:
            session = state.sessions.get(key)
            if session is None or not session.counted:
                found[key] = None
                continue
            row = found[key] = _row_of(state, session, project)
            del row["_updated"]
    return found


def _row_of(state: State, session: Session, project: ProjectLabel) -> dict[str, Any]:
    """Under the state's lock: the row of `session`, with its live state if it is live."""
    key = (session.agent, session.session_id)
    entry = state.live.get(key)
    status = state.status(key, entry) if entry is not None else ("ended", None, None)
    return _row(session, entry, status, project)


def _row(
    session: Session,
    entry: LiveIndexRead | None,
    status: tuple[str, str | None, float | None],
    project: ProjectLabel,
) -> dict[str, Any]:
    cwd = session.cwd or (entry.cwd if entry else None)
    updated = max(
        filter(None, (session.updated_at, entry.updated_at if entry else None)), default=None
    )
    subagents = session.unique_subagents()
    tokens = session.tokens
    return {
        "agent": session.agent,
        "session_id": session.session_id,
        "title": session.title,
        "title_source": session.title_source,
        "cwd": cwd,
        "project": project(cwd),
        "model": session.model,
        "live": entry is not None,
        "pid": entry.pid if entry else None,
        "kind": (entry.kind if entry else None) or session.kind or "interactive",
        "state": status[0],
        "reason": status[1],
        "state_since": iso(status[2] if status[0] != "ended" else updated),
        "started_at": iso(session.started_at or (entry.started_at if entry else None)),
        "updated_at": iso(updated),
        "version": session.version,
        "messages": session.messages,
        "turns": {o: session.turns[o] for o in ("completed", "interrupted", "failed")},
        "tool_calls": {"total": session.tool_calls, "error": session.tool_errors},
        "tokens": tokens.as_dict(),
        "tokens_total": tokens.input + tokens.output + tokens.cache_read + tokens.cache_write,
        "cost_usd": round(session.cost, 6),
        "reported_cost_usd": _rounded(session.reported_cost),
        "subagents": [_subagent(s) for s in subagents],
        "subagents_running": sum(s.state == "running" for s in subagents),
        "subagents_total": len(subagents),
        "_updated": updated,
    }


def _rounded(usd: float | None) -> float | None:
    return None if usd is None else round(usd, 6)


def _review(agent: str, review: ReviewEnded, state: State, project: ProjectLabel) -> dict[str, Any]:
    """An automatic review as a row: not a session, counted nowhere but in its own metric."""
    parent = state.sessions.get((agent, review.session_id))
    cwd = parent.cwd if parent is not None else None
    empty = {"completed": 0, "interrupted": 0, "failed": 0}
    return {
        "agent": agent,
        "session_id": review.review_id,
        "title": f"review: {review.outcome}",
        "title_source": "harness",
        "cwd": cwd,
        "project": project(cwd),
        "model": None,
        "live": False,
        "pid": None,
        "kind": "review",
        "state": "ended",
        "reason": None,
        "state_since": iso(review.at),
        "started_at": None,
        "updated_at": iso(review.at),
        "version": None,
        "messages": 0,
        "turns": empty,
        "tool_calls": {"total": 0, "error": 0},
        "tokens": Usage().as_dict(),
        "tokens_total": 0,
        "cost_usd": 0.0,
        "reported_cost_usd": None,
        "subagents": [],
        "subagents_running": 0,
        "subagents_total": 0,
        "parent_session_id": review.session_id,
        "outcome": review.outcome,
        "_updated": review.at,
    }


def _subagent(sub: Subagent) -> dict[str, Any]:
    row = sub.as_dict()
    row["started_at"], row["ended_at"] = iso(sub.started_at), iso(sub.ended_at)
    return row


_COLUMNS = ("STATE", "AGENT", "PROJECT", "TITLE", "MODEL", "TURNS", "TOKENS", "COST", "UPDATED")


def table(rows: list[dict[str, Any]]) -> str:
    """A plain-text table for a terminal."""
    lines = [_COLUMNS]
    for row in rows:
        state = row["state"] + (f" ({row['reason']})" if row["reason"] else "")
        lines.append(
            (
                state,
                row["agent"],
                row["project"] or "-",
                _cut(row["title"] or "-", 48),
                row["model"] or "-",
                str(sum(row["turns"].values())),
                f"{row['tokens_total']:,}",
                f"${row['cost_usd']:,.2f}",
                (row["updated_at"] or "-")[:19].replace("T", " "),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(_COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"

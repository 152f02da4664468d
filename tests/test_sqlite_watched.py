"""`sqlite_tail`'s two additions for Hermes Agent's `state.db`: a table numbered as a whole
(`TableLog` with no group: an `AUTOINCREMENT` id) and tables whose rows are updated in place
(`RowWatch`: one row per session holding its running totals and its end). One test per hazard;
the writer keeps its rows in the `-wal`, as Hermes does while it runs."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from coding_agent_exporter.sources.sqlite_tail import RowWatch, SqliteTail, TableLog

from .test_sqlite import traced_read, writer

SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, ended_at REAL, input_tokens INTEGER DEFAULT 0);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT, content TEXT);
"""
SESSIONS = RowWatch(
    table="sessions",
    columns=("id", "ended_at", "input_tokens"),
    key=("id",),
    open="ended_at IS NULL",
    closed="ended_at",
)
MESSAGES = TableLog(
    table="messages",
    columns=("id", "session_id", "content"),
    group=None,
    seq="id",
    watched=(SESSIONS,),
)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "state.db"
    with writer(path) as db:
        db.executescript(SCHEMA)
    return path


def run(db: sqlite3.Connection, sql: str, *args: object) -> None:
    db.execute("BEGIN IMMEDIATE")
    db.execute(sql, args)
    db.execute("COMMIT")


def seen(tail: SqliteTail) -> list[tuple[object, ...]]:
    """What one read delivered: `("sessions", id, input)` or `("messages", id)`."""
    return [
        (r["_table"], r["id"], r["input_tokens"]) if "_table" in r else ("messages", r["id"])
        for r in tail.read().rows
    ]


def test_a_session_row_is_delivered_before_the_new_messages_and_again_when_it_changed(
    database: Path,
) -> None:
    tail = SqliteTail(database, MESSAGES)
    with writer(database) as db:
        run(db, "INSERT INTO sessions (id) VALUES ('s')")
        run(db, "INSERT INTO messages (session_id, content) VALUES ('s', 'hi')")
        assert Path(f"{database}-wal").stat().st_size > 0  # only in the -wal yet
        assert seen(tail) == [("sessions", "s", 0), ("messages", 1)]
        run(db, "UPDATE sessions SET input_tokens = 10 WHERE id = 's'")
        assert seen(tail) == [("sessions", "s", 10)]  # the row again, its new totals
        run(db, "INSERT INTO messages (session_id, content) VALUES ('s', 'more')")
        assert seen(tail) == [("messages", 2)]  # an unchanged row is not delivered again


def test_a_row_that_ended_is_delivered_once_then_left_alone(database: Path) -> None:
    tail = SqliteTail(database, MESSAGES)
    with writer(database) as db:
        run(db, "INSERT INTO sessions (id) VALUES ('a')")
        run(db, "INSERT INTO sessions (id) VALUES ('b')")
        assert [s[1] for s in seen(tail)] == ["a", "b"]
        run(db, "UPDATE sessions SET ended_at = 100, input_tokens = 5 WHERE id = 'a'")
        assert seen(tail) == [("sessions", "a", 5)]
        run(db, "UPDATE sessions SET ended_at = 100 WHERE id = 'b'")  # the same end time
        assert seen(tail) == [("sessions", "b", 0)]
        run(db, "INSERT INTO messages (session_id, content) VALUES ('b', 'x')")
        assert seen(tail) == [("messages", 1)]  # neither ended row again


def test_a_resumed_row_is_open_again(database: Path) -> None:
    tail = SqliteTail(database, MESSAGES)
    with writer(database) as db:
        run(db, "INSERT INTO sessions (id, ended_at) VALUES ('s', 50)")
        assert seen(tail) == [("sessions", "s", 0)]
        run(db, "UPDATE sessions SET ended_at = NULL, input_tokens = 7 WHERE id = 's'")
        assert seen(tail) == [("sessions", "s", 7)]
        run(db, "UPDATE sessions SET input_tokens = 9 WHERE id = 's'")
        assert seen(tail) == [("sessions", "s", 9)]


def test_a_table_numbered_as_a_whole_reads_what_is_new(database: Path) -> None:
    log = TableLog(table="messages", columns=("id", "session_id", "content"), group=None, seq="id")
    tail = SqliteTail(database, log)
    with writer(database) as db:
        for session in ("a", "b", "a"):
            run(db, "INSERT INTO messages (session_id, content) VALUES (?, 'x')", session)
        assert [r["id"] for r in tail.read().rows] == [1, 2, 3]
        run(db, "INSERT INTO messages (session_id, content) VALUES ('b', 'y')")
        assert [r["id"] for r in tail.read().rows] == [4]


def test_a_table_numbered_as_a_whole_that_went_back_resets(database: Path) -> None:
    log = TableLog(table="messages", columns=("id", "session_id", "content"), group=None, seq="id")
    tail = SqliteTail(database, log)
    with writer(database) as db:
        run(db, "INSERT INTO messages (session_id, content) VALUES ('a', 'x')")
        run(db, "INSERT INTO messages (session_id, content) VALUES ('a', 'y')")
        assert len(tail.read().rows) == 2
        run(db, "DELETE FROM messages")
        run(db, "DELETE FROM sqlite_sequence")
        run(db, "INSERT INTO messages (session_id, content) VALUES ('c', 'z')")
        result = tail.read()
        assert result.reset and [r["session_id"] for r in result.rows] == ["c"]


def test_only_the_open_and_new_rows_are_asked_for(database: Path) -> None:
    """The query names the rows that may still change (new, open, or closed at or after the
    latest end delivered), and only a changed one is delivered."""
    tail = SqliteTail(database, MESSAGES)
    with writer(database) as db:
        for i in range(50):
            run(db, "INSERT INTO sessions (id, ended_at) VALUES (?, ?)", f"old{i}", float(i))
        run(db, "INSERT INTO sessions (id) VALUES ('live')")
        assert len(seen(tail)) == 51
        run(db, "UPDATE sessions SET input_tokens = 3 WHERE id = 'live'")
        rows, traced = traced_read(tail)
        assert [r["id"] for r in rows] == ["live"]
        (query,) = [q for q in traced if 'FROM "sessions"' in q]
        assert "rowid > 51" in query and "ended_at IS NULL" in query and ">= 49" in query


def test_rows_known_by_several_columns_that_change_their_last_seen(tmp_path: Path) -> None:
    """Hermes' `session_model_usage`: keyed by (session, task), never open, its `last_seen`
    moved by every call added: a changed row is read again, an unchanged one is not."""
    path = tmp_path / "state.db"
    usage = RowWatch(
        table="usage",
        columns=("session_id", "task", "tokens", "last_seen"),
        key=("session_id", "task"),
        open="0",
        closed="last_seen",
    )
    log = TableLog(table="messages", columns=("id",), group=None, seq="id", watched=(usage,))
    tail = SqliteTail(path, log)
    with writer(path) as db:
        db.executescript(SCHEMA)
        db.execute(
            "CREATE TABLE usage (session_id TEXT, task TEXT, tokens INTEGER, last_seen REAL, "
            "PRIMARY KEY (session_id, task))"
        )
        run(db, "INSERT INTO usage VALUES ('s', '', 10, 1.0)")
        run(db, "INSERT INTO usage VALUES ('s', 'title', 3, 2.0)")
        assert [(r["task"], r["tokens"]) for r in tail.read().rows] == [("", 10), ("title", 3)]
        run(db, "UPDATE usage SET tokens = 25, last_seen = 3.0 WHERE task = ''")
        assert [(r["task"], r["tokens"]) for r in tail.read().rows] == [("", 25)]
        run(db, "INSERT INTO messages (session_id) VALUES ('s')")
        assert [r.get("_table") for r in tail.read().rows] == [None]

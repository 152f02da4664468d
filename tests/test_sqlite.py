"""`sqlite_tail.SqliteTail`: one test per hazard of following a table another program writes,
and the engine's handling of a database (a `-wal` change read as the database's, a locked or damaged
database counted)."""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from coding_agent_exporter.harnesses.opencode.harness import OpenCode
from coding_agent_exporter.harnesses.opencode_database import EVENTS
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.sources.sqlite_tail import SqliteTail
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.state import State

from .conftest import FIXTURES

RECORDED = FIXTURES / "opencode" / "1.18.33" / "subagent" / "home" / ".local" / "share" / "opencode"
SCHEMA = """
CREATE TABLE event_sequence (aggregate_id text PRIMARY KEY, seq integer NOT NULL);
CREATE TABLE event (id text PRIMARY KEY, aggregate_id text NOT NULL, seq integer NOT NULL,
                    type text NOT NULL, data text NOT NULL);
CREATE TABLE credential (id text, secret text);
"""


@contextlib.contextmanager
def writer(path: Path, wal: bool = True) -> Iterator[sqlite3.Connection]:
    """The agent's own connection: it writes, we only read."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        if wal:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA wal_autocheckpoint=0")  # rows stay in the -wal
        yield db
    finally:
        db.close()


def append(db: sqlite3.Connection, group: str, seq: int, data: str = "{}") -> None:
    db.execute("BEGIN IMMEDIATE")
    db.execute(
        "INSERT INTO event VALUES (?, ?, ?, 'x', ?)", (f"evt_{group}_{seq}", group, seq, data)
    )
    db.execute("INSERT OR REPLACE INTO event_sequence VALUES (?, ?)", (group, seq))
    db.execute("COMMIT")


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "opencode.db"
    with writer(path) as db:
        db.executescript(SCHEMA)
        db.execute("INSERT INTO credential VALUES ('c', 'planted')")
    return path


def seqs(rows: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(r["aggregate_id"], r["seq"]) for r in rows]


def test_rows_appended_while_following_in_the_wal(database: Path) -> None:
    tail = SqliteTail(database, EVENTS)
    with writer(database) as db:
        append(db, "a", 0)
        assert seqs(tail.read().rows) == [("a", 0)]
        append(db, "b", 0)
        append(db, "a", 1)
        assert Path(f"{database}-wal").stat().st_size > 0  # not checkpointed: only in the -wal
        result = tail.read()
        assert seqs(result.rows) == [("b", 0), ("a", 1)]  # in the order they were written
        assert not result.reset and result.error is None
        assert tail.read().rows == []


def test_unchanged_database_is_not_queried(database: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tail = SqliteTail(database, EVENTS)
    with writer(database) as db:
        append(db, "a", 0)
    tail.read()

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("queried an unchanged database")

    monkeypatch.setattr(sqlite3, "connect", refuse)
    assert tail.read().rows == []


def test_reads_only_the_followed_tables_and_never_writes(database: Path) -> None:
    with writer(database) as db:
        append(db, "a", 0)
        _, seen = traced_read(SqliteTail(database, EVENTS))
        assert seen and not [q for q in seen if "credential" in q]
        assert not [q for q in seen if q.split()[0].upper() in ("INSERT", "UPDATE", "DELETE")]
        append(db, "a", 1)  # the writer is not disturbed


def test_closed_wal_database_gets_no_new_files(database: Path) -> None:
    with writer(database) as db:
        append(db, "a", 0)
    before = sorted(p.name for p in database.parent.iterdir())  # the writer removed its -wal
    assert seqs(SqliteTail(database, EVENTS).read().rows) == [("a", 0)]
    assert sorted(p.name for p in database.parent.iterdir()) == before


def test_locked_database_costs_nothing_and_is_retried(tmp_path: Path) -> None:
    path = tmp_path / "opencode.db"
    with writer(path, wal=False) as db:  # a rollback journal: a writer locks readers out
        db.executescript(SCHEMA)
        append(db, "a", 0)
        tail = SqliteTail(path, EVENTS)
        db.execute("BEGIN EXCLUSIVE")
        db.execute("INSERT INTO event VALUES ('e', 'a', 1, 'x', '{}')")
        result = tail.read()
        assert result.locked and result.rows == [] and result.error is None
        db.execute("INSERT OR REPLACE INTO event_sequence VALUES ('a', 1)")
        db.execute("COMMIT")
    assert seqs(tail.read().rows) == [("a", 0), ("a", 1)]


def test_corrupt_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "opencode.db"
    path.write_bytes(b"this is not a database" * 200)
    result = SqliteTail(path, EVENTS).read()
    assert result.error is not None and result.rows == []


def test_table_not_created_yet_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "opencode.db"
    with writer(path):
        pass
    tail = SqliteTail(path, EVENTS)
    assert tail.read().error is None
    with writer(path) as db:
        db.executescript(SCHEMA)
        append(db, "a", 0)
    assert seqs(tail.read().rows) == [("a", 0)]


def test_replaced_database_resets(database: Path, tmp_path: Path) -> None:
    tail = SqliteTail(database, EVENTS)
    with writer(database) as db:
        append(db, "a", 0)
    tail.read()
    other = tmp_path / "other.db"
    with writer(other) as db:
        db.executescript(SCHEMA)
        append(db, "b", 0)
    other.replace(database)
    Path(f"{database}-wal").unlink(missing_ok=True)
    result = tail.read()
    assert result.reset and seqs(result.rows) == [("b", 0)]


def test_deleted_session_keeps_the_others(database: Path) -> None:
    tail = SqliteTail(database, EVENTS)
    with writer(database) as db:
        append(db, "a", 0)
        append(db, "b", 0)
        tail.read()
        db.execute("DELETE FROM event WHERE aggregate_id = 'a'")
        db.execute("DELETE FROM event_sequence WHERE aggregate_id = 'a'")
        append(db, "b", 1)
    result = tail.read()
    assert not result.reset and seqs(result.rows) == [("b", 1)]


def engine_over(home: Path) -> tuple[Engine, State, Stats]:
    state, stats = State(), Stats()
    source = Source(OpenCode(), home)
    source.held = None  # no process lookups in these tests
    return Engine([source], state, stats), state, stats


def test_engine_reads_a_wal_change_as_the_database(tmp_path: Path) -> None:
    home = tmp_path / "opencode"
    home.mkdir()
    database = home / "opencode.db"
    shutil.copy(RECORDED / "opencode.db", database)
    engine, state, stats = engine_over(home)
    engine.catch_up()
    assert stats.records["opencode"] == 57
    with writer(database) as db:
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "INSERT INTO event SELECT id || '-copy', 'ses_new', seq, type, "
            "replace(data, 'ses_dd400e9faffeEmDtICinENeL8Y', 'ses_new') FROM event "
            "WHERE aggregate_id = 'ses_dd400e9faffeEmDtICinENeL8Y' AND seq < 5"
        )
        db.execute("INSERT INTO event_sequence VALUES ('ses_new', 4, NULL)")
        db.execute("COMMIT")
        engine.changed([home / "opencode.db-wal"])
    assert stats.records["opencode"] == 62
    assert ("opencode", "ses_new") in state.sessions


def test_engine_counts_a_locked_and_a_corrupt_database(tmp_path: Path) -> None:
    home = tmp_path / "opencode"
    home.mkdir()
    database = home / "opencode.db"
    shutil.copy(RECORDED / "opencode.db", database)  # journal_mode=DELETE, as recorded
    engine, _, stats = engine_over(home)
    with writer(database, wal=False) as db:
        db.execute("BEGIN EXCLUSIVE")
        engine.catch_up()
        assert stats.parse_errors[("opencode", "locked")] == 1
        assert stats.records["opencode"] == 0
        db.execute("COMMIT")
    engine.changed([database])
    assert stats.records["opencode"] == 57
    database.write_bytes(b"garbage" * 1000)
    engine.changed([database])
    assert stats.parse_errors[("opencode", "read_error")] == 1


def traced_read(tail: SqliteTail) -> tuple[list[dict[str, object]], list[str]]:
    seen: list[str] = []
    real = sqlite3.connect

    def traced(*args: object, **kwargs: object) -> sqlite3.Connection:
        connection = real(*args, **kwargs)  # type: ignore[arg-type]
        connection.set_trace_callback(seen.append)
        return connection

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlite3, "connect", traced)
        rows = tail.read().rows
    return rows, seen


def test_new_rows_are_found_by_one_range_scan_not_a_query_per_group(database: Path) -> None:
    """OpenCode's `event` has no index on its groups: a query per group would scan the whole
    table once per session (a large history: groups x rows)."""
    tail = SqliteTail(database, EVENTS)
    with writer(database) as db:
        for group in range(40):
            append(db, f"g{group}", 0)
        rows, queries = traced_read(tail)
        assert len(rows) == 40
        append(db, "g7", 1)
        append(db, "g3", 1)
        rows, queries = traced_read(tail)
    assert seqs(rows) == [("g7", 1), ("g3", 1)]
    per_group = [q for q in queries if '"aggregate_id" = ' in q]
    assert per_group == [] and any("rowid > " in q for q in queries)


def test_a_row_that_took_a_deleted_rows_rowid_is_read(database: Path) -> None:
    tail = SqliteTail(database, EVENTS)
    with writer(database) as db:
        append(db, "a", 0)
        append(db, "b", 0)  # the last rowid read
        assert seqs(tail.read().rows) == [("a", 0), ("b", 0)]
        db.execute("DELETE FROM event WHERE aggregate_id = 'b'")  # a session deleted
        db.execute("DELETE FROM event_sequence WHERE aggregate_id = 'b'")
        append(db, "c", 0)  # takes the deleted row's rowid: not above the last one read
        (rowid,) = db.execute("SELECT rowid FROM event WHERE aggregate_id = 'c'").fetchone()
        assert rowid == 2
        append(db, "a", 1)
        assert sorted(seqs(tail.read().rows)) == [("a", 1), ("c", 0)]

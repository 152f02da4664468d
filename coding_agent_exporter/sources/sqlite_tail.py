"""Follow an append-only table of a SQLite database that another program writes, read-only.

``SqliteTail`` follows an append-only table of a SQLite database that another program writes
(``TableLog``: rows numbered per group, e.g. OpenCode's ``event`` table by
``(aggregate_id, seq)``). The contract:

* The database is opened read-only (``file:...?mode=ro``, ``PRAGMA query_only``) for each read and
  closed after it: no write lock is ever taken and nothing is ever checkpointed. It is not
  opened ``immutable`` while a ``-wal`` exists, so rows still in the ``-wal`` file are seen; as
  every WAL reader, SQLite notes its read mark in the ``-shm`` shared memory. A WAL database
  without a ``-wal`` (no writer: the last one folded it in and removed it) is read
  ``immutable``, else SQLite would create an empty ``-wal`` and ``-shm`` beside it. Only the
  followed table and its heads table are named in a query; nothing else is read.
* It queries again only when ``(device, inode, size, mtime_ns)`` of the database or of its
  ``-wal`` changed. One read transaction sees one committed state: a half-written transaction is
  never seen. New rows are those whose ``seq`` is above the last one delivered for their
  group, delivered in the order they were inserted (``rowid``). They are found by one range
  scan of the rows inserted after the last one read (``rowid`` above it: the table's own
  b-tree, no index needed; OpenCode's ``event`` has none on its groups), then a query per
  group only for a group still behind its head (a row that took the ``rowid`` of a deleted
  one), so reading costs what is new, not the size of the table times its groups.
* A database another connection holds locked (``SQLITE_BUSY``: a rollback-journal writer) costs
  nothing: no wait (busy timeout 0), ``locked=True``, nothing committed, retried at the next
  change. A table that does not exist yet is an empty table. A damaged file or any other
  SQLite error is returned in ``error``, nothing committed.
* Another database file at the path (other inode), or a group whose last ``seq`` went back,
  restarts from nothing with ``reset=True``: the caller drops what it derived.
* A table numbered as a whole (``group=None``: its ``seq`` is an ``AUTOINCREMENT`` id, Hermes
  Agent's ``messages``) has one group, ``""``; its head is ``MAX(seq)``, one b-tree lookup.
* Tables whose rows are updated in place (``RowWatch``: one row per session holding its running
  totals and its end, Hermes Agent's ``sessions``) are read in the same transaction, before the
  followed table's new rows, each such row tagged ``"_table"``. A row is delivered again only
  when one of its values changed. Only the rows that may still change are asked for: those
  inserted after the last one read (``rowid``), those still ``open`` (an SQL condition over its
  own columns, written by the harness, e.g. ``ended_at IS NULL``) and those whose ``closed``
  column is at or after the latest value of it delivered; the values of the rows still open are
  remembered to tell a change (bounded by the open rows). Finding them is one scan of the table
  (Hermes indexes neither `ended_at` nor `last_seen`): at each change of the database, what it
  costs grows with the table's rows, what is delivered only with the changed ones
  (`bench/hermes_state.py`: 4 ms a change at 20,000 sessions, 0.8 ms at 2,000).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from .reading import stat_current, stat_key


@dataclass(frozen=True, slots=True)
class TableLog:
    """An append-only table of a SQLite database, followed by (`group`, `seq`): each group's
    rows are numbered 0, 1, 2, ... in the order they were written.

    `heads` names a table holding the last `seq` of each group (`table`, `group`, `seq` columns),
    so finding what is new costs one row per group, not one per event. `json` lists the
    columns holding JSON text: they are parsed before the row reaches the reader.
    """

    table: str
    columns: tuple[str, ...]
    group: str | None
    seq: str
    heads: tuple[str, str, str] | None = None
    json: tuple[str, ...] = ()
    watched: tuple[RowWatch, ...] = ()
    """Tables of rows updated in place, read with this one (`RowWatch`)."""


@dataclass(frozen=True, slots=True)
class RowWatch:
    """A table whose rows are updated in place: each row delivered again when it changed.

    `key` names the columns that tell its rows apart (its primary key); `open` is an SQL
    condition over its columns true while a row may still change (`"0"`: none stays open);
    `closed` a numeric column set when it stops, or on every change (a `last_seen`): a row
    changed since the last read has it at or after the latest value delivered. `open` is
    written by the harness, never taken from a file."""

    table: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    open: str
    closed: str


__all__ = ["RowWatch", "RowsResult", "SqliteTail", "TableLog"]


@dataclass(frozen=True, slots=True)
class RowsResult:
    """What one ``SqliteTail.read()`` found."""

    rows: list[dict[str, object]]
    reset: bool
    bytes_read: int
    """Bytes of the values delivered (the database itself is read by SQLite, page-wise)."""
    error: OSError | sqlite3.Error | None
    locked: bool = False


_NO_ROWS = RowsResult([], False, 0, None)


class SqliteTail:
    """Follows one append-only table of a live SQLite database, read-only."""

    def __init__(self, path: Path, log: TableLog) -> None:
        self.path = path
        self.log = log
        self._key: tuple[tuple[int, int, int, int], ...] | None = None
        self._seqs: dict[str, int] = {}
        self._rowid = 0  # the last row read
        self._watch = _Watched()

    def read(self) -> RowsResult:
        try:
            key = self._stat()
        except OSError as exc:
            return RowsResult([], False, 0, exc)
        if key == self._key:
            return _NO_ROWS
        replaced = self._key is not None and key[0][:2] != self._key[0][:2]
        seqs, rowid = ({}, 0) if replaced else (self._seqs, self._rowid)
        watch = _Watched() if replaced else self._watch.copy()
        try:
            rows, heads, rowid = self._query(seqs, rowid, watch)
        except sqlite3.OperationalError as exc:
            if _busy(exc):
                return RowsResult([], False, 0, None, locked=True)
            if "no such table" in str(exc):
                self._key = key  # not created yet: the writer's next change brings it
                return _NO_ROWS
            return RowsResult([], False, 0, exc)
        except (sqlite3.Error, OSError) as exc:
            return RowsResult([], False, 0, exc)
        went_back = any(heads.get(group, seq) < seq for group, seq in seqs.items())  # gone: kept
        if went_back and not replaced:
            self._key, self._seqs, self._rowid, self._watch = None, {}, 0, _Watched()
            result = self.read()
            return RowsResult(result.rows, True, result.bytes_read, result.error, result.locked)
        for row in rows:
            if "_table" in row:
                continue
            group, seq = _group(row, self.log.group), row[self.log.seq]
            if isinstance(seq, int):
                seqs[group] = max(seqs.get(group, -1), seq)
        self._key, self._seqs, self._rowid, self._watch = key, seqs, rowid, watch
        size = sum(len(v) for row in rows for v in row.values() if isinstance(v, str | bytes))
        return RowsResult(rows, replaced, size, None)

    def _stat(self) -> tuple[tuple[int, int, int, int], ...]:
        main = stat_key(stat_current(str(self.path)))  # on Windows through a handle: current
        try:
            return main, stat_key(stat_current(f"{self.path}-wal"))
        except FileNotFoundError:
            return (main,)

    def _query(
        self, seqs: dict[str, int], rowid: int, watch: _Watched
    ) -> tuple[list[dict[str, object]], dict[str, int], int]:
        """The new rows in insertion order, the heads, and the last rowid read."""
        uri = f"{self.path.absolute().as_uri()}?mode=ro"
        if _wal_mode(self.path) and not os.path.exists(f"{self.path}-wal"):
            uri += "&immutable=1"  # no writer: all is in the file, and SQLite creates no -wal
        db = sqlite3.connect(uri, uri=True, timeout=0, isolation_level=None)
        try:
            db.execute("PRAGMA query_only = 1")
            db.execute("BEGIN")  # one snapshot for the heads and the rows
            changed = [row for w in self.log.watched for row in watch.changed(db, w)]
            heads = self._heads(db)
            behind = {g: seqs.get(g, -1) for g, head in heads.items() if head > seqs.get(g, -1)}
            new, rowid = self._rows(db, heads, behind, rowid) if behind else ([], rowid)
            db.execute("COMMIT")
        finally:
            db.close()
        new.sort(key=lambda item: item[0])
        return changed + [row for _, row in new], heads, rowid

    def _rows(
        self, db: sqlite3.Connection, heads: dict[str, int], behind: dict[str, int], rowid: int
    ) -> tuple[list[tuple[int, dict[str, object]]], int]:
        """The rows above `behind`'s seqs: those inserted after `rowid` by one range scan, then
        by a query of its own each group that is still behind its head."""
        log, columns = self.log, self.log.columns
        names = ", ".join(_quoted(c) for c in columns)
        table = _quoted(log.table)
        seq_at = columns.index(log.seq)
        group_at = columns.index(log.group) if log.group is not None else None
        new: list[tuple[int, dict[str, object]]] = []
        reached = dict(behind)
        scan = f"SELECT rowid, {names} FROM {table} WHERE rowid > ? ORDER BY rowid"
        for row_id, *values in db.execute(scan, (rowid,)):
            rowid = max(rowid, row_id)
            group, seq = "" if group_at is None else str(values[group_at]), values[seq_at]
            if group in behind and isinstance(seq, int) and seq > behind[group]:
                new.append((row_id, dict(zip(columns, values, strict=True))))
                reached[group] = max(reached[group], seq)
        where = "? = ''" if log.group is None else f"{_quoted(log.group)} = ?"
        query = f"SELECT rowid, {names} FROM {table} WHERE {where} AND {_quoted(log.seq)} > ?"
        lagging = [(g, last) for g, last in behind.items() if heads.get(g, -1) > reached[g]]
        seen = {row_id for row_id, _ in new} if lagging else set()
        for group, last in lagging:  # a row below the scanned range
            for row_id, *values in db.execute(query, (group, last)):
                if row_id not in seen:
                    new.append((row_id, dict(zip(columns, values, strict=True))))
        return new, rowid

    def _heads(self, db: sqlite3.Connection) -> dict[str, int]:
        """The last seq of each group."""
        log = self.log
        if log.group is None:  # numbered as a whole: one lookup of the largest id
            top = db.execute(f"SELECT MAX({_quoted(log.seq)}) FROM {_quoted(log.table)}")
            head = top.fetchone()[0]
            return {"": head} if isinstance(head, int) else {}
        table, group, seq = log.heads or (log.table, log.group, log.seq)
        query = f"SELECT {_quoted(group)}, MAX({_quoted(seq)}) FROM {_quoted(table)} GROUP BY 1"
        return {str(g): s for g, s in db.execute(query) if isinstance(s, int)}


class _Watched:
    """What is known of the `RowWatch` tables: per table, the last rowid read, the latest
    `closed` value delivered, the values of the rows still open and of the rows closed at that
    latest value (by key): a row is delivered again only when they differ."""

    def __init__(self) -> None:
        self.rowid: dict[str, int] = {}
        self.closed: dict[str, float] = {}
        self.open: dict[str, dict[object, tuple[object, ...]]] = {}
        self.edge: dict[str, dict[object, tuple[object, ...]]] = {}

    def copy(self) -> _Watched:
        """A copy to work on: kept only if the read succeeds."""
        other = _Watched()
        other.rowid, other.closed = dict(self.rowid), dict(self.closed)
        other.open = {table: dict(rows) for table, rows in self.open.items()}
        other.edge = {table: dict(rows) for table, rows in self.edge.items()}
        return other

    def changed(self, db: sqlite3.Connection, watch: RowWatch) -> list[dict[str, object]]:
        names = ", ".join(_quoted(c) for c in watch.columns)
        table = watch.table
        query = (
            f"SELECT rowid, ({watch.open}), {names} FROM {_quoted(table)} "
            f"WHERE rowid > ? OR ({watch.open}) OR {_quoted(watch.closed)} >= ? ORDER BY rowid"
        )
        known, edge = self.open.setdefault(table, {}), self.edge.setdefault(table, {})
        key_at = [watch.columns.index(k) for k in watch.key]
        closed_at = watch.columns.index(watch.closed)
        rows: list[dict[str, object]] = []
        found = db.execute(query, (self.rowid.get(table, 0), self.closed.get(table, -1e300)))
        before = dict(edge)  # what was delivered, as the last read left it
        for row_id, is_open, *values in found:
            self.rowid[table] = max(self.rowid.get(table, 0), row_id)
            key, ended, now = tuple(values[i] for i in key_at), values[closed_at], tuple(values)
            if (known if is_open else before).get(key) == now:
                continue
            if is_open:
                known[key] = now
            else:
                known.pop(key, None)
                self._closed_at(table, key, ended, now)
            rows.append({"_table": table, **dict(zip(watch.columns, values, strict=True))})
        return rows

    def _closed_at(self, table: str, key: object, ended: object, now: tuple[object, ...]) -> None:
        if not isinstance(ended, int | float) or isinstance(ended, bool):
            return
        edge = self.edge[table]
        if ended > self.closed.get(table, -1e300):
            self.closed[table] = ended
            edge.clear()
        if ended == self.closed[table]:
            edge[key] = now


def _group(row: dict[str, object], group: str | None) -> str:
    return "" if group is None else str(row[group])


def _wal_mode(path: Path) -> bool:
    """The database header says WAL (file format versions 2 at offsets 18 and 19)."""
    with open(path, "rb") as f:
        return f.read(20)[18:20] == b"\x02\x02"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(exc)

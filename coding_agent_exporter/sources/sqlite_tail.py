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
    group: str
    seq: str
    heads: tuple[str, str, str] | None = None
    json: tuple[str, ...] = ()


__all__ = ["RowsResult", "SqliteTail", "TableLog"]


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

    def read(self) -> RowsResult:
        try:
            key = self._stat()
        except OSError as exc:
            return RowsResult([], False, 0, exc)
        if key == self._key:
            return _NO_ROWS
        replaced = self._key is not None and key[0][:2] != self._key[0][:2]
        seqs, rowid = ({}, 0) if replaced else (self._seqs, self._rowid)
        try:
            rows, heads, rowid = self._query(seqs, rowid)
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
            self._key, self._seqs, self._rowid = None, {}, 0
            result = self.read()
            return RowsResult(result.rows, True, result.bytes_read, result.error, result.locked)
        for row in rows:
            group, seq = str(row[self.log.group]), row[self.log.seq]
            if isinstance(seq, int):
                seqs[group] = max(seqs.get(group, -1), seq)
        self._key, self._seqs, self._rowid = key, seqs, rowid
        size = sum(len(v) for row in rows for v in row.values() if isinstance(v, str | bytes))
        return RowsResult(rows, replaced, size, None)

    def _stat(self) -> tuple[tuple[int, int, int, int], ...]:
        main = stat_key(stat_current(str(self.path)))  # on Windows through a handle: current
        try:
            return main, stat_key(stat_current(f"{self.path}-wal"))
        except FileNotFoundError:
            return (main,)

    def _query(
        self, seqs: dict[str, int], rowid: int
    ) -> tuple[list[dict[str, object]], dict[str, int], int]:
        """The new rows in insertion order, the heads, and the last rowid read."""
        uri = f"{self.path.absolute().as_uri()}?mode=ro"
        if _wal_mode(self.path) and not os.path.exists(f"{self.path}-wal"):
            uri += "&immutable=1"  # no writer: all is in the file, and SQLite creates no -wal
        db = sqlite3.connect(uri, uri=True, timeout=0, isolation_level=None)
        try:
            db.execute("PRAGMA query_only = 1")
            db.execute("BEGIN")  # one snapshot for the heads and the rows
            heads = self._heads(db)
            behind = {g: seqs.get(g, -1) for g, head in heads.items() if head > seqs.get(g, -1)}
            new, rowid = self._rows(db, heads, behind, rowid) if behind else ([], rowid)
            db.execute("COMMIT")
        finally:
            db.close()
        new.sort(key=lambda item: item[0])
        return [row for _, row in new], heads, rowid

    def _rows(
        self, db: sqlite3.Connection, heads: dict[str, int], behind: dict[str, int], rowid: int
    ) -> tuple[list[tuple[int, dict[str, object]]], int]:
        """The rows above `behind`'s seqs: those inserted after `rowid` by one range scan, then
        by a query of its own each group that is still behind its head."""
        log, columns = self.log, self.log.columns
        names = ", ".join(_quoted(c) for c in columns)
        table = _quoted(log.table)
        group_at, seq_at = columns.index(log.group), columns.index(log.seq)
        new: list[tuple[int, dict[str, object]]] = []
        reached = dict(behind)
        scan = f"SELECT rowid, {names} FROM {table} WHERE rowid > ? ORDER BY rowid"
        for row_id, *values in db.execute(scan, (rowid,)):
            rowid = max(rowid, row_id)
            group, seq = str(values[group_at]), values[seq_at]
            if group in behind and isinstance(seq, int) and seq > behind[group]:
                new.append((row_id, dict(zip(columns, values, strict=True))))
                reached[group] = max(reached[group], seq)
        query = (
            f"SELECT rowid, {names} FROM {table} "
            f"WHERE {_quoted(log.group)} = ? AND {_quoted(log.seq)} > ?"
        )
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
        table, group, seq = log.heads or (log.table, log.group, log.seq)
        query = f"SELECT {_quoted(group)}, MAX({_quoted(seq)}) FROM {_quoted(table)} GROUP BY 1"
        return {str(g): s for g, s in db.execute(query) if isinstance(s, int)}


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

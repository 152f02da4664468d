#!/usr/bin/env python3
"""What following Hermes Agent's `state.db` costs: the catch-up, then each change.

    python3 bench/hermes_state.py [--sessions 20000] [--messages 10] [--open 10] [--changes 50]

Makes a scratch WAL database with Hermes' own `sessions`, `messages` and `session_model_usage`
tables (their `CREATE TABLE` taken from a recorded fixture): `--sessions` ended sessions of
`--messages` messages and one title row each, and `--open` sessions still running. Times the
catch-up read (`SqliteTail.read()` with Hermes' `MESSAGES` log), then `--changes` commits as
Hermes makes them while it runs (a message, then the session's totals grown), each read at once:
the rows delivered (must be 2: the message and the changed row) and the median and slowest read,
in milliseconds. The watched tables have no index on `ended_at` / `last_seen`: each read scans
them, so its cost grows with `--sessions`.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coding_agent_exporter.harnesses.hermes.state_db import MESSAGES  # noqa: E402
from coding_agent_exporter.sources.sqlite_tail import SqliteTail  # noqa: E402

FIXTURE = ROOT / "fixtures" / "hermes" / "0.19.0" / "subagent" / "home" / ".hermes" / "state.db"
TABLES = ("sessions", "messages", "session_model_usage")


def made(path: Path, sessions: int, messages: int, running: int) -> sqlite3.Connection:
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    with sqlite3.connect(f"file:{FIXTURE}?mode=ro", uri=True) as recorded:
        marks = ",".join("?" * len(TABLES))
        query = f"SELECT sql FROM sqlite_master WHERE type = 'table' AND name IN ({marks})"
        for (sql,) in recorded.execute(query, TABLES):
            writer.execute(sql)
    writer.execute("BEGIN")
    for i in range(sessions):
        at = 1e9 + i
        writer.execute(
            "INSERT INTO sessions (id, source, started_at, ended_at, model, input_tokens) "
            "VALUES (?, 'cli', ?, ?, 'm', 100)",
            (f"s{i}", at, at + 1),
        )
        rows = [(f"s{i}", at)] * messages
        writer.executemany(
            "INSERT INTO messages (session_id, role, content, timestamp) "
            "VALUES (?, 'assistant', 'x', ?)",
            rows,
        )
        writer.execute(
            "INSERT INTO session_model_usage (session_id, model, task, input_tokens, last_seen) "
            "VALUES (?, 'm', 'title_generation', 5, ?)",
            (f"s{i}", at),
        )
    for i in range(running):
        writer.execute(
            "INSERT INTO sessions (id, source, started_at, model) VALUES (?, 'cli', 2e9, 'm')",
            (f"open{i}",),
        )
    writer.execute("COMMIT")
    return writer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=20_000)
    ap.add_argument("--messages", type=int, default=10)
    ap.add_argument("--open", type=int, default=10)
    ap.add_argument("--changes", type=int, default=50)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "state.db"
        writer = made(path, a.sessions, a.messages, a.open)
        tail = SqliteTail(path, MESSAGES)
        start = time.perf_counter()
        rows = len(tail.read().rows)
        print(f"catch-up: {rows} rows in {time.perf_counter() - start:.3f} s")
        took = []
        for _ in range(a.changes):
            writer.execute("BEGIN IMMEDIATE")
            writer.execute(
                "INSERT INTO messages (session_id, role, content, timestamp) "
                "VALUES ('open0', 'user', 'y', 2e9)"
            )
            grown = "UPDATE sessions SET input_tokens = input_tokens + 10 WHERE id = 'open0'"
            writer.execute(grown)
            writer.execute("COMMIT")
            start = time.perf_counter()
            delivered = len(tail.read().rows)
            took.append((time.perf_counter() - start) * 1000)
            assert delivered == 2, delivered
        print(
            f"per change ({a.sessions} sessions): 2 rows, median {statistics.median(took):.1f} ms,"
            f" slowest {max(took):.1f} ms"
        )
        writer.close()


if __name__ == "__main__":
    main()

"""Vibe's unified session store (2.26 and later): `logs/session/unified/<id>/`.

- `journal/<first sequence>.jsonl`: the event-sourced journal, one hash-chained record per line
  (`record_sha256` = SHA-256 of the record without that key, as sorted compact JSON;
  `previous_record_sha256` = the record before in the same segment; a segment's first record
  links to nothing). A record whose hash is wrong, or that does not follow the record before
  it, is rejected (counted as `bad_hash` / `chain_break`), never guessed.
- `chunks/<sha256>.json`: a snapshot's pieces; those holding projection entries (messages and
  effects) tell the history whose journal segments were deleted (only the newest two remain).
- `generations/<n>/runtime-state.json`: every completion of the session (`actions`), the model,
  and a sub-agent's parent.

Here: each file's reader, and how their records are folded into the session's `Store` (a
sub-agent's records wait until its lead is known); what the records tell is
`vibe_unified_records`'s.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec

from ...events import Event
from ..base import RecordRejected
from ..fields import nonempty
from .store import PENDING_MAX, Store
from .unified_records import dispatch, is_entry, is_history, learn_root


def record_hash(record: dict[str, Any]) -> str:
    """The SHA-256 Vibe writes in `record_sha256`: of the rest of the record as Python's
    `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)` writes it."""
    body = {k: v for k, v in record.items() if k != "record_sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


_SORTED = msgspec.json.Encoder(order="sorted")


def _verified(record: dict[str, Any]) -> str | None:
    """The record's own hash if it is right, else None. msgspec writes the same text as
    `record_hash` for what Vibe writes (3.5x faster); where the two could differ (a float's or
    an escape's spelling), `record_hash` has the last word."""
    claimed = record.get("record_sha256")
    if not isinstance(claimed, str):
        return None
    body = {k: v for k, v in record.items() if k != "record_sha256"}
    try:
        if hashlib.sha256(_SORTED.encode(body)).hexdigest() == claimed:
            return claimed
    except (TypeError, ValueError, OverflowError):  # e.g. NaN, a huge int: json.dumps decides
        pass
    return claimed if record_hash(record) == claimed else None


class JournalReader:
    """One journal segment. Each segment is a chain of its own (its first record links to
    nothing); sequence numbers run on across a store's segments, so a segment read again (a
    copy saved over it) tells nothing twice."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.last_hash: str | None = None

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict) or not isinstance(record.get("sequence"), int):
            return []
        store, sequence = self.store, record["sequence"]
        if sequence <= store.last_seq:  # read before (a copy saved over it): checked then
            self.last_hash = record.get("record_sha256")
            return []
        digest = _verified(record)
        if digest is None:
            raise RecordRejected("bad_hash", f"journal record {sequence}: hash does not match")
        previous, self.last_hash = self.last_hash, digest
        if previous is not None and record.get("previous_record_sha256") != previous:
            raise RecordRejected("chain_break", f"journal record {sequence}: chain broken")
        if store.last_seq and sequence > store.last_seq + 1:
            store.waiting.clear()  # records were missed (deleted unread): their answers too
        store.last_seq = sequence
        return feed_store(store, "journal", record)


class ChunkReader:
    """A snapshot chunk: a JSON array; only arrays of projection entries matter here."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, list):
            return []
        if any(is_entry(e) for e in record):
            return feed_store(self.store, "chunk", record)
        if any(is_history(e) for e in record):
            return feed_store(self.store, "history", record)
        return []


class RuntimeReader:
    """A generation's `runtime-state.json`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        store = self.store
        meta = record.get("session_metadata")
        if isinstance(meta, dict):
            store.model = nonempty(meta.get("active_model")) or store.model
            if store.root is None and nonempty(meta.get("root_session_id")):
                store.root = meta["root_session_id"]
                store.parent = nonempty(meta.get("parent_session_id"))
        return feed_store(store, "runtime", record)


def feed_store(store: Store, kind: str, record: Any) -> list[Event]:
    """Fold one record in; a sub-agent's records wait until its lead is known."""
    if store.root is None and kind == "journal":
        learn_root(store, record)
    if store.root is None:
        if len(store.pending) < PENDING_MAX:
            store.pending.append((kind, record))
        return []
    events = store.child_seen()
    if store.pending:
        waiting, store.pending = store.pending, []
        for was, old in waiting:
            events += dispatch(store, was, old)
    return events + dispatch(store, kind, record)

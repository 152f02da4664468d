"""Property-based fuzzing of every reader of every harness with REAL records made wrong.

For each agent, one file of each kind its harness reads is taken from the recorded fixtures, and
its first records are the seeds. Hypothesis then replaces a value anywhere inside a seed (at any
depth) with arbitrary JSON, drops keys, and feeds the results in any order to a fresh reader;
Vibe journal records are hashed and chained again after the change, so the change reaches the
reader's logic instead of its hash check. Nothing may escape a reader except its own verdict
(`RecordRejected`), and the events must fold into a state. Run more cases with
`HYPOTHESIS_PROFILE=deep`.
"""

from __future__ import annotations

import copy
import json
import random
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coding_agent_exporter.harnesses import HARNESSES, RecordRejected
from coding_agent_exporter.harnesses.vibe.unified import JournalReader, record_hash
from coding_agent_exporter.state.state import State

from .conftest import source_for
from .test_fuzz import JSON

SEEDS_PER_FILE = 40


@cache
def seeds() -> dict[str, list[tuple[str, str, list[Any]]]]:
    """agent → [(relative path, kind, records)], one file per reader kind and file name."""
    found: dict[str, list[tuple[str, str, list[Any]]]] = {}
    for agent in HARNESSES:
        homes = sorted(Path(__file__).parent.parent.glob(f"fixtures/{agent}/*/*/home"))
        kinds: dict[tuple[str, str], tuple[str, str, list[Any]]] = {}
        for home in homes:
            source = source_for(home)
            for path in sorted(p for p in source.home.rglob("*") if p.is_file()):
                rel = PurePosixPath(path.relative_to(source.home).as_posix())
                kind = source.harness.match(rel)
                reader = type(source.harness.reader(rel)).__name__ if kind else ""
                if kind in ("jsonl", "doc") and (reader, kind) not in kinds:
                    records = _records(path, kind)
                    if records:
                        kinds[(reader, kind)] = (str(rel), kind, records)
        found[agent] = list(kinds.values())
    return found


def _records(path: Path, kind: str) -> list[Any]:
    try:
        if kind == "doc":
            return [json.loads(path.read_text())]
        lines = path.read_text().splitlines()[:SEEDS_PER_FILE]
        return [json.loads(line) for line in lines if line.strip()]
    except (ValueError, UnicodeDecodeError):
        return []


def paths_in(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += paths_in(inner, (*prefix, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value[:6]):
            found += paths_in(inner, (*prefix, i))
    return found


def mutated(record: Any, pick: int, replacement: Any, drop: bool) -> Any:
    record = copy.deepcopy(record)
    places = paths_in(record)
    place = places[pick % len(places)]
    if not place:
        return replacement
    parent = record
    for key in place[:-1]:
        parent = parent[key]
    if drop and isinstance(parent, dict):
        del parent[place[-1]]
    else:
        parent[place[-1]] = replacement
    return record


def rechain(records: list[Any]) -> list[Any]:
    """Vibe journal records, numbered and hash-chained again after their change."""
    previous = None
    out = []
    for number, record in enumerate(records, 1):
        if not isinstance(record, dict):
            out.append(record)
            continue
        record = {**record, "sequence": number, "previous_record_sha256": previous}
        record.pop("record_sha256", None)
        record["record_sha256"] = record_hash(record)
        previous = record.get("record_sha256")
        out.append(record)
    return out


CHANGES = st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(0, 10_000), JSON, st.booleans()), max_size=10
)


DATABASES = ("opencode", "kilo-code", "hermes")  # SQLite rows: Hermes' fuzzed in test_hermes.py


@pytest.mark.parametrize("agent", [a for a in HARNESSES if a not in DATABASES])
@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(changes=CHANGES, seed=st.integers(0, 2**32))
def test_real_records_made_wrong_never_escape_a_reader(
    agent: str, changes: list[tuple[int, int, Any, bool]], seed: int
) -> None:
    files = seeds()[agent]
    assert files, f"no recorded files for {agent}"
    harness = HARNESSES[agent]()
    state, order = State(), random.Random(seed)
    for rel, _, records in files:
        reader = harness.reader(PurePosixPath(rel))
        batch = list(records)
        for which, pick, replacement, drop in changes:
            i = which % len(batch)
            batch[i] = mutated(batch[i], pick, replacement, drop)
        if len(batch) > 1 and changes:
            order.shuffle(batch)
        if isinstance(reader, JournalReader):
            batch = rechain(batch)
        for record in batch:
            try:
                events = reader.feed(record)
            except RecordRejected:
                continue
            for event in events:
                state.apply(agent, event)
    state.refresh(2e9, lambda pid: 1.0)


def test_every_agent_has_seeds() -> None:
    for agent in HARNESSES:
        if agent not in DATABASES:
            assert seeds()[agent], agent


@pytest.mark.parametrize("value", [253402300800000, -1, float("inf"), float("nan"), 1e300, True])
def test_an_epoch_no_date_has_is_no_time(value: object) -> None:
    """A record's epoch past the year 9999, before 1970 or not a number (what the fuzz test
    above made of a Vibe record) is no time: the record's own, never a date that raises."""
    from coding_agent_exporter.harnesses.fields import timestamp

    assert timestamp(value) is None
    assert timestamp(1_796_034_447_163) == 1_796_034_447.163  # ms, as the agents write
    assert timestamp(253402300799000) == 253402300799.0  # the last second of the year 9999

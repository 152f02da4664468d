"""Clock oddities in the records: timestamps in the future, out of order, or missing. Counts do
not change, no duration is negative, nothing raises."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import FIXTURES, app_for

SCENARIO = FIXTURES / "claude-code" / "2.1.332" / "subagent-foreground" / "home"


def rewrite(home: Path, change: object) -> None:
    for journal in home.rglob("*.jsonl"):
        records = [json.loads(line) for line in journal.read_text().splitlines()]
        for i, record in enumerate(records):
            if "timestamp" in record:
                change(i, record)  # type: ignore[operator]
        journal.write_text("".join(json.dumps(r) + "\n" for r in records))


def totals(home: Path) -> tuple[object, ...]:
    state = app_for(home).state
    t = state.totals
    durations = [h.total for h in (*t.turn_durations.values(), *t.tool_durations.values())]
    assert all(d >= 0 for d in durations)
    return (dict(t.messages), dict(t.tokens), sum(t.turns.values()), sum(t.tool_calls.values()))


def copy(tmp_path: Path) -> Path:
    import shutil

    home = tmp_path / "home"
    shutil.copytree(SCENARIO, home)
    return home


def test_future_out_of_order_and_missing_timestamps_change_no_count(tmp_path: Path) -> None:
    clean = totals(SCENARIO)
    home = copy(tmp_path)

    def odd(i: int, record: dict[str, object]) -> None:
        if i < 4:
            return  # the session starts normally, then the clock misbehaves
        if i % 3 == 0:
            record["timestamp"] = "2099-01-01T00:00:00.000Z"  # in the future
        elif i % 3 == 1:
            record["timestamp"] = f"2020-01-01T00:00:{59 - i % 60:02d}.000Z"  # went back
        else:
            del record["timestamp"]

    rewrite(home, odd)
    assert totals(home)[:2] == clean[:2]  # responses and tokens: exactly the same


def test_garbage_timestamps_are_ignored(tmp_path: Path) -> None:
    clean = totals(SCENARIO)
    home = copy(tmp_path)

    def garbage(i: int, record: dict[str, object]) -> None:
        record["timestamp"] = ["not", "a", "time"] if i % 2 else "yesterday-ish"

    rewrite(home, garbage)
    assert totals(home)[:2] == clean[:2]

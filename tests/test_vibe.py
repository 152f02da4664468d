"""Mistral Vibe: the unified store and the legacy engine, record kinds, file hazards and live
states, against the recorded fixtures (`fixtures/vibe/`, see its README)."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path, PurePosixPath

import pytest

from coding_agent_exporter.events import LiveIndexRead, ModelResponded, TurnEnded, TurnStarted
from coding_agent_exporter.harnesses.base import RecordRejected
from coding_agent_exporter.harnesses.vibe.harness import Vibe
from coding_agent_exporter.harnesses.vibe.legacy import Legacy, MessagesReader, MetaReader
from coding_agent_exporter.harnesses.vibe.store import Store, usage
from coding_agent_exporter.harnesses.vibe.unified import JournalReader, record_hash
from coding_agent_exporter.runtime.config import parse
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.runtime.settings import settings_of
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.labels import live_state
from coding_agent_exporter.state.state import State
from coding_agent_exporter.web.views import session_rows

from .conftest import FIXTURES, expected

VIBE = FIXTURES / "vibe"


def sessions_of(scenario: Path) -> Path:
    return scenario / "home" / ".vibe" / "logs" / "session"


def engine_over(folder: Path) -> Engine:
    engine = Engine([Source(Vibe("mistral-medium-latest"), folder)], State(), Stats())
    engine.catch_up()
    return engine


def tokens(engine: Engine) -> dict[str, int]:
    totals = engine.state.totals.tokens
    return {kind: sum(v for k, v in totals.items() if k[3] == kind) for kind in ("input", "output")}


def messages(engine: Engine) -> int:
    return sum(engine.state.totals.messages.values())


def sync(target: Path, source: Path) -> list[Path]:
    """Make `target` a copy of `source` as the agent would have changed it: new and changed
    files written, vanished ones deleted. The paths that changed, for `Engine.changed`."""
    changed: list[Path] = []
    wanted = {p.relative_to(source) for p in source.rglob("*") if p.is_file()}
    for rel in sorted(wanted):
        to = target / rel
        data = (source / rel).read_bytes()
        if not to.exists() or to.read_bytes() != data:
            to.parent.mkdir(parents=True, exist_ok=True)
            to.write_bytes(data)
            changed.append(to)
    for path in sorted(p for p in target.rglob("*") if p.is_file()):
        if path.relative_to(target) not in wanted:
            path.unlink()
            changed.append(path)
    return changed


def steps(scenario: Path) -> list[Path]:
    """The copies taken while Vibe ran, in order, then the final files."""
    index = json.loads((scenario / "snapshots" / "index.json").read_text())
    kept = sorted(index["kept"], key=lambda k: k["t_ms"])
    return [scenario / "snapshots" / str(k["n"]) for k in kept] + [sessions_of(scenario)]


def lock_pids(folder: Path) -> set[int]:
    return {json.loads(p.read_text())["process_id"] for p in folder.glob("active/*.lock.json")}


def live_states(engine: Engine, pids: set[int], now: float = 2e9) -> list[str]:
    engine.state.refresh(now, lambda pid: 0.0 if pid in pids else None)
    return sorted(
        live_state(e.status) + (f":{e.reason}" if e.reason else "") if not e.derived else "derived"
        for e in engine.state.live.values()
    )


# -- following a session live, one recorded copy after another --------------------------------


@pytest.mark.parametrize("version", ["3.0.2", "2.26.1", "2.25.8", "2.26.1-legacy"])
def test_followed_session_ends_with_the_totals_of_a_fresh_read(
    version: str, tmp_path: Path
) -> None:
    """Generations roll over and journal segments are deleted between the copies: what was read
    while following is kept, and the end equals reading the final files afresh."""
    scenario = VIBE / version / "prog-multi"
    folder = tmp_path / "session"
    folder.mkdir()
    engine = engine_over(folder)
    for step in steps(scenario):
        engine.changed(sync(folder, step))
    assert sum(engine.stats.parse_errors.values()) == 0  # every segment's chain holds
    fresh = engine_over(sessions_of(scenario))
    assert (messages(engine), tokens(engine)) == (messages(fresh), tokens(fresh))
    want = expected(scenario)["home"]
    assert messages(engine) == want["messages"]
    assert tokens(engine) == {k: want["tokens"][k] for k in ("input", "output")}


def test_following_keeps_what_deleted_segments_held(tmp_path: Path) -> None:
    """2.26.1 deleted a sub-agent's store and journal records a fresh read cannot recover:
    following the copies keeps what they showed, more than the final files alone."""
    scenario = VIBE / "2.26.1" / "prog-subagent"
    folder = tmp_path / "session"
    folder.mkdir()
    engine = engine_over(folder)
    for step in steps(scenario):
        engine.changed(sync(folder, step))
    fresh = engine_over(sessions_of(scenario))
    truth = expected(scenario)["home"]
    assert messages(fresh) < messages(engine) <= truth["messages"]
    assert tokens(fresh)["input"] < tokens(engine)["input"] <= truth["tokens"]["input"]
    (row,) = session_rows(engine.state, parse(["metrics"], {}).project, history=True)
    assert [s["id"] for s in row["subagents"]] == ["child-" + _child_of(scenario)]


def _child_of(scenario: Path) -> str:
    (sub,) = expected(scenario)["sessions"][0]["subagents"]
    return str(sub["store"]).removeprefix("child-")


@pytest.mark.parametrize(
    "version,states",
    [
        ("3.0.2", [["needs_user:bash"], ["needs_user:bash"], ["running"], ["idle"], []]),
        ("2.26.1", [["needs_user:bash"], ["idle"], ["needs_user:bash"], ["idle"], []]),
    ],
)
def test_approval_shows_needs_user_until_answered(
    version: str, states: list[list[str]], tmp_path: Path
) -> None:
    """The TUI copies: an approval dialog open (callback registered) is needs_user with the
    tool; answered, the session runs on; `/exit` removes the lock."""
    scenario = VIBE / version / "tui"
    folder = tmp_path / "session"
    folder.mkdir()
    engine = engine_over(folder)
    seen = []
    for step in steps(scenario):
        engine.changed(sync(folder, step))
        seen.append(live_states(engine, lock_pids(step) | lock_pids(folder)))
    assert seen == states
    assert sum(engine.stats.parse_errors.values()) == 0


@pytest.mark.parametrize("version", ["3.0.2", "2.26.1"])
def test_a_killed_session_is_live_only_while_its_process_runs(version: str) -> None:
    scenario = VIBE / version / "prog-killed"
    folder = sessions_of(scenario)
    (pid,) = lock_pids(folder)
    engine = engine_over(folder)
    assert live_states(engine, {pid}) == ["running"]
    assert live_states(engine, set()) == []  # the process is gone: its lock is stale
    (session,) = engine.state.sessions.values()
    assert session.turn_open_at is None and not session.open_tools
    assert session.turns["interrupted"] == 1


def test_a_legacy_session_lock_derives_its_state_from_turns() -> None:
    scenario = VIBE / "2.26.1-legacy" / "tui" / "snapshots" / "1"  # no session folder yet
    engine = engine_over(scenario)
    (lock,) = scenario.glob("active/*.lock.json")
    acquired = datetime.fromisoformat(json.loads(lock.read_text())["acquired_at"]).timestamp()
    assert live_states(engine, lock_pids(scenario), now=acquired + 5) == ["derived"]
    (row,) = session_rows(engine.state, parse(["metrics"], {}).project, history=False)
    assert row["state"] == "idle"


# -- the journal's hash chain --------------------------------------------------------------


def journal_of(folder: Path) -> Path:
    return sorted(p for p in folder.glob("unified/*/journal/*.jsonl") if p.stat().st_size)[0]


def rewrite(path: Path, number: int, change: object) -> None:
    lines = path.read_text().splitlines()
    record = json.loads(lines[number])
    change(record)  # type: ignore[operator]
    lines[number] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")


def test_every_recorded_journal_record_verifies() -> None:
    checked = 0
    for path in VIBE.glob("*/*/home/.vibe/logs/session/unified/*/journal/*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            assert record["record_sha256"] == record_hash(record), path
            checked += 1
    assert checked > 200


def test_a_record_whose_hash_is_wrong_is_rejected_and_counted(tmp_path: Path) -> None:
    folder = tmp_path / "session"
    shutil.copytree(sessions_of(VIBE / "3.0.2" / "prog-shell"), folder)
    journal = journal_of(folder)
    lines = journal.read_text().splitlines()
    number = next(i for i, line in enumerate(lines) if '"completion_succeeded"' in line)
    rewrite(
        journal,
        number,
        lambda r: r["payload"]["result"]["result"]["usage"].update(output_tokens=999_999),
    )
    engine = engine_over(folder)
    assert engine.stats.parse_errors[("vibe", "bad_hash")] == 1
    assert tokens(engine)["output"] < 999_999  # the forged usage was not used


def test_a_record_that_breaks_the_chain_is_rejected_and_counted(tmp_path: Path) -> None:
    folder = tmp_path / "session"
    shutil.copytree(sessions_of(VIBE / "3.0.2" / "prog-shell"), folder)
    journal = journal_of(folder)

    def relink(record: dict[str, object]) -> None:
        record["previous_record_sha256"] = "0" * 64
        record["record_sha256"] = record_hash(record)  # consistent in itself, not in the chain

    rewrite(journal, 3, relink)
    engine = engine_over(folder)
    # the forged record, and the next one (it names the record that was replaced)
    assert engine.stats.parse_errors[("vibe", "chain_break")] == 2
    assert engine.stats.parse_errors[("vibe", "bad_hash")] == 0


def test_an_unreadable_session_costs_that_session_only(tmp_path: Path) -> None:
    folder = tmp_path / "session"
    shutil.copytree(sessions_of(VIBE / "3.0.2" / "prog-shell"), folder)
    shutil.copytree(
        sessions_of(VIBE / "3.0.2" / "prog-fail") / "unified",
        folder / "unified",
        dirs_exist_ok=True,
    )
    broken = next(p for p in (folder / "unified").iterdir() if p.name != ".session-index.json")
    for path in broken.rglob("*.json*"):
        path.write_bytes(b"\x00garbage{" * 50)
    engine = engine_over(folder)
    assert sum(v for k, v in engine.stats.parse_errors.items() if k[0] == "vibe") > 0
    assert len(engine.state.sessions) == 1  # the other session is whole
    assert messages(engine) == 2


# -- record kinds ----------------------------------------------------------------------------


def test_an_approval_is_needs_user_until_resolved_then_running() -> None:
    store = Store("s")
    reader = JournalReader(store)
    store.lock = LiveIndexRead(pid=7, session_id="s", started_at=1.0, status=None, source="l")
    records = [
        ("projection_delta", _envelope(0)),
        (
            "callback_registered",
            {
                "callback_id": "approval-abc123XYZ",
                "kind": "approval",
                "routing": {
                    "createdAt": 1_000_500,
                    "detail": {"effect": {"toolName": "file_system.bash"}},
                },
            },
        ),
        (
            "callback_resolved",
            {
                "callback_id": "approval-abc123XYZ",
                "result": {"output": {"decision": {"type": "approve"}}},
            },
        ),
    ]
    previous, states = None, []
    for number, (kind, payload) in enumerate(records, 1):
        record = _record(number, previous, kind, payload)
        previous = record["record_sha256"]
        live = [e for e in reader.feed(record) if isinstance(e, LiveIndexRead)]
        states.append((live[-1].status, live[-1].reason))
    assert states == [("busy", None), ("waiting", "bash"), ("busy", None)]


def test_usage_takes_the_cached_part_out_of_the_input() -> None:
    got = usage({"input_tokens": 3000, "cached_input_tokens": 900, "output_tokens": 60})
    assert (got.input, got.cache_read, got.output) == (2100, 900, 60)
    camel = usage({"inputTokens": 3000, "cachedInputTokens": 900, "outputTokens": 60})
    assert camel == got


def _record(sequence: int, previous: str | None, kind: str, payload: object) -> dict[str, object]:
    record: dict[str, object] = {
        "type": kind,
        "sequence": sequence,
        "payload": payload,
        "previous_record_sha256": previous,
        "recovery_journal_record_version": 1,
    }
    record["record_sha256"] = record_hash(record)
    return record


def _envelope(total: int, status: str = "in_progress") -> dict[str, object]:
    state = {
        "latestTurn": {"id": "turn-1", "startedAt": 1_000_000, "status": status},
        "session": {
            "rootSessionId": "s",
            "tokenUsage": {
                "inputTokens": total,
                "cachedInputTokens": 0,
                "outputTokens": total // 100,
            },
        },
        "activeCallbacks": [],
    }
    return {"delta": [{"op": "set_envelope", "state": state}]}


def test_usage_before_the_journal_is_carried_once() -> None:
    """A journal whose older segments are gone starts with a cumulative usage: what it does not
    show per response is carried (tokens, no message), once; a later envelope that grew by what
    the journal showed adds nothing, one that grew by more (records missed) adds the rest."""
    store = Store("s")
    reader = JournalReader(store)
    first = _record(40, None, "projection_delta", _envelope(5000))
    events = reader.feed(first)
    carried = [e for e in events if isinstance(e, ModelResponded)]
    assert [(e.carried, e.usage.input) for e in carried] == [(True, 5000)]
    same = reader.feed(_record(41, first["record_sha256"], "projection_delta", _envelope(5000)))
    assert not [e for e in same if isinstance(e, ModelResponded)]
    next_segment = JournalReader(store)
    later = next_segment.feed(_record(50, None, "projection_delta", _envelope(7000)))
    assert [e.usage.input for e in later if isinstance(e, ModelResponded)] == [7000]


def test_a_journal_read_from_its_start_carries_nothing() -> None:
    store = Store("s")
    events = JournalReader(store).feed(_record(1, None, "projection_delta", _envelope(0)))
    assert not [e for e in events if isinstance(e, ModelResponded)]
    assert [type(e) for e in events if isinstance(e, TurnStarted | TurnEnded)] == [TurnStarted]


def test_legacy_lines_are_spread_between_start_and_end() -> None:
    session = Legacy()
    meta = {
        "session_id": "s1",
        "start_time": "2026-11-30T10:00:00+00:00",
        "end_time": "2026-11-30T10:00:30+00:00",
        "config": {"active_model": "m"},
    }
    lines = [
        {"role": "user", "content": "a", "message_id": "u1"},
        {"role": "assistant", "content": "b", "message_id": "a1"},
        {"role": "user", "content": "c", "message_id": "u2"},
        {"role": "assistant", "content": "d", "message_id": "a2"},
    ]
    messages_reader = MessagesReader(session)
    for line in lines:
        assert messages_reader.feed(line) == []  # no time before the meta says when
    events = MetaReader(session).feed(meta)
    times = [e.at for e in events if isinstance(e, TurnStarted | ModelResponded)]
    start = 1_796_032_800.0
    assert times == [start, start + 10, start + 20, start + 30]
    # a copy of the file saved over it repeats the lines already read
    again = MessagesReader(session)
    assert [again.feed(line) for line in lines] == [[], [], [], []]


# -- where the sessions are ---------------------------------------------------------------


def test_the_session_folder_comes_from_vibe_settings(tmp_path: Path) -> None:
    home = tmp_path / ".vibe"
    home.mkdir()
    assert settings_of(Vibe, home).home == home / "logs" / "session"
    (home / "config.toml").write_text(
        'active_model = "devstral"\n[session_logging]\nsave_dir = "/srv/vibe-logs"\n'
    )
    settings = settings_of(Vibe, home)
    assert (settings.home, settings.model) == (Path("/srv/vibe-logs"), "devstral")
    assert settings_of(Vibe, home, {"vibe.session-dir": "/elsewhere"}).home == Path("/elsewhere")
    config = parse(["metrics", "--vibe.home", str(home)], {})
    assert config.homes["vibe"] == Path("/srv/vibe-logs")
    assert config.models["vibe"] == "devstral"
    env = {"CODING_AGENT_EXPORTER_VIBE_SESSION_DIR": "/x", "VIBE_HOME": str(home)}
    assert parse(["metrics"], env).homes["vibe"] == Path("/x")


def test_a_broken_config_toml_keeps_the_defaults(tmp_path: Path) -> None:
    home = tmp_path / ".vibe"
    home.mkdir()
    (home / "config.toml").write_text("this is = = not toml")
    assert settings_of(Vibe, home).home == home / "logs" / "session"


def test_what_is_read_and_what_is_left_alone() -> None:
    vibe = Vibe()
    kinds = {
        "active/abc.lock.json": "doc",
        "active/abc.lock": None,
        "active/.registry": None,
        "unified/abc/meta.json": "doc",
        "unified/child-1f/meta.json": None,
        "unified/abc/journal/0000000000000001.jsonl": "jsonl",
        "unified/abc/chunks/ff.json": "doc",
        "unified/abc/generations/0000000000000001/runtime-state.json": "doc",
        "unified/abc/generations/0000000000000001/manifest.json": None,
        "unified/abc/scheduled-loops.json": None,
        "unified/.session-index.json": None,
        "session_20261130_104222_20ab5004/messages.jsonl": "jsonl",
        "session_20261130_104222_20ab5004/meta.json": "doc",
        "session_20261130_104222_20ab5004/agents/explore_x/messages.jsonl": "jsonl",
        "plugins/packages/99/x/meta.json": None,
        ".session_index.json": None,
    }
    assert {rel: vibe.match(PurePosixPath(rel)) for rel in kinds} == kinds


def test_the_fast_hash_check_defers_to_pythons_own_json_text() -> None:
    """msgspec spells `1e-05` as `0.00001`: such a record is still checked against the text
    Vibe (Python) hashed, and a record whose hash is wrong either way is still rejected."""
    reader = JournalReader(Store("s"))
    first = _record(1, None, "note", {"ratio": 1e-05, "big": 1e22, "text": "é\u2028"})
    assert reader.feed(first) == []
    forged = _record(2, first["record_sha256"], "note", {"ratio": 1e-05})  # type: ignore[arg-type]
    forged["payload"] = {"ratio": 2e-05}
    with pytest.raises(RecordRejected):
        reader.feed(forged)

"""The reading loop over real files: new lines, new files, bad input and unreadable files.

Journals are built from a recorded fixture, so the records are the real CLI's.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path, PurePosixPath

import pytest

from coding_agent_exporter.events import Event
from coding_agent_exporter.harnesses import FileReader
from coding_agent_exporter.harnesses.claude_code.harness import ClaudeCode
from coding_agent_exporter.runtime.cache import Cache
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.state import State

from .conftest import FIXTURES

pytestmark = pytest.mark.usefixtures("probes")  # Linux's own probes, then the portable ones

RECORDED = FIXTURES / "claude-code" / "2.1.197" / "print-tool" / "home"
A = "claude-code"


@pytest.fixture
def journal() -> list[bytes]:
    (path,) = RECORDED.glob("projects/*/*.jsonl")
    return path.read_bytes().splitlines(keepends=True)


def engine_on(home: Path) -> Engine:
    return Engine([Source(ClaudeCode(), home)], State(), Stats())


def journal_path(home: Path) -> Path:
    folder = home / "projects" / "-home-user-work-shop-api"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "0cb4ee5f-eeae-463f-9990-9f1af99a8fd0.jsonl"


def totals(engine: Engine) -> tuple[int, int, int]:
    t = engine.state.totals
    return sum(t.messages.values()), sum(t.turns.values()), sum(t.tool_calls.values())


def test_appended_lines_are_read_on_change(tmp_path: Path, journal: list[bytes]) -> None:
    path = journal_path(tmp_path)
    path.write_bytes(b"".join(journal[:4]))
    engine = engine_on(tmp_path)
    engine.catch_up()
    before = engine.stats.records[A]
    with path.open("ab") as f:
        f.write(b"".join(journal[4:]))
    engine.changed([path])
    assert engine.stats.records[A] == before + len(journal) - 4
    assert totals(engine) == (2, 1, 1)


def test_half_written_line_waits_for_its_end(tmp_path: Path, journal: list[bytes]) -> None:
    path = journal_path(tmp_path)
    whole = b"".join(journal)
    path.write_bytes(whole[: len(whole) - 40])
    engine = engine_on(tmp_path)
    engine.catch_up()
    assert engine.stats.parse_errors == {}
    path.write_bytes(whole)
    engine.changed([path])
    assert engine.stats.parse_errors == {}
    assert totals(engine) == (2, 1, 1)


def test_truncated_then_rewritten_journal_counts_nothing_twice(
    tmp_path: Path, journal: list[bytes]
) -> None:
    path = journal_path(tmp_path)
    path.write_bytes(b"".join(journal))
    engine = engine_on(tmp_path)
    engine.catch_up()
    path.write_bytes(b"")
    engine.changed([path])
    path.write_bytes(b"".join(journal))
    engine.changed([path])
    assert totals(engine) == (2, 1, 1)


def test_replaced_journal_counts_nothing_twice(tmp_path: Path, journal: list[bytes]) -> None:
    path = journal_path(tmp_path)
    path.write_bytes(b"".join(journal))
    engine = engine_on(tmp_path)
    engine.catch_up()
    other = path.with_suffix(".tmp")
    other.write_bytes(b"".join(journal))
    os.replace(other, path)
    engine.changed([path, other])
    assert totals(engine) == (2, 1, 1)


def test_deleted_journal_is_forgotten_but_its_counts_stay(
    tmp_path: Path, journal: list[bytes]
) -> None:
    path = journal_path(tmp_path)
    path.write_bytes(b"".join(journal))
    engine = engine_on(tmp_path)
    engine.catch_up()
    assert engine.stats.files[A] == 1
    path.unlink()
    engine.changed([path])
    assert engine.stats.files[A] == 0
    assert totals(engine) == (2, 1, 1)


def test_new_file_in_a_new_folder_is_found(tmp_path: Path, journal: list[bytes]) -> None:
    engine = engine_on(tmp_path)
    (tmp_path / "projects").mkdir()
    engine.catch_up()
    path = journal_path(tmp_path)
    path.write_bytes(b"".join(journal))
    engine.changed([path.parent])  # a watcher reports the new folder
    assert totals(engine) == (2, 1, 1)


def test_bad_line_costs_one_record_and_is_logged_once(
    tmp_path: Path, journal: list[bytes], caplog: pytest.LogCaptureFixture
) -> None:
    path = journal_path(tmp_path)
    path.write_bytes(b"{not json\n" + b"".join(journal) + b"[1, 2\n" + b'"x"\n')
    engine = engine_on(tmp_path)
    with caplog.at_level(logging.WARNING):
        engine.catch_up()
    assert engine.stats.parse_errors == {(A, "invalid_json"): 2}
    assert totals(engine) == (2, 1, 1)
    warnings = [r for r in caplog.records if "invalid_json" in r.getMessage()]
    assert len(warnings) == 1 and str(path) in warnings[0].getMessage()
    assert "line 1" in warnings[0].getMessage()


def test_unreadable_file_costs_that_file(
    tmp_path: Path, journal: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    good = journal_path(tmp_path)
    good.write_bytes(b"".join(journal))
    bad = good.with_name("11111111-2222-3333-4444-555555555555.jsonl")
    bad.write_bytes(b"".join(journal))
    real_open = os.open

    def deny(path: str | os.PathLike[str], *args: object, **kw: object) -> int:
        if Path(path) == bad:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", deny)
    engine = engine_on(tmp_path)
    engine.catch_up()
    assert totals(engine) == (2, 1, 1)
    assert engine.stats.parse_errors[(A, "read_error")] == 1


def test_a_reader_that_raises_costs_one_record(
    tmp_path: Path, journal: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = journal_path(tmp_path)
    path.write_bytes(b"".join(journal))
    made = ClaudeCode.reader
    calls = {"n": 0}

    class Flaky:
        """The journal's own reader, but its first response raises (a reader bug). The bug is
        put around the reader, not into one of its methods: a reader compiled by mypyc
        (`setup.py`) calls its own methods directly, past anything patched on its class."""

        def __init__(self, real: FileReader) -> None:
            self.real = real

        def feed(self, record: object) -> list[Event]:
            if isinstance(record, dict) and record.get("type") == "assistant":
                calls["n"] += 1
                if calls["n"] == 1:
                    raise KeyError("surprise")
            return self.real.feed(record)

    def flaky(self: ClaudeCode, rel: PurePosixPath) -> FileReader:
        return Flaky(made(self, rel))

    monkeypatch.setattr(ClaudeCode, "reader", flaky)
    engine = engine_on(tmp_path)
    engine.catch_up()
    assert engine.stats.parse_errors == {(A, "reader_error"): 1}
    assert sum(engine.state.totals.messages.values()) >= 1


def test_live_index_change_and_removal(tmp_path: Path) -> None:
    index = tmp_path / "sessions" / "4242.json"
    index.parent.mkdir()
    doc = {"pid": 4242, "sessionId": "s1", "startedAt": 1_700_000_000_000, "status": "busy"}
    index.write_text(json.dumps(doc))
    engine = engine_on(tmp_path)
    engine.catch_up()
    engine.state.refresh(2000.0, lambda pid: 1_700_000_000.0)
    assert engine.state.live[(A, "s1")].status == "busy"
    index.write_text(json.dumps({**doc, "status": "waiting", "waitingFor": "permission prompt"}))
    os.utime(index, ns=(1, 1))  # a same-size rewrite within one clock tick is still seen
    engine.changed([index])
    engine.state.refresh(2000.0, lambda pid: 1_700_000_000.0)
    assert engine.state.live[(A, "s1")].reason == "permission prompt"
    index.unlink()
    engine.changed([index])
    engine.state.refresh(2000.0, lambda pid: 1_700_000_000.0)
    assert engine.state.live == {}


@pytest.mark.parametrize("cached", [False, True], ids=["awake", "asleep"])
def test_a_first_start_reads_the_live_index_before_the_history_and_again_after_the_watch(
    tmp_path: Path, journal: list[bytes], cached: bool
) -> None:
    """A cold catch-up reads the live index first (a session waiting for its user shows
    before the history is walked), then starts the watcher (`watch`), then reads the history
    and looks at the index files again: a change or a removal made before the watch is seen."""
    home = tmp_path / "home"
    journal_path(home).write_bytes(b"".join(journal))
    index, other = home / "sessions" / "4242.json", home / "sessions" / "4343.json"
    index.parent.mkdir()
    doc = {"pid": 4242, "sessionId": "s1", "startedAt": 1_700_000_000_000, "status": "busy"}
    index.write_text(json.dumps(doc))
    other.write_text(json.dumps({**doc, "pid": 4343, "sessionId": "s2"}))
    cache = Cache(tmp_path / "state", [(A, home)]) if cached else None
    engine = Engine([Source(ClaudeCode(), home)], State(), Stats(), cache)
    at_watch: list[tuple[set[str], int]] = []

    def watch() -> None:
        at_watch.append(({e.session_id for e in engine.state.entries.values()}, totals(engine)[0]))
        index.write_text(json.dumps({**doc, "status": "waiting", "waitingFor": "input"}))
        os.utime(index, ns=(1, 1))  # a same-size rewrite within one clock tick is still seen
        other.unlink()

    engine.catch_up(watch=watch)
    assert at_watch == [({"s1", "s2"}, 0)]  # the live index read, nothing of the history yet
    engine.state.refresh(2000.0, lambda pid: 1_700_000_000.0)
    assert list(engine.state.live) == [(A, "s1")]
    assert engine.state.live[(A, "s1")].reason == "input"
    assert totals(engine) == (2, 1, 1)


def test_missing_home_is_no_error(tmp_path: Path) -> None:
    engine = engine_on(tmp_path / "nothing-here")
    engine.catch_up()
    assert engine.stats.up[A] is True and engine.stats.files[A] == 0


def test_credentials_are_never_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "4242.abc.key").write_text("secret")
    (tmp_path / ".credentials.json").write_text("{}")
    shutil.copytree(RECORDED / "projects", tmp_path / "projects")
    opened: list[str] = []
    real_open = os.open

    def spy(path: str | os.PathLike[str], *args: object, **kw: object) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", spy)
    engine_on(tmp_path).catch_up()
    assert opened and not [p for p in opened if p.endswith((".key", "credentials.json"))]


def test_rescan_finds_changes_without_file_events(
    tmp_path: Path, journal: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fallback when inotify watches run out: a rescan sees new, grown and gone files. A
    followed file is looked at as the name it is followed by, its source known from its
    follower: no home is asked which one holds it (a `Path` made and compared per home), as
    for a path a watcher reports or a new file."""
    path = journal_path(tmp_path)
    path.write_bytes(b"".join(journal[:4]))
    engine = engine_on(tmp_path)
    engine.catch_up()
    with path.open("ab") as f:
        f.write(b"".join(journal[4:]))
    other = path.with_name("11111111-2222-3333-4444-555555555555.jsonl")
    other.write_bytes(b"".join(journal).replace(b"0cb4ee5f", b"11111111"))
    asked: list[Path] = []
    source_of = engine._source_of
    monkeypatch.setattr(engine, "_source_of", lambda p: asked.append(p) or source_of(p))
    engine.rescan()
    assert asked == [other] and engine.stats.files[A] == 2
    assert sum(engine.state.totals.turns.values()) == 1  # the copy's prompt counts once
    other.unlink()
    engine.rescan()
    assert engine.stats.files[A] == 1


@pytest.mark.parametrize("windows", [False, True], ids=["posix", "windows-simulated"])
def test_a_rescan_reads_in_the_order_of_the_paths(
    windows: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Names sort as their `Path`s do, part by part (`a/b` before `a-b`, which a sort of the
    text would put first), and on Windows (SIMULATED: its separator and case folding) as
    `PureWindowsPath`s do."""
    import ntpath
    from pathlib import PurePosixPath, PureWindowsPath

    from coding_agent_exporter.runtime import found

    parts = ["a", "a-b", "a.b", "a b", "A", "a0", "ä", "ab"]
    names = [f"/h/{x}/{y}" for x in parts for y in parts] + [f"/h/{x}" for x in parts]
    flavour = PurePosixPath
    if windows:
        monkeypatch.setattr(found, "SEP", "\\")
        monkeypatch.setattr(os.path, "normcase", ntpath.normcase)
        names, flavour = (
            [n.replace("/", "\\").replace("\\h", "C:\\h", 1) for n in names],
            PureWindowsPath,
        )
    by_path = [str(p) for p in sorted(map(flavour, names))]
    assert sorted(names, key=found.path_order) == by_path
    assert sorted(names) != by_path  # the text alone sorts them otherwise


def test_a_record_with_a_field_of_the_wrong_type_is_rejected_whole(
    tmp_path: Path, journal: list[bytes], caplog: pytest.LogCaptureFixture
) -> None:
    """`"output_tokens": "many"`: not a response of no tokens, but a record not used at all,
    counted under bad_field and logged once with its file and line."""
    import json

    lines = list(journal)
    at = next(i for i, line in enumerate(lines) if b'"output_tokens"' in line)
    record = json.loads(lines[at])
    record["message"]["usage"]["output_tokens"] = "many"
    lines[at] = json.dumps(record).encode() + b"\n"
    path = journal_path(tmp_path)
    path.write_bytes(b"".join(lines))
    engine = engine_on(tmp_path)
    with caplog.at_level("WARNING"):
        engine.catch_up()
    assert engine.stats.parse_errors[(A, "bad_field")] == 1
    said = [r.getMessage() for r in caplog.records if "bad_field" in r.getMessage()]
    assert len(said) == 1 and str(path) in said[0] and f"line {at + 1}" in said[0]
    assert "'many' is not a count of tokens" in said[0]
    reference = engine_on(tmp_path / "whole")
    journal_path(tmp_path / "whole").write_bytes(b"".join(journal[:at] + journal[at + 1 :]))
    reference.catch_up()
    assert engine.state.totals.tokens == reference.state.totals.tokens  # as if never written


def test_a_watchers_path_finds_the_walks_follower(tmp_path: Path, journal: list[bytes]) -> None:
    """The walk names a file as the watcher's `Path` spells it (the system's separator): an
    event for a followed file reads it on, never through a second follower from byte 0."""
    path = journal_path(tmp_path)
    path.write_bytes(b"".join(journal[:4]))
    engine = engine_on(tmp_path)
    engine.catch_up()
    followed = set(engine._files)
    assert followed == {str(path)}
    with path.open("ab") as f:
        f.write(b"".join(journal[4:]))
    engine.changed([Path(os.fspath(path))])  # as a watcher reports it
    assert set(engine._files) == followed and engine.stats.files[A] == 1
    assert totals(engine) == (2, 1, 1)  # each record once


def test_windows_separator_simulated(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIMULATED (Windows cannot run here): with `\\` as the separator, a name under the home is
    the `/`-separated path harnesses match, and shallow names sort first as their `Path`s do."""
    from pathlib import PurePosixPath, PureWindowsPath

    from coding_agent_exporter.runtime import found as module

    monkeypatch.setattr(module, "SEP", "\\")
    home = "C:\\Users\\u\\.claude"
    source = Source(ClaudeCode(), Path(home))  # a one-part POSIX path: only its text is used
    name = home + "\\projects\\-C--work\\s.jsonl"
    assert module.rel_of(name, source) == PurePosixPath("projects/-C--work/s.jsonl")
    shallow, deep = home + "\\history.jsonl", name
    assert module.order_of((shallow, source))[0] == len(PureWindowsPath(shallow).parts)
    assert module.order_of((deep, source))[0] == len(PureWindowsPath(deep).parts)
    assert module.order_of((shallow, source)) < module.order_of((deep, source))

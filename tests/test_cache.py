"""The catch-up cache: a restart over unchanged, grown, replaced or gone files ends with the same
exposition as a first start over the same files; a damaged or foreign cache is discarded and
rebuilt; the cache is never written in an agent's folder."""

from __future__ import annotations

import gc
import logging
import shutil
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import FrameType

import pytest
import zstandard
from prometheus_client import generate_latest

from coding_agent_exporter.runtime import cache as cache_module
from coding_agent_exporter.runtime import digest as digest_module
from coding_agent_exporter.runtime.app import App
from coding_agent_exporter.runtime.cache import MAGIC, Cache
from coding_agent_exporter.runtime.config import parse
from coding_agent_exporter.runtime.digest import PACKAGE
from coding_agent_exporter.sources import tail

from .conftest import FIXTURES, NOW, agent_home, all_scenarios, home_flags, scenario_id

_open = tail._open_regular
INTERACTIVE = FIXTURES / "claude-code" / "2.1.332" / "interactive" / "home"


def app(home: Path, state: Path | None, *, cache: bool = True) -> App:
    argv = ["metrics", *home_flags(home)]
    if state is not None:
        argv += ["--state.dir", str(state)]
    config = parse(argv, {"HOME": "/home/user"})
    cache = cache and state is not None  # never the default folder of a made-up $HOME
    result = App(
        config, process_metrics=False, clock=lambda: NOW, probe=lambda _: None, cache=cache
    )
    result.catch_up()
    result.engine.save_cache()
    return result


def exposition(home: Path, state: Path | None) -> str:
    return generate_latest(app(home, state).registry).decode()


def counted(text: str) -> str:
    """An exposition less the bytes read: a line left half-written is read again when it ends."""
    return "\n".join(x for x in text.splitlines() if "exporter_bytes_read_total{" not in x)


def cache_files(state: Path) -> list[Path]:
    return sorted(state.glob("catch-up-*.cache"))


@pytest.mark.parametrize("scenario", all_scenarios(), ids=scenario_id)
def test_a_restart_over_the_same_files_gives_the_same_exposition(
    scenario: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = scenario / "home"
    cold = exposition(home, tmp_path)
    assert len(cache_files(tmp_path)) == 1
    opened: list[Path] = []
    monkeypatch.setattr(tail, "_open_regular", lambda p: opened.append(p) or _open(p))
    warm = app(home, tmp_path)
    assert opened == []  # every file unchanged: one stat each, none read
    assert (
        warm.engine.cache is not None and warm.stats.bytes_read == app(home, None).stats.bytes_read
    )
    assert generate_latest(warm.registry).decode() == cold


def test_a_warm_start_knows_each_session_s_files_as_the_names_of_its_sleeping_files(
    tmp_path: Path,
) -> None:
    """What a session's turns are replayed from, kept by the cache: the same strings as the
    sleeping files' names (no second copy of every path)."""
    home = FIXTURES / "claude-code" / "2.1.332" / "subagent-foreground" / "home"
    cold = app(home, tmp_path)
    warm = app(home, tmp_path)
    files = {k: s.file_names for k, s in warm.state.sessions.items() if s.counted}
    assert files == {k: s.file_names for k, s in cold.state.sessions.items() if s.counted}
    names = {id(name) for name in warm.engine._sleepers.names}
    assert all(id(f) in names for fs in files.values() for f in fs) and names
    head = MAGIC + Cache(tmp_path, [("claude-code", agent_home(home))]).header
    (written,) = cache_files(tmp_path)
    body = zstandard.ZstdDecompressor().stream_reader(written.read_bytes()[len(head) :]).read()
    for name in {f for fs in files.values() for f in fs}:  # written once: its index thereafter
        assert body.count(name.encode()) == 1


def test_a_warm_start_keeps_the_latest_sessions_ranked_by_time(tmp_path: Path) -> None:
    """`State.recent` (what a session picker offers) ranked once, after a cold catch-up, and
    loaded ranked by a warm one: the latest record last, whatever the order of the paths."""
    home = tmp_path / "claude"
    for folder, scenario, day in (("-a", "print-answer", "12-01"), ("-b", "print-tool", "11-30")):
        (journal,) = (FIXTURES / "claude-code" / "2.1.332" / scenario / "home").glob("*/*/*.jsonl")
        text = journal.read_text().replace('"timestamp":"2026-11-30T', f'"timestamp":"2026-{day}T')
        (home / "projects" / folder).mkdir(parents=True)
        (home / "projects" / folder / journal.name).write_text(text)  # -a read first, yet newer
    cold, warm = app(home, tmp_path / "state"), app(home, tmp_path / "state")
    assert warm.engine.cache is not None and list(warm.state.recent) == list(cold.state.recent)
    times = [warm.state.sessions[k].updated_at or 0.0 for k in warm.state.recent]
    assert times == sorted(times) and len(times) == 2 and times[0] < times[1]


def copy_interactive(tmp_path: Path) -> tuple[Path, Path, bytes]:
    home = tmp_path / "claude"
    shutil.copytree(INTERACTIVE, home)
    (journal,) = home.glob("projects/*/*.jsonl")
    return home, journal, journal.read_bytes()


@pytest.mark.parametrize("cut", [0.1, 0.3, 0.5, 0.62, 0.8, 0.97])
def test_a_journal_that_grew_since_is_read_on_to_the_same_result(
    tmp_path: Path, cut: float
) -> None:
    home, journal, whole = copy_interactive(tmp_path / "a")
    reference = exposition(home, None)
    journal.write_bytes(whole[: int(len(whole) * cut)])  # may end inside a line
    first = app(home, tmp_path / "state")
    journal.write_bytes(whole)
    again = app(home, tmp_path / "state")
    assert counted(generate_latest(again.registry).decode()) == counted(reference)
    assert again.stats.bytes_read["claude-code"] > first.stats.bytes_read["claude-code"]


def test_the_reader_goes_on_after_a_warm_start_as_if_never_stopped(tmp_path: Path) -> None:
    """A warm start, then the file grows while running: the same counters as one long run."""
    home, journal, whole = copy_interactive(tmp_path)
    journal.write_bytes(whole[: len(whole) // 2])
    never_stopped = app(home, None)
    app(home, tmp_path / "state")
    warm = app(home, tmp_path / "state")
    journal.write_bytes(whole)
    for running in (never_stopped, warm):
        running.engine.changed([journal])
    reference = generate_latest(never_stopped.registry).decode()
    assert counted(generate_latest(warm.registry).decode()) == counted(reference)


def test_unchanged_files_sleep_and_a_changed_one_wakes(tmp_path: Path) -> None:
    """After the cache is written a finished file is kept as its pickle (`dormant`), not as
    live objects; a warm start over unchanged files wakes none; a file that grows wakes."""
    home, journal, whole = copy_interactive(tmp_path)
    journal.write_bytes(whole[: len(whole) // 2])
    cold = app(home, tmp_path / "state")
    assert cold.engine._files and all(map(cold.engine.asleep, cold.engine._files))
    warm = app(home, tmp_path / "state")
    assert all(map(warm.engine.asleep, warm.engine._files))
    journal.write_bytes(whole)
    warm.engine.changed([journal])
    assert not warm.engine.asleep(str(journal))
    asleep = [warm.engine.asleep(name) for name in warm.engine._files]
    assert sum(asleep) == len(asleep) - 1


def test_a_file_woken_at_a_warm_start_sleeps_again_once_in_the_next_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache written after a warm start that read a grown file on holds each file once
    (the woken one's old pickle is left behind), and the start after it reads nothing."""
    home, journal, whole = copy_interactive(tmp_path)
    journal.write_bytes(whole[: len(whole) // 2])
    app(home, tmp_path / "state")
    journal.write_bytes(whole)
    grown = app(home, tmp_path / "state")
    opened: list[Path] = []
    monkeypatch.setattr(tail, "_open_regular", lambda p: opened.append(p) or _open(p))
    third = app(home, tmp_path / "state")
    assert opened == []
    assert len(third.engine._sleepers) == len(third.engine._files) == len(grown.engine._files)
    reference = generate_latest(app(home, None).registry).decode()
    assert counted(generate_latest(third.registry).decode()) == counted(reference)


def test_files_of_readers_that_share_memory_never_sleep(tmp_path: Path) -> None:
    """Gemini CLI's readers share what a session's files say: each file stays awake."""
    (scenario, *_) = [s for s in all_scenarios() if "gemini-cli" in s.parts]
    warm = app(scenario / "home", tmp_path)
    assert warm.engine._files
    assert not any(map(warm.engine.asleep, warm.engine._files))


def test_a_gone_live_index_file_is_read_as_removed_not_all_files_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Claude Code process removes its live index file when it exits: the next start reads
    that removal (its entry gone, as a running exporter would) and nothing else; every agent's
    exit made it read all files again. The counters are today's files' all the same."""
    home, _, _ = copy_interactive(tmp_path)
    index = home / "sessions" / "4242.json"
    index.parent.mkdir()
    index.write_text('{"pid": 4242, "sessionId": "s-live", "status": "busy"}')
    first = app(home, tmp_path / "state")
    assert {e.session_id for e in first.state.entries.values()} == {"s-live"}
    index.unlink()
    opened: list[Path] = []
    monkeypatch.setattr(tail, "_open_regular", lambda p: opened.append(p) or _open(p))
    warm = app(home, tmp_path / "state")
    assert opened == [] and warm.state.entries == {}
    monkeypatch.undo()

    def read(text: str) -> list[str]:  # less what the exporter counts of its own reading
        return [x for x in counted(text).splitlines() if "exporter_records_total{" not in x]

    assert read(generate_latest(warm.registry).decode()) == read(exposition(home, None))


def test_a_replaced_or_gone_file_is_read_again_or_forgotten(tmp_path: Path) -> None:
    home, journal, _ = copy_interactive(tmp_path)
    other = FIXTURES / "claude-code" / "2.1.332" / "print-tool" / "home"
    app(home, tmp_path / "state")
    (replacement,) = other.glob("projects/*/*.jsonl")
    journal.unlink()
    shutil.copy(replacement, journal)  # another file (inode) at the same path
    assert exposition(home, tmp_path / "state") == exposition(home, None)
    journal.unlink()
    gone = app(home, tmp_path / "state")
    assert gone.stats.files["claude-code"] == app(home, None).stats.files["claude-code"]
    assert generate_latest(gone.registry).decode() == exposition(home, None)


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[: len(data) // 2],  # cut short
        lambda data: data[:-40] + b"\x00" * 40,
        lambda data: MAGIC + b"not our code\n" + data[len(MAGIC) :],
        lambda data: b"",
        lambda data: data[: data.index(b"\x80")] + b"\x80\x05garbage",  # our header, bad pickle
    ],
    ids=["truncated", "zeroed-tail", "foreign-header", "empty", "bad-pickle"],
)
def test_a_damaged_cache_is_discarded_and_rebuilt(
    tmp_path: Path, damage: object, caplog: pytest.LogCaptureFixture
) -> None:
    home = INTERACTIVE
    reference = exposition(home, None)
    app(home, tmp_path)
    (path,) = cache_files(tmp_path)
    assert callable(damage)
    path.write_bytes(damage(path.read_bytes()))
    with caplog.at_level(logging.INFO):
        rebuilt = app(home, tmp_path)
    assert generate_latest(rebuilt.registry).decode() == reference
    assert rebuilt.stats.bytes_read["claude-code"] > 0  # read from the files
    assert any("catch-up cache" in r.getMessage() for r in caplog.records)
    warm = app(home, tmp_path)  # rewritten: the next start is warm again
    assert generate_latest(warm.registry).decode() == reference


def test_a_cache_of_other_homes_or_other_code_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = INTERACTIVE
    app(home, tmp_path)
    cache = Cache(tmp_path, [("claude-code", agent_home(home))])
    assert cache.load() is not None
    assert Cache(tmp_path, [("claude-code", tmp_path)]).load() is None
    monkeypatch.setattr("coding_agent_exporter.runtime.cache.code_digest", lambda: "0" * 64)
    assert Cache(tmp_path, [("claude-code", agent_home(home))]).load() is None


@pytest.mark.parametrize(
    "module",
    [
        "harnesses/claude_code/harness.py",
        "harnesses/__init__.py",
        "state/state.py",
        "state/base.py",
        "state/responses.py",
        "state/work.py",
        "events.py",
        "sources/tail.py",
        "runtime/engine.py",
        "runtime/found.py",
        "runtime/walking.py",
        "runtime/following.py",
        "runtime/caching.py",
        "runtime/cache.py",
        "runtime/digest.py",
        "runtime/snapshot.py",
        "runtime/config.py",
        "runtime/dormant.py",
    ],
)
def test_a_change_to_what_reads_makes_an_older_cache_unusable(tmp_path: Path, module: str) -> None:
    before, after = _digests_around(tmp_path, module)
    assert before != after


@pytest.mark.parametrize(
    "module",
    [
        "prometheus/collectors.py",
        "web/views.py",
        "traces/spans.py",
        "runtime/cli.py",
        "runtime/app.py",
        "__init__.py",  # a new version number
    ],
)
def test_a_change_to_only_what_is_published_keeps_the_cache(tmp_path: Path, module: str) -> None:
    before, after = _digests_around(tmp_path, module)
    assert before == after


def test_every_module_that_runs_while_reading_is_in_the_digest(tmp_path: Path) -> None:
    """The code of a catch-up, a refresh, writing the cache and a warm start over every recorded
    scenario runs only in modules the digest covers: a module outside it could change what a
    catch-up builds without making older caches unusable."""
    ran: set[str] = set()

    def noted(frame: FrameType, event: str, arg: object) -> None:
        name = frame.f_code.co_filename
        if event == "call" and name.startswith(str(PACKAGE)):
            ran.add(Path(name).relative_to(PACKAGE).as_posix())

    for scenario in all_scenarios():
        state = tmp_path / scenario_id(scenario)
        for _ in ("cold", "warm"):
            argv = ["metrics", *home_flags(scenario / "home"), "--state.dir", str(state)]
            made = App(parse(argv, {"HOME": "/home/user"}), process_metrics=False, cache=True)
            sys.setprofile(noted)
            try:
                made.engine.catch_up()
                made.state.refresh(NOW, lambda _: None)
                made.engine.save_cache()
            finally:
                sys.setprofile(None)
    ran |= digest_module.compiled(PACKAGE)  # a compiled module runs no Python frame to see
    assert "harnesses/claude_code/journal.py" in ran and "runtime/dormant.py" in ran
    assert ran <= digest_module.reading(), sorted(ran - digest_module.reading())


def test_a_compiled_build_does_not_read_the_cache_of_a_pure_one(tmp_path: Path) -> None:
    """The same sources, one module compiled (`setup.py`): another digest, both ways."""
    pure, built = tmp_path / "pure" / "coding_agent_exporter", tmp_path / "coding_agent_exporter"
    for copy in (pure, built):
        skipped = shutil.ignore_patterns("__pycache__", *(f"*{s}" for s in EXTENSION_SUFFIXES))
        shutil.copytree(PACKAGE, copy, ignore=skipped)
    (built / f"events{EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    assert digest_module.compiled(pure) == set()
    assert digest_module.compiled(built) == {"events.py"}
    assert _digest_of(built) != _digest_of(pure)


def _digests_around(tmp_path: Path, module: str) -> tuple[str, str]:
    """The digest of a copy of the package before and after `module` is edited."""
    copy = tmp_path / "coding_agent_exporter"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = _digest_of(copy)
    (copy / module).write_text((copy / module).read_text() + "\n# changed\n")
    return before, _digest_of(copy)


def _digest_of(package: Path) -> str:
    saved = digest_module.PACKAGE
    digest_module.PACKAGE = package
    digest_module.code_digest.cache_clear()
    try:
        return digest_module.code_digest()
    finally:
        digest_module.PACKAGE = saved
        digest_module.code_digest.cache_clear()


def test_the_cache_is_never_written_in_an_agent_folder(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home, _, _ = copy_interactive(tmp_path)
    before = sorted(p.relative_to(home) for p in home.rglob("*"))
    with caplog.at_level(logging.WARNING):
        app(home, home / "projects" / "state")
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before
    assert any("agent folder" in r.getMessage() for r in caplog.records)


def test_the_catch_up_writes_the_cache_beside_its_place_and_saving_puts_it_there(
    tmp_path: Path,
) -> None:
    """The content is written to a private file as it is made (never held in memory whole, at
    the peak of a catch-up); `save_cache` renames it into place, as `statedir.write` would."""
    config = parse(["metrics", *home_flags(INTERACTIVE), "--state.dir", str(tmp_path)], {})
    made = App(config, process_metrics=False, clock=lambda: NOW, probe=lambda _: None, cache=True)
    made.catch_up()
    assert cache_files(tmp_path) == []
    (beside,) = [p for p in tmp_path.rglob("*.tmp")]
    assert beside.stat().st_mode & 0o777 == 0o600 and beside.read_bytes().startswith(MAGIC)
    made.engine.save_cache()
    assert len(cache_files(tmp_path)) == 1 and not beside.exists()
    assert Cache(tmp_path, [("claude-code", agent_home(INTERACTIVE))]).load() is not None


def test_only_the_commands_use_the_cache(tmp_path: Path) -> None:
    app(INTERACTIVE, tmp_path, cache=False)
    assert cache_files(tmp_path) == []


def test_a_journal_saved_whole_again_longer_reads_like_a_cold_start(tmp_path: Path) -> None:
    """Same inode, same first bytes, longer, other bytes before the old offset (a recorded
    session whose usage changed): a warm start gives what a cold start of the new file does."""
    home, journal, whole = copy_interactive(tmp_path)
    exposition(home, tmp_path / "state")  # cold, cache written
    rewritten = whole.replace(b'"output_tokens":25', b'"output_tokens":50625') + b"\n"
    assert rewritten[:64] == whole[:64] and len(rewritten) > len(whole)
    with journal.open("r+b") as f:
        f.write(rewritten)
    warm = exposition(home, tmp_path / "state")
    assert counted(warm) == counted(exposition(home, None))
    (output,) = [
        x
        for x in warm.splitlines()
        if x.startswith("coding_agent_tokens_total{") and 'type="output"' in x
    ]
    assert float(output.rsplit(" ", 1)[1]) > 50_000  # the new usage, not the old (240)


def test_a_running_exporter_counts_only_what_a_rewritten_file_says_now(tmp_path: Path) -> None:
    """`serve` follows a journal that is then saved whole again with less in it (a tool that
    edits it): every file is read again, and the counters are those of a cold start on
    today's files, not the largest of both."""
    home, journal, whole = copy_interactive(tmp_path)
    running = app(home, None)
    before = generate_latest(running.registry).decode()
    rewritten = whole.replace(b'"output_tokens":25', b'"output_tokens":5') + b"\n"
    with journal.open("r+b") as f:
        f.write(rewritten)
    running.changed([journal])
    after = generate_latest(running.registry).decode()
    cold = exposition(home, None)

    def tokens(text: str) -> list[str]:
        return [x for x in text.splitlines() if x.startswith("coding_agent_tokens_total{")]

    assert tokens(after) == tokens(cold) != tokens(before)
    health = ("coding_agent_exporter_bytes_read_total{", "coding_agent_exporter_records_total{")
    assert counted("\n".join(x for x in after.splitlines() if not x.startswith(health))) == counted(
        "\n".join(x for x in cold.splitlines() if not x.startswith(health))
    )


def test_after_a_rewrite_the_files_sleep_again_and_the_cache_is_today_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state read again after a rewrite keeps finished files asleep (memory does not grow
    with history), and a restart after it reads nothing."""
    home, journal, whole = copy_interactive(tmp_path)
    running = app(home, tmp_path / "state")
    with journal.open("r+b") as f:
        f.write(whole.replace(b'"output_tokens":25', b'"output_tokens":5') + b"\n")
    running.changed([journal])
    assert all(map(running.engine.asleep, running.engine._files))
    opened: list[Path] = []
    monkeypatch.setattr(tail, "_open_regular", lambda p: opened.append(p) or _open(p))
    restarted = app(home, tmp_path / "state")
    assert opened == []

    def shown(one: App) -> list[str]:  # what the files say (the health counters go their way)
        text = generate_latest(one.registry).decode()
        return [
            x for x in text.splitlines() if x.startswith("coding_agent_") and "exporter" not in x
        ]

    assert shown(restarted) == shown(running)


@pytest.mark.parametrize("keep", [False, True])
def test_a_cache_is_loaded_without_cycle_passes_and_kept_out_of_them_when_asked(
    tmp_path: Path, keep: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No cycle pass runs while a cache loads (one ran at each few hundred objects loaded, over
    all loaded so far); a command's own start (`keep`) then leaves what it loaded out of them."""
    app(INTERACTIVE, tmp_path)
    collecting: list[bool] = []
    decoded = cache_module._decoded

    def decode(body: memoryview) -> object:
        collecting.append(gc.isenabled())
        return decoded(body)

    monkeypatch.setattr(cache_module, "_decoded", decode)
    frozen = gc.get_freeze_count()
    try:
        loaded = Cache(tmp_path, [("claude-code", agent_home(INTERACTIVE))], keep=keep).load()
        assert loaded is not None and collecting == [False] and gc.isenabled()
        assert (gc.get_freeze_count() > frozen) is keep
    finally:
        gc.unfreeze()


def test_the_usage_windows_are_cached_found(tmp_path: Path) -> None:
    """The cache is written with the usage windows found (it is written before any scrape
    asks for them): a warm start does not find them again, and shows the same ones."""
    cold = exposition(INTERACTIVE, tmp_path)
    warm = app(INTERACTIVE, tmp_path)
    windows = warm.state.spend.windows.values()
    assert windows and all(w.dirty is None and w.found for w in windows)
    assert generate_latest(warm.registry).decode() == cold

"""Codex writes no live index: a thread is live while a process holds its writer lock
(`thread-writer-locks/<thread>.lock`, found in /proc/locks on Linux, elsewhere as the lock file a
`codex` process keeps open), or, without a lock file, while a Codex process holds its rollout
open. Real processes, real flocks, real /proc, a recorded rollout replayed as if it were being
written now; the tests marked `probes` run twice, with Linux's own probes and with the portable
ones (psutil's open files of the agent's processes: macOS's and Windows' path, run for real)."""

from __future__ import annotations

import builtins
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Collection, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from coding_agent_exporter.events import LiveIndexRead
from coding_agent_exporter.harnesses.codex.harness import Codex
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.sources import platform
from coding_agent_exporter.sources.holders import HeldSessions, Holder, holders
from coding_agent_exporter.sources.locks import by_writer_lock, file_key, lock_table, read_locks
from coding_agent_exporter.sources.processes import process_start
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.state import HELD_QUIET, State

from .backends import holding
from .conftest import FIXTURES

RECORDED = FIXTURES / "codex" / "0.171.0" / "exec-shell" / "home" / ".codex"


def now_lines(rollout: Path) -> list[str]:
    """The recorded records with their timestamps moved to now."""
    records = [json.loads(line) for line in rollout.read_text().splitlines()]
    first = min(datetime.fromisoformat(r["timestamp"]).timestamp() for r in records)
    shift = time.time() - first
    for record in records:
        moved = datetime.fromisoformat(record["timestamp"]).timestamp() + shift
        record["timestamp"] = datetime.fromtimestamp(moved, UTC).isoformat()
    return [json.dumps(r) for r in records]


@pytest.fixture
def rollout(tmp_path: Path) -> tuple[Path, list[str]]:
    (recorded,) = RECORDED.glob("sessions/*/*/*/rollout-*.jsonl")
    target = tmp_path / "codex" / recorded.relative_to(RECORDED)
    target.parent.mkdir(parents=True)
    lines = now_lines(recorded)
    ended = next(i for i, line in enumerate(lines) if '"task_complete"' in line)
    target.write_text("\n".join(lines[:ended]) + "\n")  # the turn is still running
    return target, lines[ended:]


@pytest.fixture
def codex_process(rollout: tuple[Path, list[str]]) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(holding(rollout[0], "codex"), stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"held\n"
    yield process
    process.kill()
    process.wait()
    process.stdout.close()


def test_held_rollout_is_live_running_then_idle_then_gone(
    probes: str,
    tmp_path: Path,
    rollout: tuple[Path, list[str]],
    codex_process: subprocess.Popen[bytes],
) -> None:
    path, rest = rollout
    state = State()
    engine = Engine([Source(Codex(), tmp_path / "codex")], state, Stats())
    engine.catch_up()
    state.refresh(time.time(), process_start)
    ((key, entry),) = state.live.items()
    assert entry.pid == codex_process.pid and entry.derived
    assert state.status(key, entry)[0] == "running"

    with path.open("a") as f:
        f.write("\n".join(rest) + "\n")  # the turn ends
    engine.changed([path])
    state.refresh(time.time(), process_start)
    assert state.status(key, state.live[key])[0] == "idle"

    codex_process.kill()
    codex_process.wait()
    state.refresh(time.time(), process_start)
    assert state.live == {} and state.entries == {}


def test_a_process_that_does_not_look_like_codex_does_not_count(
    tmp_path: Path, rollout: tuple[Path, list[str]]
) -> None:
    process = subprocess.Popen(holding(rollout[0], "editor"), stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"held\n"
        state = State()
        Engine([Source(Codex(), tmp_path / "codex")], state, Stats()).catch_up()
        state.refresh(time.time(), process_start)
        assert state.live == {}
    finally:
        process.kill()
        process.wait()
        assert process.stdout is not None
        process.stdout.close()


def test_a_quiet_held_session_is_not_live() -> None:
    """Codex' app-server keeps a thread's files open after the TUI exits."""
    state = State()
    entry = LiveIndexRead(
        pid=7, session_id="t1", started_at=0.0, status=None, source="held:7:t1", derived=True
    )
    state.apply("codex", entry)
    state.session("codex", "t1").touch(1000.0)
    state.refresh(1000.0 + HELD_QUIET / 2, lambda pid: 0.0)
    assert set(state.live) == {("codex", "t1")}
    state.refresh(1000.0 + HELD_QUIET, lambda pid: 0.0)
    assert state.live == {}


# -- the writer lock ---------------------------------------------------------------------------

LOCK = (
    "import fcntl,sys,time; f=open(sys.argv[1],'a'); fcntl.flock(f, fcntl.LOCK_EX); "
    "print('locked', flush=True); time.sleep(60)"
)
AS_CODEX = ["bash", "-c", 'exec -a codex "$0" "$@"']
"""Runs a command under the program name `codex` (its argv[0]), as the agent's process is."""


@pytest.fixture
def lock(tmp_path: Path, rollout: tuple[Path, list[str]]) -> Path:
    """The rollout's writer lock file, as Codex 0.171 makes it (empty)."""
    path = tmp_path / "codex" / "thread-writer-locks" / f"{rollout[0].name[-42:-6]}.lock"
    path.parent.mkdir()
    path.touch()
    return path


def locking(path: Path, *, codex: bool = False) -> subprocess.Popen[bytes]:
    """A process holding no rollout with an exclusive flock on `path`: not named codex (Linux's
    lock table names any holder), or named so (the portable probes see only the agent's own
    processes)."""
    argv = [*(AS_CODEX if codex else []), sys.executable, "-c", LOCK, str(path)]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"locked\n"
    return process


def killed(process: subprocess.Popen[bytes]) -> None:
    process.kill()  # SIGKILL: no clean exit, the lock file stays
    process.wait()
    assert process.stdout is not None
    process.stdout.close()


def scanless(tmp_path: Path, scans: list[Path]) -> Source:
    """Codex's source whose open-file scan (the fallback) only notes what it was asked."""

    def scan(paths: Collection[Path], names: Iterable[str]) -> dict[Path, list[Holder]]:
        scans.extend(paths)
        return {}

    home = tmp_path / "codex"
    find = by_writer_lock(home, Codex().writer_lock, fallback=scan)
    return Source(Codex(), home, HeldSessions(Codex.holder_names, find))


def test_the_writer_lock_holder_makes_the_thread_live_without_a_scan(
    tmp_path: Path, lock: Path
) -> None:
    writer = locking(lock)
    try:
        scans: list[Path] = []
        state = State()
        Engine([scanless(tmp_path, scans)], state, Stats()).catch_up()
        state.refresh(time.time(), process_start)
        ((key, entry),) = state.live.items()
        assert (entry.pid, state.status(key, entry)[0]) == (writer.pid, "running")
        assert scans == []  # the lock answered: no process's open files were looked at
    finally:
        killed(writer)


def test_the_writer_lock_is_found_by_the_default_source(
    probes: str, tmp_path: Path, lock: Path
) -> None:
    writer = locking(lock, codex=probes == "portable")
    try:
        state = State()
        Engine([Source(Codex(), tmp_path / "codex")], state, Stats()).catch_up()
        state.refresh(time.time(), process_start)
        assert [e.pid for e in state.live.values()] == [writer.pid]
    finally:
        killed(writer)


def test_a_stale_lock_of_a_killed_writer_is_not_live(tmp_path: Path, lock: Path) -> None:
    """Linux's own probes: the lock table answers alone."""
    killed(locking(lock))
    assert lock.exists()  # what a SIGKILLed Codex leaves behind
    key = file_key(lock)
    assert key is not None and key not in (read_locks() or {})  # the kernel let go of it
    scans: list[Path] = []
    state = State()
    Engine([scanless(tmp_path, scans)], state, Stats()).catch_up()
    state.refresh(time.time(), process_start)
    assert state.live == {} and scans == []  # the lock file answers: nobody writes the thread


def test_a_writer_killed_while_live_ends_the_session(
    probes: str, tmp_path: Path, lock: Path
) -> None:
    writer = locking(lock, codex=probes == "portable")
    state = State()
    engine = Engine([Source(Codex(), tmp_path / "codex")], state, Stats())
    engine.catch_up()
    state.refresh(time.time(), process_start)
    assert len(state.live) == 1
    killed(writer)
    state.refresh(time.time(), process_start)
    assert state.live == {}
    (rollout,) = (tmp_path / "codex" / "sessions").rglob("*.jsonl")
    engine.changed([rollout])  # probed again: the stale lock holds nobody
    state.refresh(time.time(), process_start)
    assert state.live == {} and state.entries == {}


def test_without_a_lock_file_the_open_file_scan_decides(
    tmp_path: Path, rollout: tuple[Path, list[str]]
) -> None:
    scans: list[Path] = []
    Engine([scanless(tmp_path, scans)], State(), Stats()).catch_up()
    assert scans == [rollout[0]]  # an older Codex, or a thread written without a lock


def test_with_locks_written_a_thread_without_its_lock_file_has_no_writer(
    tmp_path: Path, rollout: tuple[Path, list[str]]
) -> None:
    (tmp_path / "codex" / "thread-writer-locks").mkdir()  # this Codex writes locks
    scans: list[Path] = []
    state = State()
    Engine([scanless(tmp_path, scans)], state, Stats()).catch_up()
    state.refresh(time.time(), process_start)
    assert state.live == {} and scans == []  # removed at a clean exit: nobody writes it


def test_the_lock_file_is_never_opened(
    probes: str, tmp_path: Path, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = locking(lock, codex=probes == "portable")
    try:
        real_open, real_os_open = io.open, os.open

        def guarded(path: Any, *args: Any, **kwargs: Any) -> Any:
            assert "thread-writer-locks" not in str(path), "the lock file was opened"
            return real_open(path, *args, **kwargs)

        def os_guarded(path: Any, *args: Any, **kwargs: Any) -> int:
            assert "thread-writer-locks" not in str(path), "the lock file was opened"
            return real_os_open(path, *args, **kwargs)

        monkeypatch.setattr(io, "open", guarded)
        monkeypatch.setattr(builtins, "open", guarded)
        monkeypatch.setattr(os, "open", os_guarded)
        find = by_writer_lock(tmp_path / "codex", Codex().writer_lock)
        (rollout,) = (tmp_path / "codex" / "sessions").rglob("*.jsonl")
        assert [pid for pid, _ in find([rollout], ("codex",))[rollout]] == [writer.pid]
    finally:
        monkeypatch.undo()
        killed(writer)


def test_proc_locks_lines_name_their_holders() -> None:
    text = (
        "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2147272 0 EOF\n"
        "1: -> FLOCK  ADVISORY  WRITE 4343 fe:00:2147272 0 EOF\n"  # a waiter holds nothing
        "2: POSIX  ADVISORY  READ 77 08:11:99 0 EOF\n"
        "garbage\n"
    )
    assert lock_table(text) == {(254, 0, 2147272): {4242}, (8, 17, 99): {77}}


def test_portable_a_codex_holding_only_the_lock_is_the_writer_and_a_stale_lock_nobody(
    tmp_path: Path, lock: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The portable probes (macOS's and Windows' path, for real on Linux): a `codex` process
    that keeps the lock file open and flocked, and holds no rollout, makes the thread live; a
    process of another name holding the same lock does not count; once the writer is killed,
    the lock file it left holds nobody, and the rollout itself is never scanned for."""
    monkeypatch.setattr(platform, "_chosen", platform.detect("portable"))
    scanned: list[Path] = []

    def scan(paths: Collection[Path], names: Iterable[str]) -> dict[Path, list[Holder]]:
        scanned.extend(paths)
        return holders(paths, names)

    rollout_path = next((tmp_path / "codex" / "sessions").rglob("*.jsonl"))
    find = by_writer_lock(tmp_path / "codex", Codex().writer_lock, fallback=scan)
    other = locking(lock)  # not named codex
    try:
        assert find([rollout_path], Codex.holder_names) == {}
    finally:
        killed(other)
    writer = locking(lock, codex=True)
    try:
        held = find([rollout_path], Codex.holder_names)
        assert [pid for pid, _ in held[rollout_path]] == [writer.pid]
    finally:
        killed(writer)
    assert lock.exists() and find([rollout_path], Codex.holder_names) == {}
    assert set(scanned) == {lock}  # the lock file was asked about, never the rollout

"""coding_agent_exporter.sources.watch against real inotify events; every wait is
changed(timeout=...), no sleeps. Every test runs with Linux's own probes (the prompt inotify
observer) and with the portable ones (watchdog's own observer, as on macOS and Windows; still
inotify here, so this proves the watcher's logic on that path, not FSEvents or Windows' events)."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coding_agent_exporter.sources.watch import Watcher

TIMEOUT = 5.0
pytestmark = pytest.mark.usefixtures("probes")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def watcher(root: Path, probes: str) -> Iterator[Watcher]:
    w = Watcher([root])
    w.start()
    yield w
    w.stop()


def wait_for(watcher: Watcher, *expected: Path) -> set[Path]:
    """Collect changed paths until all of ``expected`` were seen; fail after TIMEOUT."""
    seen: set[Path] = set()
    deadline = time.monotonic() + TIMEOUT
    while not seen.issuperset(expected):
        left = deadline - time.monotonic()
        assert left > 0, f"never reported: {set(expected) - seen}"
        seen |= watcher.changed(timeout=left)
    return seen


def settle(watcher: Watcher, root: Path) -> set[Path]:
    """Everything reported up to now: events arrive in order, so wait for a fresh marker."""
    marker = root / f"marker-{time.monotonic_ns()}"
    marker.touch()
    return wait_for(watcher, marker) - {marker}


def test_created_appended_deleted_reported(watcher: Watcher, root: Path) -> None:
    path = root / "a" / "s.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"{}\n")
    assert settle(watcher, root) >= {root / "a", path}
    with path.open("ab") as f:
        f.write(b"{}\n")
    assert settle(watcher, root) == {path}
    path.unlink()
    assert path in settle(watcher, root)


def test_move_reports_both_ends(watcher: Watcher, root: Path) -> None:
    src, dest = root / "tmp.json", root / "123.json"
    src.write_text("{}")
    settle(watcher, root)
    src.rename(dest)
    assert settle(watcher, root) == {src, dest}


def test_reads_are_not_reported(watcher: Watcher, root: Path) -> None:
    path = root / "s.jsonl"
    path.write_bytes(b"{}\n")
    assert path in settle(watcher, root)
    assert path.read_bytes() == b"{}\n"
    assert path not in settle(watcher, root)


def test_root_created_after_start(tmp_path: Path) -> None:
    root = tmp_path / "home" / ".agent" / "sessions"
    w = Watcher([root])
    w.start()
    try:
        (tmp_path / "unrelated").mkdir()
        root.mkdir(parents=True)
        assert (tmp_path / "unrelated") not in wait_for(w, root)
        path = root / "s.jsonl"
        path.write_bytes(b"{}\n")
        wait_for(w, path)
    finally:
        w.stop()


def test_root_deleted_and_recreated(watcher: Watcher, root: Path) -> None:
    shutil.rmtree(root)
    wait_for(watcher, root)
    root.mkdir()
    wait_for(watcher, root)
    path = root / "s.jsonl"
    path.write_bytes(b"{}\n")
    wait_for(watcher, path)


def test_root_replaced_before_noticed(watcher: Watcher, root: Path) -> None:
    shutil.rmtree(root)
    root.mkdir()  # before changed() ran: the old watch died with the old directory
    wait_for(watcher, root)
    path = root / "s.jsonl"
    path.write_bytes(b"{}\n")
    wait_for(watcher, path)


def test_symlinked_root_reported_by_its_given_path(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    root = tmp_path / "link"
    root.symlink_to(tmp_path / "real")
    w = Watcher([root])
    w.start()
    try:
        (tmp_path / "real" / "s.jsonl").write_bytes(b"{}\n")
        wait_for(w, root / "s.jsonl")
    finally:
        w.stop()


def test_stop_joins_and_wakes_waiter(root: Path) -> None:
    before = set(threading.enumerate())
    w = Watcher([root])
    w.start()
    assert set(threading.enumerate()) - before  # observer and emitter threads running
    result: list[set[Path]] = []
    waiter = threading.Thread(target=lambda: result.append(w.changed(timeout=None)))
    waiter.start()
    w.stop()
    waiter.join(TIMEOUT)
    assert not waiter.is_alive()
    assert result == [set()]
    assert set(threading.enumerate()) == before


def test_out_of_inotify_watches_is_reported_as_degraded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from watchdog.observers import Observer

    def exhausted(*args: object, **kwargs: object) -> object:
        raise OSError(errno.ENOSPC, "inotify watch limit reached")

    root = tmp_path / "home"
    root.mkdir()
    monkeypatch.setattr(Observer, "schedule", exhausted)
    watcher = Watcher([root])
    watcher.start()
    try:
        assert watcher.degraded
    finally:
        watcher.stop()

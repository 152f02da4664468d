"""coding_agent_exporter.sources.fsobserver: a paired rename does not hold back the events
behind it (watchdog's queue slept its whole 0.5 s even once the pair had arrived).

No speed is asserted (`bench/latency.py` measures it): the hold is made a minute long, so an
event that comes at all within the tests' deadline (far shorter) came because the pair woke
the queue, not because the hold ran out. Waits are joins with timeouts."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from coding_agent_exporter.sources import fsobserver
from coding_agent_exporter.sources.watch import Watcher

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify: Linux")


def test_watchdogs_inotify_internals_found() -> None:
    """On Linux the prompt observer is used; if a watchdog release moved what it builds on, the
    stock observer (with its half-second hold) would be used without a word: fail here."""
    assert fsobserver.INOTIFY, (
        "watchdog's inotify internals changed: see coding_agent_exporter/fsobserver.py"
    )
    assert type(fsobserver.make()).__name__ == "_PromptObserver"


HOLD = 60.0  # the delay for an IN_MOVED_FROM (watchdog's is 0.5 s), made long
DEADLINE = 20.0  # a wait for what must come, generous on a loaded machine, well under HOLD


@pytest.fixture
def long_hold(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The observers made from here hold an unpaired move `HOLD` seconds."""
    monkeypatch.setattr(fsobserver.PromptGrouper, "delay", HOLD)
    yield


def taker(queue: fsobserver.PromptQueue) -> tuple[threading.Thread, list[object]]:
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(queue.get()), daemon=True)
    thread.start()
    return thread, got


def test_paired_move_is_taken_at_once() -> None:
    queue = fsobserver.PromptQueue(HOLD)
    queue.put("moved_from", delay=True)
    thread, got = taker(queue)  # the taker sees a delayed head and waits on it
    thread.join(0.05)
    assert thread.is_alive(), "a delayed head was taken before its pair or its time"
    assert queue.remove(lambda event: event == "moved_from") == "moved_from"  # the pair came:
    queue.put(("moved_from", "moved_to"))  # as watchdog's grouper queues it
    thread.join(DEADLINE)
    assert not thread.is_alive(), "the taker slept on after the move was paired"
    assert got == [("moved_from", "moved_to")]


def test_unpaired_move_still_held_its_time() -> None:
    queue = fsobserver.PromptQueue(0.1)
    started = time.monotonic()
    queue.put("moved_from", delay=True)
    queue.put("modified")
    assert queue.get() == "moved_from"
    assert time.monotonic() - started >= 0.1
    assert queue.get() == "modified"


def test_closed_queue_wakes_taker() -> None:
    queue = fsobserver.PromptQueue(HOLD)
    thread, got = taker(queue)
    queue.close()
    thread.join(DEADLINE)
    assert not thread.is_alive() and got == [None]


def test_renames_then_appends_are_not_held_behind_the_renames(
    tmp_path: Path, long_hold: None
) -> None:
    """The live index renamed into place again and again, a journal appended after each: the
    append is reported every time, long before the hold would have let it through."""
    root = tmp_path / "root"
    (root / "sessions").mkdir(parents=True)
    journal = root / "s.jsonl"
    journal.write_bytes(b"{}\n")
    watcher = Watcher([root])
    watcher.start()
    try:
        watcher.changed(timeout=1.0)
        for i in range(20):
            tmp, index = root / "sessions" / "1.tmp", root / "sessions" / "1.json"
            tmp.write_text(str(i))
            tmp.replace(index)
            started = time.monotonic()
            with journal.open("ab") as f:
                f.write(b"{}\n")
            seen: set[Path] = set()
            while journal not in seen:
                left = started + DEADLINE - time.monotonic()
                assert left > 0, f"append {i} held behind a rename: not reported in {DEADLINE} s"
                seen |= watcher.changed(timeout=left)
    finally:
        watcher.stop()


def test_portable_probes_use_watchdogs_own_observer(probes: str) -> None:
    """With the portable probes (as on macOS and Windows) the observer is watchdog's own for the
    system, which on Linux is still inotify: events from the kernel, never a polling observer."""
    from watchdog.observers import Observer
    from watchdog.observers.polling import PollingObserver

    observer = fsobserver.make()
    if probes == "portable":
        assert type(observer) is Observer and type(observer).__name__ == "InotifyObserver"
    else:
        assert type(observer).__name__ == "_PromptObserver"
    assert not isinstance(observer, PollingObserver)


_BROKEN_IMPORT = """
import subprocess
import sys
from importlib.abc import MetaPathFinder
from watchdog.observers import Observer  # chosen first: as on macOS/Windows, without inotify
for name in [name for name in sys.modules if name.startswith("watchdog.observers.inotify")]:
    del sys.modules[name]  # imported again below, and failing

class Broken(MetaPathFinder):
    # watchdog's inotify module as it fails off Linux: {error}
    def find_spec(self, name, path, target=None):
        if name == "watchdog.observers.inotify_c":
            from watchdog.utils import UnsupportedLibcError
            raise {error}
        return None

sys.meta_path.insert(0, Broken())
from coding_agent_exporter.sources import fsobserver, platform
platform.choose("auto")
print(fsobserver.INOTIFY, type(fsobserver.make()) is Observer)
"""


@pytest.mark.parametrize(
    "error",
    ["UnsupportedLibcError('libc.so.6 has no inotify')", "TypeError('CDLL(None)')"],
    ids=["macos-libc", "windows-ctypes"],
)
def test_inotify_import_failure_is_not_a_crash(error: str) -> None:
    """A real process in which importing watchdog's inotify module fails as it does on macOS
    (`UnsupportedLibcError`, a plain Exception) and on Windows (`TypeError` from ctypes): the
    module imports, and `make()` gives watchdog's own observer (`serve` crashed here at start);
    which one that is on macOS or Windows (FSEvents, ReadDirectoryChangesW) is watchdog's choice
    and cannot be seen on Linux."""
    code = _BROKEN_IMPORT.format(error=error)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]

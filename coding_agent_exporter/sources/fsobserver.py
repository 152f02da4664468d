"""watchdog's inotify observer, except that a rename holds back the events behind it only until
its two halves are paired, not for a fixed half second.

watchdog (7.1) keeps each ``IN_MOVED_FROM`` at the head of a watch's event queue for up to 0.5 s,
waiting for its ``IN_MOVED_TO``; the thread that takes events off the queue *sleeps* those
0.5 s, so even when the ``IN_MOVED_TO`` is queued a moment later, every event of that watch
waits the whole time. Agents rename all the time (Claude Code rewrites its live index and a
sub-agent's meta file that way), so every journal append under the same root shows up to half
a second late. Here the taking thread waits on the queue's condition instead, which the
paired move's arrival wakes: an ``IN_MOVED_FROM`` with no ``IN_MOVED_TO`` (a file moved out of
the watched tree) still holds the queue its 0.5 s, as watchdog intends.

Only the taking side changes; the pairing, the watches and the events are watchdog's own. This
builds on watchdog 7.1's inotify classes, and is used only with Linux's own probes
(``platform.current().native``). Elsewhere ``make()`` is watchdog's own observer for the system:
FSEvents on macOS, ReadDirectoryChangesW on Windows, and on Linux with
``--platform.probes=portable`` watchdog's plain inotify observer (file events still come from the
kernel; only the prompt pairing is left out). Which observer that is, is watchdog's choice: it
polls only where the system gives no file events at all.

Importing the inotify classes fails differently per system, and never only with ``ImportError``:
watchdog's ``inotify_c`` raises ``UnsupportedLibcError`` (a plain ``Exception``) where libc has no
inotify calls (macOS), and ``ctypes.CDLL(None)`` raises ``TypeError`` on Windows. Any exception
out of that import therefore means "no inotify here", never a crash at start. A watchdog whose
classes moved gives the same fallback on Linux; ``tests/test_fsobserver.py`` fails then, so an
upgrade does not lose the fix unnoticed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from . import platform

__all__ = ["make"]


def make() -> BaseObserver:
    """An observer for this platform: with Linux's own probes, inotify with prompt move pairing;
    otherwise watchdog's own observer for the system (FSEvents, ReadDirectoryChangesW, inotify)."""
    return _PromptObserver() if INOTIFY and platform.current().native else Observer()


try:
    from watchdog.observers.api import DEFAULT_OBSERVER_TIMEOUT
    from watchdog.observers.inotify import InotifyEmitter, InotifyObserver, InotifyWatchGroup
    from watchdog.observers.inotify_c import InotifyFD
    from watchdog.observers.inotify_move_event_grouper import (
        GroupedInotifyEvent,
        InotifyMoveEventGrouper,
    )
    from watchdog.utils.delayed_queue import DelayedQueue
except Exception:  # pragma: no cover - UnsupportedLibcError (macOS), TypeError (Windows)
    INOTIFY = False
else:
    INOTIFY = True

    class PromptQueue(DelayedQueue[GroupedInotifyEvent]):
        """A ``DelayedQueue`` whose ``get`` waits for a delayed head on its condition, so that
        taking the head away (the move was paired) and queueing the pair ends the wait."""

        def get(self) -> GroupedInotifyEvent | None:
            with self._not_empty:
                while True:
                    while not self._queue and not self._closed:
                        self._not_empty.wait()
                    if self._closed:
                        return None
                    head, queued, delayed = self._queue[0]
                    left = queued + self.delay - time.monotonic() if delayed else 0.0
                    if left <= 0:
                        self._queue.popleft()
                        return head
                    self._not_empty.wait(left)

    class PromptGrouper(InotifyMoveEventGrouper):
        def __init__(self) -> None:
            self._queue = PromptQueue(self.delay)

    @dataclass
    class _Group(InotifyWatchGroup):
        _move_event_grouper: InotifyMoveEventGrouper = field(
            default_factory=PromptGrouper, init=False
        )

    class _Emitter(InotifyEmitter):
        def on_thread_start(self) -> None:  # as watchdog's, with the group above
            self._inotify = _Group(
                self._inotify_fd,
                os.fsencode(self.watch.path),
                is_recursive=self.watch.is_recursive,
                event_mask=self.get_event_mask_from_filter(),
                follow_symlink=self.watch.follow_symlink,
            )

    class _PromptObserver(InotifyObserver):
        def __init__(self) -> None:  # as watchdog's, with the emitter above
            self._inotify_fd = InotifyFD()
            self._inotify_fd.start()
            BaseObserver.__init__(
                self, _Emitter, timeout=DEFAULT_OBSERVER_TIMEOUT, inotify_fd=self._inotify_fd
            )

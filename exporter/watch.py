"""Tell the loop which files changed, without polling; a thin wrapper over watchdog.

``Watcher(roots)`` watches each root recursively (inotify on Linux) and ``changed(timeout)``
blocks until something under a root was created, modified, had its attributes changed,
was moved or deleted, then returns the accumulated set of affected paths: both ends of a
move, and the directory itself for a directory event so the caller can rescan it.

Only change events are subscribed: the opens and reads the tailer itself performs are
never reported, so reading a file cannot wake the loop.

A root that does not exist yet (the agent is installed after the exporter starts) is
covered by a non-recursive watch on its nearest existing ancestor; when a directory on the
way to the root appears, the watches are moved down, and once the root exists it gets
its recursive watch and is itself reported as changed, so the caller scans whatever was
created before the watch was in place. A root that is deleted falls back the same way.
A root reached through a symlink (``/home`` -> ``/var/home``) is watched at its real path
and reported under the path it was given.

The observer thread only records paths under a lock and wakes the waiter; watches are
rearranged in the caller's thread, inside ``changed()``. Nothing is ever written.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from watchdog.events import (
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MOVED,
    DirAttribEvent,
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileAttribEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import ObservedWatch

__all__ = ["Watcher"]

log = logging.getLogger(__name__)

_EVENTS: list[type[FileSystemEvent]] = [
    FileCreatedEvent,
    FileModifiedEvent,
    FileAttribEvent,
    FileMovedEvent,
    FileDeletedEvent,
    DirCreatedEvent,
    DirAttribEvent,
    DirMovedEvent,
    DirDeletedEvent,
]
"""Change events only; DirModifiedEvent is left out, the child's own event covers it."""

_GONE = frozenset({EVENT_TYPE_DELETED, EVENT_TYPE_MOVED})

_Spec = tuple[Path, bool]
"""A watch as (path, recursive)."""


class Watcher:
    """Collects changed paths under ``roots`` from a watchdog observer thread."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = tuple(Path(os.path.abspath(root)) for root in roots)
        self._observer = Observer()
        self._handler = _Handler(self._record)
        self._cond = threading.Condition()  # guards the four fields below
        self._pending: set[Path] = set()
        self._gone: set[Path] = set()
        self._rearrange = False
        self._stopped = False
        self._lock = threading.Lock()  # guards the watches
        self._watches: dict[_Spec, ObservedWatch] = {}
        self._aliases: tuple[tuple[Path, Path], ...] = ()  # (watched real path, path as given)
        self._blind: set[Path] = set()  # roots that could not be watched (e.g. no watches left)

    @property
    def degraded(self) -> bool:
        """Some root is not watched (inotify watches exhausted) or the observer died: the
        caller must rescan now and then instead of waiting for events."""
        with self._lock:
            blind = bool(self._blind)
        started = self._observer.ident is not None
        return blind or (started and not self._stopped and not self._observer.is_alive())

    def start(self) -> None:
        """Place the watches and start the observer thread."""
        self._arrange(set())
        self._observer.start()

    def stop(self) -> None:
        """Stop the observer, join its threads, and wake any caller blocked in ``changed``."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        with self._lock:
            self._observer.stop()
        if self._observer.is_alive():
            self._observer.join()

    def changed(self, timeout: float | None) -> set[Path]:
        """Block until a path changed (or ``timeout`` seconds); return and forget the set."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._cond:
                self._cond.wait_for(self._ready, _remaining(deadline))
                paths, self._pending = self._pending, set()
                rearrange, self._rearrange = self._rearrange, False
                gone, self._gone = self._gone, set()
                stopped = self._stopped
            if rearrange:
                paths |= self._arrange(gone)
            if paths or stopped or _remaining(deadline) == 0:
                return paths

    def _ready(self) -> bool:
        return bool(self._pending) or self._rearrange or self._stopped

    def _record(self, event: FileSystemEvent) -> None:
        """Observer thread: keep paths under a root, note directories on the way to one."""
        paths = {
            self._unalias(Path(os.fsdecode(p))) for p in (event.src_path, event.dest_path) if p
        }
        inside = {p for p in paths if any(p.is_relative_to(r) for r in self.roots)}
        on_the_way = event.is_directory and any(
            r.is_relative_to(p) for p in paths for r in self.roots
        )
        if not inside and not on_the_way:
            return
        with self._cond:
            self._pending |= inside
            self._rearrange |= on_the_way
            if on_the_way and event.event_type in _GONE:
                self._gone |= paths
            self._cond.notify_all()

    def _unalias(self, path: Path) -> Path:
        """Spell an event path the way the roots were given, not through resolved symlinks."""
        for real, given in self._aliases:
            if path.is_relative_to(real):
                return given / path.relative_to(real)
        return path

    def _arrange(self, gone: set[Path]) -> set[Path]:
        """Move watches to where they should be; return the roots that just got theirs."""
        with self._lock:
            return self._arrange_locked(gone) if not self._stopped else set()

    def _arrange_locked(self, gone: set[Path]) -> set[Path]:
        wanted = {_spec(root) for root in self.roots}
        for spec in list(self._watches):
            # A watched directory that was deleted or moved has lost its inotify watch.
            if spec not in wanted or spec[0] in gone:
                self._observer.unschedule(self._watches.pop(spec))
        appeared: set[Path] = set()
        for spec in wanted - set(self._watches):
            real = spec[0].resolve()  # inotify would watch a symlinked root's link, not its tree
            try:
                self._watches[spec] = self._observer.schedule(
                    self._handler, real, recursive=spec[1], event_filter=_EVENTS
                )
            except FileNotFoundError:  # vanished since _spec looked: look again
                with self._cond:
                    self._rearrange = True
                continue
            except OSError as exc:  # e.g. out of inotify watches; retried on the next change
                if spec[0] not in self._blind:
                    log.warning(
                        "cannot watch %s: %s (raise fs.inotify.max_user_watches); rescanning "
                        "it now and then instead",
                        spec[0],
                        exc,
                    )
                self._blind.add(spec[0])
                continue
            self._blind.discard(spec[0])
            if real != spec[0]:
                self._aliases = tuple(sorted({*self._aliases, (real, spec[0])}, reverse=True))
            if spec[1]:
                appeared.add(spec[0])
        return appeared if self._observer.is_alive() else set()


class _Handler(FileSystemEventHandler):
    def __init__(self, record: Callable[[FileSystemEvent], None]) -> None:
        self._record = record

    def dispatch(self, event: FileSystemEvent) -> None:
        self._record(event)


def _spec(root: Path) -> _Spec:
    """Recursive on the root if it exists, else non-recursive on its nearest existing ancestor."""
    if root.is_dir():
        return root, True
    parent = root.parent
    while not parent.is_dir() and parent != parent.parent:
        parent = parent.parent
    return parent, False


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())

"""Tell the loop which files changed, without polling; a thin wrapper over watchdog.

``Watcher(roots)`` watches each root recursively (inotify on Linux, FSEvents on macOS,
ReadDirectoryChangesW on Windows: ``fsobserver.make()``) and ``changed(timeout)``
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

Out of inotify watches (``fs.inotify.max_user_watches``): a root whose own watch cannot be
placed, or a folder under a root left without one (watchdog skips a sub-folder it cannot watch
without a word), makes the watcher ``degraded``, logged once per root with the first such
folder and the sysctl named, so the caller rescans instead of going blind. The folders left
without are found by comparing the folders under a root with the watches the kernel lists for
this process (``/proc/self/fdinfo``): after a root's watches are placed (by the next
``changed()``, so ``start()`` does not wait for it), and for a folder that appears when no
watch can be had. Whether one can is tried with one watch on a private inotify instance, which
also tells "no watches left" from a folder that cannot be read. While degraded, every
``RETRY_EVERY`` seconds the watches of the roots concerned are placed anew if watches can be
had again (the limit was raised, another program let go of some), and those roots are reported
as changed. When several roots are placed at once, the one with the fewest folders goes first,
so a live index of one folder keeps its watch before a history of thousands takes the rest.

All of that is Linux's (``platform.current().native``). With the portable probes a root whose
watch cannot be placed is still ``degraded`` (logged once, with the system's own reason and no
``fs.inotify.*`` advice), and placed again every ``RETRY_EVERY`` seconds without a probe; the
folders under a placed root are not looked over (FSEvents and ReadDirectoryChangesW watch a
whole tree with one stream or handle: no per-folder watch to run out of).

The observer is ``fsobserver.make()``: watchdog's, except that a rename holds the events behind
it only until it is paired. The observer thread only records paths under a lock and wakes the
waiter; watches are rearranged in the caller's thread, inside ``changed()``. Nothing is ever
written.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from watchdog.events import (
    EVENT_TYPE_CREATED,
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
from watchdog.observers.api import ObservedWatch

from . import fsobserver, inotify, platform

__all__ = ["RETRY_EVERY", "Watcher"]

log = logging.getLogger(__name__)

RETRY_EVERY = 30.0
"""Seconds between tries, while degraded, to place the missing watches again."""

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
_NEW = frozenset({EVENT_TYPE_CREATED, EVENT_TYPE_MOVED})

_Spec = tuple[Path, bool]
"""A watch as (path, recursive)."""


class Watcher:
    """Collects changed paths under ``roots`` from a watchdog observer thread."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = tuple(Path(os.path.abspath(root)) for root in roots)
        self._observer = fsobserver.make()
        self._handler = _Handler(self._record)
        self._cond = threading.Condition()  # guards the five fields below
        self._pending: set[Path] = set()
        self._gone: set[Path] = set()
        self._created: set[Path] = set()  # folders that appeared under a root: watched?
        self._rearrange = False
        self._stopped = False
        self._lock = threading.Lock()  # guards the watches and the fields below
        self._watches: dict[_Spec, ObservedWatch] = {}
        self._aliases: tuple[tuple[Path, Path], ...] = ()  # (watched real path, path as given)
        self._blind: set[Path] = set()  # roots and folders without a watch (no watches left)
        self._unlooked: dict[Path, bool] = {}  # roots placed, not looked at yet: may place again
        self._unsure: set[Path] = set()  # roots whose watches /proc cannot confirm: not looked at
        self._retried = time.monotonic()
        self._native = platform.current().native  # inotify's limits can be asked about

    @property
    def degraded(self) -> bool:
        """Some root or folder is not watched (inotify watches exhausted) or the observer died:
        the caller must rescan now and then instead of waiting for events."""
        with self._lock:
            blind = bool(self._blind)
        started = self._observer.ident is not None
        return blind or (started and not self._stopped and not self._observer.is_alive())

    def start(self) -> None:
        """Start the observer thread, then place the watches: each is placed at once, so a root
        that cannot be watched is known when this returns; folders left without a watch under
        a root that has one are looked for by the next ``changed()``."""
        self._observer.start()
        self._arrange(set())

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
            wait = _soonest(_remaining(deadline), self._retry_in())
            with self._cond:
                self._cond.wait_for(self._ready, wait)
                paths, self._pending = self._pending, set()
                rearrange, self._rearrange = self._rearrange, False
                gone, self._gone = self._gone, set()
                created, self._created = self._created, set()
                stopped = self._stopped
            if rearrange:
                paths |= self._arrange(gone)
            if self._retry_in() == 0 and not stopped:
                paths |= self._retry()
            if not stopped:
                paths |= self._look(created)
            if paths or stopped or _remaining(deadline) == 0:
                return paths

    def report(self, paths: set[Path]) -> None:
        """Report `paths` as changed, as if by a file event (any thread: the live-file follower,
        `livefiles`, wakes the loop this way)."""
        with self._cond:
            self._pending |= paths
            self._cond.notify_all()

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
        new = set()
        if event.is_directory and event.event_type in _NEW:  # got its watch, if it could
            new = {self._unalias(Path(os.fsdecode(event.dest_path or event.src_path)))} & inside
        with self._cond:
            self._pending |= inside
            self._created |= new
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

    def _arrange_locked(
        self, gone: set[Path], replace: frozenset[Path] = frozenset(), *, again: bool = True
    ) -> set[Path]:
        """Place the watches; ``replace``: recursive roots whose watches are placed anew (to
        watch the folders left without); ``again``: a root whose folders are left without
        watches though watches can be had is placed anew once more."""
        wanted = {_spec(root) for root in self.roots}
        for spec in list(self._watches):
            # A watched directory that was deleted or moved has lost its inotify watch.
            if spec not in wanted or spec[0] in gone or (spec[1] and spec[0] in replace):
                self._observer.unschedule(self._watches.pop(spec))
        self._blind = {p for p in self._blind if p.is_dir()}
        appeared: set[Path] = set()
        for spec in _fewest_folders_first(wanted - set(self._watches)):
            real = spec[0].resolve()  # inotify would watch a symlinked root's link, not its tree
            try:
                self._watches[spec] = self._observer.schedule(
                    self._handler, real, recursive=spec[1], event_filter=_EVENTS
                )
            except FileNotFoundError:  # vanished since _spec looked: look again
                with self._cond:
                    self._rearrange = True
                continue
            except OSError as exc:  # e.g. out of inotify watches; retried every RETRY_EVERY
                if spec[0] not in self._blind:
                    log.warning(
                        "cannot watch %s: %s; rescanning it now and then instead",
                        spec[0],
                        inotify.why(exc.errno),
                    )
                self._blind.add(spec[0])
                continue
            self._blind.discard(spec[0])
            if real != spec[0]:
                self._aliases = tuple(sorted({*self._aliases, (real, spec[0])}, reverse=True))
            if spec[1]:
                appeared.add(spec[0])
        self._unlooked.update((root, again) for root in appeared)
        return appeared if self._observer.is_alive() else set()

    def _look(self, created: set[Path]) -> set[Path]:
        """Look for folders left without a watch under the roots just placed, and among the
        folders that just appeared; return the roots placed anew because of what was found."""
        with self._lock:
            appeared: set[Path] = set()
            if not self._native:  # no per-folder watches to look over
                self._unlooked = {}
                return appeared
            while (self._unlooked or created) and not self._stopped:
                placed, self._unlooked = self._unlooked, {}
                tops: dict[Path, list[Path]] = {root: [root] for root in placed}
                if created and not inotify.can_watch(sorted(created)):  # else watchdog had them too
                    for folder in sorted(created):  # a parent first: its walk covers its own
                        root = _root_of(folder, [r for r, deep in self._watches if deep])
                        if root is None or root in placed:  # gone, or looked at whole anyway
                            continue
                        if not any(inotify.under(folder, top) for top in tops.get(root, [])):
                            tops.setdefault(root, []).append(folder)
                created = set()
                again = {root for root, may in placed.items() if may} | (set(tops) - set(placed))
                stale = self._look_locked(tops, again)
                if stale:
                    appeared |= self._arrange_locked(set(), frozenset(stale), again=False)
            return appeared

    def _look_locked(self, tops: dict[Path, list[Path]], again: set[Path]) -> set[Path]:
        """Find the folders at and under ``tops`` (per recursive root) that have no watch, by
        the kernel's list of this process's watches; mark them blind if no watch can be had, and
        return the roots of ``again`` to place anew where one can (watches were freed since
        watchdog tried, or a folder came a moment before its parent's watch)."""
        tops = {root: folders for root, folders in tops.items() if root not in self._unsure}
        watched = inotify.watched_inodes() if tops else None
        if watched is None:  # nothing to look at, or not Linux: /proc cannot tell
            return set()
        had = {root for root in tops if self._blind_under(root)}
        missing: list[tuple[Path, Path]] = []  # (root, folder)
        for root, folders in tops.items():
            if inotify.inode(str(root)) not in watched:  # inodes not the kernel's (e.g. FUSE)
                self._unsure.add(root)
                log.debug("cannot confirm the watches under %s: not looking again", root)
                continue
            for top in folders:
                self._blind = {p for p in self._blind if not inotify.under(p, top) or p == root}
            for top in folders:
                found = [path for path, ino in inotify.folders(str(top)) if ino not in watched]
                # a mount point's or an overlay's entry may not give the inode stat gives
                found = [path for path in found if inotify.inode(path) not in watched]
                missing += sorted((root, Path(path)) for path in found)
        reason, watchable = 0, []
        with inotify.Probe() as probe:
            for root, folder in missing:
                code = reason or probe.why_not(folder)
                if code in inotify.NONE_LEFT:
                    reason = code  # none left: the folders after it cannot have one either
                    self._blind.add(folder)
                elif code == 0:
                    watchable.append((root, folder))
                # else it cannot be read (EACCES) or is gone: not for lack of watches
        if reason:  # a watch had a moment ago is gone by now: without one all the same
            self._blind.update(folder for _, folder in watchable)
        else:
            for root, folder in watchable:
                if root not in again:
                    log.debug("%s has no watch, though one can be had", folder)
        for root in sorted(tops):
            blind = sorted(self._blind_under(root))
            if blind and root not in had:
                more = f" and {len(blind) - 1} other folders" if len(blind) > 1 else ""
                log.warning(
                    "cannot watch %s%s under %s: %s; rescanning them now and then instead",
                    blind[0],
                    more,
                    root,
                    inotify.why(reason),
                )
            elif root in had and not blind:
                log.info("every folder under %s is watched again", root)
        return set() if reason else {root for root, _ in watchable} & again

    def _blind_under(self, root: Path) -> set[Path]:
        return {p for p in self._blind if inotify.under(p, root) and p != root}

    def _retry_in(self) -> float | None:
        """Seconds until the next try to place the missing watches; None if none is missing."""
        with self._lock:
            if not self._blind:
                return None
        return max(0.0, self._retried + RETRY_EVERY - time.monotonic())

    def _retry(self) -> set[Path]:
        """If watches can be had again, place those of the roots with folders left without (and
        of the roots left without): return the roots that got theirs, for the caller to read."""
        with self._lock:
            self._retried = time.monotonic()
            self._blind = {p for p in self._blind if p.is_dir()}
            if self._stopped or not self._blind:
                return set()
            if self._native:
                with inotify.Probe() as probe:
                    if probe.why_not(min(self._blind)) != 0:
                        return set()  # still none left
            recursive = [s[0] for s in self._watches if s[1]]
            replace = {r for r in recursive for p in self._blind if p.is_relative_to(r)}
            return self._arrange_locked(set(), frozenset(replace))


class _Handler(FileSystemEventHandler):
    def __init__(self, record: Callable[[FileSystemEvent], None]) -> None:
        self._record = record

    def dispatch(self, event: FileSystemEvent) -> None:
        self._record(event)


def _root_of(folder: Path, roots: Sequence[Path]) -> Path | None:
    """The deepest of ``roots`` that ``folder`` is under."""
    return max(
        (root for root in roots if inotify.under(folder, root)),
        key=lambda r: len(r.parts),
        default=None,
    )


def _fewest_folders_first(specs: Iterable[_Spec]) -> list[_Spec]:
    """When watches run short, as many roots as possible keep all of theirs: a root with the
    fewest folders (counted one level down) is placed first."""
    specs = list(specs)
    if len(specs) < 2:
        return specs
    return sorted(specs, key=lambda s: (_subfolders(s[0]) if s[1] else -1, s))


def _subfolders(path: Path) -> int:
    try:
        with os.scandir(path) as entries:
            return sum(1 for e in entries if e.is_dir(follow_symlinks=False))
    except OSError:
        return 0


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


def _soonest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)

"""The files of live sessions, followed directly where the folder watcher may not see them grow.

The folder watcher (`watch`) reports every change under the agents' folders, history and live
sessions alike. Two systems are known to miss the one change that matters most, an append to
a live session's file:

* macOS: FSEvents may report appends made through a handle the writer keeps open only when
  the file is closed (all-your-agents measured it: their ADR 0002). Here the live files are
  watched with kqueue, one `EVFILT_VNODE` filter per file (`NOTE_WRITE | NOTE_EXTEND |
  NOTE_DELETE | NOTE_RENAME`, edge-cleared), by one thread that reports each file that changed
  and so wakes the reading loop. A file deleted or renamed is let go, and opened again (the new
  file under that name) at the next `follow()`. The descriptors are opened read-only
  (`O_EVTONLY` where the system has it: they do not keep a volume from being unmounted).
* Windows: a file's size in its folder is updated lazily while a writer holds it open, so
  ReadDirectoryChangesW may say nothing of an append until then. Here each live file is looked
  at every `STAT_EVERY` second (1 s): opened (sharing delete), its size and mtime taken from
  the open handle, which are current, and closed (`reading.stat_current`; the followers
  compare the same before they read). Only the live files: history is never looked at so.

On Linux with its own probes inotify reports every append at once: nothing is followed
(`NoFollower`, `needed` False, so the loop does not even list the live files). With
`--platform.probes=portable` on Linux the stat follower is used (epoll has no file filter, and
this is how CI runs Windows' follower for real); kqueue's runs on macOS only, and is tested
here against a fake kqueue.

At most `MAX_FOLLOWED` files are followed (the latest noted first); the rest keep to the
folder watcher. Reporting a file that did not change costs the loop one `stat`.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from . import platform
from .reading import stat_current, stat_key

__all__ = [
    "MAX_FOLLOWED",
    "STAT_EVERY",
    "KqueueFollower",
    "LiveFiles",
    "NoFollower",
    "StatFollower",
    "make",
]

log = logging.getLogger(__name__)

MAX_FOLLOWED = 64
"""Files followed at most; beyond, the folder watcher alone. On macOS each holds a descriptor,
and a process started by launchd may have only 256 of them."""
STAT_EVERY = 1.0
"""Seconds between two looks at the live files, where they are looked at (Windows)."""

Report = Callable[[set[Path]], None]
"""Called (from the follower's thread) with the files that changed."""


class LiveFiles(Protocol):
    """Follows the files it is told to, reporting those that change."""

    needed: bool
    """False: the folder watcher sees every append here; `follow` need not be called."""

    def start(self) -> None: ...

    def follow(self, names: Sequence[str]) -> None:
        """Follow these files (the latest first) from now on, and no others."""

    def stop(self) -> None: ...


def make(report: Report) -> LiveFiles:
    """The follower for this system (see the module's docstring)."""
    chosen = platform.current()
    if chosen.native:
        return NoFollower()
    if not chosen.windows and hasattr(select, "kqueue"):
        return KqueueFollower(report)
    return StatFollower(report)


class NoFollower:
    """Linux's own probes: inotify reports appends; nothing to follow."""

    needed = False

    def start(self) -> None:
        pass

    def follow(self, names: Sequence[str]) -> None:
        pass

    def stop(self) -> None:
        pass


def _latest(names: Sequence[str]) -> list[str]:
    """At most `MAX_FOLLOWED` of `names`, the first ones, each once."""
    return list(dict.fromkeys(names))[:MAX_FOLLOWED]


class StatFollower:
    """Looks at each followed file every `interval` seconds; reports those whose identity, size
    or mtime changed (and each file once when it is first followed)."""

    needed = True

    def __init__(self, report: Report, interval: float = STAT_EVERY) -> None:
        self._report = report
        self._interval = interval
        self._lock = threading.Lock()
        self._names: list[str] = []
        self._keys: dict[str, tuple[int, int, int, int] | None] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-files", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join()

    def follow(self, names: Sequence[str]) -> None:
        with self._lock:
            self._names = _latest(names)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.look()

    def look(self) -> set[Path]:
        """One look at the followed files: report (and return) those that changed."""
        with self._lock:
            names = list(self._names)
        keys = {name: _key(name) for name in names}
        changed = {
            Path(n) for n, key in keys.items() if n not in self._keys or key != self._keys[n]
        }
        self._keys = keys  # only the followed ones: the table does not grow
        if changed:
            self._report(changed)
        return changed


def _key(name: str) -> tuple[int, int, int, int] | None:
    """The file's identity, size and mtime (on Windows through a handle opened on it: a
    folder's own record lags behind a file still open for writing); None if it cannot be
    looked at."""
    try:
        return stat_key(stat_current(name))
    except OSError:
        return None


# kqueue's values on macOS and the BSDs (sys/event.h), for where `select` lacks them: a unit
# test's fake kqueue on Linux.
_KQ_DEFAULTS = {
    "KQ_FILTER_READ": -1,
    "KQ_FILTER_VNODE": -4,
    "KQ_EV_ADD": 0x1,
    "KQ_EV_CLEAR": 0x20,
    "KQ_NOTE_DELETE": 0x1,
    "KQ_NOTE_WRITE": 0x2,
    "KQ_NOTE_EXTEND": 0x4,
    "KQ_NOTE_RENAME": 0x20,
}


def _kq(api: Any, name: str) -> int:
    value: int = getattr(api, name, _KQ_DEFAULTS[name])
    return value


class KqueueFollower:
    """macOS: one kqueue, one `EVFILT_VNODE` filter per followed file, one thread waiting on
    it. `api`: the `select` module, or a unit test's fake of it (`kqueue`, `kevent`)."""

    needed = True

    def __init__(self, report: Report, api: Any = select) -> None:
        self._report = report
        self._api = api
        self._kqueue = api.kqueue()
        self._lock = threading.Lock()
        self._fds: dict[str, int] = {}  # followed file → its descriptor
        self._names: dict[int, str] = {}  # and back
        self._stopped = False
        self._wake_r, self._wake_w = os.pipe()
        self._vnode = _kq(api, "KQ_FILTER_VNODE")
        self._flags = _kq(api, "KQ_EV_ADD") | _kq(api, "KQ_EV_CLEAR")
        self._gone = _kq(api, "KQ_NOTE_DELETE") | _kq(api, "KQ_NOTE_RENAME")
        self._notes = _kq(api, "KQ_NOTE_WRITE") | _kq(api, "KQ_NOTE_EXTEND") | self._gone
        wake = api.kevent(self._wake_r, _kq(api, "KQ_FILTER_READ"), _kq(api, "KQ_EV_ADD"))
        self._kqueue.control([wake], 0, 0)
        self._thread = threading.Thread(target=self._run, name="live-files", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        os.write(self._wake_w, b"x")
        if self._thread.ident is not None:
            self._thread.join()
        with self._lock:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()
            self._names.clear()
        self._kqueue.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def follow(self, names: Sequence[str]) -> None:
        wanted = _latest(names)
        opened = set()
        with self._lock:
            if self._stopped:
                return
            for name in set(self._fds) - set(wanted):
                self._let_go(name)
            for name in wanted:
                if name not in self._fds and self._watch(name):
                    opened.add(Path(name))
        if opened:  # it may have grown between the loop's read and the watch
            self._report(opened)

    def _watch(self, name: str) -> bool:
        flags = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_EVTONLY", 0)
        try:
            fd = os.open(name, flags)
        except OSError:
            return False  # gone meanwhile, or unreadable: the folder watcher tells
        try:
            event = self._api.kevent(fd, self._vnode, self._flags, self._notes)
            self._kqueue.control([event], 0, 0)
        except OSError as error:
            os.close(fd)
            log.debug("cannot follow %s with kqueue: %s", name, error)
            return False
        self._fds[name], self._names[fd] = fd, name
        return True

    def _let_go(self, name: str) -> None:
        fd = self._fds.pop(name)
        self._names.pop(fd, None)
        os.close(fd)  # its filter goes with it

    def _run(self) -> None:
        while True:
            try:
                events = self._kqueue.control(None, 64, None)
            except OSError as error:  # the folder watcher goes on alone
                log.warning("live files: kqueue failed, no longer followed directly: %s", error)
                return
            changed: set[Path] = set()
            with self._lock:
                if self._stopped:
                    return
                for event in events:
                    name = self._names.get(event.ident)
                    if name is None:  # the wake-up pipe, or a file let go meanwhile
                        continue
                    changed.add(Path(name))
                    if event.fflags & self._gone:  # watched again at the next `follow`
                        self._let_go(name)
            if changed:
                self._report(changed)

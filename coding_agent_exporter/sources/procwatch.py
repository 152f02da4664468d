"""Notice at once when the process of a live session exits, instead of at the next scrape.

`ProcessWatch(on_exit)` keeps one thread that waits on a pidfd per watched process (Linux 5.3+:
a pidfd becomes readable when its process terminates, SIGKILL included) and calls
`on_exit(pids)` from that thread with the pids that just ended. `watch(processes)` replaces the
set of watched processes, each a (pid, start time) pair as the live index gives it, so a pid
that is recycled by a new entry is watched again; it is called from the reading loop after each
batch of changes. A process is reported once, however often it is named again. Where pidfds
cannot be had (another OS, an old kernel, a seccomp filter), the watched pids are polled every
`poll` seconds instead: the same answer, a little later.

An exit only wakes the caller; which sessions stop being live is still decided by
`State.refresh`, with the pid's start time checked (a recycled pid is not the same process).
"""

from __future__ import annotations

import logging
import os
import selectors
import threading
from collections.abc import Callable, Iterable
from contextlib import suppress

import psutil

__all__ = ["Process", "ProcessWatch", "pidfds_available"]

Process = tuple[int, float | None]
"""A process as a live-index entry names it: pid and start time."""

log = logging.getLogger(__name__)
POLL_EVERY = 1.0
"""Seconds between looks at the watched pids when pidfds are not available."""


def pidfds_available() -> bool:
    if not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


def _exists(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, OSError):
        return False


class ProcessWatch:
    """One thread: pidfds in a selector (or a poll), plus a pipe to wake it for a new set."""

    def __init__(
        self,
        on_exit: Callable[[set[int]], None],
        *,
        pidfd: bool | None = None,
        poll: float = POLL_EVERY,
    ) -> None:
        self.on_exit, self.poll = on_exit, poll
        self.pidfd = pidfds_available() if pidfd is None else pidfd
        self._lock = threading.Lock()
        self._wanted: set[Process] = set()
        self._stopping = False
        self._fds: dict[Process, int] = {}  # process → its pidfd; fields owned by the thread
        self._polled: set[Process] = set()  # processes without a pidfd
        self._ended: set[Process] = set()  # reported, still named by the caller
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)  # a full pipe already says "wake up"
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, name="process-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
        self._wake()
        if self._thread.ident is not None:
            self._thread.join(timeout=5)
        for fd in self._fds.values():
            os.close(fd)
        self._selector.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def watch(self, processes: Iterable[Process]) -> None:
        """Watch exactly `processes` from now on (those already watched stay watched)."""
        wanted = set(processes)
        with self._lock:
            if wanted == self._wanted:
                return
            self._wanted = wanted
        self._wake()

    def _wake(self) -> None:
        with suppress(BlockingIOError):
            os.write(self._wake_w, b"x")

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopping:
                    return
                wanted = set(self._wanted)
            ended = self._settle(wanted)
            timeout = 0.0 if ended else self.poll if self._polled else None
            for key, _ in self._selector.select(timeout):
                if key.fd == self._wake_r:
                    os.read(self._wake_r, 4096)
                else:
                    ended.add(self._close(key.data))
            ended |= {p for p in self._polled if not _exists(p[0])}
            self._polled -= ended
            with self._lock:  # a process the caller stopped naming meanwhile is not reported
                ended &= self._wanted
            if ended:
                self._ended |= ended
                self._report({pid for pid, _ in ended})

    def _settle(self, wanted: set[Process]) -> set[Process]:
        """Open pidfds for new processes, close those no longer wanted; processes already
        gone are returned as ended."""
        for process in set(self._fds) - wanted:
            self._close(process)
        self._polled &= wanted
        self._ended &= wanted
        ended: set[Process] = set()
        for process in wanted - set(self._fds) - self._polled - self._ended:
            if not self.pidfd:
                self._polled.add(process)
                continue
            try:
                fd = os.pidfd_open(process[0])
            except ProcessLookupError:
                ended.add(process)
                continue
            except OSError as error:  # not ours to open: poll it instead
                log.debug("pidfd_open(%d): %s; polling it", process[0], error)
                self._polled.add(process)
                continue
            self._fds[process] = fd
            self._selector.register(fd, selectors.EVENT_READ, process)
        return ended

    def _close(self, process: Process) -> Process:
        fd = self._fds.pop(process)
        self._selector.unregister(fd)
        os.close(fd)
        return process

    def _report(self, pids: set[int]) -> None:
        try:
            self.on_exit(pids)
        except Exception:  # the watch outlives a failing callback
            log.exception("handling the exit of pids %s failed", sorted(pids))

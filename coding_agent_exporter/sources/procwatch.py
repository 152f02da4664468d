"""Notice at once when the process of a live session exits, instead of at the next scrape.

`ProcessWatch(on_exit)` keeps one thread that waits for watched processes to exit and calls
`on_exit(pids)` from that thread with the pids that just ended. `watch(processes)` replaces the
set of watched processes, each a (pid, start time) pair as the live index gives it, so a pid
that is recycled by a new entry is watched again; it is called from the reading loop after each
batch of changes. A process is reported once, however often it is named again.

How it waits is the system's own (`waiters`), chosen once (`choose_waiter`):
- Linux (native probes): a pidfd per process (Linux 5.3+: readable when its process
  terminates, SIGKILL included).
- macOS: a kqueue with `EVFILT_PROC`/`NOTE_EXIT` per process.
- Windows: a wait on each process's handle (`OpenProcess(SYNCHRONIZE)` and
  `WaitForMultipleObjects`, through ctypes, in this thread), up to 63 processes at once.
- Elsewhere, and with `--platform.probes=portable` on Linux: psutil, looking at the watched
  pids only, every `poll` seconds.
A process the system's waiter cannot take (not ours to open, an old kernel, a seccomp filter,
more than a Windows wait holds) is looked at every `poll` seconds too: the same answer, a
little later. Nothing is looked at while no process is watched.

An exit only wakes the caller; which sessions stop being live is still decided by
`State.refresh`, with the pid's start time checked (a recycled pid is not the same process).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterable

import psutil

from . import platform
from .waiters import KqueueWaiter, PidfdWaiter, PollWaiter, Process, Waiter, Win32Waiter

__all__ = ["WAITERS", "Process", "ProcessWatch", "choose_waiter", "pidfds_available"]

log = logging.getLogger(__name__)
POLL_EVERY = 1.0
"""Seconds between looks at the pids no waiter of the system's own holds."""
WAITERS: dict[str, Callable[[], Waiter]] = {
    "pidfd": PidfdWaiter,
    "kqueue": KqueueWaiter,
    "win32": Win32Waiter,
    "poll": PollWaiter,
}


def pidfds_available() -> bool:
    if not platform.current().native or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


def choose_waiter() -> str:
    """The waiter of this system and its chosen probes (`platform.current()`)."""
    system = platform.current()
    if system.native:
        return "pidfd" if pidfds_available() else "poll"
    if system.macos:
        return "kqueue"
    return "win32" if system.windows else "poll"


def make_waiter(name: str) -> Waiter:
    """`name`'s waiter; the poll where the system refuses it (no kqueue in this Python, no
    kernel32, no pidfd)."""
    try:
        return WAITERS[name]()
    except (OSError, AttributeError, ImportError) as error:
        log.info("cannot wait for processes with %s (%s): looking every second", name, error)
        return PollWaiter()


def _exists(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, OSError):
        return False


class ProcessWatch:
    """One thread: a waiter of the system's own, plus a look at the pids it cannot hold."""

    def __init__(
        self,
        on_exit: Callable[[set[int]], None],
        *,
        waiter: str | Waiter | None = None,
        poll: float = POLL_EVERY,
    ) -> None:
        self.on_exit, self.poll = on_exit, poll
        if waiter is None:
            waiter = choose_waiter()
        self.waiter = make_waiter(waiter) if isinstance(waiter, str) else waiter
        self._lock = threading.Lock()
        self._wanted: set[Process] = set()
        self._stopping = False
        self._held: set[Process] = set()  # waited on by the waiter; fields owned by the thread
        self._polled: set[Process] = set()  # looked at every `poll` seconds
        self._ended: set[Process] = set()  # reported, still named by the caller
        self._thread = threading.Thread(target=self._run, name="process-watch", daemon=True)

    def start(self) -> None:
        log.debug("process exits: waited for with %s", self.waiter.name)
        self._thread.start()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
        self.waiter.wake()
        if self._thread.ident is not None:
            self._thread.join(timeout=5)
        self.waiter.close()

    def watch(self, processes: Iterable[Process]) -> None:
        """Watch exactly `processes` from now on (those already watched stay watched)."""
        wanted = set(processes)
        with self._lock:
            if wanted == self._wanted:
                return
            self._wanted = wanted
        self.waiter.wake()

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stopping:
                    return
                wanted = set(self._wanted)
            ended = self._settle(wanted)
            timeout = 0.0 if ended else self.poll if self._polled else None
            try:
                done = self.waiter.wait(timeout)
            except OSError as error:  # the system's wait failed: look at every pid instead
                log.warning("waiting for processes failed (%s): looking every second", error)
                with contextlib.suppress(OSError):
                    self.waiter.close()
                done, self.waiter = set(), PollWaiter()
                self._polled |= self._held
                self._held = set()
            self._held -= done
            ended |= done | {p for p in self._polled if not _exists(p[0])}
            self._polled -= ended
            with self._lock:  # a process the caller stopped naming meanwhile is not reported
                ended &= self._wanted
            if ended:
                self._ended |= ended
                self._report({pid for pid, _ in ended})

    def _settle(self, wanted: set[Process]) -> set[Process]:
        """Hand new processes to the waiter, take back those no longer wanted; processes
        already gone are returned as ended."""
        for process in self._held - wanted:
            self.waiter.remove(process)
        self._held &= wanted
        self._polled &= wanted
        self._ended &= wanted
        ended: set[Process] = set()
        for process in wanted - self._held - self._polled - self._ended:
            try:
                held = self.waiter.add(process)
            except ProcessLookupError:
                ended.add(process)
                continue
            except OSError as error:
                log.debug("waiting on pid %d: %s; looking at it instead", process[0], error)
                held = False
            (self._held if held else self._polled).add(process)
        return ended

    def _report(self, pids: set[int]) -> None:
        log.debug("process exits: %s", " ".join(map(str, sorted(pids))))
        try:
            self.on_exit(pids)
        except Exception:  # the watch outlives a failing callback
            log.exception("handling the exit of pids %s failed", sorted(pids))

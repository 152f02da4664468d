"""Asking the operating system about a process: when it started, or that it is gone.

`process_start` is the probe that `state.liveness` is given (a `Probe`: pid → start time in Unix
seconds, or None when there is no such process). It runs at each scrape, and as soon as a watched
process exits (`procwatch.ProcessWatch`); `serve` wraps it in a `CachedProbe`, which the exits it
is told of keep honest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import psutil


def process_start(pid: int) -> float | None:
    """The start time of `pid`, or None if it does not exist (or cannot be seen). A zombie (it
    exited, its parent has not collected it yet) does not exist: it runs nothing any more."""
    try:
        process = psutil.Process(pid)
        with process.oneshot():
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
            return float(process.create_time())
    except (psutil.Error, OSError, ValueError):
        return None


class CachedProbe:
    """A probe that asks once per process: a running process keeps its start time. `forget`
    is called when a process is seen to exit (`procwatch`), so a scrape over many live sessions
    does not look at every one of their processes again; an answer is kept `ttl` seconds at most
    (an exit that was never reported costs that long, never more), and at least half as long,
    spread by pid: sessions started together are not all asked again at the same scrape (200
    processes asked at once cost ~100 ms)."""

    def __init__(
        self,
        probe: Callable[[int], float | None] = process_start,
        *,
        ttl: float = 60.0,
        size: int = 4096,
    ) -> None:
        self._probe, self._ttl, self._size = probe, ttl, size
        self._known: dict[int, tuple[float, float]] = {}  # pid → (start time, kept until)
        self._forgotten = 0  # exits told so far: an answer got across one is not kept

    def __call__(self, pid: int) -> float | None:
        now = time.monotonic()
        known = self._known.get(pid)
        if known is not None and now < known[1]:
            return known[0]
        before = self._forgotten
        started = self._probe(pid)  # another thread may be told of this very exit meanwhile
        if started is None:
            self._known.pop(pid, None)
            return None
        if len(self._known) >= self._size:
            self._known.clear()
        if self._forgotten == before:
            self._known[pid] = (started, now + self._ttl * _spread(pid))
        return started

    def forget(self, pids: Iterable[int]) -> None:
        self._forgotten += 1
        for pid in pids:
            self._known.pop(pid, None)


def _spread(pid: int) -> float:
    """A share of the ttl between 1/2 and 1, scattered over pids (neighbours far apart)."""
    return 0.5 + ((pid * 2654435761) % 4096) / 8192

"""Which operating system the exporter runs on, and which probes answer its questions of it.

Every question the exporter asks of the operating system (which files changed, which process
holds this file or lock, which terminal a process reads, when a process exits, where our own
state lives, how to tell the user) has one small interface in `sources/`, with two answers:
Linux's own (`/proc`, inotify, pidfd) and a portable one (psutil, watchdog's platform observers,
`select.kqueue`, the standard library). The portable answers are the real code path on macOS
and Windows; on Linux, `--platform.probes=portable` selects them too, which is how CI runs them
against real files and real processes.

The choice is made once at start (`choose`, from the flag) and read with `current()`; it is
never made again while the exporter runs. Linux-only calls live only in `sources/`, behind a
`current().native` test (`tests/test_platform.py` walks the code for them).
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from functools import cache

__all__ = ["PROBES", "Platform", "choose", "current", "detect", "load_average", "worker_start"]

PROBES = ("auto", "portable")
"""`--platform.probes`: auto (Linux's own on Linux, the portable ones elsewhere) or portable."""


@dataclass(frozen=True, slots=True)
class Platform:
    """The system the exporter runs on, as its probes see it."""

    system: str
    """`linux`, `darwin` or `windows` (`sys.platform`, folded); another Unix reads as `linux`
    without native probes."""
    native: bool
    """Linux's own probes (`/proc`, inotify, pidfd) are used; False: the portable ones."""
    wsl: bool
    """Linux inside Windows' WSL (agent folders under `/mnt/<drive>` then give no file events
    for writes made from Windows)."""

    @property
    def macos(self) -> bool:
        return self.system == "darwin"

    @property
    def windows(self) -> bool:
        return self.system == "windows"


def _system(name: str) -> str:
    if name.startswith("win") or name == "cygwin":
        return "windows"
    return "darwin" if name == "darwin" else "linux"


@cache
def _wsl() -> bool:
    """Linux under WSL: its kernel says so in its release string."""
    try:
        return "microsoft" in os.uname().release.lower()
    except AttributeError:  # no uname: Windows
        return False


def detect(probes: str = "auto", name: str | None = None) -> Platform:
    """The platform of this process, with the probes `probes` asks for."""
    if probes not in PROBES:
        raise ValueError(f"probes must be one of {', '.join(PROBES)}, not {probes!r}")
    system = _system(sys.platform if name is None else name)
    linux = system == "linux" and sys.platform.startswith("linux")
    return Platform(system, native=linux and probes == "auto", wsl=linux and _wsl())


_chosen: Platform | None = None


def choose(probes: str = "auto") -> Platform:
    """Choose the probes for the rest of this process (at start, from the flag)."""
    global _chosen
    _chosen = detect(probes)
    return _chosen


def current() -> Platform:
    """The platform chosen at start; before any choice, this system with its own probes, or
    the portable ones when `CODING_AGENT_EXPORTER_PLATFORM_PROBES` says so (a library user or
    a test that never parses flags)."""
    global _chosen
    if _chosen is None:
        wanted = os.environ.get("CODING_AGENT_EXPORTER_PLATFORM_PROBES", "auto").strip().lower()
        _chosen = detect(wanted if wanted in PROBES else "auto")
    return _chosen


def worker_start() -> str:
    """How catch-up workers start (a `multiprocessing` start method): `fork` on Linux (native
    probes) while this process has a single thread (`metrics`, `sessions`: instant, and the
    workers share the imported code); else `spawn`: forking a process with threads can copy a
    lock another thread holds (`serve`), macOS's system libraries are not safe across a fork
    (CPython's default there is spawn), Windows has no fork. A fresh interpreter imports what it
    needs, and leaves no server process behind as `forkserver` would."""
    if current().native and threading.active_count() == 1:
        return "fork"
    return "spawn"


def load_average() -> float | None:
    """The machine's 1-minute load average; None where the system keeps none (Windows: psutil
    only makes one up from a thread it starts, reading 0 at first)."""
    if current().native:
        return os.getloadavg()[0]
    if current().windows:
        return None
    import psutil

    return float(psutil.getloadavg()[0])

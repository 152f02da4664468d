"""The terminal a running process reads from: how oh-my-pi's breadcrumbs name a process's session.

oh-my-pi names each breadcrumb after the terminal on its standard input (`/proc/self/fd/0`,
`/dev/pts/3` → `pts-3`; on macOS `/dev/ttys003` → `ttys003`); with no terminal there, after
`$TMUX_PANE` and the like, which are not looked at here (a process's environment is not read).
So the same terminal is found for the process: only it, its name and its start time; nothing
else of the process is read.

On Linux (native probes) the link of its standard input is read, as oh-my-pi reads its own.
Elsewhere (macOS, `--platform.probes=portable`) psutil's `terminal()` names the process's
controlling terminal instead, the one it was started on. The two differ for a process started
on a terminal with a pipe on its input (`echo hi | omp -p`): oh-my-pi writes no breadcrumb for
it, but its terminal may have one from another oh-my-pi run there, which it then seems to show.
Windows has no such terminal names, and oh-my-pi records none there: no process shows a
session there.
"""

from __future__ import annotations

import os

import psutil

from . import platform

PROGRAM = "omp"


def omp_terminal(pid: int) -> tuple[str, float] | None:
    """(terminal, start time) of a running oh-my-pi process; None when `pid` is gone, reads no
    terminal (`omp -p` fed by a pipe), or is another program (a pid reused after a kill)."""
    try:
        process = psutil.Process(pid)
        with process.oneshot():
            if process.status() == psutil.STATUS_ZOMBIE:
                return None
            name, argv, started = process.name(), process.cmdline(), process.create_time()
        terminal = _standard_input(pid) if platform.current().native else _controlling(process)
    except (psutil.Error, OSError, ValueError):
        return None
    programs = {name, *(os.path.basename(arg) for arg in argv[:2])}  # `bun …/bin/omp`
    if terminal is None or not terminal.startswith("/dev/") or PROGRAM not in programs:
        return None
    return breadcrumb_name(terminal), float(started)


def breadcrumb_name(device: str) -> str:
    """A terminal's name as oh-my-pi names its breadcrumb file: `/dev/pts/3` → `pts-3` (Linux),
    `/dev/ttys003` → `ttys003` (macOS)."""
    return device.removeprefix("/dev/").replace("/", "-")


def _standard_input(pid: int) -> str:
    """Linux: what the process's standard input is (a terminal's device path, or a pipe)."""
    return os.readlink(f"/proc/{pid}/fd/0")


def _controlling(process: psutil.Process) -> str | None:
    """The process's controlling terminal (`/dev/ttys003`), None without one. psutil keeps its
    map of terminal devices to names from its first call on; a terminal opened since is missing
    from it, so the map is made again on each call (one listing of `/dev`)."""
    if platform.current().windows or not hasattr(process, "terminal"):
        return None  # psutil has no terminal() on Windows
    from psutil import _psposix

    getattr(_psposix.get_terminal_map, "cache_clear", lambda: None)()  # psutil's memoize
    found: str | None = process.terminal()
    return found


__all__ = ["breadcrumb_name", "omp_terminal"]

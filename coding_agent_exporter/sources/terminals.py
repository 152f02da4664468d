"""The terminal a running process reads from: how oh-my-pi's breadcrumbs name a process's session.

oh-my-pi names each breadcrumb after the terminal on its standard input (`/proc/self/fd/0`,
`/dev/pts/3` → `pts-3`); with no terminal there, after `$TMUX_PANE` and the like, which are not
looked at here (a process's environment is not read). So the same link is read for the
process: only its target, its name and its start time; nothing else of the process is read.
"""

from __future__ import annotations

import os

import psutil

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
        terminal = os.readlink(f"/proc/{pid}/fd/0")
    except (psutil.Error, OSError, ValueError):
        return None
    programs = {name, *(os.path.basename(arg) for arg in argv[:2])}  # `bun …/bin/omp`
    if not terminal.startswith("/dev/") or PROGRAM not in programs:
        return None
    return terminal.removeprefix("/dev/").replace("/", "-"), float(started)


__all__ = ["omp_terminal"]

"""Which running processes hold given files open: liveness for agents that keep no pid index.

Codex writes no live index; a thread is live while a Codex process holds its rollout (or its
thread lock) open. `holders(paths, names)` looks at the open files of processes whose name or
command line mentions one of `names` (so not every process on the machine is inspected) and
returns, per path, the (pid, start time) of each holder. The exporter's own process is never
counted. Call it when a file changes, not on a timer.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from pathlib import Path

import psutil

Holder = tuple[int, float]  # pid, process start time (Unix seconds)


def holders(paths: Collection[Path], names: Iterable[str]) -> dict[Path, list[Holder]]:
    wanted = {os.path.realpath(p): p for p in paths}
    found: dict[Path, list[Holder]] = {}
    words = tuple(names)
    me = os.getpid()
    for process in psutil.process_iter(["pid", "name", "cmdline", "create_time"]):
        info = process.info
        if info["pid"] == me or not _mentions(info, words):
            continue
        try:
            open_files = process.open_files()
        except (psutil.Error, OSError):
            continue  # gone meanwhile, or not ours to look at
        for opened in open_files:
            path = wanted.get(opened.path)
            if path is not None:
                found.setdefault(path, []).append((info["pid"], float(info["create_time"] or 0)))
    return found


def _mentions(info: dict[str, object], words: tuple[str, ...]) -> bool:
    name = str(info.get("name") or "")
    cmdline = info.get("cmdline") or []
    text = " ".join([name, *map(str, cmdline)]) if isinstance(cmdline, list) else name
    return any(word in text for word in words)

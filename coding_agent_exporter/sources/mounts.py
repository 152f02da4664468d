"""Which agent folders sit on a WSL mount of a Windows drive (`/mnt/c/...`), where Linux's file
events and inode numbers cannot be trusted.

Under WSL, a Windows drive is mounted through 9P (WSL 2: type `9p`, `aname=drvfs`) or DrvFs
(WSL 1: type `drvfs`). A write made from Windows there (a Windows-side agent writing its
session files) gives no inotify event inside WSL, so such a folder is rescanned on an interval
(`--platform.wsl-rescan-interval`), and inode numbers over 9P are not stable from one `stat` to
the next, so a file there is known by its size and mtime instead (`reading.identity`).

Only under WSL (`platform.current().wsl`) is `/proc/mounts` read, once per process; elsewhere no
folder is on such a mount. What a mount is, is read from its type alone: a `9p` mount that is
not a Windows drive (a VM's shared folder) is treated the same, since it has the same lacks.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from . import platform

__all__ = [
    "UNSTABLE_TYPES",
    "Mount",
    "mounts",
    "on_windows_drive",
    "parse",
    "rescanned",
    "unstable_devices",
]

UNSTABLE_TYPES = frozenset({"9p", "drvfs"})
"""Filesystem types of WSL's Windows-drive mounts: no events for Windows' writes, no stable
inode numbers."""

Mount = tuple[str, str]
"""(mount point, filesystem type)."""

_ESCAPE = re.compile(r"\\([0-7]{3})")


def parse(text: str) -> list[Mount]:
    """The mounts of a `/proc/mounts` table (a space in a mount point is written `\\040`)."""
    found: list[Mount] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            point = _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[1])
            found.append((point, fields[2]))
    return found


@functools.cache
def mounts() -> tuple[Mount, ...]:
    """This system's mounts, under WSL only (read once); elsewhere none."""
    if not platform.current().wsl:
        return ()
    try:
        with open("/proc/mounts", encoding="utf-8", errors="replace") as f:
            return tuple(parse(f.read()))
    except OSError:
        return ()


def _mount_of(path: str, table: Sequence[Mount]) -> Mount | None:
    """The mount `path` is on: the deepest mount point above it."""
    parts = PurePosixPath(path).parts
    best: Mount | None = None
    depth = -1
    for mount in table:
        above = PurePosixPath(mount[0]).parts
        if parts[: len(above)] == above and len(above) > depth:
            best, depth = mount, len(above)
    return best


def on_windows_drive(paths: Iterable[os.PathLike[str] | str], table: Sequence[Mount]) -> list[str]:
    """Those of `paths` (agent folders) whose mount, by `table`, is a WSL Windows-drive mount;
    a folder that does not exist yet is judged by the mount it would be on."""
    found = []
    for path in paths:
        text = os.path.abspath(os.fspath(path))
        mount = _mount_of(text, table)
        if mount is not None and mount[1] in UNSTABLE_TYPES:
            found.append(text)
    return found


def rescanned(roots: Sequence[Path]) -> list[Path]:
    """Those of `roots` (the agents' watched folders) to rescan on an interval: under WSL, the
    ones on a Windows drive; elsewhere none."""
    if not platform.current().wsl:
        return []
    found = set(on_windows_drive(roots, mounts()))
    return [root for root in roots if os.path.abspath(root) in found]


@functools.cache
def unstable_devices() -> frozenset[int]:
    """The device numbers (`st_dev`) of the mounts whose inode numbers are not stable (read once;
    empty but under WSL)."""
    devices = set()
    for point, kind in mounts():
        if kind in UNSTABLE_TYPES:
            try:
                devices.add(os.stat(point).st_dev)
            except OSError:
                continue
    return frozenset(devices)

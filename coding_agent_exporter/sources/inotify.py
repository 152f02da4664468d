"""The kernel's side of inotify, for when watches run out: can one be had, and which folders
have one. Linux's own probes only (`platform.current().native`); with the portable ones (macOS,
Windows, Linux with `--platform.probes=portable`) every answer is "cannot tell": no watch is
probed (`Probe.why_not` says ENOSYS), `watched_inodes` is None, and `why` names no
`fs.inotify.*` sysctl, which would be no help there."""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import re
from collections.abc import Sequence
from pathlib import Path

from . import platform

__all__ = [
    "NONE_LEFT",
    "Probe",
    "can_watch",
    "folders",
    "inode",
    "under",
    "watched_inodes",
    "why",
]

NONE_LEFT = frozenset({errno.ENOSPC, errno.ENOMEM, errno.EMFILE})
"""Why a watch could not be had that says none is left (watches, memory, instances)."""


class Probe:
    """One inotify watch tried on a private instance, then removed: can one be had now?"""

    _IN_CREATE, _IN_ONLYDIR, _IN_DONT_FOLLOW = 0x100, 0x01000000, 0x02000000

    def __enter__(self) -> Probe:
        self._fd: int | None = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)

    def why_not(self, folder: Path) -> int:
        """0 if ``folder`` could be watched now, else the errno that says why not."""
        libc = _libc() if platform.current().native else None
        if libc is None:
            return errno.ENOSYS
        if self._fd is None:
            fd = int(libc.inotify_init1(os.O_CLOEXEC))
            if fd < 0:
                return ctypes.get_errno()
            self._fd = fd
        mask = self._IN_CREATE | self._IN_ONLYDIR | self._IN_DONT_FOLLOW
        wd = int(libc.inotify_add_watch(self._fd, os.fsencode(folder), mask))
        if wd < 0:
            return ctypes.get_errno()
        libc.inotify_rm_watch(self._fd, wd)
        return 0


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library's inotify calls, if it has them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    names = ("inotify_init1", "inotify_add_watch", "inotify_rm_watch")
    return libc if all(hasattr(libc, name) for name in names) else None


_WATCH = re.compile(r"^inotify wd:[0-9a-f]+ ino:([0-9a-f]+) ", re.MULTILINE)


def watched_inodes() -> set[int] | None:
    """The inode of everything this process holds an inotify watch on, as the kernel lists them
    in /proc/self/fdinfo; None where that cannot be read (not Linux, no inotify instance)."""
    if not platform.current().native:
        return None
    inodes: set[int] = set()
    found = False
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as f:
                text = f.read()
        except OSError:  # closed meanwhile, or the listing's own descriptor
            continue
        found = True
        inodes.update(int(ino, 16) for ino in _WATCH.findall(text))
    return inodes if found else None


def folders(top: str) -> list[tuple[str, int]]:
    """``top`` and every directory under it, symlinks not followed (as watchdog watches them),
    each with its inode as its parent's listing gives it (no stat)."""
    ino = inode(top)
    if ino < 0:
        return []
    found, stack = [(top, ino)], [top]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                more = [(e.path, e.inode()) for e in entries if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        found += more
        stack += [path for path, _ in more]
    return found


def inode(path: str | Path) -> int:
    try:
        return os.stat(path).st_ino
    except OSError:
        return -1


def under(path: Path, top: Path) -> bool:
    return path.is_relative_to(top)


def can_watch(folders: Sequence[Path]) -> bool:
    """Can a watch be had now (on the first of ``folders`` that can be read at all)?"""
    with Probe() as probe:
        for folder in folders:
            why = probe.why_not(folder)
            if why == 0 or why in NONE_LEFT:
                return why == 0
    return True  # none can be read, or gone: no folder for lack of watches


def why(code: int | None) -> str:
    """Why a watch could not be had, with the sysctl that would help (on Linux's own probes)."""
    if not platform.current().native:
        return os.strerror(code) if code else "unknown error"
    if code == errno.EMFILE:
        return "inotify instance limit reached (raise fs.inotify.max_user_instances)"
    if code == errno.ENOSPC:
        return "inotify watch limit reached (raise fs.inotify.max_user_watches)"
    return f"{os.strerror(code) if code else 'unknown error'} (raise fs.inotify.max_user_watches)"

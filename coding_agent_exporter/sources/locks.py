"""Who holds a writer lock, read without touching the lock: liveness from an agent's lock files.

Codex (0.171) takes an exclusive `flock` on `thread-writer-locks/<thread>.lock` while a process
writes that thread, and removes the file at a clean exit; a killed writer leaves the file, but
the kernel dropped its lock (and the file is open in no process any more).

On Linux (native probes) the kernel lists every lock held on the machine in `/proc/locks`, one
line per lock with the holder's pid and the locked file's device and inode, so the holder is
found by listing the lock folder (its entries carry their inodes: no lock file is opened, locked
or even stat-ed) and matching device and inode there: one read of one small file and one folder
listing instead of every Codex process's open files. Elsewhere (macOS, Windows, or
`--platform.probes=portable`), and on a Linux whose `/proc/locks` cannot be read, the lock's
holder is the Codex process that keeps the lock file open (Codex holds it open while it holds
the lock): asked of the open-file scan (`holders.holders`) with the lock files themselves, in the
same scan as the rollouts without a lock. The scan sees only processes named as the agent (a
lock held by another program counts on Linux only). The lock is never taken, on any system.

`by_writer_lock(home, lock_of)` is a `HeldSessions` finder: for each file, the lock `lock_of`
names for it (relative to `home`). Where that lock's folder exists, the agent writes locks, and
the lock alone answers: its holders, or nobody (a stale lock left by a killed writer, or no lock
file: no writer since a clean exit). A file whose lock folder does not exist (an agent too old to
write locks) is asked of `fallback`, the open-file scan, by its own path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable
from pathlib import Path, PurePosixPath

from . import platform
from .holders import Holder, holders
from .processes import process_start

LOCKS = Path("/proc/locks")
FileKey = tuple[int, int, int]  # device major, minor, inode
Finder = Callable[[Collection[Path], Iterable[str]], dict[Path, list[Holder]]]


def lock_table(text: str) -> dict[FileKey, set[int]]:
    """`/proc/locks` → the pids holding a lock on each file. A line is `1: FLOCK ADVISORY WRITE
    <pid> <major>:<minor>:<inode> 0 EOF` (major and minor in hex); a blocked waiter's line
    (`1: -> FLOCK ...`) holds nothing; an odd line is skipped."""
    table: dict[FileKey, set[int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6 or parts[1] == "->":
            continue
        try:
            major, minor, inode = parts[5].split(":")
            key = (int(major, 16), int(minor, 16), int(inode))
            table.setdefault(key, set()).add(int(parts[4]))
        except ValueError:
            continue
    return table


def read_locks() -> dict[FileKey, set[int]] | None:
    """The machine's locks, or None when there is no `/proc/locks` to read."""
    try:
        return lock_table(LOCKS.read_text())
    except OSError:
        return None


def file_key(path: Path) -> FileKey | None:
    """A file's device and inode (`stat`: the file is not opened), None if it is absent. Linux
    only (`os.major`): `/proc/locks` names files so."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return os.major(found.st_dev), os.minor(found.st_dev), found.st_ino


def folder_keys(folder: Path, native: bool = True) -> dict[str, FileKey | None] | None:
    """Every file of a lock folder by name, with its device and inode when `native` (one
    listing, no file opened or stat-ed: the inode comes with the entry), None when the folder
    does not exist."""
    key = file_key(folder) if native else None
    try:
        with os.scandir(folder) as entries:
            if key is None:
                return {e.name: None for e in entries}
            return {e.name: (key[0], key[1], e.inode()) for e in entries}
    except OSError:
        return None


def by_writer_lock(
    home: Path,
    lock_of: Callable[[PurePosixPath], PurePosixPath | None],
    fallback: Finder = holders,
    start: Callable[[int], float | None] = process_start,
) -> Finder:
    prefix = f"{home}{os.sep}"

    def find(paths: Collection[Path], names: Iterable[str]) -> dict[Path, list[Holder]]:
        table = read_locks() if platform.current().native else None
        found: dict[Path, list[Holder]] = {}
        scan: dict[Path, Path] = {}  # a file to ask the open-file scan of → the file it answers
        folders: dict[str, dict[str, FileKey | None] | None] = {}  # lock folder → its files
        for path in paths:
            text = str(path)  # plain strings: pathlib would cost more than the lookup
            lock = lock_of(PurePosixPath(text[len(prefix) :])) if text.startswith(prefix) else None
            folder, _, name = str(lock).rpartition("/")
            if lock is not None and folder not in folders:
                folders[folder] = folder_keys(home / folder, native=table is not None)
            locks = None if lock is None else folders[folder]
            if locks is None:
                scan[path] = path  # no lock to ask: who holds the file itself
            elif name not in locks:
                continue  # no lock file: nobody writes the thread
            elif table is None:
                scan[home / folder / name] = path  # who keeps the lock file open
            else:
                key = locks[name]
                pids = sorted(table.get(key, ())) if key is not None else []
                held = [(pid, at) for pid in pids if (at := start(pid)) is not None]
                if held:
                    found[path] = held
        if scan:
            for asked, held in fallback(list(scan), names).items():
                found[scan[asked]] = held
        return found

    return find

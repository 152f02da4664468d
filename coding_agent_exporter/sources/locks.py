"""Who holds a writer lock, read without touching the lock: liveness from an agent's lock files.

Codex (0.171) takes an exclusive `flock` on `thread-writer-locks/<thread>.lock` while a process
writes that thread, and removes the file at a clean exit; a killed writer leaves the file, but
the kernel dropped its lock. The kernel lists every lock held on the machine in `/proc/locks`
(Linux), one line per lock with the holder's pid and the locked file's device and inode, so the
holder is found by listing the lock folder (its entries carry their inodes: no lock file is
opened, locked or even stat-ed) and matching device and inode there: one read of one small file
and one folder listing instead of every Codex process's open files (`holders.holders`).

`by_writer_lock(home, lock_of)` is a `HeldSessions` finder: for each file, the lock `lock_of`
names for it (relative to `home`). Where that lock's folder exists, the agent writes locks, and
the lock alone answers: its holders, or nobody (a stale lock left by a killed writer, or no lock
file: no writer since a clean exit). A file whose lock folder does not exist (an agent too old to
write locks), or any file when `/proc/locks` cannot be read (not Linux), is asked of `fallback`,
the open-file scan.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable
from pathlib import Path, PurePosixPath

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
    """A file's device and inode (`stat`: the file is not opened), None if it is absent."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return os.major(found.st_dev), os.minor(found.st_dev), found.st_ino


def folder_keys(folder: Path) -> dict[str, FileKey] | None:
    """Every file of a lock folder by name, with its device and inode (one listing, no file
    opened or stat-ed: the inode comes with the entry), None when the folder does not exist."""
    key = file_key(folder)
    if key is None:
        return None
    try:
        with os.scandir(folder) as entries:
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
        table = read_locks()
        found: dict[Path, list[Holder]] = {}
        rest: list[Path] = []
        folders: dict[str, dict[str, FileKey] | None] = {}  # lock folder → its lock files
        for path in paths:
            text = str(path)  # plain strings: pathlib would cost more than the lookup
            lock = lock_of(PurePosixPath(text[len(prefix) :])) if text.startswith(prefix) else None
            folder, _, name = str(lock).rpartition("/")
            if lock is not None and folder not in folders:
                folders[folder] = folder_keys(home / folder)
            locks = None if lock is None else folders[folder]
            if table is None or locks is None:
                rest.append(path)
                continue
            key = locks.get(name)
            pids = sorted(table.get(key, ())) if key is not None else []
            held = [(pid, at) for pid in pids if (at := start(pid)) is not None]
            if held:
                found[path] = held
        if rest:
            found.update(fallback(rest, names))
        return found

    return find

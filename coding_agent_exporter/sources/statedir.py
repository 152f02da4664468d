"""The exporter's own state folder (`--state.dir`): one exporter at a time, private, durable.

- **One exporter per folder**: `hold(folder)` takes a lock on `exporter.lock` in it for as long
  as the process lives (`fcntl.flock` on POSIX, `msvcrt.locking` on Windows: both let go when
  the process ends, however it ends) and writes our pid into it; a second exporter on the same
  folder gets `Held` with the pid the file names. Two exporters on one folder would send every
  span twice and share temporary files and spool numbers.
- **Private**: the folder is made 0700 and every file written in it 0600 (on POSIX; Windows
  keeps a user's local application data to that user): it holds titles, working folders and,
  with `--traces.capture-content`, prompts and tool output.
- **Durable**: `write(path, data)` writes a temporary file beside `path`, flushes it to the disk
  (`fsync`) and only then renames it over `path`, so a crash or a power cut leaves the old file
  or the new one, never an empty one. `clean(folder)` removes the temporary files a kill left
  (run at start, once the lock is held: no other exporter is writing them).

Never used on an agent's folder (the caller passes the state folder alone).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

__all__ = ["LOCK", "Held", "clean", "hold", "private_folder", "write"]

LOCK = "exporter.lock"
TMP = ".tmp"
FOLDER_MODE = 0o700
FILE_MODE = 0o600
_LOCKED_AT = 4096
"""The byte `msvcrt.locking` locks on Windows (beyond the pid written at the start: a locked
byte cannot be read by another process)."""


class Held(Exception):
    """Another exporter holds the state folder."""

    def __init__(self, folder: Path, pid: int | None) -> None:
        self.folder, self.pid = folder, pid
        who = f"process {pid}" if pid is not None else "another process"
        super().__init__(f"{folder} is used by another exporter ({who})")


def private_folder(folder: Path) -> Path:
    """`folder`, made if missing with only the user allowed in (its parents too, as mkdir -p)."""
    folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
    return folder


def hold(folder: Path) -> IO[bytes]:
    """Lock `folder` for this process (kept until the returned file is closed or the process
    ends) and write our pid in the lock file; `Held` when another process holds it."""
    private_folder(folder)
    path = folder / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    lock = os.fdopen(fd, "r+b", buffering=0)
    try:
        _lock(lock)
    except OSError:
        pid = _pid(lock)
        lock.close()
        raise Held(folder, pid) from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n".encode())
    return lock


def _lock(lock: IO[bytes]) -> None:
    if sys.platform == "win32":  # Windows, or a Windows stand-in
        try:
            import msvcrt
        except ImportError:  # no Windows C runtime: only a Windows stand-in on another system
            return

        lock.seek(_LOCKED_AT)  # a byte past the pid: the pid stays readable by the next one
        msvcrt.locking(lock.fileno(), msvcrt.LK_NBLCK, 1)  # never waiting
    else:
        import fcntl

        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def _pid(lock: IO[bytes]) -> int | None:
    """The pid the holder wrote, if it could be read."""
    try:
        lock.seek(0)
        text = lock.read(32)
    except OSError:
        return None
    digits = text.split(b"\n")[0].strip()
    return int(digits) if digits.isdigit() else None


def write(path: Path, data: bytes | memoryview | str) -> None:
    """Replace `path` with `data` whole: a private temporary file beside it, flushed to the
    disk, then renamed over it (OSError when it cannot be: the temporary file is removed)."""
    raw = data.encode() if isinstance(data, str) else data
    prepare(path, lambda out: out.write(raw))
    commit(path)


def prepare(path: Path, fill: Callable[[IO[bytes]], object]) -> None:
    """The private temporary file beside `path` filled by `fill` and flushed to the disk, to be
    renamed over `path` by `commit` (OSError, or what `fill` raised: it is removed)."""
    private_folder(path.parent)
    tmp = temporary(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with os.fdopen(fd, "wb") as out:
            fill(out)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def commit(path: Path) -> None:
    """`prepare`'s file renamed over `path` (OSError when it cannot be: it is removed)."""
    tmp = temporary(path)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _sync_folder(path.parent)


def temporary(path: Path) -> Path:
    """Where `prepare` writes what will replace `path`."""
    return path.with_name(f"{path.name}.{os.getpid()}{TMP}")


def _sync_folder(folder: Path) -> None:
    """The rename itself made durable (POSIX; Windows cannot open a folder for this)."""
    if sys.platform == "win32":
        return
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def clean(folder: Path) -> list[Path]:
    """Remove the temporary files a killed exporter left in `folder` and its sub-folders (the
    caller holds the folder's lock); the ones removed."""
    removed = []
    for found in _temporary(folder):
        with contextlib.suppress(OSError):
            found.unlink()
            removed.append(found)
    return removed


def _temporary(folder: Path) -> list[Path]:
    try:
        return [
            Path(root, name)
            for root, _, names in os.walk(folder)
            for name in names
            if name.endswith(TMP)
        ]
    except OSError:
        return []

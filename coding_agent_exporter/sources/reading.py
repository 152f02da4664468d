"""How an agent's file is opened, read at an offset and known again, on each system.

* Opening: on POSIX, `os.open` read-only, close-on-exec and non-blocking (a FIFO put where a
  journal was expected never blocks the loop). On Windows a file opened the usual way cannot be
  renamed or deleted while it is open, so an agent that saves a file by renaming a new one over
  it would fail while we read: there it is opened with `CreateFileW` sharing read, write AND
  delete (`FILE_SHARE_DELETE`), and the handle turned into a descriptor (`msvcrt`). Its handle
  is not inherited by child processes (no security attributes given).
* Looking before reading (`stat_current`): `os.stat`, except on Windows, where a folder's own
  record of a file's size lags while a writer holds the file open: there the file is opened
  (sharing delete) and its handle asked, which is current (not verified on Windows here).
* Reading at an offset: `os.pread` with Linux's own probes and on macOS; elsewhere (Windows,
  which has no `pread`, and Linux with `--platform.probes=portable`, which is how CI runs
  Windows' way) a seek and a read on the descriptor, which only its one follower uses.
* Knowing a file again: by `(st_dev, st_ino)`, except where inode numbers cannot be trusted: a
  file whose `st_ino` is 0 (some filesystems, some Windows volumes) and a file on a WSL mount of
  a Windows drive (`mounts.unstable_devices`: 9P gives a file a new inode number now and then).
  There the identity is `(0, 0)` and the file is known by its size and mtime alone; a rewrite
  or a truncation is still found by the followers' own checks (the size below the offset, the
  first bytes, the bytes before the offset), only a file replaced by one of the same size, mtime
  and content cannot be told, which is no loss.
"""

from __future__ import annotations

import errno
import os
import stat
from array import array
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any, Protocol, cast

from . import mounts, platform

__all__ = [
    "Pread",
    "changed",
    "identity",
    "open_regular",
    "pread_for",
    "seek_read",
    "stat_current",
    "stat_key",
]

Pread = Callable[[int, int, int], bytes]
"""`(fd, size, offset) -> bytes`: `os.pread`'s signature."""


def open_regular(path: str) -> tuple[int, os.stat_result]:
    """Open for reading (without blocking on a FIFO, and on Windows without keeping the agent
    from renaming or deleting the file); refuse anything but a regular file."""
    fd = _open_windows(path) if platform.current().windows else _open_posix(path)
    try:
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if stat.S_ISREG(st.st_mode):
        return fd, st
    os.close(fd)
    code = errno.EISDIR if stat.S_ISDIR(st.st_mode) else errno.EINVAL
    raise OSError(code, "not a regular file", str(path))


def _stat_by_handle(path: str, api: Win32 | None = None) -> os.stat_result:
    """Windows: the file's `stat` through a handle opened on it, which gives the size and mtime
    of a file still being written (a folder's own record of them lags until the writer closes
    the file: what the listing-based calls may return)."""
    fd = _open_shared(path, api) if api is not None else _open_windows(path)
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)


def stat_current(path: str) -> os.stat_result:
    """`os.stat`, except on Windows, where the size of a file still open for writing is taken
    from a handle (see `_stat_by_handle`): what a follower compares before deciding to read."""
    return _stat_by_handle(path) if platform.current().windows else os.stat(path)


def _open_windows(path: str) -> int:
    """Windows: `_open_shared` through the Win32 API; where that API cannot be loaded (only a
    stand-in on another system), a plain read-only open, without share-delete."""
    try:
        api = _win32()
    except (ImportError, AttributeError, OSError):
        return os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    return _open_shared(path, api)


def _open_posix(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)


# Win32's values (winnt.h, fileapi.h)
GENERIC_READ = 0x80000000
FILE_SHARE_READ, FILE_SHARE_WRITE, FILE_SHARE_DELETE = 0x1, 0x2, 0x4
OPEN_EXISTING = 3
FILE_ATTRIBUTE_NORMAL = 0x80
INVALID_HANDLE_VALUE = -1


class Win32(Protocol):
    """The four calls `_open_shared` makes (`_win32()`'s, or a unit test's fakes)."""

    def CreateFileW(self, *args: Any) -> int | None: ...  # Win32 names
    def CloseHandle(self, handle: int) -> int: ...
    def get_last_error(self) -> int: ...
    def open_osfhandle(self, handle: int, flags: int) -> int: ...


def _open_shared(path: str, api: Win32 | None = None) -> int:
    """Windows only: a read-only descriptor of `path` that leaves the file free to be renamed,
    written and deleted by others."""
    api = api or _win32()
    share = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE
    handle = api.CreateFileW(
        path, GENERIC_READ, share, None, OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, None
    )
    if handle is None or handle in (INVALID_HANDLE_VALUE, 2**64 - 1):
        raise _win_error(api.get_last_error(), path)
    try:
        return api.open_osfhandle(handle, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    except OSError:
        api.CloseHandle(handle)
        raise


def _win32() -> Win32:  # pragma: no cover - Windows
    import ctypes
    import msvcrt
    from ctypes import wintypes

    kernel32: Any = getattr(ctypes, "WinDLL")("kernel32", use_last_error=True)  # noqa: B009
    kernel32.CreateFileW.restype = wintypes.HANDLE
    kernel32.CreateFileW.argtypes = [
        wintypes.LPCWSTR,
        wintypes.DWORD,
        wintypes.DWORD,
        wintypes.LPVOID,
        wintypes.DWORD,
        wintypes.DWORD,
        wintypes.HANDLE,
    ]
    kernel32.CloseHandle.argtypes = [wintypes.HANDLE]
    api: Any = SimpleNamespace(
        CreateFileW=kernel32.CreateFileW,
        CloseHandle=kernel32.CloseHandle,
        get_last_error=getattr(ctypes, "get_last_error"),  # noqa: B009 - Windows only
        open_osfhandle=getattr(msvcrt, "open_osfhandle"),  # noqa: B009 - Windows only
    )
    return cast(Win32, api)


_WIN_ERRNO = {2: errno.ENOENT, 3: errno.ENOENT, 5: errno.EACCES, 32: errno.EACCES}
"""Win32 errors as errno (file not found, path not found, access denied, sharing violation),
so an `OSError` is a `FileNotFoundError` or a `PermissionError` as on POSIX."""


def _win_error(code: int, path: str) -> OSError:
    number = _WIN_ERRNO.get(code, errno.EIO)
    return OSError(number, f"{os.strerror(number)} (Windows error {code})", path)


def seek_read(fd: int, size: int, offset: int) -> bytes:
    """`os.pread` where there is none: a seek, then a read (the descriptor is the caller's
    alone, so nothing moves it in between)."""
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, size)


def pread_for(chosen: platform.Platform) -> Pread:
    """`os.pread` with Linux's own probes and on macOS; a seek and a read otherwise."""
    if (chosen.native or chosen.macos) and hasattr(os, "pread"):
        return os.pread
    return seek_read


def identity(st: os.stat_result) -> tuple[int, int]:
    """`(st_dev, st_ino)`, or `(0, 0)` where inode numbers cannot be trusted (see above)."""
    if st.st_ino == 0 or (st.st_dev in mounts.unstable_devices()):
        return 0, 0
    return st.st_dev, st.st_ino


def stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    """What says a file has not changed: its identity, size and mtime."""
    return (*identity(st), st.st_size, st.st_mtime_ns)


def changed(names: Sequence[str], keys: array[int]) -> list[int]:
    """The indexes `i` of the files of `names` whose `stat_key` is no longer `keys[4 * i : 4 *
    i + 4]`, or that cannot be looked at: what `stat_key` compares, in one loop (a warm start
    looks at every file it read before: 50,000 of them, where a call per file cost as much as
    the `stat`)."""
    look = stat_current if platform.current().windows else os.stat
    unstable = mounts.unstable_devices()
    found = []
    for i, name in enumerate(names):
        try:
            st = look(name)
        except OSError:
            found.append(i)
            continue
        at = 4 * i
        if st.st_mtime_ns != keys[at + 3] or st.st_size != keys[at + 2]:
            found.append(i)
            continue
        device, inode = st.st_dev, st.st_ino
        if inode == 0 or device in unstable:  # as `identity` says
            device = inode = 0
        if device != keys[at] or inode != keys[at + 1]:
            found.append(i)
    return found

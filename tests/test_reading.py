"""coding_agent_exporter.sources.reading: opening, reading at an offset and knowing a file again
on each system. The Windows opener cannot run here: its tests give it a FAKE Win32 (labelled as
such) and prove only the calls it makes and how it turns their failures into errors; that the
real `CreateFileW` lets an agent rename the file while we read is not proven here."""

from __future__ import annotations

import errno
import os
from array import array
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from coding_agent_exporter.sources import reading


class FakeWin32:
    """FAKE: records `CreateFileW`'s arguments; a 'handle' is a real POSIX descriptor."""

    def __init__(self, error: int = 0, osfhandle_fails: bool = False) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.closed: list[int] = []
        self.error, self.osfhandle_fails = error, osfhandle_fails

    def CreateFileW(self, *args: Any) -> int:
        self.calls.append(args)
        if self.error:
            return reading.INVALID_HANDLE_VALUE
        return os.open(args[0], os.O_RDONLY)

    def CloseHandle(self, handle: int) -> int:
        self.closed.append(handle)
        os.close(handle)
        return 1

    def get_last_error(self) -> int:
        return self.error

    def open_osfhandle(self, handle: int, flags: int) -> int:
        if self.osfhandle_fails:
            raise OSError(errno.EMFILE, "too many open files")
        assert flags & os.O_RDONLY == os.O_RDONLY
        return handle


def test_fake_win32_open_shares_read_write_and_delete(tmp_path: Path) -> None:
    """FAKE Win32: the file is asked for read-only, existing, shared for read, write and delete
    (so an agent may rename a new file over it while we read), and the descriptor reads it."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\n')
    fake = FakeWin32()
    fd = reading._open_shared(str(path), fake)
    try:
        assert reading.seek_read(fd, 100, 0) == b'{"a":1}\n'
    finally:
        os.close(fd)
    ((name, access, share, security, disposition, _, template),) = fake.calls
    assert (name, access, security, template) == (str(path), reading.GENERIC_READ, None, None)
    assert share == reading.FILE_SHARE_READ | reading.FILE_SHARE_WRITE | reading.FILE_SHARE_DELETE
    assert disposition == reading.OPEN_EXISTING


@pytest.mark.parametrize(
    ("code", "raised"),
    [(2, FileNotFoundError), (3, FileNotFoundError), (5, PermissionError), (32, PermissionError)],
    ids=["file-not-found", "path-not-found", "access-denied", "sharing-violation"],
)
def test_fake_win32_failures_are_the_errors_posix_gives(
    tmp_path: Path, code: int, raised: type[OSError]
) -> None:
    """FAKE Win32: a failed `CreateFileW` is the `OSError` the engine knows (a gone file is
    forgotten, a denied one counted), naming the file."""
    with pytest.raises(raised) as caught:
        reading._open_shared(str(tmp_path / "gone.jsonl"), FakeWin32(error=code))
    assert caught.value.filename == str(tmp_path / "gone.jsonl")
    assert f"Windows error {code}" in str(caught.value)


def test_fake_win32_handle_closed_when_no_descriptor_can_be_made(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    fake = FakeWin32(osfhandle_fails=True)
    with pytest.raises(OSError):
        reading._open_shared(str(path), fake)
    assert len(fake.closed) == 1


def test_seek_read_is_pread(tmp_path: Path) -> None:
    """Windows' way of reading at an offset gives what `os.pread` gives, at any offset."""
    path = tmp_path / "f"
    path.write_bytes(bytes(range(256)) * 4)
    fd = os.open(path, os.O_RDONLY)
    try:
        for size, offset in [(10, 0), (64, 1000), (100, 1020), (5, 2000)]:
            assert reading.seek_read(fd, size, offset) == os.pread(fd, size, offset)
    finally:
        os.close(fd)


def _stat(**fields: int) -> os.stat_result:
    values = dict(st_dev=7, st_ino=42, st_size=10, st_mtime_ns=5)
    values.update(fields)
    st: Any = SimpleNamespace(**values)
    return st  # type: ignore[no-any-return]


def test_identity_is_the_inode_unless_it_is_zero() -> None:
    assert reading.identity(_stat()) == (7, 42)
    assert reading.identity(_stat(st_ino=0)) == (0, 0)
    assert reading.stat_key(_stat(st_ino=0)) == (0, 0, 10, 5)


def test_open_regular_refuses_a_folder_and_a_fifo(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        reading.open_regular(str(tmp_path))
    os.mkfifo(fifo := tmp_path / "fifo")
    with pytest.raises(OSError) as caught:
        reading.open_regular(str(fifo))  # would block without O_NONBLOCK
    assert caught.value.errno == errno.EINVAL


def test_fake_win32_stat_is_taken_through_a_handle(tmp_path: Path) -> None:
    """FAKE Win32: on Windows a follower's `stat` comes from a handle opened (sharing delete) on
    the file, then closed, so it sees the size of a file still open for writing."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\n')
    fake = FakeWin32()
    st = reading._stat_by_handle(str(path), fake)
    assert st.st_size == 8 and st.st_ino == path.stat().st_ino
    assert len(fake.calls) == 1
    assert reading.stat_current(str(path)) == os.stat(path)  # POSIX: the plain call


def test_changed_finds_what_stat_key_tells_apart(tmp_path: Path) -> None:
    """`changed` looks at many files in one loop and finds exactly those whose `stat_key`
    differs: a new mtime, a new size, another file of the same size and mtime (a new inode),
    a file gone; not one left as it was."""
    names = [str(tmp_path / f"f{i}") for i in range(6)]
    for name in names:
        Path(name).write_text("abc")
        os.utime(name, ns=(10**9, 10**9))
    keys = array("q", [v for name in names for v in reading.stat_key(os.stat(name))])
    os.utime(names[1], ns=(2 * 10**9, 2 * 10**9))
    Path(names[2]).write_text("abcd")
    os.utime(names[2], ns=(10**9, 10**9))
    Path(names[3]).unlink()
    Path(tmp_path / "new").write_text("abc")
    os.replace(tmp_path / "new", names[4])
    os.utime(names[4], ns=(10**9, 10**9))
    assert reading.changed(names, keys) == [1, 2, 3, 4]
    expected = [
        i
        for i, name in enumerate(names)
        if not os.path.exists(name)
        or reading.stat_key(os.stat(name)) != tuple(keys[4 * i : 4 * i + 4])
    ]
    assert expected == [1, 2, 3, 4]

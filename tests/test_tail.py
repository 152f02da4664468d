"""One test per file-system hazard for coding_agent_exporter.sources.tail; every step is an
explicit read(). Each runs three ways, on real files: with Linux's own probes (`os.pread`),
with the portable ones (a seek and a read, Windows' way), and with the portable ones on a
filesystem whose inode numbers are not trusted (as WSL's 9P mounts of Windows drives: the file
known by size and mtime; here the test's own folder is declared such a mount)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from coding_agent_exporter.sources import mounts, platform, reading
from coding_agent_exporter.sources.tail import DocResult, JsonDoc, JsonlTail, Line, TailResult


@pytest.fixture(autouse=True, params=["auto", "portable", "unstable-inodes"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """How files are read and known again (see the module's docstring)."""
    wanted: str = request.param
    probes = "auto" if wanted == "auto" else "portable"
    monkeypatch.setenv("CODING_AGENT_EXPORTER_PLATFORM_PROBES", probes)
    monkeypatch.setattr(platform, "_chosen", platform.detect(probes))
    if wanted == "unstable-inodes":
        device = frozenset({tmp_path.stat().st_dev})
        monkeypatch.setattr(mounts, "unstable_devices", lambda: device)
    return wanted


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


def texts(result: TailResult) -> list[bytes]:
    return [line.text for line in result.lines]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"")
    return path


def test_append(log: Path) -> None:
    tail = JsonlTail(log)
    append(log, b'{"a":1}\n{"b":2}\n')
    first = tail.read()
    assert first.lines == [
        Line(str(log), 0, 1, b'{"a":1}'),
        Line(str(log), 8, 2, b'{"b":2}'),
    ]
    assert (first.reset, first.bytes_read, first.error, first.oversized) == (False, 16, None, 0)
    append(log, b'{"c":3}\n')
    second = tail.read()
    assert second.lines == [Line(str(log), 16, 3, b'{"c":3}')]
    assert second.bytes_read == 8
    assert tail.offset == 24
    assert tail.read() == TailResult([], False, 0, None, 0)


def test_started_near_the_end_reads_the_last_whole_lines_then_appends(log: Path) -> None:
    append(log, b'{"a":1}\n{"b":2}\n{"c":3}\n')  # 24 bytes
    tail = JsonlTail(log)
    assert tail.start_near_end(12) == 12  # from byte 12, inside {"b":2}: its rest skipped
    first = tail.read()
    assert texts(first) == [b'{"c":3}'] and first.lines[0].offset == 16
    assert first.oversized == 0 and not first.reset
    append(log, b'{"d":4}\n')
    assert texts(tail.read()) == [b'{"d":4}']
    assert tail.start_near_end(1) == 0  # once read, it stays where it is
    whole = JsonlTail(log)
    assert whole.start_near_end(1000) == 0 and len(whole.read().lines) == 4


def test_unchanged_file_not_opened(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    append(log, b'{"a":1}\n')
    tail = JsonlTail(log)
    tail.read()

    def no_open(*args: object, **kwargs: object) -> int:
        raise AssertionError("re-opened an unchanged file")

    monkeypatch.setattr(os, "open", no_open)
    assert tail.read() == TailResult([], False, 0, None, 0)


def test_partial_last_line_held_back(log: Path) -> None:
    tail = JsonlTail(log)
    append(log, b'{"a":1}\n{"b":')
    assert texts(tail.read()) == [b'{"a":1}']
    assert tail.offset == 8
    assert tail.read().lines == []
    append(log, b"2}\n")
    assert tail.read().lines == [Line(str(log), 8, 2, b'{"b":2}')]
    assert tail.offset == log.stat().st_size


def test_utf8_split_across_reads(log: Path) -> None:
    text = '{"t":"héllo ✓"}'.encode()
    cut = text.index("✓".encode()) + 1  # inside the three-byte character
    tail = JsonlTail(log)
    append(log, text[:cut])
    assert tail.read().lines == []
    append(log, text[cut:] + b"\n")
    (line,) = tail.read().lines
    assert line.text == text
    assert json.loads(bytes(line.text)) == {"t": "héllo ✓"}


HEADER = b'{"type":"session","id":"' + b"0" * 64 + b'"}'  # longer than the 64-byte head


def test_truncation_resets(log: Path) -> None:
    tail = JsonlTail(log)
    append(log, HEADER + b'\n{"b":2}\n')
    tail.read()
    with log.open("r+b") as f:  # the head bytes stay: only the size tells
        f.truncate(len(HEADER) + 1)
    result = tail.read()
    assert result.reset
    assert result.lines == [Line(str(log), 0, 1, HEADER)]
    append(log, b'{"c":3}\n')
    after = tail.read()
    assert not after.reset
    assert after.lines == [Line(str(log), len(HEADER) + 1, 2, b'{"c":3}')]


def test_rewrite_same_size_detected(log: Path, tmp_path: Path) -> None:
    """Replaced by a file of the same head and size: the inode tells, or, where inodes are not
    trusted, the bytes before the offset do."""
    tail = JsonlTail(log)
    append(log, HEADER + b'\n{"n":1}\n')
    tail.read()
    other = tmp_path / "new.jsonl"
    other.write_bytes(HEADER + b'\n{"n":2}\n')  # same head, same size
    os.replace(other, log)
    assert log.stat().st_size == tail.offset
    result = tail.read()
    assert result.reset
    assert texts(result) == [HEADER, b'{"n":2}']


def test_rewrite_in_place_detected(log: Path) -> None:
    tail = JsonlTail(log)
    append(log, b'{"a":1}\n')
    tail.read()
    before = log.stat()
    with log.open("r+b") as f:  # same inode, same size, other bytes
        f.write(b'{"q":7}\n')
    # A real rewrite comes later than the first write; do not depend on the clock tick.
    os.utime(log, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))
    assert (log.stat().st_ino, log.stat().st_size) == (before.st_ino, before.st_size)
    result = tail.read()
    assert result.reset
    assert result.lines == [Line(str(log), 0, 1, b'{"q":7}')]


def test_rewrite_in_place_longer_with_the_same_head_detected(log: Path) -> None:
    """An agent that saves its whole log again at each step: same inode, same first 64
    bytes, longer than before, other bytes before the old offset."""
    tail = JsonlTail(log)
    append(log, HEADER + b'\n{"usage":627}\n')
    tail.read()
    with log.open("r+b") as f:  # written whole again over the same inode
        f.write(HEADER + b'\n{"usage":50627}\n{"n":3}\n')
    assert log.stat().st_size > tail.offset
    result = tail.read()
    assert result.reset
    assert texts(result) == [HEADER, b'{"usage":50627}', b'{"n":3}']
    append(log, b'{"n":4}\n')  # and an append after it is an append again
    assert (tail.read().reset, texts(tail.read())) == (False, [])


def test_deleted_file_reports_error_then_recreated_resets(log: Path) -> None:
    tail = JsonlTail(log)
    append(log, b'{"a":1}\n{"b":2}\n')
    tail.read()
    log.unlink()
    gone = tail.read()
    assert isinstance(gone.error, FileNotFoundError)
    assert (gone.lines, gone.reset) == ([], False)
    assert tail.offset == 16  # state kept
    log.write_bytes(b'{"new":1}\n{"new":2}\n')  # longer than before: not a truncation
    back = tail.read()
    assert back.reset
    assert back.error is None
    assert texts(back) == [b'{"new":1}', b'{"new":2}']


def test_new_file(tmp_path: Path) -> None:
    path = tmp_path / "later.jsonl"
    tail = JsonlTail(path)
    assert isinstance(tail.read().error, FileNotFoundError)
    path.write_bytes(b'{"a":1}\n')
    result = tail.read()
    assert (result.error, result.reset) == (None, False)
    assert result.lines == [Line(str(path), 0, 1, b'{"a":1}')]


def test_permission_denied(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    append(log, b'{"a":1}\n')
    tail = JsonlTail(log)
    log.chmod(0)
    if _can_open(log):  # root ignores the mode bits: deny this one path instead
        real_open = os.open

        def deny(path: str | os.PathLike[str], flags: int, mode: int = 0o777) -> int:
            if os.fspath(path) == str(log):
                raise PermissionError(errno.EACCES, "Permission denied", str(log))
            return real_open(path, flags, mode)

        monkeypatch.setattr(os, "open", deny)
    denied = tail.read()
    assert isinstance(denied.error, PermissionError)
    assert (denied.lines, denied.reset, tail.offset) == ([], False, 0)
    log.chmod(0o644)
    monkeypatch.undo()
    retried = tail.read()
    assert retried.error is None
    assert texts(retried) == [b'{"a":1}']


def _can_open(path: Path) -> bool:
    try:
        os.close(os.open(path, os.O_RDONLY))
    except PermissionError:
        return False
    return True


def test_crlf(log: Path) -> None:
    append(log, b'{"a":1}\r\n{"b":2}\r')
    tail = JsonlTail(log)
    assert texts(tail.read()) == [b'{"a":1}']
    append(log, b"\n")
    assert tail.read().lines == [Line(str(log), 9, 2, b'{"b":2}')]


def test_oversized_line_skipped_bounded(log: Path) -> None:
    tail = JsonlTail(log, max_line_bytes=100)
    append(log, b'{"a":1}\n' + b"x" * 250_000)  # longer than max and than one read chunk
    first = tail.read()
    assert texts(first) == [b'{"a":1}']
    assert (first.oversized, first.oversized_line) == (1, 2)
    assert tail.offset == log.stat().st_size  # discarded, not held back in memory
    for _ in range(2):
        append(log, b"y" * 50)
        still = tail.read()
        assert (still.lines, still.oversized) == ([], 0)  # counted once
        assert still.bytes_read == 50  # the discarded bytes are not read again
        assert tail.offset == log.stat().st_size
    append(log, b'yyy\n{"b":2}\n' + b"z" * 101 + b"\n")
    last = tail.read()
    assert [(line.number, line.text) for line in last.lines] == [(3, b'{"b":2}')]
    assert (last.oversized, last.oversized_line) == (1, 4)


def test_empty_lines_counted(log: Path) -> None:
    append(log, b'\n{"a":1}\n\r\n\n{"b":2}\n')
    lines = JsonlTail(log).read().lines
    assert [(line.number, line.offset, line.text) for line in lines] == [
        (2, 1, b'{"a":1}'),
        (5, 12, b'{"b":2}'),
    ]


@pytest.fixture
def doc(tmp_path: Path) -> Path:
    return tmp_path / "1234.json"


def test_doc_unchanged_not_reread(doc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc.write_text('{"pid": 1234}')
    reader = JsonDoc(doc)
    assert reader.read() == DocResult(True, {"pid": 1234}, None, 13)

    def no_open(*args: object, **kwargs: object) -> int:
        raise AssertionError("re-opened an unchanged document")

    monkeypatch.setattr(os, "open", no_open)
    assert reader.read() == DocResult(False, None, None, 0)  # told once, not kept


def test_doc_half_written_then_completed(doc: Path) -> None:
    doc.write_text('{"pid": 12')
    reader = JsonDoc(doc)
    assert reader.read() == DocResult(True, None, "invalid_json", 10)
    assert reader.read().changed is False
    doc.write_text('{"pid": 1234}')
    assert reader.read() == DocResult(True, {"pid": 1234}, None, 13)


def test_doc_too_large(doc: Path) -> None:
    doc.write_text(json.dumps({"x": "a" * 200}))
    result = JsonDoc(doc, max_bytes=100).read()
    assert (result.changed, result.data, result.error) == (True, None, "too_large")


def test_doc_missing(doc: Path) -> None:
    reader = JsonDoc(doc)
    assert reader.read() == DocResult(True, None, "missing", 0)
    assert reader.read() == DocResult(False, None, "missing", 0)
    doc.write_text("[1, 2]")
    assert reader.read() == DocResult(True, [1, 2], None, 6)
    doc.unlink()
    assert reader.read() == DocResult(True, None, "missing", 0)


def test_each_way_reads_and_knows_files_as_it_says(way: str, log: Path) -> None:
    """The three ways differ where they claim to: how bytes are read at an offset, and whether
    a file is known by its inode."""
    pread = reading.pread_for(platform.current())
    assert (pread is os.pread) == (way == "auto")
    assert (reading.identity(log.stat()) == (0, 0)) == (way == "unstable-inodes")

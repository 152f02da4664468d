"""File-system faults under a followed home: a journal replaced by a directory or a symlink,
permission denied and later granted, a session folder renamed, the home created after start.
Nothing counted is lost or counted twice, and each fault costs at most the file it hits."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .test_engine import A, engine_on, journal, journal_path, totals

pytestmark = pytest.mark.usefixtures("probes")  # Linux's own probes, then the portable ones

__all__ = ["journal"]  # the fixture, used by name

WHOLE = (2, 1, 1)  # messages, turns, tool calls of the recorded journal


def test_a_journal_replaced_by_a_directory_and_back(tmp_path: Path, journal: list[bytes]) -> None:
    path = journal_path(tmp_path)
    path.write_bytes(b"".join(journal))
    engine = engine_on(tmp_path)
    engine.catch_up()
    path.unlink()
    path.mkdir()
    engine.changed([path])
    assert totals(engine) == WHOLE
    path.rmdir()
    path.write_bytes(b"".join(journal))
    engine.changed([path])
    assert totals(engine) == WHOLE


def test_a_journal_replaced_by_a_symlink(tmp_path: Path, journal: list[bytes]) -> None:
    path = journal_path(tmp_path)
    path.write_bytes(b"".join(journal))
    engine = engine_on(tmp_path)
    engine.catch_up()
    elsewhere = tmp_path / "elsewhere.jsonl"
    shutil.copy(path, elsewhere)
    path.unlink()
    path.symlink_to(elsewhere)
    engine.changed([path])
    assert totals(engine) == WHOLE
    with elsewhere.open("ab") as f:  # the file it points at grows: read on
        f.write(journal[0])
    engine.changed([path])
    assert totals(engine) == WHOLE
    path.unlink()
    path.symlink_to(tmp_path / "nowhere.jsonl")  # dangling: gone, not an error that repeats
    engine.changed([path])
    assert totals(engine) == WHOLE


def test_permission_denied_then_granted(
    tmp_path: Path, journal: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = journal_path(tmp_path)
    path.write_bytes(b"".join(journal[:3]))
    real_open = os.open
    denied = True

    def guarded(name: str | os.PathLike[str], *args: object, **kw: object) -> int:
        if denied and Path(name) == path:
            raise PermissionError(13, "Permission denied", str(name))
        return real_open(name, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", guarded)
    engine = engine_on(tmp_path)
    engine.catch_up()
    assert engine.stats.parse_errors[(A, "read_error")] == 1
    assert totals(engine) == (0, 0, 0)
    with path.open("ab") as f:
        f.write(b"".join(journal[3:]))
    denied = False  # chmod fixed by the user: the next change reads it all
    engine.changed([path])
    assert totals(engine) == WHOLE


def test_a_session_folder_renamed(tmp_path: Path, journal: list[bytes]) -> None:
    path = journal_path(tmp_path)
    path.write_bytes(b"".join(journal))
    engine = engine_on(tmp_path)
    engine.catch_up()
    moved = path.parent.with_name("-home-user-work-renamed")
    path.parent.rename(moved)
    engine.changed([path, moved / path.name])
    assert totals(engine) == WHOLE  # the same records under a new path count once


def test_a_home_created_after_start(tmp_path: Path, journal: list[bytes]) -> None:
    home = tmp_path / "not-yet"
    engine = engine_on(home)
    engine.catch_up()
    assert totals(engine) == (0, 0, 0)
    path = journal_path(home)
    path.write_bytes(b"".join(journal))
    engine.rescan()  # what the serve loop does when the watcher reports the new root
    assert totals(engine) == WHOLE


def test_an_oversized_line_is_logged_with_its_number_and_the_limit(
    tmp_path: Path, journal: list[bytes], caplog: pytest.LogCaptureFixture
) -> None:
    path = journal_path(tmp_path)
    huge = b'{"type":"attachment","x":"' + b"x" * (16 * 2**20) + b'"}\n'
    path.write_bytes(journal[0] + huge + b"".join(journal[1:]))
    engine = engine_on(tmp_path)
    with caplog.at_level("WARNING"):
        engine.catch_up()
    assert totals(engine) == WHOLE  # the line costs itself, nothing else
    (said,) = [r.getMessage() for r in caplog.records if "oversized_line" in r.getMessage()]
    assert str(path) in said and "line 2 is longer than the limit of 16 MiB: skipped" in said


def test_the_walk_tells_which_journals_are_links(
    tmp_path: Path, journal: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catch-up knows a link for one from the walk's listing, no `lstat` per file: asked of a
    journal here, `os.path.islink` fails, and a second way to the journal is still read once."""
    path = journal_path(tmp_path)
    path.write_bytes(b"".join(journal))
    path.with_name("a-link.jsonl").symlink_to(path)  # read first: the journal is the alias
    islink = os.path.islink

    def unasked(name: str | os.PathLike[str]) -> bool:
        assert not os.fspath(name).endswith(".jsonl"), f"the walk knew: {name}"
        return islink(name)

    monkeypatch.setattr(os.path, "islink", unasked)
    engine = engine_on(tmp_path)
    engine.catch_up()
    assert totals(engine) == WHOLE and engine.stats.files[A] == 1

"""One test per hazard of `sources.docfolder.DocFolder`: a folder of event documents (one file
per event, OpenHands' way) followed as one stream; every step an explicit read() on real files."""

from __future__ import annotations

import json
from pathlib import Path

from coding_agent_exporter.sources import docfolder
from coding_agent_exporter.sources.docfolder import DocFolder


def event(folder: Path, n: int, body: str | None = None) -> Path:
    path = folder / f"event-{n:05d}-abc{n}.json"
    path.write_text(json.dumps({"n": n}) if body is None else body)
    return path


def numbers(docs: list[object]) -> list[int]:
    return [d["n"] for d in docs if isinstance(d, dict)]


def test_new_documents_once_each_in_name_order(tmp_path: Path) -> None:
    for n in (2, 0, 1):
        event(tmp_path, n)
    follower = DocFolder(str(tmp_path))
    assert numbers(follower.read().docs) == [0, 1, 2]
    assert follower.read().docs == []  # unchanged: nothing listed again
    event(tmp_path, 3)
    assert numbers(follower.read().docs) == [3]


def test_unchanged_folder_is_settled_and_other_files_are_left_alone(tmp_path: Path) -> None:
    event(tmp_path, 0)
    (tmp_path / "notes.txt").write_text("not an event")
    (tmp_path / ".event-00001-x.json.tmp").write_text("{")
    follower = DocFolder(str(tmp_path))
    assert numbers(follower.read().docs) == [0]
    assert follower.settled() is not None


def test_half_written_last_document_is_held_back_then_delivered(tmp_path: Path) -> None:
    event(tmp_path, 0)
    torn = event(tmp_path, 1, '{"n": 1, "te')
    follower = DocFolder(str(tmp_path))
    assert numbers(follower.read().docs) == [0]
    assert follower.settled() is None  # the folder's key does not change with the file's content
    torn.write_text(json.dumps({"n": 1, "text": "whole"}))
    assert numbers(follower.read().docs) == [1]
    assert follower.settled() is not None


def test_a_document_never_completed_is_skipped_and_counted(tmp_path: Path) -> None:
    event(tmp_path, 0, "{torn")
    event(tmp_path, 1)
    result = DocFolder(str(tmp_path)).read()
    assert numbers(result.docs) == [1]
    assert result.invalid == 1


def test_too_large_document_is_skipped_and_counted(tmp_path: Path) -> None:
    event(tmp_path, 0, json.dumps({"n": 0, "pad": "x" * 200}))
    event(tmp_path, 1)
    result = DocFolder(str(tmp_path), max_bytes=100).read()
    assert numbers(result.docs) == [1]
    assert result.too_large == 1


def test_long_folder_comes_in_pieces(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(docfolder, "BATCH", 4)
    for n in range(10):
        event(tmp_path, n)
    follower = DocFolder(str(tmp_path))
    got, more = [], True
    while more:
        result = follower.read()
        got += numbers(result.docs)
        more = result.more
    assert got == list(range(10))


def test_replaced_folder_starts_again_with_reset(tmp_path: Path) -> None:
    folder = tmp_path / "events"
    folder.mkdir()
    event(folder, 0)
    follower = DocFolder(str(folder))
    assert numbers(follower.read().docs) == [0]
    folder.rename(tmp_path / "old")
    folder.mkdir()
    event(folder, 0)
    result = follower.read()
    assert result.reset and numbers(result.docs) == [0]


def test_missing_folder_is_an_error(tmp_path: Path) -> None:
    assert DocFolder(str(tmp_path / "gone")).read().error == "missing"

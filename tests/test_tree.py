"""`sources.tree.walk`: the folders `os.walk` gives, in its order, and which files are links."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coding_agent_exporter.sources.tree import walk


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """top/{a, la → a, dangling → nowhere, sub/{b, deep/c}, lsub → sub, other/d}"""
    top = tmp_path / "top"
    (top / "sub" / "deep").mkdir(parents=True)
    (top / "other").mkdir()
    for name in ("a", "sub/b", "sub/deep/c", "other/d"):
        (top / name).write_text(name)
    (top / "la").symlink_to(top / "a")
    (top / "dangling").symlink_to(tmp_path / "nowhere")
    (top / "lsub").symlink_to(top / "sub", target_is_directory=True)
    return top


def failing(error: OSError) -> None:
    raise AssertionError(f"no error expected: {error}")


def test_the_folders_of_os_walk_in_its_order(tree: Path) -> None:
    walked = [(f.path, f.folders, f.files) for f in walk(tree, failing)]
    assert walked == list(os.walk(tree))  # lsub listed among the folders, not entered


def test_links_to_files_are_told_and_links_to_folders_not_entered(tree: Path) -> None:
    found = {Path(f.path).relative_to(tree).as_posix(): f for f in walk(tree, failing)}
    assert set(found) == {".", "sub", "sub/deep", "other"}  # not lsub
    top = found["."]
    assert sorted(top.folders) == ["lsub", "other", "sub"]
    assert sorted(top.files) == ["a", "dangling", "la"]
    assert top.links == {"la", "dangling"}
    assert all(not f.links for name, f in found.items() if name != ".")


def test_folders_removed_from_the_list_are_not_walked(tree: Path) -> None:
    seen = []
    for folder in walk(tree, failing):
        seen.append(Path(folder.path).name)
        folder.folders[:] = [name for name in folder.folders if name != "sub"]
    assert sorted(seen) == ["other", "top"]


def test_an_unreadable_folder_is_reported_and_left_out(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scandir = os.scandir
    denied = str(tree / "sub")

    def guarded(path: str) -> object:
        if path == denied:  # as chmod 000 does (not to root, who runs these tests in CI)
            raise PermissionError(13, "Permission denied", path)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", guarded)
    errors: list[OSError] = []
    seen = [Path(f.path).name for f in walk(tree, errors.append)]
    assert sorted(seen) == ["other", "top"]  # nor sub/deep, below it
    assert [(type(e), e.filename) for e in errors] == [(PermissionError, denied)]


def test_a_listing_that_fails_midway_leaves_the_folder_out(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scandir = os.scandir

    class Failing:
        """The listing of `other`: an I/O error after its first entry."""

        def __init__(self, path: str) -> None:
            self.entries, self.given = scandir(path), 0

        def __enter__(self) -> Failing:
            return self

        def __exit__(self, *_: object) -> None:
            self.entries.close()

        def __next__(self) -> os.DirEntry[str]:
            if self.given:
                raise OSError(5, "Input/output error", "other")
            self.given += 1
            return next(self.entries)

    monkeypatch.setattr(os, "scandir", lambda p: Failing(p) if p.endswith("other") else scandir(p))
    errors: list[OSError] = []
    seen = sorted(Path(f.path).name for f in walk(tree, errors.append))
    assert seen == ["deep", "sub", "top"] and [e.errno for e in errors] == [5]


def test_a_folder_gone_midway_is_reported_and_the_walk_goes_on(tree: Path) -> None:
    errors: list[OSError] = []
    seen = []
    for folder in walk(tree, errors.append):
        seen.append(folder)
        if folder.path == str(tree):
            for name in folder.folders:
                if name == "sub":
                    (tree / "sub" / "deep" / "c").unlink()
                    (tree / "sub" / "deep").rmdir()
                    (tree / "sub" / "b").unlink()
                    (tree / "sub").rmdir()
    assert sorted(Path(f.path).name for f in seen) == ["other", "top"]
    assert [(type(e), e.filename) for e in errors] == [(FileNotFoundError, str(tree / "sub"))]


def test_what_on_error_raises_ends_the_walk(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        list(walk(tmp_path / "absent", reraised))


def reraised(error: OSError) -> None:
    raise error


def test_a_regular_file_costs_one_look_at_its_entry(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Most of a history is regular files: each is told by one question to its entry (what the
    listing said of it), not by two (`is_dir`, then `is_symlink`)."""
    scandir = os.scandir
    asked: dict[str, list[str]] = {}

    class Entry:
        def __init__(self, entry: os.DirEntry[str]) -> None:
            self.entry, self.name = entry, entry.name

        def __getattr__(self, method: str) -> object:
            asked.setdefault(self.name, []).append(method)
            return getattr(self.entry, method)

    class Listing:
        def __init__(self, path: str) -> None:
            self.entries = scandir(path)

        def __enter__(self) -> Listing:
            return self

        def __exit__(self, *_: object) -> None:
            self.entries.close()

        def __next__(self) -> Entry:
            return Entry(next(self.entries))

    monkeypatch.setattr(os, "scandir", Listing)
    found = {name for folder in walk(tree, failing) for name in folder.files}
    assert found == {"a", "la", "dangling", "b", "c", "d"}
    assert all(asked[name] == ["is_file"] for name in ("a", "b", "c", "d"))
    assert asked["la"][-1] == asked["lsub"][-1] == "is_symlink"

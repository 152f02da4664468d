"""A folder tree walked as `os.walk` walks it (top down, a link to a folder listed but not
entered, the folders in their listing's order), telling besides which files are links.

Both list a folder with `os.scandir`, whose entries know their kind from the listing itself
(`DirEntry.is_symlink()` costs no system call on Linux, macOS or Windows, save on the rare file
system that does not say a file's kind). `os.walk` drops what the entries knew: it calls
`os.path.islink` (an `lstat`) for each folder before entering it, and a caller that must know
which files are links calls it again for each file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field


@dataclass(slots=True)
class Folder:
    path: str
    """The folder: `top`, or its parent folder's path joined with its name (`os.path.join`)."""
    folders: list[str]
    """Its folders' names: a caller that removes some (in place) leaves them unwalked."""
    files: list[str]
    """Its other entries' names: files, and links to files (or to nothing)."""
    links: set[str] = field(default_factory=set)
    """The names among `files` that are symbolic links (usually none)."""


def walk(top: str | os.PathLike[str], on_error: Callable[[OSError], None]) -> Iterator[Folder]:
    """Each folder under `top` (itself first), each before its folders. A folder that cannot be
    listed, or whose listing fails midway, is handed to `on_error` and left out; what
    `on_error` raises ends the walk."""
    stack = [os.fspath(top)]
    while stack:
        listed = _listed(stack.pop(), on_error)
        if listed is None:
            continue
        folder, linked = listed
        yield folder
        for name in reversed(folder.folders):  # popped in their order
            if name not in linked:
                stack.append(os.path.join(folder.path, name))


def _listed(path: str, on_error: Callable[[OSError], None]) -> tuple[Folder, set[str]] | None:
    """The folder at `path`, with the names of its folders that are links (never entered)."""
    found = Folder(path, [], [])
    linked: set[str] = set()
    try:
        entries = os.scandir(path)
    except OSError as error:
        on_error(error)
        return None
    with entries:
        while True:
            try:
                entry = next(entries)
            except StopIteration:
                break
            except OSError as error:
                on_error(error)
                return None
            try:  # most entries: one look at what the listing said, no link, no folder
                regular = entry.is_file(follow_symlinks=False)
            except OSError:
                regular = False
            if regular:
                found.files.append(entry.name)
            elif _is(entry.is_dir):
                found.folders.append(entry.name)
                if _is(entry.is_symlink):
                    linked.add(entry.name)
            else:
                found.files.append(entry.name)
                if _is(entry.is_symlink):
                    found.links.add(entry.name)
    return found, linked


def _is(test: Callable[[], bool]) -> bool:
    """What an entry says of itself; False where it must ask the system, which fails (as
    `os.walk` takes an entry it cannot look at for a file, and a path it cannot `lstat` for no
    link)."""
    try:
        return test()
    except OSError:
        return False

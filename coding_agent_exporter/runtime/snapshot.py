"""What a catch-up built (`Snapshot`), and the form a cache writes it in: the per-file and
per-session parts, the bulk of a large history, as flat runs of plain values (`Run`), with no
tuple, record or token count of their own in the file or in the pickler's memo, rebuilt on
loading; a session's files that sleep by their index among the sleeping files."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any

from ..events import Usage
from ..state.asleep import Asleep
from ..state.attributes import assign, attributes
from ..state.session import ZERO, Session
from .dormant import Sleepers

__all__ = ["Files", "Index", "Run", "Snapshot", "flattened", "rebuilt"]


@dataclass(slots=True)
class Snapshot:
    """What a catch-up built. `files`: per file the index of its source, its follower (`tail`,
    which knows the file's path) and its reader. `dormant`: the files asleep (`dormant`)."""

    harnesses: list[Any]
    held: list[dict[str, Any] | None]
    files: list[tuple[int, Any, Any]]
    state: dict[str, Any]
    stats: dict[str, Any]
    dormant: Sleepers = field(default_factory=Sleepers)


class Run(list[Any]):
    """A run of records as it is read back: their values one after another, `width` each."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width

    def rows(self) -> Iterator[list[Any]]:
        width = self.width
        if width < 1 or len(self) % width:
            raise ValueError(f"a run of {len(self)} values is not made of rows of {width}")
        return (self[i : i + width] for i in range(0, len(self), width))


class Flat:
    """A run of records as it is written: `values` gives `width` plain values per record."""

    def __init__(self, width: int, values: Iterator[Any]) -> None:
        self.width, self.values = width, values

    def __reduce__(self) -> tuple[Any, ...]:
        return Run, (self.width,), None, self.values


_SESSION = tuple(f.name for f in dataclasses.fields(Session))
_TOKENS = _SESSION.index("tokens")
_FILES = _SESSION[_TOKENS + 1 :].index("files")  # among the fields after the tokens
_USAGE = tuple(f.name for f in dataclasses.fields(Usage))
_SESSION_WIDTH = len(_SESSION) - 1 + len(_USAGE)


def _session_values(sessions: Iterable[Session], index: Index) -> Iterator[Any]:
    """Each session's fields, its token counts in place of its `Usage`, its files by `index`."""
    before, after = attrgetter(*_SESSION[:_TOKENS]), attrgetter(*_SESSION[_TOKENS + 1 :])
    tokens = attrgetter(*_USAGE)
    for session in sessions:
        yield from before(session)
        yield from tokens(session.tokens)
        rest = after(session)
        yield from rest[:_FILES]
        yield _indexed(rest[_FILES], index)
        yield from rest[_FILES + 1 :]


Files = str | int | tuple[str | int, ...] | None
"""A session's files as the cache writes them: a sleeping file by its index among the
sleeping files, whose names the cache holds already (a path of ~120 bytes each written, read
and hashed twice, where an index is a few bytes); any other by its name."""


Index = Mapping[str, object]
"""A sleeping file's index among the sleeping files by its name (any other value: not asleep)."""


def _indexed(files: str | tuple[str, ...] | None, index: Index) -> Files:
    if isinstance(files, str):
        return _index(files, index)
    return None if files is None else tuple(_index(name, index) for name in files)


def _index(name: str, index: Index) -> str | int:
    found = index.get(name)
    return found if type(found) is int else name


def _named(files: Files, names: list[str]) -> str | tuple[str, ...] | None:
    """What `_indexed` wrote, as names: the very strings naming the sleeping files."""
    if isinstance(files, int):
        return names[files]
    if isinstance(files, tuple):
        return tuple(names[f] if isinstance(f, int) else f for f in files)
    return files


def flattened(snapshot: Snapshot, index: Index | None = None) -> Snapshot:
    """The snapshot with its files and the state's sessions as flat runs (`Run`), without
    its sleeping files (written before it, by `Sleepers.write`), the sessions' files by their
    index among those (`Files`)."""
    files = Flat(3, (value for row in snapshot.files for value in row))
    state = dict(snapshot.state)
    if index is None:  # the engine's own table spares a dict of every name at the peak
        index = {name: i for i, name in enumerate(snapshot.dormant.names)}
    sessions = state.get("awake")
    if isinstance(sessions, dict) and all(
        type(s) is Session and key == (s.agent, s.session_id) for key, s in sessions.items()
    ):
        state["awake"] = Flat(_SESSION_WIDTH, _session_values(sessions.values(), index))
    asleep = state.get("asleep")
    if isinstance(asleep, Asleep):
        state["asleep"] = written = Asleep()  # the same columns but its files
        assign(written, {**attributes(asleep), "files": [_indexed(f, index) for f in asleep.files]})
    return replace(snapshot, files=files, state=state, dormant=None)  # type: ignore[arg-type]


def rebuilt(loaded: object, dormant: Sleepers) -> Snapshot:
    """The snapshot `flattened` wrote, its runs made records again, with `dormant`."""
    if not isinstance(loaded, Snapshot):
        raise TypeError(f"not a snapshot: {type(loaded).__name__}")
    if not isinstance(loaded.files, Run) or loaded.files.width != 3:
        raise TypeError("the files are not a run of 3")
    loaded.files = [(row[0], row[1], row[2]) for row in loaded.files.rows()]
    if loaded.dormant is not None:
        raise TypeError("sleeping files in the pickle")
    loaded.dormant = dormant
    sessions = loaded.state.get("awake")
    if isinstance(sessions, Run):
        if sessions.width != _SESSION_WIDTH:
            raise TypeError(f"sessions are not a run of {_SESSION_WIDTH}")
        made = (_session(row, dormant.names) for row in sessions.rows())
        loaded.state["awake"] = {(s.agent, s.session_id): s for s in made}
    asleep = loaded.state.get("asleep")
    if isinstance(asleep, Asleep):
        asleep.files = [_named(files, dormant.names) for files in asleep.files]
    return loaded


def _session(row: list[Any], names: list[str]) -> Session:
    """The session of `row`, its files named again before it is made (a `Session` compiled by
    mypyc, `setup.py`, checks the type of each field: it takes no index for its files)."""
    end = _TOKENS + len(_USAGE)
    counts, after = row[_TOKENS:end], row[end:]
    after[_FILES] = _named(after[_FILES], names)
    args = [*row[:_TOKENS], Usage(*counts) if any(counts) else ZERO, *after]
    return Session(*args)

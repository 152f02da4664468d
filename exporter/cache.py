"""What the last catch-up read, kept in the exporter's own state folder for a fast restart.

Reading years of history again at each start costs seconds per hundred megabytes; the result of
reading it does not change unless the files do. After a catch-up the engine hands over what it
built: the folded state, the health counters, and for every file its follower (offset, identity,
size, modification time, first bytes) and its reader (a reader remembers what the file told it
so far). The next start loads that and looks at every file again: an unchanged file costs one
`stat`, a file that grew is read on from where the last run stopped, a truncated or replaced one
is read again from its start, a new one is read, a gone one is forgotten: exactly what a running
exporter does when a file changes, so a restart ends with the same counters as a run that never
stopped.

The cache is one file per set of agent homes, written atomically (a temporary file, then a
rename) and never inside an agent's folder. It is used only by the code that wrote it: its
header names a digest of the exporter's own source, so an upgrade or an edit starts from the
files again. A cache that cannot be read or does not unpickle is discarded (logged once) and
rebuilt from the files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import os
import pickle
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
FORMAT = 1
MAGIC = b"coding-agent-exporter catch-up cache\n"


@dataclass(slots=True)
class Snapshot:
    """What a catch-up built. `files`: per file the index of its source, its follower (`tail`,
    which knows the file's path) and its reader."""

    harnesses: list[Any]
    held: list[dict[str, Any] | None]
    files: list[tuple[int, Any, Any]]
    state: dict[str, Any]
    stats: dict[str, Any]


@cache
def code_digest() -> str:
    """A digest of the exporter's own source and the Python running it."""
    digest = hashlib.sha256(f"{FORMAT} {sys.version}".encode())
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


class Cache:
    """The cache file of one set of agent homes, `sources` as (agent, home) pairs."""

    def __init__(self, folder: Path, sources: Sequence[tuple[str, Path]]) -> None:
        self.homes = [home.resolve() for _, home in sources]
        key = "\n".join(f"{agent}\t{home}" for agent, home in sources)
        name = hashlib.sha256(key.encode()).hexdigest()[:16]
        self.path = folder.expanduser().resolve() / f"catch-up-{name}.cache"
        self.header = f"{code_digest()}\n{key}\n".encode()

    def load(self) -> Snapshot | None:
        """The snapshot written by this very code for these homes, or None."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as error:
            log.warning("catch-up cache %s unreadable (%s): reading all files", self.path, error)
            return None
        head = MAGIC + self.header
        if not data.startswith(head):
            log.info("catch-up cache %s is from other code or homes: reading all files", self.path)
            return None
        try:
            snapshot = pickle.loads(memoryview(data)[len(head) :])
            if not isinstance(snapshot, Snapshot):
                raise TypeError(f"not a snapshot: {type(snapshot).__name__}")
        except Exception as error:  # any damage: start from the files
            log.warning("catch-up cache %s damaged (%r): reading all files", self.path, error)
            return None
        return snapshot

    def dumps(self, snapshot: Snapshot) -> bytes | None:
        """The file's content for `snapshot`; None (logged) when something will not pickle."""
        try:
            out = io.BytesIO()
            out.write(MAGIC + self.header)
            _Pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(snapshot)
            return out.getvalue()
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as error:
            log.warning("catch-up cache not written: %r", error)
            return None

    def write(self, body: bytes) -> bool:
        """Write the cache atomically; False (logged) when it cannot be written."""
        inside = next((h for h in self.homes if self.path.is_relative_to(h)), None)
        if inside is not None:
            log.warning("catch-up cache not written: %s lies in agent folder %s", self.path, inside)
            return False
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(body)
            os.replace(tmp, self.path)
        except OSError as error:
            log.warning("catch-up cache %s not written: %s", self.path, error)
            tmp.unlink(missing_ok=True)
            return False
        return True


class _Pickler(pickle.Pickler):
    """Dataclasses with slots unpickle through a `__setstate__` that lists their fields again for
    every object (a third of a restart's time); those that can are rebuilt by their `__init__`."""

    def reducer_override(self, obj: Any) -> Any:
        fields = _positional(type(obj))
        if fields is None:
            return NotImplemented
        return type(obj), tuple(getattr(obj, name) for name in fields)


_POSITIONAL: dict[type, tuple[str, ...] | None] = {}


def _positional(cls: type) -> tuple[str, ...] | None:
    """The fields of a dataclass with slots whose `__init__` takes them all, in order, and does
    nothing else; None for any other class."""
    if cls in _POSITIONAL:
        return _POSITIONAL[cls]
    found: tuple[str, ...] | None = None
    if dataclasses.is_dataclass(cls) and hasattr(cls, "__slots__"):
        fields = dataclasses.fields(cls)
        plain = all(f.init and not f.kw_only for f in fields)
        if plain and not hasattr(cls, "__post_init__"):
            found = tuple(f.name for f in fields)
    _POSITIONAL[cls] = found
    return found

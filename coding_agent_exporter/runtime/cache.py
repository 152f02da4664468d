"""What the last catch-up read, kept in the exporter's own state folder for a fast restart.

Reading years of history again at each start costs seconds per hundred megabytes; the result of
reading it does not change unless the files do. After a catch-up the engine hands over what it
built: the folded state, the health counters, and for every file its follower (offset, identity,
size, modification time, first bytes) and its reader (a reader remembers what the file told it
so far); the files asleep (`dormant`: those of Claude Code and Codex once read) as the columns
of `Sleepers`. The next start loads that and looks at every file again: an unchanged file costs one
`stat`, a file that grew is read on from where the last run stopped, a truncated or replaced one
is read again from its start, a new one is read, a gone one is forgotten: exactly what a running
exporter does when a file changes, so a restart ends with the same counters as a run that never
stopped.

The cache is one file per set of agent homes, written atomically (a temporary file, then a
rename) and never inside an agent's folder. It is used only by code that reads as the code that
wrote it: its header names a digest of the source of every module the reading imports (`READING`
and what they import, found in their source), so an upgrade or an edit of a reader, the state or
the reading loop starts from the files again, while one of only what is published (metrics,
traces, the web pages, the command line) keeps the cache. A cache that cannot be read or does
not unpickle is discarded (logged once) and rebuilt from the files.

Writing it must not cost more memory than what it saves: a pickler keeps every object it wrote
(and every temporary it made to write one) until the end, so the per-file and per-session parts,
the bulk of a large history, are written as flat runs of plain values (`snapshot`): no tuple,
record or token count of their own in the file or in the pickler's memo, rebuilt on loading; the
sleeping files' columns are written before the pickle, straight from their arrays. The file
is compressed as it is written (zstd: a fifth to a tenth of the size, for less time than the
pickling).
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import inspect
import io
import logging
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import zstandard

from ..sources import statedir
from ..state.session import Session
from .digest import code_digest, file_digest
from .dormant import Sleepers
from .snapshot import Index, Snapshot, flattened, rebuilt

__all__ = ["MAGIC", "Cache", "Refused", "Snapshot"]
log = logging.getLogger(__name__)
FORMAT = 4
MAGIC = b"coding-agent-exporter catch-up cache\n"


class Cache:
    """The cache file of one set of agent homes, `sources` as (agent, home) pairs."""

    def __init__(
        self,
        folder: Path,
        sources: Sequence[tuple[str, Path]],
        priced_by: str | None = None,
        read: Sequence[Path] | None = None,
        keep: bool = False,
    ) -> None:
        """`priced_by`: the user's pricing file, if any (its content is part of the key: the
        state holds what the responses cost); `read`: the folders and files the agents' files
        are read from (by default their homes), where the cache is never written. A home that
        is a folder of other things (`$OPENCODE_DB` in the user's home) is not all read.
        `keep`: what is loaded lives as long as the process (a command's own start), so it is
        left out of the cycle collector's passes (`gc.freeze`) from the moment it is loaded."""
        self.homes = [path.resolve() for path in read or [home for _, home in sources]]
        key = "\n".join(f"{agent}\t{home}" for agent, home in sources)
        name = hashlib.sha256(key.encode()).hexdigest()[:16]
        self.path = folder.expanduser().resolve() / f"catch-up-{name}.cache"
        pricing = file_digest(Path(priced_by)) if priced_by else "-"
        self.header = f"{FORMAT} {code_digest()}\n{pricing}\n{key}\n".encode()
        self.failure: str | None = None  # why the last `load` found no usable cache, if it failed
        self.keep = keep

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
        collecting = gc.isenabled()
        gc.disable()  # a cycle pass over what is loaded so far, at each few hundred objects more
        try:
            snapshot = _decoded(memoryview(data)[len(head) :])
        except Refused as error:  # crafted, or written by a foreign program: never run
            self.failure = "cache_refused"
            log.warning("catch-up cache %s refused (%s): reading all files", self.path, error)
            return None
        except Exception as error:  # any damage: start from the files
            self.failure = "cache_damaged"
            log.warning("catch-up cache %s damaged (%r): reading all files", self.path, error)
            return None
        finally:
            if collecting:
                gc.enable()
        if self.keep and collecting:
            gc.freeze()
        return snapshot

    def dumps(self, snapshot: Snapshot, index: Index | None = None) -> memoryview | None:
        """The file's content for `snapshot` (a view of the buffer it was written to); None
        (logged) when something will not pickle. `index`: each sleeping file's index among
        `snapshot.dormant`'s by its name (the engine's own table, whose other values are not
        ints), else made here."""
        out = io.BytesIO()
        try:
            self._dump(out, snapshot, index)
        except _UNPICKLABLE as error:
            log.warning("catch-up cache not written: %r", error)
            return None
        return out.getbuffer()

    def prepare(self, snapshot: Snapshot, index: Index | None = None) -> bool:
        """`dumps` written as it is made to a private file beside the cache (its content is
        never held in memory, at the peak of a catch-up), which `commit` puts in place; False
        (logged) when it cannot be."""
        if not self._writable():
            return False
        try:
            statedir.prepare(self.path, lambda out: self._dump(out, snapshot, index))
        except (*_UNPICKLABLE, OSError) as error:
            log.warning("catch-up cache %s not written: %r", self.path, error)
            return False
        return True

    def commit(self) -> bool:
        """What `prepare` wrote, in the cache's place; False (logged) when it cannot be."""
        try:
            statedir.commit(self.path)
        except OSError as error:
            log.warning("catch-up cache %s not written: %s", self.path, error)
            return False
        return True

    def write(self, body: bytes | memoryview) -> bool:
        """Write the cache atomically; False (logged) when it cannot be written."""
        if not self._writable():
            return False
        try:
            statedir.write(self.path, body)
        except OSError as error:
            log.warning("catch-up cache %s not written: %s", self.path, error)
            return False
        return True

    def _writable(self) -> bool:
        inside = next((h for h in self.homes if self.path.is_relative_to(h)), None)
        if inside is not None:
            log.warning("catch-up cache not written: %s lies in agent folder %s", self.path, inside)
        return inside is None

    def _dump(self, out: IO[bytes], snapshot: Snapshot, index: Index | None) -> None:
        out.write(MAGIC + self.header)
        body = zstandard.ZstdCompressor(level=1).stream_writer(out, closefd=False)
        snapshot.dormant.write(body)
        _Pickler(body, protocol=pickle.HIGHEST_PROTOCOL).dump(flattened(snapshot, index))
        body.flush(zstandard.FLUSH_FRAME)


def _decoded(body: memoryview) -> Snapshot:
    """The snapshot in a cache file's `body` (after its header)."""
    stream = zstandard.ZstdDecompressor().stream_reader(body)
    dormant = Sleepers.read(stream)
    return rebuilt(_Unpickler(stream).load(), dormant)


_UNPICKLABLE = (pickle.PicklingError, TypeError, AttributeError, RecursionError)
"""What pickling a snapshot raises when something in it will not pickle."""


class Refused(pickle.UnpicklingError):
    """The cache names something that is not the exporter's own data."""


_READ_MODULES = ("coding_agent_exporter.harnesses.", "coding_agent_exporter.state.")
"""Packages whose classes (and module-level functions: a harness's parsers) a cache may name."""
_READ_NAMES = {
    "coding_agent_exporter.events": None,
    "coding_agent_exporter.sources.tail": None,
    "coding_agent_exporter.sources.docfolder": {"DocFolder"},
    "coding_agent_exporter.sources.sqlite_tail": None,
    "coding_agent_exporter.sources.terminals": {"omp_terminal"},
    "coding_agent_exporter.runtime.snapshot": {"Snapshot", "Run"},
    "builtins": {
        "float",
        "int",
        "str",
        "bytes",
        "bool",
        "set",
        "frozenset",
        "dict",
        "list",
        "tuple",
        "complex",
        "getattr",
    },
    "collections": {"Counter", "OrderedDict", "defaultdict", "deque"},
    "pathlib": {"Path", "PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath"},
}
"""Other modules, and the names of each a cache may use (None: its classes and functions)."""


class _Unpickler(pickle.Unpickler):
    """Loads only what the exporter itself writes: its own classes, the harnesses' functions
    they refer to, and the plain types of `builtins`, `collections` and `pathlib`; anything
    else (`os.system`, `subprocess.Popen`, `builtins.eval`, ...) raises `Refused` before it
    is looked up. `getattr` is the bound method of a harness (`Grok.mark_child`), checked."""

    def find_class(self, module: str, name: str) -> Any:
        if "." in name or name.startswith("__"):
            raise Refused(f"{module}.{name}")
        allowed = _READ_NAMES.get(module, ...)
        if allowed is ... and not module.startswith(_READ_MODULES):
            raise Refused(f"{module}.{name}")
        if allowed is not None and allowed is not ... and name not in allowed:
            raise Refused(f"{module}.{name}")
        if (module, name) == ("builtins", "getattr"):
            return _method
        found = super().find_class(module, name)
        if (
            module.startswith("coding_agent_exporter.")
            and getattr(found, "__module__", "") != module
        ):
            raise Refused(f"{module}.{name}: imported there, not its own")
        if not isinstance(found, type) and not callable(found):
            raise Refused(f"{module}.{name}")
        return found


def _method(obj: object, name: str) -> Any:
    """`getattr` as a cache may use it: a public method of one of the exporter's objects."""
    if name.startswith("_") or not type(obj).__module__.startswith("coding_agent_exporter."):
        raise Refused(f"getattr({type(obj).__name__}, {name!r})")
    found = getattr(obj, name)
    if not inspect.ismethod(found):
        raise Refused(f"getattr({type(obj).__name__}, {name!r}): not a method")
    return found


class _Pickler(pickle.Pickler):
    """Dataclasses with slots unpickle through a `__setstate__` that lists their fields again for
    every object (a third of a restart's time), and one compiled by mypyc (`setup.py`) cannot be
    made without its `__init__`: those that can are rebuilt by their `__init__`."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is Session:  # only in the state's run of sessions, never on its own
            raise pickle.PicklingError("a session outside the state's sessions")
        fields = _positional(type(obj))
        if fields is None:
            return NotImplemented
        return type(obj), tuple(getattr(obj, name) for name in fields)


_POSITIONAL: dict[type, tuple[str, ...] | None] = {}


def _positional(cls: type) -> tuple[str, ...] | None:
    """The fields of a dataclass whose `__init__` takes them all, in order, and does nothing
    else; None for any other class."""
    if cls in _POSITIONAL:
        return _POSITIONAL[cls]
    found: tuple[str, ...] | None = None
    if dataclasses.is_dataclass(cls):
        fields = dataclasses.fields(cls)
        plain = all(f.init and not f.kw_only for f in fields)
        if plain and not hasattr(cls, "__post_init__"):
            found = tuple(f.name for f in fields)
    _POSITIONAL[cls] = found
    return found

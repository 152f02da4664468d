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
the bulk of a large history, are written as flat runs of plain values (`_Run`): no tuple, record
or token count of their own in the file or in the pickler's memo, rebuilt on loading; the
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
import os
import pickle
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from importlib.machinery import EXTENSION_SUFFIXES
from operator import attrgetter
from pathlib import Path
from typing import IO, Any

import zstandard

from ..events import Usage
from ..sources import statedir
from ..state.asleep import Asleep
from ..state.attributes import assign, attributes
from ..state.session import ZERO, Session
from .dormant import Sleepers

log = logging.getLogger(__name__)
FORMAT = 4
MAGIC = b"coding-agent-exporter catch-up cache\n"


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


PACKAGE = Path(__file__).resolve().parents[1]
"""The whole package (this module is in `coding_agent_exporter/runtime/`)."""
READING = (
    "runtime/engine.py",
    "runtime/config.py",
    "runtime/cache.py",
    "sources/processes.py",
    "sources/terminals.py",
)
"""What decides what a catch-up builds: the reading loop (and through its imports the sources,
harnesses, events and state), the configuration that makes the harnesses and what they may ask
of the machine (`Probes`), this cache."""
DATA = ("state/prices.json",)
"""Data the reading uses: the prices the state's costs come from."""
VERSION_ONLY = "__init__.py"
"""The package's own module holds only its version: a new version that reads the same keeps
the cache."""


@cache
def code_digest() -> str:
    """A digest of the source of the modules that decide what a catch-up builds (`reading`),
    of which of them run compiled (`compiled`), and of the Python running it."""
    digest = hashlib.sha256(f"{FORMAT} {sys.version}".encode())
    built = compiled(PACKAGE)
    for name in [*sorted(reading()), *DATA]:
        digest.update(name.encode() + (b" compiled" if name in built else b"") + b"\0")
        digest.update((PACKAGE / name).read_bytes() + b"\0")
    return digest.hexdigest()


def _file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def reading() -> set[str]:
    """`READING` and every module of the package they import, anywhere in their source, with
    the packages holding them (an import runs their `__init__.py`): paths relative to the
    package, less `VERSION_ONLY`. The imports are found by their shape in the text (a start
    must not parse 50 modules); one written in a docstring only adds a module."""
    found: set[str] = set()
    todo = list(READING)
    while todo:
        name = todo.pop()
        if name in found or name == VERSION_ONLY:
            continue
        found.add(name)
        folders = name.split("/")[:-1]
        todo += ["/".join([*folders[:i], "__init__.py"]) for i in range(1, len(folders) + 1)]
        todo += _imported(name, (PACKAGE / name).read_text())
    return found


_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_IMPORT = re.compile(r"^[ \t]*import[ \t]+coding_agent_exporter\.([\w.]+)", re.M)


def _imported(name: str, source: str) -> list[str]:
    """The package's modules that module `name`, of source `source`, imports."""
    found = [m for w in _IMPORT.findall(source) if (m := _module(w.split("."))) is not None]
    for dots, module, names in _FROM.findall(source):
        if dots:
            base = [*name.split("/")[: -len(dots)], *module.split(".")]
        elif module.split(".")[0] == "coding_agent_exporter":
            base = module.split(".")[1:]
        else:
            continue
        base = [part for part in base if part]
        listed = re.sub(r"#[^\n]*|[()]", "", names).split(",")
        wanted = [[*base, n.split()[0]] for n in listed if n.strip()] + [base]
        found += [m for w in wanted if (m := _module(w)) is not None]
    return found


def _module(parts: list[str]) -> str | None:
    """The source file of module `parts` (a package: its `__init__.py`), if the package has it."""
    stem = "/".join(parts)
    for candidate in (f"{stem}.py", f"{stem}/__init__.py" if stem else "__init__.py"):
        if candidate in _sources(PACKAGE):
            return candidate
    return None


@cache
def _sources(package: Path) -> frozenset[str]:
    """Every module of `package`, relative to it (one walk, not a `stat` per imported name)."""
    return frozenset(name for name in _files(package) if name.endswith(".py"))


@cache
def compiled(package: Path) -> frozenset[str]:
    """The modules of `package` that Python imports from a C extension beside their source (a
    wheel compiled by mypyc: `setup.py`), as their sources' paths. A compiled class may pickle
    otherwise than its pure self: a cache is read only by the build that wrote it."""
    found = set()
    for name in _files(package):
        suffix = next((s for s in EXTENSION_SUFFIXES if name.endswith(s)), None)
        if suffix is not None:
            found.add(name.removesuffix(suffix) + ".py")
    return frozenset(found)


@cache
def _files(package: Path) -> frozenset[str]:
    return frozenset(
        os.path.relpath(os.path.join(folder, name), package)
        for folder, _, names in os.walk(package)
        for name in names
    )


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
        pricing = _file_digest(Path(priced_by)) if priced_by else "-"
        self.header = f"{code_digest()}\n{pricing}\n{key}\n".encode()
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
        _Pickler(body, protocol=pickle.HIGHEST_PROTOCOL).dump(_flattened(snapshot, index))
        body.flush(zstandard.FLUSH_FRAME)


def _decoded(body: memoryview) -> Snapshot:
    """The snapshot in a cache file's `body` (after its header)."""
    stream = zstandard.ZstdDecompressor().stream_reader(body)
    dormant = Sleepers.read(stream)
    return _rebuilt(_Unpickler(stream).load(), dormant)


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
    "coding_agent_exporter.runtime.cache": {"Snapshot", "_Run"},
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


class _Run(list[Any]):
    """A run of records as it is read back: their values one after another, `width` each."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width

    def rows(self) -> Iterator[list[Any]]:
        width = self.width
        if width < 1 or len(self) % width:
            raise ValueError(f"a run of {len(self)} values is not made of rows of {width}")
        return (self[i : i + width] for i in range(0, len(self), width))


class _Flat:
    """A run of records as it is written: `values` gives `width` plain values per record."""

    def __init__(self, width: int, values: Iterator[Any]) -> None:
        self.width, self.values = width, values

    def __reduce__(self) -> tuple[Any, ...]:
        return _Run, (self.width,), None, self.values


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


def _flattened(snapshot: Snapshot, index: Index | None = None) -> Snapshot:
    """The snapshot with its files and the state's sessions as flat runs (`_Run`), without
    its sleeping files (written before it, by `Sleepers.write`), the sessions' files by their
    index among those (`Files`)."""
    files = _Flat(3, (value for row in snapshot.files for value in row))
    state = dict(snapshot.state)
    if index is None:  # the engine's own table spares a dict of every name at the peak
        index = {name: i for i, name in enumerate(snapshot.dormant.names)}
    sessions = state.get("awake")
    if isinstance(sessions, dict) and all(
        type(s) is Session and key == (s.agent, s.session_id) for key, s in sessions.items()
    ):
        state["awake"] = _Flat(_SESSION_WIDTH, _session_values(sessions.values(), index))
    asleep = state.get("asleep")
    if isinstance(asleep, Asleep):
        state["asleep"] = written = Asleep()  # the same columns but its files
        assign(written, {**attributes(asleep), "files": [_indexed(f, index) for f in asleep.files]})
    return replace(snapshot, files=files, state=state, dormant=None)  # type: ignore[arg-type]


def _rebuilt(loaded: object, dormant: Sleepers) -> Snapshot:
    """The snapshot `_flattened` wrote, its runs made records again, with `dormant`."""
    if not isinstance(loaded, Snapshot):
        raise TypeError(f"not a snapshot: {type(loaded).__name__}")
    if not isinstance(loaded.files, _Run) or loaded.files.width != 3:
        raise TypeError("the files are not a run of 3")
    loaded.files = [(row[0], row[1], row[2]) for row in loaded.files.rows()]
    if loaded.dormant is not None:
        raise TypeError("sleeping files in the pickle")
    loaded.dormant = dormant
    sessions = loaded.state.get("awake")
    if isinstance(sessions, _Run):
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

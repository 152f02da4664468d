"""The reading loop's work: find an agent's files, read what is new in them, fold it into state.

Each enabled harness has a home folder. `catch_up()` walks the harness's `watch_dirs` once; after
that, `changed(paths)` is called with what the watcher reported, so nothing is polled. A JSONL
file is read from its last offset (`tail.JsonlTail`), a compressed one read whole when it changed
(`tail.ZstdJsonl`; skipped while its uncompressed twin exists: the plain file wins), a JSON
document re-read when it changed (`tail.JsonDoc`), a SQLite database's followed table queried for
new rows when the database or its `-wal` changed (`sqlite_tail.SqliteTail`; a change reported for
the `-wal` or `-journal` is a change of the database). A harness may name a single file among its
`watch_dirs` (an index at the home's top). A locked database costs nothing: it is counted
(`locked`) and read again at its next change. A bad line, an unreadable file or a reader that
raises costs that record or that file: it is counted in `Stats` and logged once per file and
reason, and reading goes on. A catch-up of a large history may hand whole files to worker
processes (`pool`); what they found is folded here, in the same order as reading them here.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..events import Event, LiveIndexRead, LiveIndexRemoved, TitleSet
from ..harnesses import FileKind, FileReader, Harness, TableReader
from ..sources.decode import loads
from ..sources.docfolder import DocFolder
from ..sources.holders import HeldSessions, holders
from ..sources.locks import by_writer_lock
from ..sources.sqlite_tail import SqliteTail
from ..sources.tail import DOC_LIMIT, JsonDoc, JsonlTail, TailResult, ZstdJsonl
from ..state.health import Stats
from ..state.state import State
from . import pool
from .cache import Cache, Snapshot
from .dormant import Sleepers, settled
from .pool import Ahead, Fed, Job, feed, feed_lines

log = logging.getLogger(__name__)
Found = Path | str
"""A file the engine found: a `Path`, or the name of one it already follows (no `Path` made)."""
_INDEX_EVENTS = (LiveIndexRead, LiveIndexRemoved, TitleSet)
"""What indexes beside the sessions tell (live processes, titles): no work of the session's."""
_SEP = os.sep
"""How the walk joins a folder and a file name: the system's own separator, so a walked name is
the `str` of the `Path` a watcher reports for the same file (on Windows `\\`: with `/`, a
watcher's path never matched the walk's and a second follower read the file again)."""
_COMPANIONS = ("-wal", "-journal")
Tail = JsonlTail | ZstdJsonl | JsonDoc | SqliteTail | DocFolder
"""Files SQLite writes beside a database on each commit (not `-shm`: readers touch it too)."""


@dataclass(slots=True)
class Source:
    harness: Harness
    home: Path
    held: HeldSessions | None = None  # for agents without a live index

    def __post_init__(self) -> None:
        if self.held is None and self.harness.holder_names:
            lock_of = getattr(self.harness, "writer_lock", None)  # optional: see harnesses.base
            find = holders if lock_of is None else by_writer_lock(self.home, lock_of)
            self.held = HeldSessions(self.harness.holder_names, find)


@dataclass(slots=True)
class _File:
    source: Source
    path: str
    """Its key in `Engine._files`: the follower's own string, never a `Path` per file kept."""
    reader: FileReader
    tail: Tail

    @property
    def rel(self) -> PurePosixPath:
        return _rel(Path(self.path), self.source)


class Engine:
    def __init__(
        self,
        sources: Iterable[Source],
        state: State,
        stats: Stats | None = None,
        cache: Cache | None = None,
        workers: int | None = None,
    ) -> None:
        self.sources = list(sources)
        self.state = state
        self.stats = stats or Stats()
        self.cache = cache
        self.workers = pool.workers_wanted() if workers is None else workers
        self.min_bytes = pool.MIN_BYTES  # of unread files, for the workers to start (`pool`)
        self.steal = True  # the main process reads a batch no worker has begun (`pool.Ahead`)
        self._files: dict[str, _File | int] = {}  # by path; asleep: its index in `_sleepers`
        self._sleepers = Sleepers()
        self._index = {id(source): i for i, source in enumerate(self.sources)}  # source → i
        self._walked: dict[str, PurePosixPath] = {}  # found, not read yet: its path in the home
        self._logged: set[tuple[str, str]] = set()
        self.retry: set[str] = set()
        """Files and folders that could not be opened for want of file descriptors (the process
        or the system at its limit): handed back by `retried`, not left until they change."""
        self.unfinished: dict[str, None] = {}
        """Files read in part since the catch-up (a large file is read one `tail.READ_LIMIT`
        piece per turn of the loop, `changed` reading the others in between), oldest first."""
        self._sliced = False  # `changed` at work: a large file is left unfinished, not read whole
        self._links: dict[str, str] = {}  # a linked file's real path → the link followed for it
        self._pending: memoryview | None = None  # the cache's new content, not written yet
        self._cached = False  # reading on from the cache's result: a replaced file is stale
        self.rewritten: list[str] = []
        """Files followed since the catch-up that were written again from their start (truncated,
        replaced, saved whole again): what they said before is in the state (`app.App`)."""

    @property
    def roots(self) -> list[Path]:
        return [s.home / d for s in self.sources for d in s.harness.watch_dirs]

    @property
    def content(self) -> bool:
        """Spans show what records say (prompts, replies, tool arguments and results)."""
        return self.state.observer.capture

    def catch_up(self, progress: Callable[[int, int], None] | None = None) -> None:
        """Read every file once, in an order that depends on the paths alone (shallow ones
        first, then by name), never on modification times, which a copy or a checkout reshuffles:
        the same files always give the same counts, sessions and spans.

        With a cache, the last catch-up's result is loaded first, then only what changed since
        is read (`cache`); the result is taken for the cache before any process is probed."""
        snapshot = self._load()
        new: list[tuple[Found, Source]] = []
        seen: set[str] = set()  # the files the cache's result read that are still there
        for i, source in enumerate(self.sources):
            new += self._scan(source, _known(snapshot, i), seen)
        fresh = self._restore(snapshot)
        read_before = sum(self.stats.bytes_read.values())
        try:
            found = new + self._stirred(seen) if fresh is not None else new
            found.sort(key=_order)
            self._read_all(found, progress, cached=fresh is not None)
        except _Stale as why:  # counters are rebuilt from today's files: read them all
            log.info("catch-up cache: %s since it was written: reading all files", why)
            assert fresh is not None  # only reading on from the cache's result raises
            files = self._files.items()
            found = new + [(n, self._source_of_entry(e)) for n, e in files if n in seen]
            found.sort(key=_order)
            self._install(fresh)
            fresh = None
            self._read_all(found, progress, cached=False)
        del found, new, seen  # a name per file: gone before the cache is written (its peak)
        self._walked.clear()
        if fresh is None:  # read in the order of the paths: the latest sessions by their times
            with self.state.lock:  # (a warm start's come ranked, with what was read since)
                self.state.rank_recent()
        unchanged = sum(self.stats.bytes_read.values()) == read_before
        if self.cache is not None and not (fresh is not None and unchanged):
            with self.state.lock:  # what the files say, before the processes and the clock
                self._pending = self.cache.dumps(self._snapshot())
        for source in self.sources:
            if source.held is not None:
                self._apply(source, source.held.probe(list(source.held.sessions)))

    def _read_all(
        self,
        found: list[tuple[Found, Source]],
        progress: Callable[[int, int], None] | None,
        *,
        cached: bool,
    ) -> None:
        self._cached = cached
        sleep = self.cache is not None  # its pickle is made for the cache anyway: made now
        try:
            with self._ahead(found) as ahead:
                for done, (path, source) in enumerate(found, 1):
                    taken = ahead.take(done) if ahead is not None else None
                    if taken is None:
                        self._read(path, source)
                    else:
                        self._adopt(path, source, taken)
                    if sleep:
                        self._sleep(_name(path))
                    if progress is not None:
                        progress(done, len(found))
        finally:
            self._cached = False

    def _ahead(self, found: list[tuple[Found, Source]]) -> Ahead | nullcontext[None]:
        """Workers for the files not read yet whose readers keep to their own file, if there
        is enough of them to be worth it (`pool`)."""
        if self.workers < 1:
            return nullcontext()
        jobs, sizes = [], []
        content = self.content
        for position, (name, source) in enumerate(found, 1):
            if _name(name) in self._files or source.harness.name not in pool.PARALLEL:
                continue
            path = _name(name)
            rel = self._walked.get(path) or _rel(path, source)
            kind = self._kind(path, source, rel)
            size = _size(path)  # a link: read here, where it is known for one (`_aliased`)
            if kind in ("jsonl", "zstd") and size is not None:
                job = Job(position, source.harness, rel, Path(path), kind == "zstd", content)
                jobs.append(job)
                sizes.append(size)
        if sum(sizes) < self.min_bytes:
            return nullcontext()
        return Ahead(pool.batches(jobs, sizes), self.workers, steal=self.steal)

    def changed(self, paths: Iterable[Path]) -> None:
        """Handle what the watcher reported: files read again, folders scanned for new files."""
        touched: dict[int, tuple[Source, list[Path]]] = {}
        self._sliced = True
        try:
            self._changed(paths, touched)
        finally:
            self._sliced = False
        for source, changed in touched.values():
            if source.held is not None:
                self._apply(source, source.held.probe(changed))

    def _changed(
        self, paths: Iterable[Path], touched: dict[int, tuple[Source, list[Path]]]
    ) -> None:
        for reported in paths:
            source = self._source_of(reported)
            if source is None:
                continue
            path = _folder_of(_database_of(reported, source), source)
            if str(path) in self._files or not path.is_dir():
                self._read(path, source)
                touched.setdefault(id(source), (source, []))[1].append(path)
            else:
                for found, _ in self._walk(source, path):
                    self._read(found, source)
                    touched.setdefault(id(source), (source, []))[1].append(Path(found))

    def read_files(self, names: Iterable[str], last_bytes: int | None = None) -> int:
        """Read these files of the homes once, in the catch-up's order (a session's files,
        replayed: `replay`), a JSONL file longer than `last_bytes` from the first line of its
        last `last_bytes`; one outside every home is left alone. The bytes left out."""
        found = [(name, source) for name in names if (source := self._source_of(Path(name)))]
        skipped = 0
        for name, source in sorted(found, key=_order):
            if last_bytes is not None and name not in self._files:
                entry = self._open(name, source)
                if entry is not None and isinstance(entry.tail, JsonlTail):
                    skipped += entry.tail.start_near_end(last_bytes)
            self._read(name, source)
        return skipped

    def retried(self) -> list[Path]:
        """What to hand to `changed` again: files not opened for want of descriptors (those
        still short come back), and the next piece of each file read in part."""
        again, self.retry = self.retry, set()
        again.update(self.unfinished)
        self.unfinished = {}
        return sorted(map(Path, again))

    def rescan(self, roots: Collection[Path] | None = None) -> None:
        """Look at every file again, for when file events cannot be had (no inotify watches
        left): unchanged files cost one stat, new ones are read, gone ones are forgotten.
        `roots`: only the files under these watched folders (a Windows drive under WSL)."""
        if roots is None:
            paths = [Path(path) for source in self.sources for path, _ in self._scan(source)]
            self.changed(sorted({*paths, *map(Path, self._files)}))
            return
        tops = [os.fspath(root) for root in roots]
        under = tuple(top + _SEP for top in tops)
        paths = [Path(p) for source in self.sources for p, _ in self._scan(source, only=roots)]
        followed = [Path(name) for name in self._files if name.startswith(under) or name in tops]
        self.changed(sorted({*paths, *followed}))

    def watched(self) -> list[tuple[str, Path]]:
        """Each watched folder (or file) of each source, with its agent."""
        return [(s.harness.name, s.home / d) for s in self.sources for d in s.harness.watch_dirs]

    def live_files(self) -> list[str]:
        """The files the live sessions' work was read from, the latest noted first (a SQLite
        database with its `-wal`, where its commits land): followed directly where the folder
        watcher may not see them grow (`sources.livefiles`)."""
        names: list[str] = []
        with self.state.lock:
            for key in self.state.live:
                session = self.state.sessions.get(key)
                if session is not None:
                    names += reversed(session.file_names)
        for name in list(names):
            entry = self._files.get(name)
            if isinstance(entry, _File) and isinstance(entry.tail, SqliteTail):
                names.append(name + "-wal")
        return names

    def save_cache(self) -> None:
        """Write the result of the catch-up to the cache, if it differs from what was loaded."""
        if self.cache is not None and self._pending is not None:
            self.cache.write(self._pending)
        self._pending = None

    def _snapshot(self) -> Snapshot:
        """What the engine knows, for the cache; the files that can sleep fall asleep
        (`dormant`): from now on they cost a few bytes each until they change."""
        index = self._index
        old = self._sleepers
        sleeping = Sleepers() if old.dead else old  # the woken ones' pickles left behind
        files = []
        for name, entry in self._files.items():
            if isinstance(entry, int):
                if sleeping is not old:
                    self._files[name] = sleeping.moved(old, entry)
                continue
            i, key = index[id(entry.source)], settled(entry.tail)
            if key is not None and entry.source.harness.name in pool.PARALLEL:
                self._files[name] = sleeping.add(i, name, key, entry.tail, entry.reader)
            else:
                files.append((i, entry.tail, entry.reader))
        self._sleepers = sleeping
        return Snapshot(
            harnesses=[source.harness for source in self.sources],
            held=[None if s.held is None else _saved(vars(s.held)) for s in self.sources],
            files=files,
            state=_saved(vars(self.state)),
            stats={name: getattr(self.stats, name) for name in _STATS_KEPT},
            dormant=sleeping,
        )

    def _load(self) -> Snapshot | None:
        """The cache's result, if there is one for these sources and nothing was read yet."""
        snapshot = self.cache.load() if self.cache is not None and not self._files else None
        if self.cache is not None and self.cache.failure is not None:
            self.stats.state_errors[self.cache.failure] += 1
        if snapshot is None or len(snapshot.harnesses) != len(self.sources):
            return None
        return snapshot

    def _restore(self, snapshot: Snapshot | None) -> Snapshot | None:
        """Install the cache's result, if any; return what it replaced (to undo it)."""
        if snapshot is None:
            return None
        before = self._snapshot()
        self._install(snapshot)
        return before

    def _install(self, snapshot: Snapshot) -> None:
        for source, harness, held in zip(
            self.sources, snapshot.harnesses, snapshot.held, strict=True
        ):
            source.harness = harness
            if source.held is not None and held is not None:
                vars(source.held).update(held)
        self._files = {}
        for i, tail, reader in snapshot.files:
            path = _key(tail)
            self._files[path] = _File(self.sources[i], path, reader, tail)
        self._sleepers = snapshot.dormant
        names = self._sleepers.names
        self._files.update(zip(names, range(len(names)), strict=True))
        with self.state.lock:
            vars(self.state).update(snapshot.state)
        for name, value in snapshot.stats.items():
            setattr(self.stats, name, value)

    def _source_of(self, path: Path) -> Source | None:
        """The source whose home holds `path`, the deepest one when homes nest (OpenCode's
        home is `$OPENCODE_DB`'s folder, which may be the user's home itself: `~/.pi` is
        still pi's)."""
        found = None
        for source in self.sources:
            if path.is_relative_to(source.home) and (
                found is None or len(source.home.parts) > len(found.home.parts)
            ):
                found = source
        return found

    def _scan(
        self,
        source: Source,
        known: Collection[str] | None = None,
        seen: set[str] | None = None,
        only: Collection[Path] | None = None,
    ) -> list[tuple[Found, Source]]:
        """The harness's files; with `seen`, those in `known` are noted there, not listed;
        `only`: of these watched folders alone (which then say nothing of the reader's health)."""
        agent = source.harness.name
        up = True
        found: list[tuple[Found, Source]] = []
        if known is None:
            known = {p for p, e in self._files.items() if self._source_of_entry(e) is source}
        for folder in source.harness.watch_dirs:
            if only is not None and source.home / folder not in only:
                continue
            try:
                found += self._walk(source, source.home / folder, known, seen)
            except OSError as error:
                up = False
                self._once(source.home / folder, "read_error", agent, error)
        if only is None:
            self.stats.up[agent] = up
        return found

    def _walk(
        self,
        source: Source,
        top: Path,
        known: Collection[str] = frozenset(),
        seen: set[str] | None = None,
    ) -> Iterator[tuple[Found, Source]]:
        """The files under `top` the harness reads; `known` (by name) were matched before and
        come as their names (no `Path` made for a file the engine already follows), or, with
        `seen`, are added to it instead."""
        if not top.is_dir():  # a single file the harness watches
            if not top.is_file():
                return
            if seen is not None and str(top) in known:
                seen.add(str(top))
            elif source.harness.match(_rel(top, source)) is not None:
                yield top, source
            return
        agent = source.harness.name

        def skipped(error: OSError) -> None:
            if _short(error):  # the folder is walked again when a descriptor is free
                self.retry.add(os.fspath(error.filename or top))
            if Path(error.filename or top) == top:
                raise error  # the agent's folder itself: the reader is down
            self.stats.parse_errors[(agent, "read_error")] += 1
            self._once(Path(error.filename or top), "read_error", agent, error)

        stream = getattr(source.harness, "doc_folder", None)  # optional: see harnesses.base
        for folder, _, names in os.walk(top, onerror=skipped):
            rel = None  # once per folder: a file costs no stat
            if stream is not None and stream(_rel(folder, source)):
                names = []  # one stream, not a file each (`docfolder`)
                if folder not in known:
                    self._walked[folder] = _rel(folder, source)
                    yield folder, source
                elif seen is None:
                    yield folder, source
                else:
                    seen.add(folder)
            for name in names:
                joined = folder + _SEP + name
                if joined in known:  # read before: matched then
                    if seen is None:
                        yield joined, source
                    else:
                        seen.add(joined)
                    continue
                rel = rel or _rel(folder, source)
                inner = rel / name
                if source.harness.match(inner) is not None:
                    self._walked[joined] = inner  # matched once: `_open` needs it again
                    yield joined, source

    def asleep(self, name: str) -> bool:
        """File `name` is followed, asleep (`dormant`)."""
        return isinstance(self._files.get(name), int)

    def _stirred(self, seen: set[str]) -> list[tuple[Found, Source]]:
        """The followed files to read again after loading the cache's result: each one awake,
        and each sleeping one whose `stat` changed. A file not `seen` by the walk is gone:
        `_Stale`, since what it added cannot be taken back."""
        stirred: list[tuple[Found, Source]] = []
        unchanged = self._sleepers.unchanged
        for name, entry in self._files.items():
            if name not in seen:
                raise _Stale("a file is gone")
            if not isinstance(entry, int):
                stirred.append((name, entry.source))
            elif not unchanged(entry):
                stirred.append((name, self._source_of_sleeper(entry)))
        return stirred

    def _read(self, path: Found, source: Source) -> None:
        name = _name(path)
        walked = self._walked.pop(name, None)
        entry = self._files.get(name)
        if isinstance(entry, int):
            if self._sleepers.unchanged(entry):
                return  # what reading it would do: nothing
            entry = self._wake(entry)
        if entry is None:
            entry = self._open(name, source, walked)
            if entry is None:
                return
        if isinstance(entry.tail, JsonlTail | ZstdJsonl):
            self._read_lines(path, entry, entry.tail)
        elif isinstance(entry.tail, SqliteTail):
            self._read_rows(path, entry, entry.tail)
        elif isinstance(entry.tail, DocFolder):
            self._read_folder(path, entry, entry.tail)
        else:
            self._read_doc(path, entry, entry.tail)

    def _sleep(self, name: str) -> None:
        """A file just read falls asleep, if it can (see `dormant`)."""
        entry = self._files.get(name)
        if not isinstance(entry, _File) or entry.source.harness.name not in pool.PARALLEL:
            return
        key = settled(entry.tail)
        if key is not None:
            i = self._index[id(entry.source)]
            self._files[name] = self._sleepers.add(i, name, key, entry.tail, entry.reader)

    def _wake(self, at: int) -> _File:
        tail, reader = self._sleepers.woken(at)
        name = self._sleepers.names[at]
        entry = self._files[name] = _File(self._source_of_sleeper(at), name, reader, tail)
        return entry

    def _source_of_sleeper(self, at: int) -> Source:
        return self.sources[self._sleepers.sources[at]]

    def _source_of_entry(self, entry: _File | int) -> Source:
        return self._source_of_sleeper(entry) if isinstance(entry, int) else entry.source

    def _kind(self, path: str, source: Source, rel: PurePosixPath) -> FileKind | None:
        """What the harness reads the file as; None to leave it alone (a compressed file
        whose plain twin exists: the plain file wins)."""
        stream = getattr(source.harness, "doc_folder", None)  # optional: see harnesses.base
        if stream is not None and stream(rel):
            return "docs"
        kind = source.harness.match(rel)
        if kind is None or (kind == "zstd" and Path(path).with_suffix("").exists()):
            return None
        return kind

    def _open(self, path: str, source: Source, rel: PurePosixPath | None = None) -> _File | None:
        """Follow the file at `path` (`rel` below the home, if the walk that found it knew)."""
        rel = rel or _rel(path, source)
        kind = self._kind(path, source, rel)
        if kind is None or self._aliased(path, source):
            return None
        reader = source.harness.reader(rel)
        limit = getattr(source.harness, "doc_limit", DOC_LIMIT)  # optional: `Harness`
        tail: Tail = JsonDoc(path, text=kind == "text", max_bytes=limit)
        if kind == "docs":
            tail = DocFolder(path, max_bytes=limit)
        elif kind == "sqlite":
            if not isinstance(reader, TableReader):
                return None
            tail = SqliteTail(Path(path), reader.log)
        elif kind not in ("doc", "text"):
            tail = JsonlTail(path) if kind == "jsonl" else ZstdJsonl(path)
        key = _key(tail)
        entry = self._files[key] = _File(source, key, reader, tail)
        self.stats.files[source.harness.name] += 1
        return entry

    def _aliased(self, path: str, source: Source) -> bool:
        """`path` is a second way to a file already followed (a link to it, or the file a
        followed link leads to): not read again, each record would count twice. A link costs a
        look at where it leads; a plain file one look at the links met so far."""
        if path in self._links:
            return self._links[path] != path
        if not os.path.islink(path):
            return False
        real = os.path.realpath(path)
        first = self._links.setdefault(real, path)
        if first == path and real not in self._files:
            return False
        self._once(path, "aliased", source.harness.name, f"a link to {real}, read once as {first}")
        return True

    def _read_lines(self, path: Found, entry: _File, tail: JsonlTail | ZstdJsonl) -> None:
        decode, more = pool.decoder(entry.source.harness, self.content), True
        while more:  # a large file comes in pieces (`tail.READ_LIMIT`)
            result = tail.read()
            if result.reset and result.error is None:
                if self._cached:
                    raise _Stale(f"{path} was replaced")
                entry.reader = entry.source.harness.reader(entry.rel)
                self.rewritten.append(_name(path))
            if self._lines_read(path, entry, result, Fed()):  # a piece is folded at once
                self._fold(path, entry, feed_lines(entry.reader, result.lines, decode))
            more = result.more and result.error is None
            if more and self._sliced:  # the rest on the loop's next turn, after other files
                self.unfinished[_name(path)] = None
                return

    def _adopt(self, path: Found, source: Source, taken: pool.Read) -> None:
        """A file a worker read: its follower and reader join the others, what it said is
        folded here, in its turn."""
        key = _key(taken.tail)
        if self._links.get(key, key) != key:  # the file a link read before leads to
            self._once(path, "aliased", source.harness.name, f"read once as {self._links[key]}")
            return
        entry = self._files[key] = _File(source, key, taken.reader, taken.tail)
        self.stats.files[source.harness.name] += 1
        self._lines_read(path, entry, taken.result, taken.fed)
        if taken.result.more and taken.result.error is None:  # a large file: the rest here
            self._read_lines(path, entry, taken.tail)

    def _lines_read(self, path: Found, entry: _File, result: TailResult, fed: Fed) -> bool:
        """What a read of lines found, with what a worker's reader said of them (`fed`); False
        if the file could not be read."""
        agent = entry.source.harness.name
        self.stats.bytes_read[agent] += result.bytes_read
        if result.error is not None:
            self._failed(path, entry, result.error)
            return False
        if result.oversized:
            self.stats.parse_errors[(agent, "oversized_line")] += result.oversized
            limit = entry.tail.max_line_bytes if isinstance(entry.tail, JsonlTail) else 0
            where = f"line {result.oversized_line}" if result.oversized_line else "a line"
            size = f"the limit of {limit / 2**20:g} MiB" if limit else "the size limit"
            self._once(path, "oversized_line", agent, f"{where} is longer than {size}: skipped")
        self._fold(path, entry, fed)
        return True

    def _read_rows(self, path: Found, entry: _File, tail: SqliteTail) -> None:
        agent = entry.source.harness.name
        result = tail.read()
        self.stats.bytes_read[agent] += result.bytes_read
        if result.locked:
            self.stats.parse_errors[(agent, "locked")] += 1
            return
        if result.error is not None:
            self._failed(path, entry, result.error)
            return
        if result.reset:
            if self._cached:
                raise _Stale(f"{path} was replaced")
            entry.reader = entry.source.harness.reader(entry.rel)
        for row in result.rows:
            try:
                for column in tail.log.json:
                    if column in row:  # not in the rows of a watched table (`RowWatch`)
                        row[column] = loads(str(row[column]))
            except ValueError as error:
                self.stats.parse_errors[(agent, "invalid_json")] += 1
                self._once(path, "invalid_json", agent, f"row {row.get(tail.log.seq)}: {error}")
                continue
            self._feed(path, entry, row, f"{row.get('_table', tail.log.table)} row")

    def _failed(self, path: Found, entry: _File, error: Exception) -> None:
        """A file that could not be read: forgotten if gone, else counted, logged once."""
        if isinstance(error, FileNotFoundError):
            self._forget(path, entry)
            return
        agent = entry.source.harness.name
        if _short(error):  # no descriptor left: read again when there is one, not forgotten
            self.retry.add(_name(path))
            self.stats.parse_errors[(agent, "descriptors")] += 1
            self._once(path, "descriptors", agent, f"{error}: read again once one is free")
            return
        self.stats.parse_errors[(agent, "read_error")] += 1
        said: object = error
        if isinstance(error, OSError) and error.strerror and error.filename == _name(path):
            said = error.strerror  # the path is in the line already
        self._once(path, "read_error", agent, said)

    def _read_doc(self, path: Found, entry: _File, doc: JsonDoc) -> None:
        agent = entry.source.harness.name
        result = doc.read()
        self.stats.bytes_read[agent] += result.bytes_read
        if not result.changed:
            return
        if result.error == "missing":
            self._feed(path, entry, None, "removed")
            self._forget(path, entry)
            return
        if result.error is not None:
            self.stats.parse_errors[(agent, result.error)] += 1
            if result.error == "descriptors":
                self.retry.add(_name(path))
            self._once(path, result.error, agent, "document skipped")
            return
        self._feed(path, entry, result.data, "document")

    def _read_folder(self, path: Found, entry: _File, folder: DocFolder) -> None:
        """The new documents of a folder read as one stream (`docfolder`), in name order."""
        agent, more = entry.source.harness.name, True
        while more:  # a long conversation comes in pieces (`docfolder.BATCH`)
            result = folder.read()
            self.stats.bytes_read[agent] += result.bytes_read
            if result.error == "missing":
                self._forget(path, entry)
                return
            if result.error is not None:
                self._failed(path, entry, OSError(result.error))
                return
            for reason, count in (
                ("invalid_json", result.invalid),
                ("too_large", result.too_large),
            ):
                if count:
                    self.stats.parse_errors[(agent, reason)] += count
                    self._once(path, reason, agent, f"{count} document(s) skipped")
            if result.reset:
                if self._cached:
                    raise _Stale(f"{path} was replaced")
                entry.reader = entry.source.harness.reader(entry.rel)
                self.rewritten.append(_name(path))
            for doc in result.docs:
                self._feed(path, entry, doc, "document")
            more = result.more

    def _feed(self, path: Found, entry: _File, record: object, where: str) -> None:
        fed = Fed()
        feed(entry.reader, record, where, fed)
        self._fold(path, entry, fed)

    def _fold(self, path: Found, entry: _File, fed: Fed) -> None:
        """What a reader said, into the health counters, the log and the state."""
        agent = entry.source.harness.name
        self.stats.records[agent] += fed.records
        for reason, detail in fed.errors:
            self.stats.parse_errors[(agent, reason)] += 1
            self._once(path, reason, agent, detail)
        held = entry.source.held
        last = None  # the session the file's last work was noted for
        for events in fed.groups:
            session_id, read_from = getattr(events[0], "session_id", None), None
            if isinstance(session_id, str):
                if held is not None:
                    held.note(Path(path), session_id, shared=isinstance(entry.tail, SqliteTail))
                if session_id != last and not isinstance(events[0], _INDEX_EVENTS):
                    read_from, last = entry.path, session_id
            self._apply(entry.source, events, read_from)

    def _apply(self, source: Source, events: list[Event], read_from: str | None = None) -> None:
        """Fold `events` into the state; `read_from`: the file that told them, noted on their
        session (a session's turns are replayed from its files: `runtime.replay`)."""
        agent = source.harness.name
        with self.state.lock:
            if read_from is not None:
                session_id: str = getattr(events[0], "session_id")  # noqa: B009
                self.state.session(agent, session_id).read_from(read_from)
            for event in events:
                self.state.apply(agent, event)

    def _forget(self, path: Found, entry: _File) -> None:
        for real, name in list(self._links.items()):  # another link may be followed now
            if name == _name(path):
                del self._links[real]
        if self._files.pop(_name(path), None) is not None:
            self.stats.files[entry.source.harness.name] -= 1
        if entry.source.held is not None:  # nothing of a gone file is kept
            entry.source.held.forget(Path(path))

    def _once(self, path: Found, reason: str, agent: str, detail: object) -> None:
        if (_name(path), reason) in self._logged:
            return
        self._logged.add((_name(path), reason))
        log.warning("%s: %s: %s (%s; reported once per file)", agent, path, detail, reason)


def _short(error: Exception) -> bool:
    """The error says no file descriptor was left (the process's or the system's limit)."""
    return isinstance(error, OSError) and error.errno in (errno.EMFILE, errno.ENFILE)


def _name(path: Found) -> str:
    return path if isinstance(path, str) else str(path)


def _order(item: tuple[Found, Source]) -> tuple[int, str]:
    """Shallow files first, then by name. A name (the walk's `folder/name`, equal to the `str`
    of its `Path`) counts its parts without a `Path` made: one more than its separators (a
    name that starts with two, `//x` or Windows' `\\\\server\\share`, is counted by its `Path`)."""
    path = item[0]
    sep = _SEP
    if isinstance(path, Path) or path.startswith(sep + sep):
        return len(Path(path).parts), str(path)
    return path.count(sep) + 1, path


def _database_of(path: Path, source: Source) -> Path:
    """A SQLite companion file (`x.db-wal`) stands for its database when the harness reads it."""
    for suffix in _COMPANIONS:
        if path.name.endswith(suffix):
            database = path.with_name(path.name.removesuffix(suffix))
            if source.harness.match(_rel(database, source)) == "sqlite":
                return database
    return path


def _folder_of(path: Path, source: Source) -> Path:
    """A file in a folder read as one stream (`docfolder`) stands for its folder."""
    stream = getattr(source.harness, "doc_folder", None)  # optional: see harnesses.base
    if stream is not None and path != source.home and stream(_rel(path.parent, source)):
        return path.parent
    return path


def _rel(path: Found, source: Source) -> PurePosixPath:
    """`path` below its home, in the `/`-separated form harnesses match on every system."""
    text, home, sep = os.fspath(path), os.fspath(source.home), _SEP
    if text.startswith(home) and text[len(home) : len(home) + 1] == sep:  # no Path made
        rest = text[len(home) + 1 :]
        return PurePosixPath(rest if sep == "/" else rest.replace(sep, "/"))
    return PurePosixPath(Path(path).relative_to(source.home).as_posix())


def _known(snapshot: Snapshot | None, source: int) -> set[str] | None:
    """The files of a source the cache's result read (by name: a walk makes names)."""
    if snapshot is None:
        return None
    awake = {_key(tail) for i, tail, _ in snapshot.files if i == source}
    sleepers = snapshot.dormant
    return awake | {n for n, i in zip(sleepers.names, sleepers.sources, strict=True) if i == source}


def _key(tail: Tail) -> str:
    """A follower's path as a string: the one it keeps, if it keeps one."""
    return str(tail.path) if isinstance(tail, SqliteTail) else tail.file


def _size(path: str) -> int | None:
    """The file's size; None for a link (one `lstat` either way)."""
    try:
        found = os.lstat(path)
    except OSError:
        return 0  # the worker meets the error, the main process reports it
    return None if stat.S_ISLNK(found.st_mode) else found.st_size


_NOT_CACHED = frozenset({"lock", "observer", "find", "touched"})
"""Attributes of the state and of `HeldSessions` that belong to this process, not the cache."""
_STATS_KEPT = ("bytes_read", "records", "parse_errors", "files")


def _saved(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if name not in _NOT_CACHED}


class _Stale(Exception):
    """A file the cache read was replaced or removed since."""

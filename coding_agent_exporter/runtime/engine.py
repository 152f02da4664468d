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
The engine is four parts: `walking` finds the files, `following` reads them, `caching` keeps and
puts back what the cache holds, this module runs the catch-up and the watcher's changes; what they
share is in `found`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Iterable
from contextlib import nullcontext
from pathlib import Path

from ..sources.sqlite_tail import SqliteTail
from ..sources.tail import JsonlTail
from ..state.health import Stats
from ..state.state import State
from . import pool
from .cache import Cache
from .caching import Caching, known
from .dormant import Sleepers
from .following import Following
from .found import (
    SEP,
    Entry,
    Found,
    Source,
    Stale,
    database_of,
    folder_of,
    name_of,
    order_of,
    path_order,
    rel_of,
    size_of,
)
from .pool import Ahead, Job
from .walking import Walking

__all__ = ["Engine", "Source"]
log = logging.getLogger(__name__)


class Engine(Walking, Following, Caching):
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
        if cache is not None:  # files fall asleep (`dormant`): their finished sessions too
            state.files_asleep = self.asleep
        self.workers = pool.workers_wanted() if workers is None else workers
        self.min_bytes = pool.MIN_BYTES  # of unread files, for the workers to start (`pool`)
        self.steal = True  # the main process reads a batch no worker has begun (`pool.Ahead`)
        self._files: dict[str, Entry | int] = {}  # by path; asleep: its index in `_sleepers`
        self._sleepers = Sleepers()
        self._index = {id(source): i for i, source in enumerate(self.sources)}  # source → i
        self._walked: set[str] = set()  # found by a walk, not read yet (`_aliased`)
        self._logged: set[tuple[str, str]] = set()
        self.retry: set[str] = set()
        """Files and folders that could not be opened for want of file descriptors (the process
        or the system at its limit): handed back by `retried`, not left until they change."""
        self.unfinished: dict[str, None] = {}
        """Files read in part since the catch-up (a large file is read one `tail.READ_LIMIT`
        piece per turn of the loop, `changed` reading the others in between), oldest first."""
        self._sliced = False  # `changed` at work: a large file is left unfinished, not read whole
        self._links: dict[str, str] = {}  # a linked file's real path → the link followed for it
        self._linked: set[str] = set()  # of the walk's files not read yet, those that are links
        self._pending = False  # the cache's new content written beside it, not in place yet
        self._cached = False  # reading on from the cache's result: a replaced file is stale
        self.rewritten: list[str] = []
        """Files followed since the catch-up that were written again from their start (truncated,
        replaced, saved whole again): what they said before is in the state (`app.App`)."""

    @property
    def roots(self) -> list[Path]:
        return [s.home / d for s in self.sources for d in s.harness.watch_dirs]

    def catch_up(
        self,
        progress: Callable[[int, int], None] | None = None,
        watch: Callable[[], None] | None = None,
    ) -> None:
        """Read every file once, in an order that depends on the paths alone (shallow ones
        first, then by name), never on modification times, which a copy or a checkout reshuffles:
        the same files always give the same counts, sessions and spans.

        With a cache, the last catch-up's result is loaded first, then only what changed since
        is read (`cache`); the result is taken for the cache before any process is probed.
        Without one, the agents' live indexes (`live_dirs`, the first files of their agents in
        that order) are read before the history is walked: a session waiting for its user shows
        at once. `watch` (the watcher's start) is called then, before the walk: the files read
        before it are looked at again after it, so no change is missed."""
        snapshot = self._load()
        if snapshot is None:
            self._read_live()
        followed: list[tuple[Found, Source]] = [
            (n, self._source_of_entry(e)) for n, e in self._files.items()
        ]
        if watch is not None:
            watch()
        new: list[tuple[Found, Source]] = []
        seen: set[str] = set()  # the files the cache's result read that are still there
        for i, source in enumerate(self.sources):
            new += self._scan(source, known(snapshot, i), seen)
        fresh = self._restore(snapshot)
        read_before = sum(self.stats.bytes_read.values())
        try:
            found = new + self._stirred(seen) if fresh is not None else new + followed
            found.sort(key=order_of)
            self._read_all(found, progress, cached=fresh is not None)
        except Stale as why:  # counters are rebuilt from today's files: read them all
            log.info("catch-up cache: %s since it was written: reading all files", why)
            assert fresh is not None  # only reading on from the cache's result raises
            files = self._files.items()
            found = new + [(n, self._source_of_entry(e)) for n, e in files if n in seen]
            found.sort(key=order_of)
            self._install(fresh)
            fresh = None
            self._read_all(found, progress, cached=False)
        del found, new, seen  # a name per file: gone before the cache is written (its peak)
        self._walked.clear()
        self._linked.clear()
        if fresh is None:  # read in the order of the paths: the latest sessions by their times
            with self.state.lock:  # (a warm start's come ranked, with what was read since)
                self.state.rank_recent()
        unchanged = sum(self.stats.bytes_read.values()) == read_before
        if self.cache is not None and not (fresh is not None and unchanged):
            with self.state.lock:  # what the files say, before the processes and the clock
                self.state.spend.found()
                self._pending = self.cache.prepare(self._snapshot(), self._files)
        for source in self.sources:
            if source.held is not None:
                self._apply(source, source.held.probe(list(source.held.sessions)))

    def _read_live(self) -> None:
        """The files of the agents' live indexes (`live_dirs`), read in the catch-up's order."""
        found: list[tuple[Found, Source]] = []
        for source in self.sources:
            live = getattr(source.harness, "live_dirs", ())  # optional: see harnesses.base
            if live:
                found += self._scan(source, only=[source.home / folder for folder in live])
        found.sort(key=order_of)
        self._read_all(found, None, cached=False)

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
                        self._sleep(name_of(path))
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
            if name_of(name) in self._files or source.harness.name not in pool.PARALLEL:
                continue
            path = name_of(name)
            rel = rel_of(path, source)
            kind = self._kind(path, source, rel)
            size = size_of(path)  # a link: read here, where it is known for one (`_aliased`)
            if kind in ("jsonl", "zstd") and size is not None:
                job = Job(position, source.harness, rel, path, kind == "zstd", content)
                jobs.append(job)
                sizes.append(size)
        if sum(sizes) < self.min_bytes:
            return nullcontext()
        return Ahead(pool.batches(jobs, sizes), self.workers, steal=self.steal)

    def changed(self, paths: Iterable[Found]) -> None:
        """Handle what the watcher reported: files read again, folders scanned for new files.
        A followed file may come as its name (`rescan`: no `Path` made, its source known)."""
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
        self, paths: Iterable[Found], touched: dict[int, tuple[Source, list[Path]]]
    ) -> None:
        for reported in paths:
            entry = self._files.get(reported) if isinstance(reported, str) else None
            if entry is not None:
                self._read_on(name_of(reported), entry, touched)
                continue
            told = Path(reported)
            source = self._source_of(told)
            if source is None:
                continue
            path = folder_of(database_of(told, source), source)
            if str(path) in self._files or not path.is_dir():
                self._read(path, source)
                touched.setdefault(id(source), (source, []))[1].append(path)
            else:
                for found, _ in self._walk(source, path):
                    self._read(found, source)
                    touched.setdefault(id(source), (source, []))[1].append(Path(found))

    def _read_on(
        self, name: str, entry: Entry | int, touched: dict[int, tuple[Source, list[Path]]]
    ) -> None:
        """A followed file named as such: read on, its source known (a `Path` made only for a
        source with holders to probe)."""
        source = self._source_of_entry(entry)
        self._read(name, source)
        if source.held is not None:
            touched.setdefault(id(source), (source, []))[1].append(Path(name))

    def read_files(self, names: Iterable[str], last_bytes: int | None = None) -> int:
        """Read these files of the homes once, in the catch-up's order (a session's files,
        replayed: `replay`), a JSONL file longer than `last_bytes` from the first line of its
        last `last_bytes`; one outside every home is left alone. The bytes left out."""
        found = [(name, source) for name in names if (source := self._source_of(Path(name)))]
        skipped = 0
        for name, source in sorted(found, key=order_of):
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
            names = {name_of(path) for source in self.sources for path, _ in self._scan(source)}
            names.update(self._files)
        else:
            tops = [os.fspath(root) for root in roots]
            under = tuple(top + SEP for top in tops)
            found = (p for source in self.sources for p, _ in self._scan(source, only=roots))
            names = {name_of(path) for path in found}
            names.update(name for name in self._files if name.startswith(under) or name in tops)
        ordered: list[str] = sorted(names, key=path_order)
        self.changed(ordered)

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
            if isinstance(entry, Entry) and isinstance(entry.tail, SqliteTail):
                names.append(name + "-wal")
        return names

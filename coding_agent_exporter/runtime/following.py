"""Reading a found file: its follower opened, what is new in it read and handed to its reader,
what the reader said folded into the state and the health counters; a file read falls asleep
and wakes when it changes (`Following`, a part of `Engine`)."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from ..events import Event, LiveIndexRead, LiveIndexRemoved, TitleSet
from ..harnesses import FileKind, TableReader
from ..sources.decode import loads
from ..sources.docfolder import DocFolder
from ..sources.sqlite_tail import SqliteTail
from ..sources.tail import DOC_LIMIT, JsonDoc, JsonlTail, TailResult, ZstdJsonl
from . import pool
from .dormant import settled
from .found import Entry, Found, Parts, Source, Stale, Tail, key_of, name_of, no_descriptor, rel_of
from .pool import Fed, feed, feed_lines

_INDEX_EVENTS = (LiveIndexRead, LiveIndexRemoved, TitleSet)
"""What indexes beside the sessions tell (live processes, titles): no work of the session's."""


class Following(Parts):
    def _read(self, path: Found, source: Source) -> None:
        name = name_of(path)
        walked = name in self._walked
        self._walked.discard(name)
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
        if not isinstance(entry, Entry) or entry.source.harness.name not in pool.PARALLEL:
            return
        key = settled(entry.tail)
        if key is not None:
            i = self._index[id(entry.source)]
            self._files[name] = self._sleepers.add(i, name, key, entry.tail, entry.reader)

    def _wake(self, at: int) -> Entry:
        tail, reader = self._sleepers.woken(at)
        name = self._sleepers.names[at]
        entry = self._files[name] = Entry(self._source_of_sleeper(at), name, reader, tail)
        return entry

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

    def _open(self, path: str, source: Source, walked: bool = False) -> Entry | None:
        """Follow the file at `path` (`walked`: a walk found it). Its path below the home is made
        again here, not kept from the walk: a `PurePosixPath` per file found costs ~300 bytes
        while a large catch-up reads the others."""
        rel = rel_of(path, source)
        kind = self._kind(path, source, rel)
        if kind is None or self._aliased(path, source, walked=walked):
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
        key = key_of(tail)
        entry = self._files[key] = Entry(source, key, reader, tail)
        self.stats.files[source.harness.name] += 1
        return entry

    def _aliased(self, path: str, source: Source, *, walked: bool = False) -> bool:
        """`path` is a second way to a file already followed (a link to it, or the file a
        followed link leads to): not read again, each record would count twice. A link costs a
        look at where it leads; a plain file one look at the links met so far, and one `lstat`
        unless a walk found it (`walked`: the walk's listing said whether it is a link)."""
        if path in self._links:
            return self._links[path] != path
        if walked:
            linked = path in self._linked
            self._linked.discard(path)
        else:
            linked = os.path.islink(path)
        if not linked:
            return False
        real = os.path.realpath(path)
        first = self._links.setdefault(real, path)
        if first == path and real not in self._files:
            return False
        self._once(path, "aliased", source.harness.name, f"a link to {real}, read once as {first}")
        return True

    def _read_lines(self, path: Found, entry: Entry, tail: JsonlTail | ZstdJsonl) -> None:
        decode, more = pool.decoder(entry.source.harness, self.content), True
        while more:  # a large file comes in pieces (`tail.READ_LIMIT`)
            result = tail.read()
            if result.reset and result.error is None:
                if self._cached:
                    raise Stale(f"{path} was replaced")
                entry.reader = entry.source.harness.reader(entry.rel)
                self.rewritten.append(name_of(path))
            if self._lines_read(path, entry, result, Fed()):  # a piece is folded at once
                self._fold(path, entry, feed_lines(entry.reader, result.lines, decode))
            more = result.more and result.error is None
            if more and self._sliced:  # the rest on the loop's next turn, after other files
                self.unfinished[name_of(path)] = None
                return

    def _adopt(self, path: Found, source: Source, taken: pool.Read) -> None:
        """A file a worker read: its follower and reader join the others, what it said is
        folded here, in its turn."""
        key = key_of(taken.tail)
        if self._links.get(key, key) != key:  # the file a link read before leads to
            self._once(path, "aliased", source.harness.name, f"read once as {self._links[key]}")
            return
        entry = self._files[key] = Entry(source, key, taken.reader, taken.tail)
        self.stats.files[source.harness.name] += 1
        self._lines_read(path, entry, taken.result, taken.fed)
        if taken.result.more and taken.result.error is None:  # a large file: the rest here
            self._read_lines(path, entry, taken.tail)

    def _lines_read(self, path: Found, entry: Entry, result: TailResult, fed: Fed) -> bool:
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

    def _read_rows(self, path: Found, entry: Entry, tail: SqliteTail) -> None:
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
                raise Stale(f"{path} was replaced")
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

    def _failed(self, path: Found, entry: Entry, error: Exception) -> None:
        """A file that could not be read: forgotten if gone, else counted, logged once."""
        if isinstance(error, FileNotFoundError):
            self._forget(path, entry)
            return
        agent = entry.source.harness.name
        if no_descriptor(error):  # no descriptor left: read again when there is one, not forgotten
            self.retry.add(name_of(path))
            self.stats.parse_errors[(agent, "descriptors")] += 1
            self._once(path, "descriptors", agent, f"{error}: read again once one is free")
            return
        self.stats.parse_errors[(agent, "read_error")] += 1
        said: object = error
        if isinstance(error, OSError) and error.strerror and error.filename == name_of(path):
            said = error.strerror  # the path is in the line already
        self._once(path, "read_error", agent, said)

    def _read_doc(self, path: Found, entry: Entry, doc: JsonDoc) -> None:
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
                self.retry.add(name_of(path))
            self._once(path, result.error, agent, "document skipped")
            return
        self._feed(path, entry, result.data, "document")

    def _read_folder(self, path: Found, entry: Entry, folder: DocFolder) -> None:
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
                    raise Stale(f"{path} was replaced")
                entry.reader = entry.source.harness.reader(entry.rel)
                self.rewritten.append(name_of(path))
            for doc in result.docs:
                self._feed(path, entry, doc, "document")
            more = result.more

    def _feed(self, path: Found, entry: Entry, record: object, where: str) -> None:
        fed = Fed()
        feed(entry.reader, record, where, fed)
        self._fold(path, entry, fed)

    def _fold(self, path: Found, entry: Entry, fed: Fed) -> None:
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

    def _forget(self, path: Found, entry: Entry) -> None:
        for real, name in list(self._links.items()):  # another link may be followed now
            if name == name_of(path):
                del self._links[real]
        if self._files.pop(name_of(path), None) is not None:
            self.stats.files[entry.source.harness.name] -= 1
        if entry.source.held is not None:  # nothing of a gone file is kept
            entry.source.held.forget(Path(path))

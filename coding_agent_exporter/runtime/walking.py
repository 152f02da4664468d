"""Finding an agent's files: the walk of its watched folders, the source a reported path
belongs to, and which followed files a warm start reads again (`Walking`, a part of `Engine`)."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from pathlib import Path

from ..sources.tree import walk
from .found import SEP, Found, Parts, Source, Stale, no_descriptor, rel_of


class Walking(Parts):
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
            elif source.harness.match(rel_of(top, source)) is not None:
                yield top, source
            return
        agent = source.harness.name

        def skipped(error: OSError) -> None:
            if no_descriptor(error):  # the folder is walked again when a descriptor is free
                self.retry.add(os.fspath(error.filename or top))
            if Path(error.filename or top) == top:
                raise error  # the agent's folder itself: the reader is down
            self.stats.parse_errors[(agent, "read_error")] += 1
            self._once(Path(error.filename or top), "read_error", agent, error)

        stream = getattr(source.harness, "doc_folder", None)  # optional: see harnesses.base
        if os.path.islink(top):  # the walk tells whether what it found is a link, not `top`
            self._linked.add(os.fspath(top))
        for listed in walk(top, skipped):
            folder, names, rel = listed.path, listed.files, None  # once per folder: no stat a file
            if stream is not None and stream(rel_of(folder, source)):
                names = []  # one stream, not a file each (`docfolder`)
                if folder not in known:
                    self._walked.add(folder)
                    yield folder, source
                elif seen is None:
                    yield folder, source
                else:
                    seen.add(folder)
            for name in names:
                joined = folder + SEP + name
                if joined in known:  # read before: matched then
                    if seen is None:
                        yield joined, source
                    else:
                        seen.add(joined)
                    continue
                rel = rel or rel_of(folder, source)
                inner = rel / name
                if source.harness.match(inner) is not None:
                    self._walked.add(joined)
                    if name in listed.links:
                        self._linked.add(joined)
                    yield joined, source

    def _stirred(self, seen: set[str]) -> list[tuple[Found, Source]]:
        """The followed files to read again after loading the cache's result: each one awake,
        and each sleeping one whose `stat` changed (all looked at in one loop). A file not
        `seen` by the walk is gone: `Stale`, since what it added cannot be taken back; but for
        a live index's (`live_dirs`), whose removal says its process ended (read again, it
        tells so, as to a running exporter: every agent's exit removed one, and the next start
        read all files again)."""
        if not seen.issuperset(self._files):
            gone = [(n, self._source_of_entry(e)) for n, e in self._files.items() if n not in seen]
            if not all(live_index(name, source) for name, source in gone):
                raise Stale("a file is gone")
        files, names = self._files, self._sleepers.names
        stirred: list[tuple[Found, Source]] = [
            (name, entry.source) for name, entry in files.items() if not isinstance(entry, int)
        ]
        for at in self._sleepers.changed():
            if files.get(names[at]) == at:  # asleep (a woken file's name is left behind)
                stirred.append((names[at], self._source_of_sleeper(at)))
        return stirred


def live_index(name: str, source: Source) -> bool:
    """File `name` is in one of its agent's live index folders (`live_dirs`)."""
    live = getattr(source.harness, "live_dirs", ())  # optional: see harnesses.base
    tops = [os.path.join(source.home, folder) for folder in live]
    return any(name.startswith(top + SEP) for top in tops)

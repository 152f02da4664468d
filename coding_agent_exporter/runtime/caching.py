"""What the catch-up cache keeps of the engine and puts back (`Caching`, a part of `Engine`):
the snapshot written after a catch-up, in which the files that can sleep fall asleep, and its
installation at a warm start."""

from __future__ import annotations

from typing import Any

from ..state.attributes import assign, attributes
from . import pool
from .cache import Cache, Snapshot
from .dormant import Sleepers, settled
from .found import Entry, Parts, key_of

__all__ = ["Caching", "known"]


class Caching(Parts):
    cache: Cache | None
    _pending: bool

    def save_cache(self) -> None:
        """Put the result of the catch-up in the cache's place (written beside it by `prepare`),
        if it differs from what was loaded."""
        if self.cache is not None and self._pending:
            self.cache.commit()
        self._pending = False

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
        self.state.doze(everything=True)
        return Snapshot(
            harnesses=[source.harness for source in self.sources],
            held=[None if s.held is None else _saved(vars(s.held)) for s in self.sources],
            files=files,
            state=_saved(attributes(self.state)),
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
            path = key_of(tail)
            self._files[path] = Entry(self.sources[i], path, reader, tail)
        self._sleepers = snapshot.dormant
        names = self._sleepers.names
        self._files.update(zip(names, range(len(names)), strict=True))
        with self.state.lock:
            assign(self.state, snapshot.state)
        for name, value in snapshot.stats.items():
            setattr(self.stats, name, value)

    def asleep(self, name: str) -> bool:
        """File `name` is followed, asleep (`dormant`)."""
        return isinstance(self._files.get(name), int)


def known(snapshot: Snapshot | None, source: int) -> set[str] | None:
    """The files of a source the cache's result read (by name: a walk makes names)."""
    if snapshot is None:
        return None
    awake = {key_of(tail) for i, tail, _ in snapshot.files if i == source}
    sleepers = snapshot.dormant
    return awake | {n for n, i in zip(sleepers.names, sleepers.sources, strict=True) if i == source}


_NOT_CACHED = frozenset({"lock", "observer", "find", "touched", "_touched_all", "files_asleep"})
"""Attributes of the state and of `HeldSessions` that belong to this process, not the cache."""
_STATS_KEPT = ("bytes_read", "records", "parse_errors", "files")


def _saved(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if name not in _NOT_CACHED}

"""Every session the state knows, awake or asleep, as one read-only mapping (`State.sessions`).

The state folds into the awake ones (`State.awake`, a dict) and wakes a sleeping one when an
event names it; what reads the state (views, metrics, replay, tests) sees both through this
mapping: a sleeping session is given as a copy made from its row (`asleep.Asleep.copy`), never
woken by a read. Sessions are listed in the order they were first known (`Session.born`), as
the state's one dict listed them before any slept.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from operator import itemgetter
from typing import NamedTuple

from .asleep import Asleep
from .session import Session

Key = tuple[str, str]


class Brief(NamedTuple):
    """What a list of sessions is filtered and sorted by, read without making a `Session`."""

    key: Key
    counted: bool
    cwd: str | None
    updated_at: float | None
    title: str | None


class Sessions(Mapping[Key, Session]):
    def __init__(self, awake: dict[Key, Session], asleep: Asleep) -> None:
        self.awake, self.asleep = awake, asleep

    def __getitem__(self, key: Key) -> Session:
        found = self.awake.get(key)
        if found is None:
            found = self.asleep.copy(*key)
            if found is None:
                raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        if key in self.awake:
            return True
        return isinstance(key, tuple) and len(key) == 2 and key in self.asleep

    def __len__(self) -> int:
        return len(self.awake) + len(self.asleep)

    def __iter__(self) -> Iterator[Key]:
        return (key for key, _ in self._ordered())

    def items(self) -> ItemsView[Key, Session]:
        return _Items(self)

    def values(self) -> ValuesView[Session]:
        return _Values(self)

    def pairs(self) -> Iterator[tuple[Key, Session]]:
        """(key, session) in the order they were first known; the sleeping ones as copies."""
        for key, session in self._ordered():
            yield key, self[key] if session is None else session

    def briefs(self) -> Iterator[Brief]:
        """Each session's `Brief`, in the order they were first known."""
        if not len(self.asleep):
            for key, s in self.awake.items():
                yield Brief(key, s.counted, s.cwd, s.updated_at, s.title)
            return
        found = [
            (s.born, Brief(key, s.counted, s.cwd, s.updated_at, s.title))
            for key, s in self.awake.items()
        ]
        found += [
            (born, Brief((agent, sid), counted, cwd, updated, title))
            for born, agent, sid, cwd, updated, counted, title in self.asleep.briefs()
        ]
        found.sort(key=itemgetter(0))
        for _, brief in found:
            yield brief

    def frozen(self) -> Sessions:
        """What `briefs` reads, copied (under the state's lock: a few ms for 100,000 sleeping
        sessions, where their briefs take 0.25 s); the awake ones are the same records."""
        return Sessions(dict(self.awake), self.asleep.frozen())

    def _ordered(self) -> Iterator[tuple[Key, Session | None]]:
        """Keys in the order they were first known, with the awake session (None: asleep)."""
        if not len(self.asleep):
            yield from self.awake.items()
            return
        found: list[tuple[int, Key, Session | None]] = [
            (s.born, key, s) for key, s in self.awake.items()
        ]
        found += [(born, (agent, sid), None) for born, agent, sid, *_ in self.asleep.briefs()]
        found.sort(key=itemgetter(0))
        for _, key, session in found:
            yield key, session


class _Items(ItemsView[Key, Session]):
    _mapping: Sessions

    def __iter__(self) -> Iterator[tuple[Key, Session]]:
        return self._mapping.pairs()


class _Values(ValuesView[Session]):
    _mapping: Sessions

    def __iter__(self) -> Iterator[Session]:
        return (session for _, session in self._mapping.pairs())

"""Files followed before and unchanged since: kept as a few bytes, not as live objects.

Most of a history is finished files. Their follower (offset, identity) and reader (what the file
told it so far) are needed again only if the file changes, so the engine keeps such a file
`Dormant`: the `stat_key` at which reading it would find nothing new, and the follower and
reader pickled together. Unchanged, it costs one `stat` and its bytes; changed, it is woken
(unpickled) and read on exactly as if it had never slept. Only the files of harnesses whose
readers keep to their own file (`pool.PARALLEL`) sleep: a reader that shares objects with the
readers of other files would come back with copies of them.
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..sources.tail import JsonDoc, JsonlTail, ZstdJsonl, stat_key

S = TypeVar("S")
Key = tuple[int, int, int, int]
SLEEPERS = (JsonlTail, ZstdJsonl, JsonDoc)
"""The followers that can sleep: those that know when a read would find nothing."""


@dataclass(slots=True)
class Dormant(Generic[S]):
    source: S
    path: str
    """Its key in the engine's files, as a followed file's."""
    key: Key
    blob: bytes
    """The follower and reader, pickled together."""


def asleep(source: S, path: str, tail: Any, reader: object) -> Dormant[S] | None:
    """`tail` and `reader` put to sleep; None when the follower would read at once anyway."""
    key = tail.settled() if isinstance(tail, SLEEPERS) else None
    if key is None:
        return None
    return Dormant(source, path, key, pickle.dumps((tail, reader), pickle.HIGHEST_PROTOCOL))


def unchanged(dormant: Dormant[Any]) -> bool:
    """The file is as it was when it fell asleep (a file that cannot be looked at has changed:
    waking it lets its follower report why)."""
    try:
        return stat_key(os.stat(dormant.path)) == dormant.key
    except OSError:
        return False


def woken(dormant: Dormant[Any]) -> tuple[Any, Any]:
    """The follower and reader, as they were."""
    tail, reader = pickle.loads(dormant.blob)
    return tail, reader

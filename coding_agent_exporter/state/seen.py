"""Ids already counted, kept small: 8-byte digests, not the ids themselves.

History can hold millions of message, prompt and tool-call ids; a digest costs a fraction of
the id string and two different ids collide with a probability of about n²/2⁶⁵. The digests are
packed eight bytes each into `BUCKETS` byte arrays (by their leading bits), never one Python
object per id: about 9 bytes per id instead of 70-140 for a set of integers. A bucket is searched
with `bytearray.find` (only a match at a multiple of 8 counts): a million ids make buckets of
about 500 bytes.
"""

from __future__ import annotations

from hashlib import blake2b
from typing import Any

BITS = 14
BUCKETS = 1 << BITS


class SeenIds:
    def __init__(self) -> None:
        self._buckets: list[bytearray | None] = [None] * BUCKETS
        self._count = 0

    def __reduce__(self) -> tuple[Any, ...]:
        """Made by `__init__`, then given its buckets (the catch-up cache keeps them): a class
        compiled by mypyc (`setup.py`) is not made without calling it."""
        return SeenIds, (), {"_buckets": self._buckets, "_count": self._count}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._buckets, self._count = state["_buckets"], state["_count"]

    def add(self, *parts: str) -> bool:
        """Remember the id; True if it had been seen before."""
        digest = blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
        index = digest[0] << (BITS - 8) | digest[1] >> (16 - BITS)
        bucket = self._buckets[index]
        if bucket is None:
            self._buckets[index] = bytearray(digest)
        else:
            at = bucket.find(digest)
            while at >= 0:
                if not at & 7:
                    return True
                at = bucket.find(digest, at + 1)
            bucket += digest
        self._count += 1
        return False

    def __len__(self) -> int:
        return self._count

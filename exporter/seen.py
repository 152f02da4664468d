"""Ids already counted, kept small: 8-byte digests, not the ids themselves.

History can hold millions of message, prompt and tool-call ids; a digest costs a fraction of
the id string and two different ids collide with a probability of about n²/2⁶⁵.
"""

from __future__ import annotations

from hashlib import blake2b


class SeenIds:
    def __init__(self) -> None:
        self._seen: set[int] = set()

    def add(self, *parts: str) -> bool:
        """Remember the id; True if it had been seen before."""
        digest = blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
        key = int.from_bytes(digest, "little")
        if key in self._seen:
            return True
        self._seen.add(key)
        return False

    def __len__(self) -> int:
        return len(self._seen)

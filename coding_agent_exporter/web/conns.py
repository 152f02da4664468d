"""What one client can hold of the HTTP server: a bounded number of connections, and none for
longer than its request takes.

- **A cap on connections** (`--web.max-connections`, 64 by default): each connection is a
  thread. Past the cap, `RESERVED` more are taken but answer only `/metrics` and the health
  endpoints (the scrape and the probes come first); past those, a connection is closed at once.
- **A deadline to send a request**: from the moment a connection waits for a request (a new
  one, or the next on a kept-alive one) to the end of its headers, `REQUEST_TIMEOUT` seconds;
  a client that sends half a header and waits, or trickles one byte at a time, or never
  finishes a TLS handshake, is cut off then (one thread waits for the nearest deadline: no
  polling).
- **A write timeout**: a socket operation that makes no progress for `REQUEST_TIMEOUT` seconds
  (a client that never reads a large answer, or the event stream) ends the connection.

Every connection refused and every deadline missed is counted (`refused`, by reason), for the
exporter's own metrics.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import Counter
from typing import Any

__all__ = ["REQUEST_TIMEOUT", "RESERVED", "Connections"]

REQUEST_TIMEOUT = 30.0
"""Seconds to send a request's line and headers, and for any one socket operation."""
RESERVED = 8
"""Connections beyond the cap that may still be scraped or probed."""


class Connections:
    """Slots for connections, and the deadlines of those still sending their request."""

    def __init__(self, limit: int = 64, timeout: float = REQUEST_TIMEOUT) -> None:
        self.limit, self.timeout = limit, timeout
        self.refused: Counter[str] = Counter()  # reason → connections refused or cut off
        self._cond = threading.Condition()
        self._active = 0
        self._reserved: set[int] = set()  # ids of sockets in a reserved slot
        self._deadlines: dict[Any, float] = {}  # socket → when its request must be in
        self._stopping = False
        self._reaper: threading.Thread | None = None  # started with the first connection

    @property
    def active(self) -> int:
        """Connections being served now."""
        with self._cond:
            return self._active

    def take(self, sock: Any) -> bool:
        """A slot for a new connection; False (closed, counted) when none is left."""
        with self._cond:
            if self._active >= self.limit + RESERVED:
                self.refused["connections"] += 1
                return False
            self._active += 1
            if self._active > self.limit:
                self._reserved.add(id(sock))
        return True

    def give_back(self, sock: Any) -> None:
        with self._cond:
            self._active -= 1
            self._reserved.discard(id(sock))
            self._deadlines.pop(sock, None)

    def reserved(self, sock: Any) -> bool:
        """The connection took a slot past the cap: it is served only scrapes and probes."""
        with self._cond:
            return id(sock) in self._reserved

    def awaiting(self, sock: Any) -> None:
        """`sock` waits for a request: it must have sent all of it by the deadline."""
        with self._cond:
            self._deadlines[sock] = time.monotonic() + self.timeout
            if self._reaper is None and not self._stopping:
                self._reaper = threading.Thread(
                    target=self._reap, name="http-deadlines", daemon=True
                )
                self._reaper.start()
            self._cond.notify()

    def arrived(self, sock: Any) -> None:
        with self._cond:
            self._deadlines.pop(sock, None)

    def missed(self, sock: Any) -> None:
        """The wait for a request on `sock` ended without one: counted when its deadline had
        passed (the socket's own time-out came first), not when the client closed it."""
        with self._cond:
            deadline = self._deadlines.pop(sock, None)
            if deadline is not None and time.monotonic() >= deadline - 0.05:
                self.refused["request_timeout"] += 1

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
            reaper = self._reaper
        if reaper is not None:
            reaper.join(timeout=5)

    def _reap(self) -> None:
        while True:
            with self._cond:
                while not self._stopping:
                    now = time.monotonic()
                    late = [s for s, at in self._deadlines.items() if at <= now]
                    if late:
                        break
                    nearest = min(self._deadlines.values(), default=None)
                    self._cond.wait(None if nearest is None else nearest - now)
                if self._stopping:
                    return
                for sock in late:
                    del self._deadlines[sock]
                self.refused["request_timeout"] += len(late)
            for sock in late:  # its thread, blocked reading, sees the end of the stream
                _cut(sock)


def _cut(sock: Any) -> None:
    with contextlib.suppress(OSError, ValueError):
        sock.shutdown(socket.SHUT_RDWR)

"""The HTTP side: /metrics (Prometheus text, OpenMetrics when asked), the console, its API, probes.

/metrics (or --web.telemetry-path)   the scrape, built fresh from state each time
/                                    the console: a page of the package's `static` folder
/static/<file>                       its script and style
/-/healthy                           200 while the process serves
/-/ready                             200 once the first catch-up finished, 503 before
/api/...                             the sessions and their turns as JSON (`api`)
/api/events                          the rows that change, as server-sent events (`live`)

A scrape is never answered from a render begun before it arrived, so what it shows is a view
of the state built after the request came in. Scrapes that arrive together share a render
(`Renders`): while one is being built, those that arrive wait for the next one, built once
for all of them; N clients scraping back to back cost one render at a time, not N, and leave
the reading loop the CPU (and the state's lock) it needs. A render has the library write only
the families that changed since the last one (`exposition.FamilyRenders`).
"""

from __future__ import annotations

import errno
import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from ..prometheus.exposition import FamilyRenders
from .conns import REQUEST_TIMEOUT, Connections
from .handler import Handler, Refused
from .hosts import HostPolicy
from .live import Feed
from .webconfig import WebConfig

log = logging.getLogger(__name__)
Api = Callable[[str, dict[str, list[str]]], tuple[int, Any]]
"""`/api/...` path and query → (status, JSON document): `web.api.answer` bound to a state."""
MAX_FORMATS = 8
"""Formats (content type: format, version, escaping) whose renders are shared; the Accept header
names the version, so a client could make up any number of them."""
STATIC = Path(__file__).with_name("static")
API_AT_ONCE = 4
"""`/api/` requests answered at once (each holds the state's lock a moment); more get 503."""
PAUSE_FIRST, PAUSE_MAX = 0.1, 1.0
"""Seconds accepting pauses when no file descriptor is left: the first pause, the longest."""
_NO_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class Renders:
    """The registry rendered in one format, one render at a time, each shared by every
    request that arrived before it began; a request never gets a render begun before it."""

    def __init__(self, render: Callable[[], bytes]) -> None:
        self._render = render
        self._cond = threading.Condition()
        self._begun = 0  # renders begun so far
        self._running = False
        self._done: tuple[int, bytes] | None = None  # the latest render finished: number, body
        self.waiting = 0  # requests waiting for a render (tests look)

    def get(self) -> bytes:
        with self._cond:
            wanted = self._begun + 1  # any render begun from now on will do
            while True:
                if self._done is not None and self._done[0] >= wanted:
                    return self._done[1]
                if not self._running:
                    break
                self.waiting += 1
                self._cond.wait()
                self.waiting -= 1
            self._running = True
            self._begun += 1
            number = self._begun
        body = None
        try:
            body = self._render()
            return body
        finally:  # a render that raised wakes the others: one of them renders again
            with self._cond:
                self._running = False
                if body is not None:
                    self._done = (number, body)
                self._cond.notify_all()


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        registry: CollectorRegistry,
        telemetry_path: str,
        ready: threading.Event,
        web_config: WebConfig | None = None,
        api: Api | None = None,
        feed: Feed | None = None,
        static: Path = STATIC,
        hosts: HostPolicy | None = None,
        max_connections: int = 64,
        request_timeout: float = REQUEST_TIMEOUT,
        api_at_once: int = API_AT_ONCE,
    ) -> None:
        self.registry, self.telemetry_path = registry, telemetry_path
        self.ready, self.api, self.feed, self.static = ready, api, feed, static
        self.hosts = hosts or HostPolicy.of(address[0])
        self.conns = Connections(max_connections, request_timeout)
        self.renders: dict[str, Renders] = {}  # by content type (format, version, escaping)
        self._renders_lock = threading.Lock()
        self.web_config = web_config or WebConfig()
        self.api_slots = threading.BoundedSemaphore(api_at_once)
        self._paused = 0.0  # seconds of the last pause of accepting (out of descriptors)
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, Handler)
        registry.register(Refused(self.conns))
        if self.web_config.tls is not None:  # the handshake runs in the request's own thread
            self.socket = self.web_config.tls.wrap_socket(
                self.socket, server_side=True, do_handshake_on_connect=False
            )

    def exposition(self, accept: str) -> tuple[str, bytes]:
        """The content type the client asked for and the metrics rendered in it."""
        encoder, content_type = choose_encoder(accept)
        with self._renders_lock:
            renders = self.renders.get(content_type)
            if renders is None and len(self.renders) < MAX_FORMATS:
                write = FamilyRenders(self.registry, encoder, content_type)
                renders = self.renders[content_type] = Renders(write)
        if renders is None:  # the client names its own version: rendered for it alone
            return content_type, encoder(self.registry)
        return content_type, renders.get()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-request (a reset, a broken pipe, a time-out, a failed TLS
        handshake) is no failure of the exporter's: not reported. Anything else is logged
        with its traceback, never printed to stderr as `socketserver` does."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError | ssl.SSLError):
            return
        log.error("request from %s failed", client_address[0], exc_info=error)

    def get_request(self) -> tuple[Any, Any]:
        """Accept a connection. With no file descriptor left (EMFILE, ENFILE: the process or
        the system at its limit), the connection stays queued and the listening socket stays
        readable: accepting again at once would spin a core. Accepting pauses instead, for
        `PAUSE_FIRST` seconds doubling to `PAUSE_MAX` while it lasts; each pause is counted
        (`descriptors`) and the first of a run logged."""
        try:
            found = super().get_request()
        except OSError as error:
            if error.errno not in _NO_DESCRIPTORS:
                raise
            self.conns.refused["descriptors"] += 1
            if not self._paused:
                log.warning(
                    "no file descriptor left to accept a connection (%s): accepting paused "
                    "until one is free (raise the limit: ulimit -n)",
                    error.strerror,
                )
            self._paused = min(PAUSE_MAX, max(PAUSE_FIRST, 2 * self._paused))
            time.sleep(self._paused)  # only while out of descriptors: never in steady state
            raise
        if self._paused:
            log.info("accepting connections again")
            self._paused = 0.0
        return found

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.conns.take(request):  # every slot taken: closed at once, never queued
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.conns.give_back(request)

    def server_close(self) -> None:
        self.conns.stop()
        super().server_close()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="http", daemon=True)
        thread.start()
        return thread

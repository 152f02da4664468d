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

import json
import logging
import socket
import ssl
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from ..prometheus.exposition import FamilyRenders
from .live import Feed
from .webconfig import WebConfig

log = logging.getLogger(__name__)
Api = Callable[[str, dict[str, list[str]]], tuple[int, Any]]
"""`/api/...` path and query → (status, JSON document): `web.api.answer` bound to a state."""
MAX_FORMATS = 8
"""Formats (content type: format, version, escaping) whose renders are shared; the Accept header
names the version, so a client could make up any number of them."""
STATIC = Path(__file__).with_name("static")
STATIC_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
PAGE_HEADERS = (
    (
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-cache"),
)
"""Sent with the console's files: nothing but its own script and style runs in it."""


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
    ) -> None:
        self.registry, self.telemetry_path = registry, telemetry_path
        self.ready, self.api, self.feed, self.static = ready, api, feed, static
        self.renders: dict[str, Renders] = {}  # by content type (format, version, escaping)
        self._renders_lock = threading.Lock()
        self.web_config = web_config or WebConfig()
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
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

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="http", daemon=True)
        thread.start()
        return thread


class _Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        if not self.server.web_config.allows(self.headers.get("Authorization")):
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="coding-agent-exporter"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        if path == "/api/events" and self.server.feed is not None:
            self._stream(self.server.feed)
        elif path.startswith("/api/") and self.server.api is not None:
            status, doc = self.server.api(path, parse_qs(query))
            self._send(status, "application/json", json.dumps(doc).encode())
        elif path == self.server.telemetry_path:
            self._send(200, *self.server.exposition(self.headers.get("Accept", "")))
        elif path == "/" or path.startswith("/static/"):
            self._static(path.removeprefix("/static/") if path != "/" else "console.html")
        elif path == "/-/healthy":
            self._send(200, "text/plain; charset=utf-8", b"Healthy.\n")
        elif path == "/-/ready":
            if self.server.ready.is_set():
                self._send(200, "text/plain; charset=utf-8", b"Ready.\n")
            else:
                self._send(503, "text/plain; charset=utf-8", b"Catching up on history.\n")
        else:
            self._send(404, "text/plain; charset=utf-8", b"Not found.\n")

    def do_HEAD(self) -> None:
        self.do_GET()

    def _stream(self, feed: Feed) -> None:
        """Server-sent events until the client goes or the server stops (`live`)."""
        events = feed.stream() if self.command == "GET" else None
        if events is None:
            busy = self.command == "GET"
            self._send(503 if busy else 200, "text/event-stream", b"")
            return
        self.close_connection = True  # the stream ends with the connection
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Accel-Buffering", "no")  # a proxy (nginx) passes each event on
        self.end_headers()
        try:
            for chunk in events:
                self.wfile.write(chunk)
                self.wfile.flush()
        except (ConnectionError, TimeoutError, ssl.SSLError):
            pass  # the client went away: noticed at the latest by the next keep-alive
        finally:
            events.close()

    def _static(self, name: str) -> None:
        """A file of the console, by its bare name (no folder: nothing else can be reached)."""
        kind = STATIC_TYPES.get(Path(name).suffix)
        body = None
        if kind is not None and name and "/" not in name and not name.startswith("."):
            try:
                body = (self.server.static / name).read_bytes()
            except OSError:
                body = None
        if body is None or kind is None:
            self._send(404, "text/plain; charset=utf-8", b"Not found.\n")
        else:
            self._send(200, kind, body, PAGE_HEADERS)

    def _send(
        self,
        status: int,
        content_type: str,
        body: bytes,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # scrapes every few seconds would drown the log

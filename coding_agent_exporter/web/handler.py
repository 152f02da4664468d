"""How one request is answered: the checks before anything is served (the host and origin it
names, its framing, whether its connection may ask for more than a scrape), then the route:
/metrics, the console's files, its API and event stream, the probes (see `server`)."""

from __future__ import annotations

import json
import re
import select
import ssl
from functools import partial
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from .conns import REQUEST_TIMEOUT, Connections
from .live import Feed

if TYPE_CHECKING:
    from .server import Api, Server

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
PROBES = frozenset({"/-/healthy", "/-/ready"})
STATIC_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*")


class Refused(Collector):
    """`coding_agent_exporter_http_refused_total{reason}`: connections the server closed
    (`connections`: over the cap; `request_timeout`: a request not sent in time), pauses of
    accepting for want of file descriptors (`descriptors`) and requests it refused (`host`,
    `origin`, `framing`, `reserved`, `api_busy`: more API requests at once than it makes)."""

    def __init__(self, conns: Connections) -> None:
        self.conns = conns

    def collect(self) -> Any:
        family = CounterMetricFamily(
            "coding_agent_exporter_http_refused",
            "Connections closed and requests refused by the HTTP server, by reason.",
            labels=["reason"],
        )
        for reason, count in sorted(self.conns.refused.items()):
            family.add_metric([reason], count)
        yield family


class Handler(BaseHTTPRequestHandler):
    server: Server
    protocol_version = "HTTP/1.1"
    timeout = REQUEST_TIMEOUT  # any one read or write: a client that stops is let go

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.conns.timeout)

    def handle_one_request(self) -> None:
        conns = self.server.conns
        conns.awaiting(self.connection)  # its line and headers by the deadline
        super().handle_one_request()
        conns.missed(self.connection)  # a request that never came in time is counted

    def parse_request(self) -> bool:
        """The request line and headers, refused when HTTP/0.9 (no headers to answer with) or
        framed ambiguously: a body on a GET would be read as the next request (smuggling)."""
        raw: bytes = getattr(self, "raw_requestline", b"")
        self.requestline = str(raw, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if len(words) == 2:  # HTTP/0.9: answered before any header is waited for
            self.command, self.path = words
            return self._bad_framing("HTTP/0.9 is not supported")
        if not super().parse_request():
            return False
        self.server.conns.arrived(self.connection)
        problem = _framing_problem(self)
        return True if problem is None else self._bad_framing(problem)

    def _bad_framing(self, problem: str) -> bool:
        self.server.conns.refused["framing"] += 1
        self.request_version = "HTTP/1.0"  # an answer with a status line, never a bare body
        self.close_connection = True
        self.send_error(400, problem)
        return False

    def _refuse(self, path: str) -> bool:
        """Answered 403 (and True) when a request for the console or its API names a host or
        origin this exporter is not known by (`hosts`: DNS rebinding), or 503 when it holds a
        reserved slot (`conns`). /metrics and the probes are answered to any host: a scraper
        may name the machine by any of its DNS names, and they hold no prompt or title."""
        if path in PROBES or path == self.server.telemetry_path:
            return False
        hosts, refused = self.server.hosts, self.server.conns.refused
        reason = None
        if not hosts.allows_host(self.headers.get("Host")):
            reason = "host"
        elif not hosts.allows_origin(self.headers.get("Origin")):
            reason = "origin"
        elif self.server.conns.reserved(self.connection):
            refused["reserved"] += 1
            self.close_connection = True
            self._send(503, "text/plain; charset=utf-8", b"Too many connections.\n")
            return True
        if reason is None:
            return False
        refused[reason] += 1
        body = f"Forbidden: {reason} not one this exporter is known by (--web.allowed-hosts).\n"
        self._send(403, "text/plain; charset=utf-8", body.encode())
        return True

    def do_GET(self) -> None:
        if self._refuse(self.path.partition("?")[0]):
            return
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
            self._api(self.server.api, path, query)
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

    def _api(self, api: Api, path: str, query: str) -> None:
        """An API answer, if fewer than `API_AT_ONCE` are being made: past that, 503 with
        `Retry-After` at once (counted, `api_busy`), never a queue behind the state's lock that
        the reading loop and the scrapes would wait in too."""
        slots = self.server.api_slots
        if not slots.acquire(blocking=False):
            self.server.conns.refused["api_busy"] += 1
            body = b'{"error": "busy: too many API requests at once; try again"}'
            self._send(503, "application/json", body, (("Retry-After", "1"),))
            return
        try:
            status, doc = api(path, parse_qs(query))
        finally:
            slots.release()
        self._send(status, "application/json", json.dumps(doc).encode())

    def do_HEAD(self) -> None:
        self.do_GET()

    def _stream(self, feed: Feed) -> None:
        """Server-sent events until the client goes or the server stops (`live`)."""
        events = feed.stream(partial(_gone, self.connection)) if self.command == "GET" else None
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
        if kind is not None and STATIC_NAME.fullmatch(name):
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


def _framing_problem(request: BaseHTTPRequestHandler) -> str | None:
    """Why a request's framing is refused (HTTP/0.9, a body, two lengths), or None."""
    if request.headers.get_all("Transfer-Encoding"):
        return "a request body is not accepted (Transfer-Encoding)"
    lengths = request.headers.get_all("Content-Length") or []
    if len(lengths) > 1:
        return "more than one Content-Length"
    if lengths and lengths[0].strip() != "0":
        return "a request body is not accepted"
    return None


def _gone(sock: Any) -> bool:
    """The client of an event stream closed it, or sent something (it sends nothing after its
    request): either way the stream is over. A look, never a wait."""
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True

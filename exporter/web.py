"""The HTTP side: /metrics (Prometheus text, OpenMetrics when asked), a landing page and probes.

/metrics (or --web.telemetry-path)   the scrape, built fresh from state each time
/                                    live sessions, waiting ones first, link to the metrics
/-/healthy                           200 while the process serves
/-/ready                             200 once the first catch-up finished, 503 before
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from .webconfig import WebConfig


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        registry: CollectorRegistry,
        telemetry_path: str,
        page: Callable[[], str],
        ready: threading.Event,
        web_config: WebConfig | None = None,
    ) -> None:
        self.registry, self.telemetry_path = registry, telemetry_path
        self.page, self.ready = page, ready
        self.web_config = web_config or WebConfig()
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        if self.web_config.tls is not None:  # the handshake runs in the request's own thread
            self.socket = self.web_config.tls.wrap_socket(
                self.socket, server_side=True, do_handshake_on_connect=False
            )

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
        path = self.path.split("?", 1)[0]
        if path == self.server.telemetry_path:
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            self._send(200, content_type, encoder(self.server.registry))
        elif path == "/":
            self._send(200, "text/html; charset=utf-8", self.server.page().encode())
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

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # scrapes every few seconds would drown the log

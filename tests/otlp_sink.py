"""A real OTLP endpoint in the test process: HTTP/protobuf and gRPC, built from the same
protobuf and grpc packages the OTLP exporter uses, over TLS when given a server context or
credentials. It keeps every span it receives and the headers (metadata) each request came with."""

from __future__ import annotations

import gzip
import ssl
import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: int
    end: int
    attributes: dict[str, Any]


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


class Sink:
    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self.headers: list[dict[str, str]] = []  # per request, names in lower case
        self._lock = threading.Lock()

    def take(
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        headers: dict[str, str] | None = None,
    ) -> None:
        with self._lock:
            self.requests += 1
            self.headers.append({k.lower(): v for k, v in (headers or {}).items()})
            for resource_spans in request.resource_spans:
                attrs = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        self.spans.append(
                            ReceivedSpan(
                                service=str(attrs.get("service.name")),
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_id=span.parent_span_id.hex(),
                                name=span.name,
                                start=span.start_time_unix_nano,
                                end=span.end_time_unix_nano,
                                attributes={a.key: _value(a.value) for a in span.attributes},
                            )
                        )


def otlp_handler(
    take: Callable[[Any, dict[str, str]], None],
    request_type: Callable[[], Any],
    reply: bytes,
    path: str | None = None,
) -> type[BaseHTTPRequestHandler]:
    """An OTLP/HTTP protobuf endpoint: each POST (gzip or not) decoded as `request_type` and
    handed to `take` with its headers, answered with `reply`; other paths 404 when `path`."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if path is not None and self.path != path:
                self.send_response(404)
                self.end_headers()
                return
            request = request_type()
            request.ParseFromString(body)
            take(request, dict(self.headers.items()))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


class HttpSink(Sink):
    def __init__(self, port: int = 0, tls: ssl.SSLContext | None = None) -> None:
        super().__init__()
        reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
        handler = otlp_handler(self.take, trace_service_pb2.ExportTraceServiceRequest, reply)
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        scheme = "http"
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.endpoint = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class GrpcSink(Sink, trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, credentials: grpc.ServerCredentials | None = None) -> None:
        super().__init__()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self.server)
        if credentials is None:
            port = self.server.add_insecure_port("127.0.0.1:0")
            self.endpoint = f"http://127.0.0.1:{port}"
        else:
            port = self.server.add_secure_port("127.0.0.1:0", credentials)
            self.endpoint = f"https://127.0.0.1:{port}"
        self.server.start()

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        metadata = {str(k): str(v) for k, v in context.invocation_metadata()}
        self.take(request, metadata)
        return trace_service_pb2.ExportTraceServiceResponse()

    def close(self) -> None:
        self.server.stop(grace=None)

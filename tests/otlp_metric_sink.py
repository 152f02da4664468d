"""A real OTLP metrics endpoint in the test process, HTTP/protobuf (`/v1/metrics`) and gRPC
(`MetricsService/Export`), built from the protobuf and grpc packages the OTLP exporter uses.
It keeps every request it accepted, decoded to plain points, and can start on a port given in
advance (an endpoint that is down until then)."""

from __future__ import annotations

import threading
from concurrent import futures
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc

from .otlp_sink import otlp_handler

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Point:
    name: str
    kind: str  # sum, gauge, histogram
    unit: str
    labels: Labels
    value: Any  # a number; (bounds, bucket counts, sum, count) for a histogram
    start: int
    time: int
    temporality: int  # 1 delta, 2 cumulative, 0 for a gauge
    monotonic: bool


@dataclass(frozen=True)
class Export:
    resource: dict[str, Any]
    points: list[Point]


def _any(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def _labels(attributes: Any) -> Labels:
    return tuple(sorted((a.key, str(_any(a.value))) for a in attributes))


def _points(metric: Any) -> list[Point]:
    kind = metric.WhichOneof("data")
    data = getattr(metric, kind)
    temporality = getattr(data, "aggregation_temporality", 0)
    monotonic = getattr(data, "is_monotonic", False)
    out = []
    for p in data.data_points:
        if kind == "histogram":
            value: Any = (tuple(p.explicit_bounds), tuple(p.bucket_counts), p.sum, p.count)
        else:
            value = p.as_double if p.WhichOneof("value") == "as_double" else p.as_int
        point = Point(
            metric.name,
            kind,
            metric.unit,
            _labels(p.attributes),
            value,
            p.start_time_unix_nano,
            p.time_unix_nano,
            temporality,
            monotonic,
        )
        out.append(point)
    return out


class MetricSink:
    def __init__(self) -> None:
        self.exports: list[Export] = []
        self.headers: list[dict[str, str]] = []  # per request, names in lower case
        self._lock = threading.Lock()

    def take(
        self, request: metrics_service_pb2.ExportMetricsServiceRequest, headers: dict[str, str]
    ) -> None:
        with self._lock:
            self.headers.append({k.lower(): v for k, v in headers.items()})
            for rm in request.resource_metrics:
                resource = {a.key: _any(a.value) for a in rm.resource.attributes}
                points = [p for sm in rm.scope_metrics for m in sm.metrics for p in _points(m)]
                self.exports.append(Export(resource, points))

    def latest(self) -> dict[tuple[str, Labels], Point]:
        """The last export's points by name and labels."""
        with self._lock:
            return {(p.name, p.labels): p for p in self.exports[-1].points}


class HttpMetricSink(MetricSink):
    def __init__(self, port: int = 0) -> None:
        super().__init__()
        reply = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
        request = metrics_service_pb2.ExportMetricsServiceRequest
        handler = otlp_handler(self.take, request, reply, "/v1/metrics")
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class GrpcMetricSink(MetricSink, metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, port: int = 0) -> None:
        super().__init__()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(self, self.server)
        bound = self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.endpoint = f"http://127.0.0.1:{bound}"
        self.server.start()

    def Export(
        self,
        request: metrics_service_pb2.ExportMetricsServiceRequest,
        context: grpc.ServicerContext,
    ) -> metrics_service_pb2.ExportMetricsServiceResponse:
        self.take(request, {str(k): str(v) for k, v in context.invocation_metadata()})
        return metrics_service_pb2.ExportMetricsServiceResponse()

    def close(self) -> None:
        self.server.stop(grace=None)

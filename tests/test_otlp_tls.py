"""The OTLP exporter honours TLS settings and headers from the standard OTel environment: a real
OTLP receiver over TLS (HTTP/protobuf and gRPC) with a certificate authority made here by
openssl, the CA given through OTEL_EXPORTER_OTLP_CERTIFICATE (or its _TRACES_ twin), headers
through OTEL_EXPORTER_OTLP_HEADERS, a client certificate for mutual TLS; and without the CA or
the client certificate, nothing is delivered and the failure is counted. The machine's own CA
bundle variables (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE) point at another authority throughout:
they must not replace the CA the OTel environment names."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from coding_agent_exporter.runtime.cli import main

from .backends import get, run_exporter, wait_for
from .conftest import FIXTURES
from .otlp_sink import GrpcSink, HttpSink, Sink

SCENARIO = FIXTURES / "claude-code" / "2.1.197" / "subagent-foreground" / "home"
SPANS = 8  # the span tree of that scenario
HEADERS = "authorization=Bearer%20t0ken-123,x-tenant=team-a"  # values URL-encoded, as specified


@dataclass(frozen=True)
class Certs:
    ca: Path
    server: tuple[Path, Path]  # certificate, key
    client: tuple[Path, Path]
    other_ca: Path  # an authority that signed neither


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, both signed by it."""
    folder = tmp_path_factory.mktemp("pki")
    common = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    for name in ("ca", "other-ca"):
        _openssl(*common, "-keyout", str(folder / f"{name}.key"), "-out",
                 str(folder / f"{name}.crt"), "-subj", f"/CN={name}",
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign")  # fmt: skip
    ca, ca_key = folder / "ca.crt", folder / "ca.key"
    made = {}
    for name, usage, subject in (
        ("server", "serverAuth", "subjectAltName=IP:127.0.0.1"),
        ("client", "clientAuth", "subjectAltName=DNS:coding-agent-exporter"),
    ):
        cert, key = folder / f"{name}.crt", folder / f"{name}.key"
        _openssl(*common, "-CA", str(ca), "-CAkey", str(ca_key), "-keyout", str(key),
                 "-out", str(cert), "-subj", f"/CN={name}", "-addext", subject,
                 "-addext", "basicConstraints=critical,CA:FALSE",
                 "-addext", f"extendedKeyUsage={usage}")  # fmt: skip
        made[name] = (cert, key)
    return Certs(ca, made["server"], made["client"], folder / "other-ca.crt")


def receiver(protocol: str, certs: Certs, *, client_auth: bool = False) -> HttpSink | GrpcSink:
    cert, key = certs.server
    if protocol == "grpc":
        credentials = grpc.ssl_server_credentials(
            [(key.read_bytes(), cert.read_bytes())],
            root_certificates=certs.ca.read_bytes() if client_auth else None,
            require_client_auth=client_auth,
        )
        return GrpcSink(credentials)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    if client_auth:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(certs.ca)
    return HttpSink(tls=context)


@pytest.fixture(params=["http/protobuf", "grpc"])
def protocol(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture(autouse=True)
def machine_bundle(certs: Certs, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.setenv(name, str(certs.other_ca))


@pytest.fixture
def closing() -> Iterator[list[Sink]]:
    sinks: list[Sink] = []
    yield sinks
    for sink in sinks:
        assert isinstance(sink, HttpSink | GrpcSink)
        sink.close()


def traces(monkeypatch: pytest.MonkeyPatch, **environ: str) -> int:
    """`coding-agent-exporter traces` over the scenario, with these OTEL_ variables only."""
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    return main(["traces", "--claude.home", str(SCENARIO)])


def test_serve_sends_over_tls_with_the_ca_and_headers_of_the_environment(
    certs: Certs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, closing: list[Sink]
) -> None:
    sink = receiver("http/protobuf", certs)
    closing.append(sink)
    assert sink.endpoint.startswith("https://")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(certs.ca))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", HEADERS)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    with run_exporter(SCENARIO, tmp_path, "--traces.backfill", "all") as url:
        wait_for("spans", lambda: len(sink.spans) >= SPANS)
        wait_for("counted", lambda: f"spans_exported_total {SPANS}.0" in get(url + "/metrics")[1])
    assert len(sink.spans) == SPANS
    assert sink.headers and all(h["authorization"] == "Bearer t0ken-123" for h in sink.headers)
    assert all(h["x-tenant"] == "team-a" for h in sink.headers)


def test_traces_settings_beat_the_general_ones(
    protocol: str, certs: Certs, monkeypatch: pytest.MonkeyPatch, closing: list[Sink]
) -> None:
    sink = receiver(protocol, certs)
    closing.append(sink)
    path = "/v1/traces" if protocol == "http/protobuf" else ""  # a signal URL is taken as is
    code = traces(
        monkeypatch,
        OTEL_EXPORTER_OTLP_ENDPOINT="https://127.0.0.1:9",  # nothing listens there
        OTEL_EXPORTER_OTLP_HEADERS="x-tenant=general",
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=sink.endpoint + path,
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=protocol,
        OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE=str(certs.ca),
        OTEL_EXPORTER_OTLP_TRACES_HEADERS=HEADERS,
    )
    assert code == 0
    assert len(sink.spans) == SPANS
    assert sink.headers and all(h["x-tenant"] == "team-a" for h in sink.headers)
    assert all(h["authorization"] == "Bearer t0ken-123" for h in sink.headers)


def test_mutual_tls_with_the_client_certificate_of_the_environment(
    protocol: str, certs: Certs, monkeypatch: pytest.MonkeyPatch, closing: list[Sink]
) -> None:
    sink = receiver(protocol, certs, client_auth=True)
    closing.append(sink)
    cert, key = certs.client
    code = traces(
        monkeypatch,
        OTEL_EXPORTER_OTLP_ENDPOINT=sink.endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
        OTEL_EXPORTER_OTLP_CERTIFICATE=str(certs.ca),
        OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE=str(cert),
        OTEL_EXPORTER_OTLP_CLIENT_KEY=str(key),
    )
    assert code == 0
    assert len(sink.spans) == SPANS


@pytest.mark.parametrize("missing", ["ca", "client certificate"])
def test_without_the_ca_or_the_client_certificate_nothing_is_delivered(
    missing: str,
    protocol: str,
    certs: Certs,
    monkeypatch: pytest.MonkeyPatch,
    closing: list[Sink],
) -> None:
    sink = receiver(protocol, certs, client_auth=missing == "client certificate")
    closing.append(sink)
    environ = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
    }
    if missing != "ca":
        environ["OTEL_EXPORTER_OTLP_CERTIFICATE"] = str(certs.ca)
    assert traces(monkeypatch, **environ) == 1  # the spans are counted as failed
    assert sink.spans == []

"""`--web.config.file`: TLS and basic auth, checked with real clients (Python's TLS stack and a
real Prometheus scraping over HTTPS with basic auth), over every path: metrics, the API, the
console's files and its event stream."""

from __future__ import annotations

import base64
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt
import pytest

from coding_agent_exporter.web.webconfig import WebConfigError, load

from .backends import query, run_exporter, run_prometheus, wait_for
from .conftest import FIXTURES

HOME = FIXTURES / "claude-code" / "2.1.197" / "print-answer" / "home"


@pytest.fixture
def web_config(tmp_path: Path) -> Path:
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(tmp_path / "server.key"),
            "-out",
            str(tmp_path / "server.crt"),
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    path = tmp_path / "web.yml"
    path.write_text(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        f"basic_auth_users:\n  prometheus: '{hashed}'\n"
    )
    return path


def fetch(url: str, ca: Path, password: str | None) -> int:
    request = urllib.request.Request(url)
    if password is not None:
        token = base64.b64encode(f"prometheus:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    context = ssl.create_default_context(cafile=str(ca))
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def events_over_tls(url: str, ca: Path) -> bytes:
    """The first bytes of the event stream, with the password."""
    request = urllib.request.Request(url)
    token = base64.b64encode(b"prometheus:s3cret").decode()
    request.add_header("Authorization", f"Basic {token}")
    context = ssl.create_default_context(cafile=str(ca))
    with urllib.request.urlopen(request, context=context, timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        return bytes(response.readline())


def test_tls_and_basic_auth_with_a_real_client_and_a_real_prometheus(
    tmp_path: Path, web_config: Path
) -> None:
    ca = tmp_path / "server.crt"
    with run_exporter(HOME, tmp_path, "--web.config.file", str(web_config), ready=False) as url:
        secure = url.replace("http://", "https://")
        wait_for("https", lambda: fetch(secure + "/-/healthy", ca, "s3cret") == 200)
        assert fetch(secure + "/metrics", ca, None) == 401
        assert fetch(secure + "/metrics", ca, "wrong") == 401
        assert fetch(secure + "/metrics", ca, "s3cret") == 200
        assert fetch(secure + "/api/sessions?history=1", ca, None) == 401  # the API too
        assert fetch(secure + "/api/sessions?history=1", ca, "s3cret") == 200
        for path in ("/", "/static/console.html", "/api/events", "/api/status"):
            assert fetch(secure + path, ca, None) == 401, path  # the console too
        assert events_over_tls(secure + "/api/events", ca).startswith(b"retry: 2000")
        with pytest.raises(OSError):  # plain HTTP is not served
            urllib.request.urlopen(url + "/metrics", timeout=5)
        config = (
            "global: {scrape_interval: 1s}\n"
            "scrape_configs:\n  - job_name: exporter\n    scheme: https\n"
            f"    tls_config: {{ca_file: '{ca}'}}\n"
            "    basic_auth: {username: prometheus, password: s3cret}\n"
            f"    static_configs: [{{targets: ['{secure.removeprefix('https://')}']}}]\n"
        )
        with run_prometheus(tmp_path, config) as prometheus:
            wait_for("scrape over TLS", lambda: query(prometheus, 'up{job="exporter"} == 1'))
            assert query(prometheus, "coding_agent_messages_total")


@pytest.mark.parametrize(
    "text,complaint",
    [
        ("nonsense: 1\n", "unknown keys"),
        ("tls_server_config:\n  cert_file: a.crt\n", "needs cert_file and key_file"),
        ("basic_auth_users:\n  bob: plain\n", "not a bcrypt hash"),
        ("tls_server_config: {cert_file: missing.crt, key_file: missing.key}\n", "missing.crt"),
    ],
)
def test_bad_web_config_says_which_file_and_key(tmp_path: Path, text: str, complaint: str) -> None:
    path = tmp_path / "web.yml"
    path.write_text(text)
    with pytest.raises(WebConfigError, match=complaint) as raised:
        load(path)
    assert str(path) in str(raised.value)

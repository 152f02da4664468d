"""The HTTP server under attack and load (issue: Host checks, timeouts, bounded connections,
safe auth, unambiguous framing), each attack sent over real sockets to a real server.

In-process servers with short deadlines (the defaults are 30 s); every wait is a deadline on a
condition, generous for a loaded machine, never a bound on how fast the server is.
"""

from __future__ import annotations

import base64
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import bcrypt
import pytest
from prometheus_client import CollectorRegistry

from coding_agent_exporter.state.labels import ProjectLabel
from coding_agent_exporter.web.conns import RESERVED
from coding_agent_exporter.web.hosts import HostPolicy
from coding_agent_exporter.web.live import Feed
from coding_agent_exporter.web.server import Server
from coding_agent_exporter.web.webconfig import WebConfig, load

DEADLINE = 20.0


def wait_for(what: str, check: Callable[[], bool], deadline: float = DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not check():
        if time.monotonic() > end:
            pytest.fail(f"not within {deadline} s: {what}")
        time.sleep(0.02)


def api(path: str, query: dict[str, list[str]]) -> tuple[int, object]:
    return 200, {"path": path, "sessions": ["a title the user typed"]}


@pytest.fixture
def make() -> Iterator[Callable[..., tuple[Server, int]]]:
    servers: list[Server] = []

    def start(**kwargs: object) -> tuple[Server, int]:
        ready = threading.Event()
        ready.set()
        server = Server(("127.0.0.1", 0), CollectorRegistry(), "/metrics", ready, api=api, **kwargs)  # type: ignore[arg-type]
        server.start()
        servers.append(server)
        return server, server.server_address[1]

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def exchange(port: int, request: bytes, timeout: float = 10.0) -> bytes:
    """Send `request` raw, read until the server closes or goes quiet."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as client:
        client.sendall(request)
        chunks = []
        try:
            while chunk := client.recv(65536):
                chunks.append(chunk)
                if b"\r\n\r\n" in b"".join(chunks) and b"Content-Length: " in chunks[0]:
                    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
                    length = int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0])
                    if len(body) >= length:
                        break
        except TimeoutError:
            pass
        return b"".join(chunks)


def get(port: int, path: str, **headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items())]
    return exchange(port, ("\r\n".join(lines) + "\r\nConnection: close\r\n\r\n").encode())


# ---- 1. DNS rebinding ------------------------------------------------------------------


def test_a_rebound_name_cannot_read_the_api_or_the_console(
    make: Callable[..., tuple[Server, int]],
) -> None:
    """A page at evil.example whose name now resolves to 127.0.0.1: its requests name its own
    host. The API and the console refuse them; the loopback names are served."""
    server, port = make()
    for path in ("/api/sessions", "/", "/static/console.js", "/api/events"):
        answer = get(port, path, Host=f"evil.example:{port}")
        assert answer.startswith(b"HTTP/1.1 403"), path
        assert b"a title the user typed" not in answer
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "app.localhost"):
        assert get(port, "/api/sessions", Host=host).startswith(b"HTTP/1.1 200"), host
    assert get(port, "/api/sessions").startswith(b"HTTP/1.1 403")  # HTTP/1.1 without a Host
    assert server.conns.refused["host"] == 5


def test_a_cross_origin_script_is_refused_even_with_a_good_host(
    make: Callable[..., tuple[Server, int]],
) -> None:
    _, port = make()
    host = f"127.0.0.1:{port}"
    refused = get(port, "/api/sessions", Host=host, Origin="http://evil.example")
    assert refused.startswith(b"HTTP/1.1 403")
    same = get(port, "/api/sessions", Host=host, Origin=f"http://127.0.0.1:{port}")
    assert same.startswith(b"HTTP/1.1 200")


def test_metrics_and_probes_answer_any_host_a_scraper_uses(
    make: Callable[..., tuple[Server, int]],
) -> None:
    _, port = make()
    for path in ("/metrics", "/-/healthy", "/-/ready"):
        answer = get(port, path, Host="devbox.corp.example:10464", Origin="http://x.example")
        assert answer.startswith(b"HTTP/1.1 200"), path


def test_hosts_allowed_by_flag_external_url_and_a_wildcard_listen_address() -> None:
    policy = HostPolicy.of("127.0.0.1", "https://agents.example.org/console", ["Box.Lan"])
    assert policy.allows_host("agents.example.org")
    assert policy.allows_host("box.lan:10464")
    assert not policy.allows_host("evil.example")
    assert not policy.allows_host("127.0.0.1:notaport")
    assert HostPolicy.of("127.0.0.1", None, ["*"]).allows_host("anything.example")
    wildcard = HostPolicy.of("0.0.0.0")
    assert wildcard.allows_host(socket.gethostname())
    assert not wildcard.allows_host("evil.example")


# ---- 2. what a client can hold -----------------------------------------------------------


def test_clients_that_send_half_a_header_and_wait_are_cut_off_at_the_deadline(
    make: Callable[..., tuple[Server, int]],
) -> None:
    server, port = make(request_timeout=1.0)
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
    try:
        for client in clients:
            client.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        wait_for(
            "every half-sent request cut off", lambda: server.conns.refused["request_timeout"] == 20
        )
        for client in clients:
            client.settimeout(DEADLINE)
            assert client.recv(100) == b""  # closed by the server
        wait_for("every thread gone", lambda: server.conns.active == 0)
    finally:
        for client in clients:
            client.close()


def test_a_client_that_trickles_its_header_a_byte_at_a_time_is_cut_off(
    make: Callable[..., tuple[Server, int]],
) -> None:
    server, port = make(request_timeout=1.0)
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.settimeout(DEADLINE)
        end = time.monotonic() + DEADLINE
        try:
            while time.monotonic() < end:
                client.sendall(b"x")  # each byte well within the socket timeout
                time.sleep(0.2)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert server.conns.refused["request_timeout"] == 1


def test_connections_past_the_cap_serve_only_scrapes_and_past_the_reserve_are_closed(
    make: Callable[..., tuple[Server, int]],
) -> None:
    server, port = make(max_connections=4)
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    try:
        wait_for("four connections held", lambda: server.conns.active == 4)
        reserved = socket.create_connection(("127.0.0.1", port))
        host = f"Host: 127.0.0.1:{port}\r\n"
        reserved.sendall(f"GET /api/sessions HTTP/1.1\r\n{host}\r\n".encode())
        reserved.settimeout(DEADLINE)
        assert reserved.recv(1000).startswith(b"HTTP/1.1 503")
        reserved.close()
        scrape = exchange(
            port, f"GET /metrics HTTP/1.1\r\n{host}Connection: close\r\n\r\n".encode()
        )
        assert scrape.startswith(b"HTTP/1.1 200")
        more = [socket.create_connection(("127.0.0.1", port)) for _ in range(RESERVED)]
        wait_for("the reserve held", lambda: server.conns.active == 4 + RESERVED)
        with socket.create_connection(("127.0.0.1", port)) as over:
            over.settimeout(DEADLINE)
            assert over.recv(100) == b""  # closed at once, no thread
        assert server.conns.refused["connections"] == 1
        for client in more:
            client.close()
    finally:
        for client in idle:
            client.close()


def test_a_client_that_never_reads_a_large_answer_is_let_go(
    make: Callable[..., tuple[Server, int]], tmp_path: Path
) -> None:
    static = tmp_path / "static"
    static.mkdir()
    (static / "big.js").write_bytes(b"x" * 64_000_000)
    server, port = make(request_timeout=1.0, static=static)
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.sendall(f"GET /static/big.js HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        wait_for("the stalled writer dropped", lambda: server.conns.active == 0)


# ---- 4. basic auth -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def users() -> WebConfig:
    config = WebConfig()
    config.users["prometheus"] = bcrypt.hashpw(b"secret", bcrypt.gensalt(4))
    return config


def basic(text: str, scheme: str = "Basic") -> str:
    return f"{scheme} {base64.b64encode(text.encode()).decode()}"


def test_a_password_longer_than_bcrypt_takes_is_refused_cleanly(users: WebConfig) -> None:
    assert not users.allows(basic("prometheus:" + "p" * 100))
    assert not users.allows(basic("nobody:" + "p" * 100))


def test_the_scheme_is_case_insensitive(users: WebConfig) -> None:
    assert users.allows(basic("prometheus:secret", "basic"))
    assert users.allows(basic("prometheus:secret", "BASIC"))
    assert not users.allows(basic("prometheus:wrong", "basic"))


def test_an_unknown_user_costs_a_bcrypt_check_like_a_known_one(
    users: WebConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unit (a spy on bcrypt): a wrong user is checked against a hash of the users' cost, so
    its answer takes as long as a known user's wrong password (measured in bench/auth.py)."""
    checked: list[bytes] = []
    real = bcrypt.checkpw
    monkeypatch.setattr(bcrypt, "checkpw", lambda p, h: checked.append(h[:7]) or real(p, h))
    assert not users.allows(basic("nobody:secret"))
    assert not users.allows(basic("prometheus:wrong"))
    assert checked == [b"$2b$04$", b"$2b$04$"]


def test_over_the_wire_a_long_password_gets_401_not_a_broken_connection(
    make: Callable[..., tuple[Server, int]], tmp_path: Path
) -> None:
    config = tmp_path / "web.yml"
    hashed = bcrypt.hashpw(b"secret", bcrypt.gensalt(4)).decode()
    config.write_text(f"basic_auth_users:\n  prometheus: {hashed}\n")
    _, port = make(web_config=load(config))
    answer = get(port, "/metrics", Host="127.0.0.1", Authorization=basic("prometheus:" + "p" * 200))
    assert answer.startswith(b"HTTP/1.1 401")
    answer = get(
        port, "/metrics", Host="127.0.0.1", Authorization=basic("prometheus:secret", "basic")
    )
    assert answer.startswith(b"HTTP/1.1 200")


# ---- 5. request smuggling, HTTP/0.9 -------------------------------------------------------


@pytest.mark.parametrize(
    "request_",
    [
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 44\r\n\r\n"
        b"GET /api/sessions HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 44\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    ],
    ids=["body-on-get", "two-lengths", "length-and-chunked", "chunked"],
)
def test_an_ambiguously_framed_request_is_refused_and_nothing_behind_it_is_served(
    make: Callable[..., tuple[Server, int]], request_: bytes
) -> None:
    server, port = make()
    answer = exchange(port, request_)
    assert answer.startswith(b"HTTP/1.1 400")
    assert answer.count(b"HTTP/1.") == 1  # no second answer: the body was no request
    assert server.conns.refused["framing"] == 1


def test_http_0_9_gets_a_status_line_not_a_bare_body(
    make: Callable[..., tuple[Server, int]],
) -> None:
    _, port = make()
    answer = exchange(port, b"GET /metrics\r\n")
    assert answer.split(b"\r\n", 1)[0].startswith(b"HTTP/1.1 400")  # a status line, headers


# ---- 10. smaller ones ---------------------------------------------------------------------


def test_a_nul_byte_in_a_static_path_is_a_404(make: Callable[..., tuple[Server, int]]) -> None:
    _, port = make()
    answer = get(port, "/static/console%00.js".replace("%00", "\x00"), Host="127.0.0.1")
    assert answer.startswith(b"HTTP/1.1 404")


def test_an_event_stream_slot_is_free_soon_after_its_client_leaves(
    make: Callable[..., tuple[Server, int]],
) -> None:
    """Before, a slot stayed taken until the next keep-alive (15 s) found the client gone."""
    feed = Feed(ProjectLabel())
    _, port = make(feed=feed)
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(f"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        client.settimeout(DEADLINE)
        assert client.recv(1000).startswith(b"HTTP/1.1 200")
        wait_for("the stream counted", lambda: feed.streams == 1)
    start = time.monotonic()
    wait_for("the slot freed", lambda: feed.streams == 0, deadline=12.0)  # < the keep-alive
    assert time.monotonic() - start < 12.0


def test_refusals_are_counted_in_a_metric(make: Callable[..., tuple[Server, int]]) -> None:
    server, port = make()
    get(port, "/api/sessions", Host="evil.example")
    body = get(port, "/metrics", Host="127.0.0.1").decode()
    assert 'coding_agent_exporter_http_refused_total{reason="host"} 1.0' in body
    assert server.conns.refused["host"] == 1


# ---- the same attacks against a real `serve` ----------------------------------------------


def test_a_real_serve_refuses_a_rebound_host_a_smuggled_request_and_http_0_9(
    tmp_path: Path,
) -> None:
    """`coding-agent-exporter serve` in its own process over a recorded session: a page at a
    rebound name reads nothing of the API or the console, a body on a GET is refused with
    nothing behind it served, HTTP/0.9 gets a status line; a scrape from any host is served and
    every refusal is counted on /metrics."""
    from .backends import run_exporter
    from .conftest import FIXTURES

    home = FIXTURES / "claude-code" / "2.1.332" / "print-answer" / "home"
    with run_exporter(home, tmp_path, "--web.max-connections", "8") as url:
        port = int(url.rsplit(":", 1)[1])
        rebound = get(port, "/api/sessions", Host=f"evil.example:{port}")
        assert rebound.startswith(b"HTTP/1.1 403") and b"SCENARIO" not in rebound
        assert get(port, "/", Host=f"evil.example:{port}").startswith(b"HTTP/1.1 403")
        assert get(port, "/api/sessions", Host=f"127.0.0.1:{port}").startswith(b"HTTP/1.1 200")
        smuggled = exchange(
            port,
            b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 44\r\n\r\n"
            b"GET /api/sessions HTTP/1.1\r\nHost: x\r\n\r\n",
        )
        assert smuggled.startswith(b"HTTP/1.1 400") and smuggled.count(b"HTTP/1.") == 1
        assert exchange(port, b"GET /metrics\r\n").startswith(b"HTTP/1.1 400")
        body = get(port, "/metrics", Host="devbox.example:10464").decode()
        for reason, count in (("host", 2), ("framing", 2)):
            assert (
                f'coding_agent_exporter_http_refused_total{{reason="{reason}"}} {count}.0' in body
            )

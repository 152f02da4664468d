"""Out of file descriptors (issue #34, point 3): a real `serve` whose descriptor limit is lowered
(`RLIMIT_NOFILE`), brought to it by clients that hold connections. Its accept loop must not spin,
and a session file it could not open meanwhile must be read once descriptors are free again,
without the file changing again."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, suppress
from pathlib import Path

import psutil
import pytest

from .backends import free_port, get, wait_for
from .conftest import FIXTURES

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is POSIX")
INTERACTIVE = FIXTURES / "claude-code" / "2.1.332" / "interactive" / "home"
OLD_ID = "971b287f-0952-4ff3-8a23-8b842ccd6d13"
NEW_ID = "0d5c7c6e-5a57-4d6b-9f36-0000000000e1"
LIMIT = 48
"""The exporter's descriptor limit: room to start (about 15 in use once ready), little more."""


def limited() -> None:  # in the child, before exec
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


@pytest.fixture
def exporter(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path, Path]]:
    home = tmp_path / "claude"
    shutil.copytree(INTERACTIVE, home)
    port, log = free_port(), tmp_path / "exporter.log"
    argv = [sys.executable, "-m", "coding_agent_exporter", "serve", "--claude.home", str(home)]
    argv += ["--web.listen-address", f"127.0.0.1:{port}"]
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=out, preexec_fn=limited)
    try:
        wait_for("ready", lambda: get(f"http://127.0.0.1:{port}/-/ready")[0] == 200)
        yield process, port, home, log
    finally:
        process.send_signal(signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=20)
        process.kill()


def hold_every_descriptor(port: int, pid: int, stack: ExitStack) -> None:
    """Connect and send half a request until the exporter holds as many descriptors as its
    limit lets it (the connections past it wait in the listening socket's queue)."""
    process = psutil.Process(pid)
    for _ in range(3 * LIMIT):
        with suppress(OSError):
            client = stack.enter_context(socket.create_connection(("127.0.0.1", port), 2))
            client.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        if process.num_fds() >= LIMIT:
            return
    wait_for("out of descriptors", lambda: process.num_fds() >= LIMIT)


def test_out_of_descriptors_the_accept_loop_pauses_instead_of_spinning(
    exporter: tuple[subprocess.Popen[bytes], int, Path, Path],
) -> None:
    process, port, _, _ = exporter
    with ExitStack() as stack:
        hold_every_descriptor(port, process.pid, stack)
        watched = psutil.Process(process.pid)
        before, started = sum(watched.cpu_times()[:2]), time.monotonic()
        time.sleep(3.0)  # the window watched: a spinning loop burns most of it
        used, spent = sum(watched.cpu_times()[:2]) - before, time.monotonic() - started
        assert used < spent / 6, f"{used:.2f} s of CPU in {spent:.2f} s out of descriptors"
    url = f"http://127.0.0.1:{port}"
    wait_for("served again", lambda: get(url + "/-/healthy")[0] == 200)
    page = get(url + "/metrics")[1]
    assert 'coding_agent_exporter_http_refused_total{reason="descriptors"}' in page


def test_a_session_not_opened_for_want_of_descriptors_is_read_once_they_are_free(
    exporter: tuple[subprocess.Popen[bytes], int, Path, Path],
) -> None:
    process, port, home, log = exporter
    source = home / "projects" / "-home-user-work-shop-api" / f"{OLD_ID}.jsonl"
    new = source.with_name(f"{NEW_ID}.jsonl")
    with ExitStack() as stack:
        hold_every_descriptor(port, process.pid, stack)
        new.write_text(source.read_text().replace(OLD_ID, NEW_ID))  # written once, never again
        wait_for("the open that failed", lambda: "Too many open files" in log.read_text())
    url = f"http://127.0.0.1:{port}"

    def listed() -> bool:
        status, body = get(url + "/api/sessions?history=1&limit=1000")
        return status == 200 and NEW_ID in {s["session_id"] for s in json.loads(body)["sessions"]}

    wait_for("the new session read", listed)
    assert 'reason="descriptors"' in get(url + "/metrics")[1]

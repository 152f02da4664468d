"""Real processes for end-to-end tests: the exporter, Prometheus and Alertmanager on loopback.

Each runner is a context manager that starts one process on a free 127.0.0.1 port, waits (bounded
polling) until it answers, yields its base URL and stops it again. Prometheus and promtool come
from Debian's `prometheus` package, Alertmanager from `prometheus-alertmanager` (.ci/run installs
both).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

DEADLINE = 45.0  # Prometheus 2.42 takes ~6 s to its first scrape


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def wait_for(what: str, check: Callable[[], Any], deadline: float = DEADLINE) -> Any:
    """Poll until `check()` returns something truthy (a bounded wait on another process)."""
    end = time.monotonic() + deadline
    last: Any = None
    while time.monotonic() < end:
        try:
            last = check()
        except OSError as error:
            last = error
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def binary(name: str, package: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} not found: install Debian's {package} package (.ci/run does)"
    return path


@contextmanager
def run_exporter(
    home: Path,
    workdir: Path,
    *argv: str,
    codex_home: Path | None = None,
    ready: bool = True,
    launcher: Sequence[str] = ("-m", "coding_agent_exporter"),
) -> Iterator[str]:
    """`coding-agent-exporter serve` over `home` (and `codex_home`, else an empty folder, so the
    machine's own ~/.codex is never read); asserts that it shuts down cleanly. `launcher`: what
    Python runs (a stand-in, `tests/standin.py darwin --`)."""
    port = free_port()
    log_path = workdir / "exporter.log"
    log = log_path.open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            *launcher,
            "serve",
            "--claude.home",
            str(home),
            "--codex.home",
            str(codex_home or workdir / "no-codex-home"),
            "--web.listen-address",
            f"127.0.0.1:{port}",
            "--log.level",
            "debug",
            *argv,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        if ready:  # over plain HTTP; a TLS-only exporter is waited for by its test

            def answers() -> bool:
                if process.poll() is not None:  # no waiting out the deadline for a dead one
                    raise AssertionError(f"the exporter exited: {log_path.read_text()[-3000:]}")
                return get(url + "/-/ready")[0] == 200

            wait_for("exporter ready", answers)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=10)
        log.close()
        assert code == 0, log_path.read_text()


def prometheus_config(
    target: str,
    *,
    job: str = "exporter",
    rule_files: Sequence[Path] = (),
    alertmanager: str | None = None,
) -> str:
    """A config that scrapes `target` (host:port) and evaluates rules every second."""
    text = "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
    if rule_files:
        text += "rule_files:\n" + "".join(f"  - '{p}'\n" for p in rule_files)
    if alertmanager:
        text += (
            "alerting:\n  alertmanagers:\n"
            f"    - static_configs: [{{targets: ['{alertmanager}']}}]\n"
        )
    text += (
        f"scrape_configs:\n  - job_name: {job}\n    static_configs: [{{targets: ['{target}']}}]\n"
    )
    return text


@contextmanager
def run_prometheus(workdir: Path, config_text: str, *flags: str) -> Iterator[str]:
    """Prometheus on `config_text`, with more command-line `flags` (`--enable-feature=...`)."""
    path = binary("prometheus", "prometheus")
    port = free_port()
    config = workdir / "prometheus.yml"
    config.write_text(config_text)
    with (workdir / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(
            [
                path,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
                *flags,
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for("prometheus ready", lambda: get(url + "/-/ready")[0] == 200)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=20)


@contextmanager
def run_alertmanager(workdir: Path, config_text: str) -> Iterator[str]:
    """Debian's Alertmanager, gossip cluster off (it would bind 0.0.0.0:9094 otherwise)."""
    path = binary("prometheus-alertmanager", "prometheus-alertmanager")
    port = free_port()
    config = workdir / "alertmanager.yml"
    config.write_text(config_text)
    with (workdir / "alertmanager.log").open("wb") as log:
        process = subprocess.Popen(
            [
                path,
                f"--config.file={config}",
                f"--storage.path={workdir / 'alertmanager'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--cluster.listen-address=",
                "--log.level=warn",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for("alertmanager ready", lambda: get(url + "/-/ready")[0] == 200)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=20)


def query(prometheus: str, expr: str) -> list[dict[str, Any]]:
    status, body = get(prometheus + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert status == 200, body
    result: list[dict[str, Any]] = json.loads(body)["data"]["result"]
    return result


def write_index(
    home: Path, process: subprocess.Popen[bytes], session_id: str, **status: str
) -> None:
    """Write the live index entry of a running Claude Code, with `process` as its pid."""
    started_ms = int(psutil.Process(process.pid).create_time() * 1000)
    doc = {
        "pid": process.pid,
        "sessionId": session_id,
        "cwd": "/home/user/work/shop-api",
        "startedAt": started_ms,
        "kind": "interactive",
        "entrypoint": "cli",
        "name": "shop-api-1",
        "updatedAt": started_ms,
        "statusUpdatedAt": started_ms,
        **status,
    }
    path = home / "sessions" / f"{process.pid}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)  # the way an agent rewrites its index


HOLD = "import sys,time; f=open(sys.argv[1],'a'); print('held', flush=True); time.sleep(60)"


def holding(path: Path, name: str) -> list[str]:
    """A command that holds `path` open, running under the program name `name` (argv[0])."""
    return ["bash", "-c", f'exec -a {name} "$0" -c "$1" "$2"', sys.executable, HOLD, str(path)]


@contextmanager
def held(path: Path, name: str) -> Iterator[subprocess.Popen[bytes]]:
    """A process named `name` holding `path` open while the block runs (`holding`)."""
    process = subprocess.Popen(holding(path, name), stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"held\n"
    try:
        yield process
    finally:
        process.kill()
        process.wait()
        process.stdout.close()

"""One huge file cannot stall every other update (issue #34, point 7): a real `serve` meets a
link to a sparse file of many GB in an agent's folder, and a normal session appended meanwhile
is read before the huge file is done; the same file reached through several links is read once.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from coding_agent_exporter.runtime.app import App
from coding_agent_exporter.runtime.config import parse

from .backends import free_port, get, wait_for
from .conftest import FIXTURES, NOW

INTERACTIVE = FIXTURES / "claude-code" / "2.1.332" / "interactive" / "home"
PROJECT = "projects/-home-user-work-shop-api"
SESSION = "971b287f-0952-4ff3-8a23-8b842ccd6d13"
HUGE = 64 * 2**30
"""The sparse file's size: far more than the test waits for (read whole, minutes of CPU)."""
needs_links = pytest.mark.skipif(sys.platform == "win32", reason="symlinks need privileges")


def bytes_read(url: str) -> int:
    page = get(url + "/metrics")[1]
    found = re.search(r'coding_agent_exporter_bytes_read_total\{agent="claude-code"\} (\S+)', page)
    return int(float(found.group(1))) if found else 0


def messages(url: str) -> int:
    status, body = get(url + "/api/sessions/claude-code/" + SESSION)
    return int(json.loads(body)["messages"]) if status == 200 else -1


@pytest.fixture
def exporter(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    home = tmp_path / "claude"
    shutil.copytree(INTERACTIVE, home)
    port = free_port()
    argv = [sys.executable, "-m", "coding_agent_exporter", "serve", "--claude.home", str(home)]
    argv += ["--web.listen-address", f"127.0.0.1:{port}", "--state.dir", str(tmp_path / "s")]
    with (tmp_path / "exporter.log").open("wb") as log:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for("ready", lambda: get(url + "/-/ready")[0] == 200)
        yield url, home
        process.send_signal(signal.SIGTERM)  # between two pieces of the huge file: at once
        assert process.wait(timeout=60) == 0
    finally:
        with suppress(OSError):
            process.kill()


@needs_links
def test_a_session_appended_while_a_huge_linked_file_is_read_is_read_before_it_is_done(
    exporter: tuple[str, Path], tmp_path: Path
) -> None:
    url, home = exporter
    huge = tmp_path / "elsewhere" / "huge.jsonl"
    huge.parent.mkdir()
    with huge.open("wb") as out:
        out.truncate(HUGE)  # sparse: no block written
    before, started = messages(url), bytes_read(url)
    assert before > 0
    os.symlink(huge, home / PROJECT / "0huge.jsonl")
    wait_for("the huge file begun", lambda: bytes_read(url) > started)
    journal = home / PROJECT / f"{SESSION}.jsonl"
    last = [line for line in journal.read_text().splitlines() if '"type":"assistant"' in line][-1]
    record = json.loads(last)
    record["uuid"], record["message"]["id"] = "appended-while-huge", "msg_while_huge"
    with journal.open("a") as out:
        out.write(json.dumps(record) + "\n")
    wait_for("the append read", lambda: messages(url) > before, deadline=120)
    assert bytes_read(url) - started < HUGE  # the huge file is not done


@needs_links
def test_a_file_reached_through_several_links_is_read_once(tmp_path: Path) -> None:
    home = tmp_path / "claude"
    shutil.copytree(INTERACTIVE, home)
    outside = tmp_path / "elsewhere" / "shared.jsonl"
    outside.parent.mkdir()
    journal = home / PROJECT / f"{SESSION}.jsonl"
    outside.write_bytes(
        journal.read_bytes().replace(SESSION.encode(), b"sh" + SESSION[2:].encode())
    )
    for name in ("a-link.jsonl", "b-link.jsonl"):
        os.symlink(outside, home / PROJECT / name)
    (home / "projects" / "other").mkdir()
    os.symlink(outside, home / "projects" / "other" / "c-link.jsonl")

    def read(folder: Path) -> App:
        config = parse(["metrics", "--claude.home", str(folder)], {"HOME": "/home/user"})
        app = App(config, process_metrics=False, clock=lambda: NOW, probe=lambda _: None)
        app.catch_up()
        return app

    plain = tmp_path / "plain"
    shutil.copytree(INTERACTIVE, plain)
    alone = read(plain).stats.bytes_read["claude-code"]
    linked = read(home)
    assert linked.stats.bytes_read["claude-code"] == alone + outside.stat().st_size
    (home / PROJECT / "b-link.jsonl").unlink()
    (home / PROJECT / "a-link.jsonl").unlink()
    linked.changed([home / PROJECT / "a-link.jsonl", home / PROJECT / "b-link.jsonl"])
    os.symlink(outside, home / PROJECT / "d-link.jsonl")  # a followed link gone: another reads
    linked.changed([home / PROJECT / "d-link.jsonl"])
    assert not linked.engine.asleep(str(home / PROJECT / "d-link.jsonl"))
    assert str(home / PROJECT / "d-link.jsonl") in linked.engine._files
    assert str(home / "projects" / "other" / "c-link.jsonl") not in linked.engine._files

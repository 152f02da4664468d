"""Out of inotify watches for real: the kernel's own limit, not a simulation.

Each exporter (or watcher) runs in a user namespace of its own (`unshare -U -r`), where
`/proc/sys/user/max_inotify_watches` is that namespace's limit and root inside may lower it. The
home is built from a recorded Claude Code journal, one session per project folder under fresh
ids, with more folders than the limit has watches. Which folders the exporter really watches is
read from the kernel (`/proc/<pid>/fdinfo`), so the folder the test writes in is known to have
no watch, whatever the exporter says. Every wait is a poll with a deadline.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from coding_agent_exporter.runtime.cli import RESCAN_EVERY

from .backends import free_port, get, wait_for
from .conftest import FIXTURES, ROOT, home_flags, missing_tool

RECORDED = FIXTURES / "claude-code" / "2.1.197" / "print-tool" / "home"
LIMIT_FILE = "/proc/sys/user/max_inotify_watches"
SET_LIMIT = f'echo "$0" > {LIMIT_FILE} && exec "$@"'
FOLDERS = 120  # project folders, one session each: with `projects/` and `sessions/`, 122 watches
LOW, GENEROUS = 40, 1000
RESPONSES = 2  # model responses in the recorded journal
_IDS = re.compile(
    rb"(msg_stub_|toolu_stub_|req_stub_)[0-9a-f]{12}"
    rb"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)
_WATCH = re.compile(r"^inotify wd:[0-9a-f]+ ino:([0-9a-f]+) ", re.MULTILINE)


def _namespaces() -> str | None:
    """Why a user namespace with its own inotify limit cannot be had here, or None."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    probe = subprocess.run(
        ["unshare", "-U", "-r", "sh", "-c", SET_LIMIT, str(LOW), "true"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        return f"unshare -U cannot set {LIMIT_FILE} here: {probe.stderr.strip()}"
    return None


WHY_NOT = _namespaces()
if WHY_NOT is not None:
    missing_tool(WHY_NOT, module=True)


def limited(limit: int, *argv: str) -> list[str]:
    """`argv` run as root of a new user namespace whose inotify watch limit is `limit`."""
    return ["unshare", "-U", "-r", "sh", "-c", SET_LIMIT, str(limit), *argv]


def session(n: int) -> tuple[str, bytes]:
    """The recorded journal under fresh ids: session `n`'s id and its bytes."""
    (journal,) = RECORDED.glob("projects/*/*.jsonl")
    suffix = f"{n:08x}".encode()
    text = _IDS.sub(lambda m: m.group(0)[:-8] + suffix, journal.read_bytes())
    found = re.search(rb'"sessionId":"([^"]+)"', text)
    assert found is not None
    return found.group(1).decode(), text


def build_home(home: Path) -> list[Path]:
    """`FOLDERS` project folders of one session each, and an empty live index folder."""
    (home / "sessions").mkdir(parents=True)
    folders = []
    for n in range(FOLDERS):
        folder = home / "projects" / f"-home-user-work-p{n:03d}"
        folder.mkdir(parents=True)
        sid, text = session(n)
        (folder / f"{sid}.jsonl").write_bytes(text)
        folders.append(folder)
    return folders


def watched_inodes(pid: int) -> set[int]:
    """What the kernel says process `pid` holds inotify watches on (inode numbers)."""
    inodes: set[int] = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify":
                text = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
                inodes.update(int(ino, 16) for ino in _WATCH.findall(text))
        except OSError:
            continue
    return inodes


def total(exposition: str, name: str) -> float:
    """The sum of every sample of `name` in a /metrics page."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in exposition.splitlines()
        if line.startswith((name + "{", name + " "))
    )


def write_session(folder: Path, n: int) -> None:
    """A new session written the way the CLI writes it: the file created, then appended to."""
    sid, text = session(n)
    lines = text.splitlines(keepends=True)
    path = folder / f"{sid}.jsonl"
    path.write_bytes(b"".join(lines[:4]))
    with path.open("ab") as f:
        f.write(b"".join(lines[4:]))


@contextmanager
def serving(home: Path, workdir: Path, limit: int) -> Iterator[tuple[str, int, Path]]:
    """The real `python -m coding_agent_exporter serve` over `home` under a watch limit of
    `limit`; yields its URL, pid and log once ready; asserts that SIGTERM stops it cleanly."""
    port = free_port()
    log_path = workdir / f"exporter-{limit}.log"
    argv = [sys.executable, "-m", "coding_agent_exporter", "serve", *home_flags(home)]
    argv += ["--web.listen-address", f"127.0.0.1:{port}"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            limited(limit, *argv), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
        )
        url = f"http://127.0.0.1:{port}"
        try:

            def ready() -> bool:
                assert process.poll() is None, log_path.read_text()
                return get(url + "/-/ready")[0] == 200

            wait_for("exporter ready", ready, deadline=30)
            yield url, process.pid, log_path  # unshare and sh exec: this is the exporter
        finally:
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=15)
            assert code == 0, log_path.read_text()


def metrics(url: str) -> str:
    status, page = get(url + "/metrics")
    assert status == 200, page
    return page


def test_out_of_watches_it_says_so_and_a_rescan_finds_an_unwatched_append(
    tmp_path: Path,
) -> None:
    folders = build_home(home := tmp_path / "claude")
    with serving(home, tmp_path, LOW) as (url, pid, log_path):
        rescanning = "coding_agent_exporter_rescanning"  # set by the loop's first turn
        wait_for("rescanning", lambda: total(metrics(url), rescanning) == 1, deadline=10)
        assert total(metrics(url), "coding_agent_sessions_total") == FOLDERS

        watched = watched_inodes(pid)  # the kernel's word, not the exporter's
        assert 0 < len(watched) <= LOW
        unwatched = [f for f in folders if f.stat().st_ino not in watched]
        assert len(unwatched) == FOLDERS + 2 - LOW  # the live index and projects/ have theirs
        assert (home / "sessions").stat().st_ino in watched  # the small root went first

        log = log_path.read_text()
        named = re.search(r"WARNING +cannot watch (\S+) and (\d+) other folders under (\S+): ", log)
        assert named, log
        assert Path(named[1]) in unwatched
        assert int(named[2]) == len(unwatched) - 1
        assert named[3] == str(home / "projects")
        assert "inotify watch limit reached (raise fs.inotify.max_user_watches)" in log
        assert "Traceback" not in log

        write_session(unwatched[-1], FOLDERS)  # no watch there: no event will ever say so
        written = time.monotonic()

        def visible() -> bool:
            page = metrics(url)  # and it keeps answering meanwhile
            assert total(page, rescanning) == 1
            return total(page, "coding_agent_sessions_total") == FOLDERS + 1

        wait_for("the unwatched session", visible, deadline=RESCAN_EVERY + 20)
        took = time.monotonic() - written
        print(f"\nlimit {LOW}, {FOLDERS} folders: unwatched append visible after {took:.1f} s")
        assert took > RESCAN_EVERY / 2  # by the rescan, not by an event
        page = metrics(url)
        assert total(page, "coding_agent_messages_total") == RESPONSES * (FOLDERS + 1)
        assert total(page, "coding_agent_exporter_records_total") > 0
        assert total(page, "coding_agent_exporter_parse_errors_total") == 0
        assert get(url + "/-/healthy")[0] == 200


def test_with_enough_watches_it_is_not_degraded(tmp_path: Path) -> None:
    folders = build_home(home := tmp_path / "claude")
    with serving(home, tmp_path, GENEROUS) as (url, pid, log_path):
        assert total(metrics(url), "coding_agent_exporter_rescanning") == 0
        watched = watched_inodes(pid)
        assert all(f.stat().st_ino in watched for f in [*folders, home / "sessions"])
        write_session(folders[-1], FOLDERS)
        written = time.monotonic()
        wait_for(
            "the watched session",
            lambda: total(metrics(url), "coding_agent_sessions_total") == FOLDERS + 1,
            deadline=10,
        )
        took = time.monotonic() - written
        print(f"\nlimit {GENEROUS}, {FOLDERS} folders: append visible after {took:.2f} s")
        assert total(metrics(url), "coding_agent_exporter_rescanning") == 0
        assert "cannot watch" not in log_path.read_text()


def in_namespace(limit: int, child: Callable[[Path], None], root: Path) -> str:
    """Run `child(root)` in a fresh Python inside a namespace limited to `limit` watches;
    return its log (stderr), failing with it if the child failed."""
    name = child.__name__
    code = f"import sys, pathlib; from tests.test_inotify_limit import {name}; {name}("
    done = subprocess.run(
        limited(limit, sys.executable, "-c", code + "pathlib.Path(sys.argv[1]))", str(root)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stderr


def collect(watcher: object, done: Callable[[set[Path]], bool], within: float = 10) -> set[Path]:
    """Changed paths until `done(seen)`; fail after `within` seconds."""
    from coding_agent_exporter.sources.watch import Watcher

    assert isinstance(watcher, Watcher)
    seen: set[Path] = set()
    end = time.monotonic() + within
    while not done(seen):
        left = end - time.monotonic()
        assert left > 0, f"timed out; seen {sorted(seen)}"
        seen |= watcher.changed(timeout=min(left, 0.5))
    return seen


def _child_folders_without_watches(root: Path) -> None:
    """In a namespace of 20 watches: a root of 1 folder and one of 31 (12 left without)."""
    import logging

    from coding_agent_exporter.sources import watch

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    watch.RETRY_EVERY = 0.2
    small, big = root / "small", root / "big"
    small.mkdir()
    for n in range(30):
        (big / f"f{n:02d}").mkdir(parents=True)
    watcher = watch.Watcher([big, small])
    watcher.start()
    try:
        assert watcher.changed(timeout=0) == set()  # looks for folders left without
        assert watcher.degraded
        assert len(watched_inodes(os.getpid())) == 20
        Path(LIMIT_FILE).write_text("1000\n")  # the limit raised: the next try places them all
        seen = collect(watcher, lambda seen: not watcher.degraded)
        assert big in seen  # placed anew, reported for the caller to read again
        assert len(watched_inodes(os.getpid())) == 32
        path = big / "f29" / "s.jsonl"
        path.write_bytes(b"{}\n")
        collect(watcher, lambda seen: path in seen)  # by an event now
        Path(LIMIT_FILE).write_text("32\n")  # all taken: a folder made now cannot have one
        (big / "late").mkdir()
        collect(watcher, lambda seen: watcher.degraded)
    finally:
        watcher.stop()


def test_folders_without_watches_are_found_retried_and_found_again(tmp_path: Path) -> None:
    log = in_namespace(20, _child_folders_without_watches, tmp_path)
    big = tmp_path / "big"
    assert re.search(
        rf"WARNING cannot watch {big}/f\d\d and 11 other folders under {big}: inotify watch "
        r"limit reached \(raise fs.inotify.max_user_watches\)",
        log,
    ), log
    assert f"every folder under {big} is watched again" in log
    assert f"WARNING cannot watch {big}/late under {big}: inotify watch limit reached" in log


def _child_a_root_without_a_watch(root: Path) -> None:
    """In a namespace of 1 watch, two roots of one folder: the second cannot have its watch."""
    import logging

    from coding_agent_exporter.sources import watch

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    watch.RETRY_EVERY = 0.2
    first, second = root / "a", root / "b"
    first.mkdir()
    second.mkdir()
    watcher = watch.Watcher([first, second])
    watcher.start()  # before: OSError out of Observer.start(), the exporter died at start
    try:
        assert watcher.degraded
        Path(LIMIT_FILE).write_text("1000\n")
        seen = collect(watcher, lambda seen: not watcher.degraded)
        assert second in seen
        path = second / "s.jsonl"
        path.write_bytes(b"{}\n")
        collect(watcher, lambda seen: path in seen)
    finally:
        watcher.stop()


def test_a_root_without_a_watch_is_no_crash_and_is_retried(tmp_path: Path, probes: str) -> None:
    """With the portable probes too (watchdog's own observer, as on macOS and Windows): the root
    is retried without an inotify probe, and the log gives the system's reason, no sysctl."""
    log = in_namespace(1, _child_a_root_without_a_watch, tmp_path)
    why = (
        "inotify watch limit reached (raise fs.inotify.max_user_watches)"
        if probes == "auto"
        else os.strerror(errno.ENOSPC)
    )
    assert (
        f"WARNING cannot watch {tmp_path / 'b'}: {why}; rescanning it now and then instead"
    ) in log, log
    assert probes == "auto" or "fs.inotify" not in log

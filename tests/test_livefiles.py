"""coding_agent_exporter.sources.livefiles: the files of live sessions, followed directly.

The stat follower (Windows' follower; Linux's with the portable probes) runs here for real, on
real files, and carries an append into a real engine's state with no folder watcher at all.
The kqueue follower (macOS) cannot run on Linux: its tests give it a FAKE kqueue (labelled as
such) and prove the filters it asks for, what it reports and when it lets a file go; that
macOS's kqueue delivers `NOTE_EXTEND` for an append through a held handle is not proven here.
Waits are on conditions with deadlines, no sleeps.
"""

from __future__ import annotations

import json
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from coding_agent_exporter.harnesses.claude_code.harness import ClaudeCode
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.sources import livefiles
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.state import State

from .backends import free_port, get, wait_for, write_index
from .conftest import FIXTURES, ROOT
from .test_inotify_limit import session, total

DEADLINE = 10.0
RECORDED = FIXTURES / "claude-code" / "2.1.197" / "print-tool" / "home"
READ, VNODE = livefiles._KQ_DEFAULTS["KQ_FILTER_READ"], livefiles._KQ_DEFAULTS["KQ_FILTER_VNODE"]


class Reports:
    """What a follower reported, waited on with a deadline."""

    def __init__(self) -> None:
        self.seen: set[Path] = set()
        self._cond = threading.Condition()

    def __call__(self, paths: set[Path]) -> None:
        with self._cond:
            self.seen |= paths
            self._cond.notify_all()

    def wait_for(self, path: Path) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: path in self.seen, DEADLINE), self.seen
            self.seen.clear()


def test_the_follower_is_chosen_by_the_probes(probes: str) -> None:
    follower = livefiles.make(Reports())
    if probes == "auto":  # Linux's own: inotify reports appends
        assert isinstance(follower, livefiles.NoFollower) and not follower.needed
    else:  # Linux has no kqueue: Windows' follower
        assert isinstance(follower, livefiles.StatFollower) and follower.needed


def test_stat_follower_reports_first_sight_appends_and_deletion(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(b"{}\n")
    b.write_bytes(b"{}\n")
    follower = livefiles.StatFollower(Reports())
    follower.follow([str(a), str(b)])
    assert follower.look() == {a, b}  # first sight: it may have grown since the loop read it
    assert follower.look() == set()
    with a.open("ab") as f:
        f.write(b"{}\n")
        f.flush()
        assert follower.look() == {a}  # through a handle still open
    b.unlink()
    assert follower.look() == {b}
    assert follower.look() == set()
    follower.follow([str(a)])
    assert follower.look() == set()


def test_stat_follower_follows_at_most_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(livefiles, "MAX_FOLLOWED", 3)
    names = []
    for n in range(5):
        (path := tmp_path / f"{n}.jsonl").write_bytes(b"")
        names.append(str(path))
    follower = livefiles.StatFollower(Reports())
    follower.follow(names)
    assert follower.look() == {Path(n) for n in names[:3]}  # the latest, given first


def test_stat_follower_thread_wakes_the_caller(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    reports = Reports()
    follower = livefiles.StatFollower(reports, interval=0.05)
    follower.follow([str(path)])
    follower.start()
    try:
        reports.wait_for(path)
        with path.open("ab") as f:
            f.write(b"{}\n")
            f.flush()
            reports.wait_for(path)
    finally:
        follower.stop()


def test_an_append_reaches_the_state_through_the_follower_alone(tmp_path: Path) -> None:
    """A live Claude Code session, no folder watcher: the stat follower is given the engine's
    live files, sees the append, and the engine reads it on (real files, real engine)."""
    (journal,) = RECORDED.glob("projects/*/*.jsonl")
    lines = journal.read_bytes().splitlines(keepends=True)
    session_id = json.loads(lines[0]).get("sessionId") or json.loads(lines[1])["sessionId"]
    path = tmp_path / "projects" / journal.parent.name / journal.name
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(lines[:4]))
    (tmp_path / "sessions").mkdir()
    index = {"pid": 4242, "sessionId": session_id, "startedAt": 1_700_000_000_000}
    (tmp_path / "sessions" / "4242.json").write_text(json.dumps({**index, "status": "busy"}))
    engine = Engine([Source(ClaudeCode(), tmp_path)], State(), Stats())
    engine.catch_up()
    engine.state.refresh(2000.0, lambda pid: 1_700_000_000.0)  # pid 4242 taken as running
    assert ("claude-code", session_id) in engine.state.live
    assert engine.live_files() == [str(path)]
    reports = Reports()
    follower = livefiles.StatFollower(reports)
    follower.follow(engine.live_files())
    follower.look()
    before = engine.stats.records["claude-code"]
    with path.open("ab") as f:
        f.write(b"".join(lines[4:]))
    engine.changed(sorted(follower.look()))
    assert engine.stats.records["claude-code"] == before + len(lines) - 4


class FakeKevent:
    """FAKE `select.kevent`."""

    def __init__(self, ident: int, filter: int, flags: int = 0, fflags: int = 0) -> None:
        self.ident, self.filter, self.flags, self.fflags = ident, filter, flags, fflags


class FakeKqueue:
    """FAKE `select.kqueue`: records the filters registered; `fire` queues an event; a read
    filter fires when its descriptor is readable (the follower's wake-up pipe)."""

    def __init__(self) -> None:
        self.registered: list[FakeKevent] = []
        self.events: queue.Queue[FakeKevent] = queue.Queue()
        self.closed = False

    def control(self, changes: list[FakeKevent] | None, most: int, timeout: Any) -> list[Any]:
        self.registered += changes or []
        if most == 0:
            return []
        reads = [k.ident for k in self.registered if k.filter == READ]
        while True:
            try:
                return [self.events.get(timeout=0.02)]
            except queue.Empty:
                if select.select(reads, [], [], 0)[0]:
                    return [FakeKevent(reads[0], -1)]

    def close(self) -> None:
        self.closed = True

    def fire(self, fd: int, fflags: int) -> None:
        self.events.put(FakeKevent(fd, VNODE, 0, fflags))

    def vnode_fds(self) -> list[int]:
        return [k.ident for k in self.registered if k.filter == VNODE]


def fake_select(kqueue: FakeKqueue) -> Any:
    """FAKE `select` module: kqueue's API with macOS's constants."""
    from types import SimpleNamespace

    return SimpleNamespace(kqueue=lambda: kqueue, kevent=FakeKevent, **livefiles._KQ_DEFAULTS)


def test_fake_kqueue_filters_reports_and_lets_go(tmp_path: Path) -> None:
    """FAKE kqueue: each followed file gets a vnode filter for writes, extends, deletes and
    renames, edge-cleared; an event reports its file; a deleted file is let go (its descriptor
    closed) and watched again at the next `follow`; a file no longer live is let go."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(b"")
    b.write_bytes(b"")
    kq, reports = FakeKqueue(), Reports()
    follower = livefiles.KqueueFollower(reports, fake_select(kq))
    follower.start()
    try:
        follower.follow([str(a), str(b)])
        reports.wait_for(a)  # first sight
        vnodes = [k for k in kq.registered if k.filter == VNODE]
        assert len(vnodes) == 2
        d = livefiles._KQ_DEFAULTS
        notes = d["KQ_NOTE_WRITE"] | d["KQ_NOTE_EXTEND"] | d["KQ_NOTE_DELETE"] | d["KQ_NOTE_RENAME"]
        assert all(k.fflags == notes for k in vnodes)
        assert all(k.flags == d["KQ_EV_ADD"] | d["KQ_EV_CLEAR"] for k in vnodes)
        fd_a, fd_b = (follower._fds[str(p)] for p in (a, b))
        kq.fire(fd_a, d["KQ_NOTE_EXTEND"])
        reports.wait_for(a)
        kq.fire(fd_b, d["KQ_NOTE_DELETE"])
        reports.wait_for(b)
        deadline = time.monotonic() + DEADLINE
        while str(b) in follower._fds:  # let go by the follower's thread
            assert time.monotonic() < deadline
            threading.Event().wait(0.01)
        follower.follow([str(a), str(b)])  # a file under that name again: a new filter
        assert len(kq.vnode_fds()) == 3
        follower.follow([str(a)])
        assert set(follower._fds) == {str(a)}
    finally:
        follower.stop()
    assert kq.closed and follower._fds == {}


# A real `serve` with the portable probes whose folder watcher reports nothing (as FSEvents may
# say nothing of an append through a held handle): only the live-file follower can see it.
_SERVE = """
import sys
from coding_agent_exporter.runtime import cli
from coding_agent_exporter.sources import watch

watch.Watcher._record = lambda self, event: None  # no file events at all
sys.exit(cli.main(sys.argv[1:]))
"""


def test_serve_reads_a_live_sessions_append_through_the_follower_alone(tmp_path: Path) -> None:
    """The follower carries an append made through a held handle into a real `serve`'s
    metrics, with no file event at all (without it this times out: checked by hand)."""
    home = tmp_path / "claude"
    (home / "projects" / "p").mkdir(parents=True)
    (home / "sessions").mkdir()
    sid, text = session(7)
    lines = text.splitlines(keepends=True)
    journal = home / "projects" / "p" / f"{sid}.jsonl"
    journal.write_bytes(b"".join(lines[:4]))  # the prompt: the session has work
    agent = subprocess.Popen(["sleep", "300"])  # stands in for the agent's process
    port = free_port()
    argv = ["serve", "--claude.home", str(home), "--codex.home", str(tmp_path / "no-codex")]
    argv += ["--web.listen-address", f"127.0.0.1:{port}", "--platform.probes", "portable"]
    for name in ("gemini-cli", "opencode", "pi", "oh-my-pi", "grok", "vibe"):
        argv.append(f"--no-harness.{name}")
    log_path = tmp_path / "exporter.log"
    try:
        write_index(home, agent, sid, status="busy")
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-c", _SERVE, *argv], cwd=ROOT, stdout=log, stderr=log
            )
            url = f"http://127.0.0.1:{port}"
            try:
                wait_for("ready", lambda: get(url + "/-/ready")[0] == 200, deadline=30)
                metrics = url + "/metrics"
                before = total(get(metrics)[1], "coding_agent_exporter_records_total")
                with journal.open("ab") as f:  # held open, as an agent holds its journal
                    f.write(b"".join(lines[4:]))
                    f.flush()
                    wait_for(
                        "the append, by the follower",
                        lambda: (
                            total(get(metrics)[1], "coding_agent_exporter_records_total")
                            == before + len(lines) - 4
                        ),
                        deadline=20,
                    )
            finally:
                process.send_signal(signal.SIGTERM)
                code = process.wait(timeout=15)
    finally:
        agent.kill()
        agent.wait()
    assert code == 0, log_path.read_text()

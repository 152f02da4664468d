"""Memory does not grow with the size of a transcript: a large journal is read in pieces of at
most `tail.READ_LIMIT` bytes, never whole. Proven twice: by counting what each read returns,
and by the peak RSS of a real `metrics` run over a 200 MB journal. No timing is asserted.

Memory grows with the number of sessions as little as it can: a finished session keeps only what
`sessions --all` shows, sessions without open work are not kept as maybe busy, a file no process
holds keeps no held entry, and writing the catch-up cache costs little beyond its content."""

from __future__ import annotations

import dataclasses
import gc
import os
import pickle
import shutil
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from hashlib import blake2b
from pathlib import Path
from types import NoneType

import pytest

from coding_agent_exporter.events import (
    Event,
    LiveIndexRead,
    ModelResponded,
    SessionSeen,
    SubagentStarted,
    TitleSet,
    ToolCallEnded,
    ToolCallStarted,
    TurnEnded,
    TurnStarted,
    Usage,
)
from coding_agent_exporter.harnesses import HARNESSES
from coding_agent_exporter.harnesses.codex.harness import Codex
from coding_agent_exporter.runtime.cache import Cache, Snapshot
from coding_agent_exporter.runtime.engine import Engine, Source
from coding_agent_exporter.sources import tail
from coding_agent_exporter.sources.holders import SHARED_RECENT, HeldSessions
from coding_agent_exporter.state import seen
from coding_agent_exporter.state.base import BUSY_SLACK
from coding_agent_exporter.state.session import ZERO
from coding_agent_exporter.state.state import State

from .conftest import FIXTURES

TURN = next(
    (FIXTURES / "claude-code/2.1.197/subagent-foreground/home/projects").glob("*/*.jsonl")
).read_bytes()
SESSION = "b1900000-0000-4000-8000-000000000000"


def journal(home: Path, size: int) -> Path:
    """A Claude Code journal of about `size` bytes: one recorded turn, written again and again
    (the same ids: what is counted stays small, what is read does not)."""
    path = home / "projects" / "-home-user-work-big" / f"{SESSION}.jsonl"
    path.parent.mkdir(parents=True)
    block = TURN * max(1, (4 << 20) // len(TURN))
    with path.open("wb") as out:
        while out.tell() < size:
            out.write(block)
    return path


def test_a_large_journal_is_read_in_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODING_AGENT_EXPORTER_CATCHUP_WORKERS", "0")
    path = journal(tmp_path / "claude", 40 << 20)
    reads: list[int] = []
    original = tail.JsonlTail.read

    def counted(self: tail.JsonlTail) -> tail.TailResult:
        result = original(self)
        reads.append(sum(len(line.text) + 1 for line in result.lines))
        return result

    monkeypatch.setattr(tail.JsonlTail, "read", counted)
    engine = Engine([Source(HARNESSES["claude-code"](), tmp_path / "claude")], State())
    engine.catch_up()
    longest = max(len(line) for line in TURN.splitlines())
    assert sum(reads) == path.stat().st_size  # every line read once
    assert len(reads) >= (40 << 20) // tail.READ_LIMIT
    assert max(reads) <= tail.READ_LIMIT + longest  # never the whole file at once


def test_memory_stays_far_below_a_200_mb_journal(tmp_path: Path) -> None:
    home = tmp_path / "claude"
    path = journal(home, 200 << 20)
    command = [sys.executable, "-m", "coding_agent_exporter", "metrics", "--claude.home", str(home)]
    command += ["--state.dir", str(tmp_path / "state"), "--no-traces.enabled"]
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CODING_AGENT_EXPORTER_"))
    }
    environ["CODING_AGENT_EXPORTER_CATCHUP_WORKERS"] = "0"  # all in one process
    # A child forked from this (large) pytest process would report pytest's own size as its
    # peak (ru_maxrss keeps the size from before exec): a small Python in between starts the
    # exporter and reports the peak of its only child.
    starter = (
        "import resource, subprocess, sys\n"
        "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.exit(code)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", starter, *command], env=environ, capture_output=True, text=True
        )
    finally:
        path.unlink()
    assert done.returncode == 0, done.stderr
    peak_mb = int(done.stdout.split()[-1]) / 1024
    print(f"200 MB journal read with a peak RSS of {peak_mb:.0f} MB")
    # whole-file reads held ~320 MB here; reading in pieces ~55-70 MB
    assert peak_mb < 120, f"peak RSS {peak_mb:.0f} MB"


# -- what history costs per session ---------------------------------------------------------------

A = "claude-code"


def finished(n: int, *, model: str = "claude-opus-4-5") -> Iterator[Event]:
    """A short finished session: a prompt, a tool call, a response, the end of the turn."""
    sid, at = f"7141e000-0000-4000-8000-{n:012x}", 1.7e9 + 10 * n
    cwd = "".join(["/home/user/work/project-", str(n % 10)])  # a new string each time
    yield SessionSeen(session_id=sid, at=at, cwd=cwd, kind="headless", version="2.1.197")
    yield TurnStarted(session_id=sid, at=at, record_id=f"rec-{n:032x}", prompt="say hello")
    yield TitleSet(session_id=sid, title="say hello", source="prompt")
    yield ToolCallStarted(session_id=sid, at=at + 1, call_id=f"toolu_{n:024x}", tool="Bash")
    yield ToolCallEnded(session_id=sid, at=at + 2, call_id=f"toolu_{n:024x}", outcome="ok")
    usage = Usage(input=3, output=400, cache_read=12000, cache_write=2000)
    message = f"msg_{n:024x}"
    yield ModelResponded(session_id=sid, at=at + 3, message_id=message, model=model, usage=usage)
    yield TurnEnded(session_id=sid, at=at + 3, outcome="completed")


def fold(state: State, events: Iterator[Event]) -> None:
    for event in events:
        state.apply(A, event)


def test_a_finished_session_keeps_only_what_is_shown() -> None:
    state = State()
    for n in range(3):
        fold(state, finished(n, model="".join(["claude-", "opus-4-5"])))
    one, two, three = state.sessions.values()
    assert one.tools is None and one.subs is None and not one.open_tools and not one.subagents
    assert one.last_turn is None  # the record id serves exemplars only: untraced, not kept
    assert one.turns == {"completed": 1} and one.tool_calls == 1 and one.messages == 1
    assert one.cwd == "/home/user/work/project-0" and two.cwd == "/home/user/work/project-1"
    assert one.version is two.version and one.model is two.model is three.model  # one copy
    assert State().session(A, "none").tokens is ZERO  # no record of its own until it counts
    # what the session holds beside the strings it shows: its object and its token counts,
    # ~420 bytes (~1,100 with a Counter of turns, two emptied tables and its last turn)
    held = sys.getsizeof(one) + sum(
        _deep_size(getattr(one, f.name))
        for f in dataclasses.fields(one)
        if not isinstance(getattr(one, f.name), str | int | float | NoneType)
    )
    assert held < 600, held


def _deep_size(value: object) -> int:
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(_deep_size(k) + _deep_size(v) for k, v in value.items())
    elif isinstance(value, tuple | list):
        size += sum(_deep_size(v) for v in value)
    elif dataclasses.is_dataclass(value):
        size += sum(_deep_size(getattr(value, f.name)) for f in dataclasses.fields(value))
    return size


def test_sessions_without_open_work_are_not_kept_as_busy() -> None:
    state = State()
    fold(state, (e for e in finished(0) if not isinstance(e, TurnEnded)))  # left open
    for n in range(1, 10 * BUSY_SLACK):
        fold(state, finished(n))
    assert (A, "7141e000-0000-4000-8000-000000000000") in state._busy
    assert len(state._busy) <= BUSY_SLACK + 2  # not one per session of history
    state.refresh(1.7e9 + 10 * 10 * BUSY_SLACK + 1, lambda _: None)  # the open one is closed
    assert state.sessions[(A, "7141e000-0000-4000-8000-000000000000")].turns == {"interrupted": 1}
    state.refresh(1.7e9 + 10 * 10 * BUSY_SLACK + 2, lambda _: None)
    assert not state._busy


def test_the_cache_holds_sessions_as_they_were_for_little_memory(tmp_path: Path) -> None:
    state = State()
    for n in range(20_000):
        fold(state, finished(n))
    sid = "7141e000-0000-4000-8000-000000000001"
    state.apply(A, SubagentStarted(session_id=sid, at=1.0, call_id="c1", subagent_type="Explore"))
    state.apply(A, ToolCallStarted(session_id=sid, at=2.0, call_id="c2", tool="Read"))
    usage = Usage(input=1, output=2)
    state.apply(
        A,
        ModelResponded(
            session_id=sid, at=3.0, message_id="m1", model="m", usage=usage, subagent_id="a1"
        ),
    )
    state.session(A, "no-tokens")
    kept = {k: v for k, v in vars(state).items() if k not in ("lock", "observer")}
    cache = Cache(tmp_path, [(A, tmp_path / "claude")])
    gc.collect()
    tracemalloc.start()
    try:
        body = cache.dumps(Snapshot([], [], [], kept, {}))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert body is not None and cache.write(body)
    print(f"cache {len(body) / 20_000:.0f} bytes a session, written with {peak / 20_000:.0f}")
    assert peak / 20_000 < 500  # a pickler's memo of every object and its temporaries: ~1,200

    loaded = cache.load()
    assert loaded is not None
    sessions = loaded.state["awake"]
    assert sessions == state.awake and list(sessions) == list(state.awake)
    assert sessions[(A, "no-tokens")].tokens == ZERO
    session = sessions[(A, sid)]
    assert session.open_tools["c2"].tool == "Read" and session.subagent(None, "a1") is not None
    usage_of_m1 = loaded.state["_usage"][(A, "m1")]
    assert usage_of_m1.sub is session.subagent(None, "a1")  # still the same sub-agent


def test_held_sessions_keep_little_per_file(tmp_path: Path) -> None:
    held = HeldSessions(("codex",), find=lambda paths, names: {})
    journals = [tmp_path / f"rollout-{n}.jsonl" for n in range(100)]
    for n, path in enumerate(journals):
        held.note(path, f"s{n}")
        held.note(path, "other")  # a journal belongs to its first session
    assert held.sessions[journals[7]] == ("s7",)
    assert held.probe(journals) == [] and held._entries == {}  # nobody holds them
    database = tmp_path / "opencode.db"
    for n in range(40):
        held.note(database, f"s{n % 20}", shared=True)
    assert held.sessions[database] == tuple(f"s{n}" for n in range(20 - SHARED_RECENT, 20))

    held.find = lambda paths, names: {p: [(4242, 100.0)] for p in paths if p == journals[3]}
    (entry,) = held.probe(journals)  # s3's file is held: an entry
    assert isinstance(entry, LiveIndexRead) and entry.session_id == "s3"
    held.forget(journals[3])  # the file is gone: nothing of it is kept, its entry ends
    assert journals[3] not in held.sessions
    assert [type(e).__name__ for e in held.probe([journals[3]])] == ["LiveIndexRemoved"]
    assert held._entries == {}


def test_counted_ids_are_packed_digests() -> None:
    ids = seen.SeenIds()
    n = 200_000
    assert not any(ids.add("claude-code", "message", f"msg_{i:024x}") for i in range(n))
    assert all(ids.add("claude-code", "message", f"msg_{i:024x}") for i in range(0, n, 7))
    assert not ids.add("claude-code", "tool", f"msg_{0:024x}")  # another kind: another id
    assert not ids.add("codex", "message", f"msg_{0:024x}")  # another agent: another id
    assert ids.add("claude-code\x1fmessage", f"msg_{0:024x}")  # the parts are joined
    assert len(ids) == n + 2
    # a digest's bytes found across two others in its bucket are no match
    packed = seen.SeenIds()
    digest = blake2b(b"a", digest_size=8).digest()
    index = digest[0] << (seen.BITS - 8) | digest[1] >> (16 - seen.BITS)
    packed._buckets[index] = bytearray(b"\xff" * 4 + digest + b"\xff" * 4)  # two other digests
    assert not packed.add("a") and packed.add("a")
    # eight bytes an id and little besides, not one object per id (a set of ints: ~70 bytes)
    held = sys.getsizeof(ids._buckets) + sum(sys.getsizeof(b) for b in ids._buckets)
    assert held / n < 16, held / n
    loaded = pickle.loads(pickle.dumps(ids, protocol=pickle.HIGHEST_PROTOCOL))  # the cache
    assert len(loaded) == len(ids) and loaded.add("claude-code", "message", f"msg_{n - 1:024x}")
    assert not loaded.add("claude-code", "message", f"msg_{n:024x}")


def test_a_gone_file_keeps_no_held_sessions(tmp_path: Path) -> None:
    fixture = FIXTURES / "codex/0.171.0/resume/home/.codex"
    home = tmp_path / ".codex"
    shutil.copytree(fixture, home)
    held = HeldSessions(Codex.holder_names, find=lambda paths, names: {})
    engine = Engine([Source(Codex(), home, held)], State(), workers=0)
    engine.catch_up()
    rollouts = sorted(home.rglob("rollout-*.jsonl"))
    assert rollouts and all(path in held.sessions for path in rollouts)
    rollouts[0].unlink()
    engine.changed([rollouts[0]])
    assert rollouts[0] not in held.sessions and rollouts[0] not in engine._files
    assert all(path in held.sessions for path in rollouts[1:])


_HEAP = """
import sys
from coding_agent_exporter.sources import heap
fixed = sys.argv[1] == "fixed" and heap.give_back_large_blocks()
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) // 1024
big = bytearray(8 << 20)
big[::4096] = b"x" * len(big[::4096])
del big  # a large block freed: glibc raises its threshold to its size
blocks, pins = [], []
for _ in range(40):
    block = bytearray(1 << 20)
    block[::4096] = b"x" * len(block[::4096])
    blocks.append(block)
    pins.append(bytes(600))  # a small block after each: the heap's top is never free
before = rss()
del blocks
print(fixed, before - rss())
"""


@pytest.mark.skipif(
    sys.platform != "linux" or not os.confstr("CS_GNU_LIBC_VERSION"), reason="glibc only"
)
def test_the_program_gives_large_blocks_back_to_the_system() -> None:
    """After a large block is freed glibc keeps blocks of up to its size in the heap, whose free
    room stays with the process: the program fixes the threshold (`sources.heap`), and 40 MiB of
    1 MiB blocks freed leave its RSS."""
    found = {}
    for how in ("fixed", "default"):
        out = subprocess.run(
            [sys.executable, "-c", _HEAP, how], capture_output=True, text=True, check=True
        ).stdout.split()
        found[how] = (out[0] == "True", int(out[1]))
    assert found["fixed"][0] and found["fixed"][1] >= 35
    assert found["default"][1] <= 5  # what glibc does left alone: why the program asks

"""Memory does not grow with the size of a transcript: a large journal is read in pieces of at
most `tail.READ_LIMIT` bytes, never whole. Proven twice: by counting what each read returns,
and by the peak RSS of a real `metrics` run over a 200 MB journal. No timing is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from exporter import tail
from exporter.engine import Engine, Source
from exporter.harnesses import HARNESSES
from exporter.state import State

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
    command = [sys.executable, "-m", "exporter", "metrics", "--claude.home", str(home)]
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

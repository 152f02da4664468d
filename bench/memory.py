"""Memory: one 1 GB transcript, and 100,000 tiny ones; peak RSS of a full read of each.

    python bench/memory.py                       # both cases, built once under /tmp/cae-memory
    python bench/memory.py --case big --size-mb 200
    python bench/memory.py --case tiny --files 20000

`big` is one Claude Code journal of `--size-mb` MB: the recorded turn of 2.1.197
`subagent-foreground` (prompt, a foreground `Agent` call, the answer) again and again under fresh
ids, one turn every 10 s. `tiny` is `--files` sessions of one short recorded turn each (2.1.197
`print-answer`), spread over 100 project folders. Each case is read once by
`coding-agent-exporter metrics` in its own process (the catch-up a `serve` does at start, then
one scrape); prints the command, files, bytes, seconds and that process's peak RSS.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from load import IDS, STAMP, template  # noqa: E402

TINY = ROOT / "fixtures/claude-code/2.1.197/print-answer/home/projects/-home-user-work-shop-api"
START = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
_SESSION = re.compile(rb'"sessionId":"[^"]*"')


def _stamp(at: float) -> bytes:
    text = datetime.fromtimestamp(at, UTC).isoformat(timespec="milliseconds")
    return b'"timestamp":"' + text.replace("+00:00", "Z").encode() + b'"'


def _turn(lines: list[bytes], sid: bytes, old_sid: bytes, n: int) -> bytes:
    """One recorded turn under fresh ids, timestamped 10 s after the previous one."""
    suffix = f"{n:08x}".encode()
    text = b"".join(lines)
    text = IDS.sub(lambda m: sid if m[0] == old_sid else m[0][:-8] + suffix, text)
    return STAMP.sub(_stamp(START + 10 * n), text)


def build_big(home: Path, size_mb: int) -> Path:
    """One journal of about `size_mb` MB (the lead journal only: no sub-agent files)."""
    t = template()
    sid = b"b1900000-0000-4000-8000-000000000000"
    journal = home / "projects" / "-home-user-work-big" / f"{sid.decode()}.jsonl"
    journal.parent.mkdir(parents=True, exist_ok=True)
    with journal.open("wb") as out:
        n = 0
        while out.tell() < size_mb * 1_000_000:
            out.write(_turn(t.lead, sid, t.session_id, n))
            n += 1
    return journal


def build_tiny(home: Path, files: int) -> None:
    """`files` sessions of one recorded print turn each."""
    (journal,) = TINY.glob("*.jsonl")
    lines = journal.read_bytes().splitlines(keepends=True)
    old = journal.stem.encode()
    for n in range(files):
        sid = f"7141e000-0000-4000-8000-{n:012x}".encode()
        folder = home / "projects" / f"-home-user-work-tiny-{n % 100}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{sid.decode()}.jsonl").write_bytes(_turn(lines, sid, old, n))


def measure(home: Path, environ: dict[str, str]) -> tuple[list[str], float, float, float, str]:
    """Read `home` with `metrics` in a child process: the command, seconds, peak RSS of that
    process (MB, from the kernel), peak RSS of it and its catch-up workers together (MB, sampled
    every 50 ms), and what it printed."""
    command = [sys.executable, "-m", "exporter", "metrics", "--claude.home", str(home)]
    state = tempfile.mkdtemp(prefix="cae-memory-state-")  # no catch-up cache: a cold read
    command += ["--state.dir", state]
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, cwd=ROOT, env=environ)
        tree = _TreePeak(process.pid)
        _, status, usage = os.wait4(process.pid, 0)  # this child's own peak, not all children's
        seconds = time.perf_counter() - started
        tree.stop.set()
        tree.join()
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed ({process.returncode})")
        out.seek(0)
        shutil.rmtree(state)
        return command, seconds, usage.ru_maxrss / 1024, tree.peak, out.read().decode()


class _TreePeak(threading.Thread):
    """The largest sum of RSS over a process and its descendants, sampled."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.process, self.stop, self.peak = psutil.Process(pid), threading.Event(), 0.0
        self.start()

    def run(self) -> None:
        while not self.stop.wait(0.05):
            try:
                tree = [self.process, *self.process.children(recursive=True)]
                rss = 0
                for member in tree:
                    with suppress(psutil.Error):
                        rss += member.memory_info().rss
            except psutil.Error:
                return
            self.peak = max(self.peak, rss / 1e6)


def total(text: str, name: str) -> float:
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


def run_case(case: str, folder: Path, size_mb: int, files: int) -> None:
    home = folder / (f"big-{size_mb}mb" if case == "big" else f"tiny-{files}") / "claude"
    marker = home.parent / ".built"
    if not marker.exists():
        started = time.perf_counter()
        if case == "big":
            build_big(home, size_mb)
        else:
            build_tiny(home, files)
        marker.touch()
        print(f"built {home} in {time.perf_counter() - started:.0f} s")
    count = sum(1 for _ in home.rglob("*.jsonl"))
    size = sum(p.stat().st_size for p in home.rglob("*.jsonl"))
    for workers in (None, "0"):
        environ = dict(os.environ)
        if workers is not None:
            environ["CODING_AGENT_EXPORTER_CATCHUP_WORKERS"] = workers
        command, seconds, peak, tree, out = measure(home, environ)
        print(("" if workers is None else f"CODING_AGENT_EXPORTER_CATCHUP_WORKERS={workers} ")
              + " ".join(command))  # fmt: skip
        print(
            f"  {case}: {count} files, {size / 1e6:.0f} MB, "
            f"{total(out, 'coding_agent_messages_total'):.0f} responses, "
            f"{total(out, 'coding_agent_turns_total'):.0f} turns read in {seconds:.1f} s; "
            f"peak RSS {peak:.0f} MB (with its catch-up workers: {tree:.0f} MB)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=["big", "tiny", "both"], default="both")
    parser.add_argument("--size-mb", type=int, default=1000)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/cae-memory"))
    ns = parser.parse_args()
    print("command: python bench/memory.py " + " ".join(sys.argv[1:]))
    for case in ("big", "tiny") if ns.case == "both" else (ns.case,):
        run_case(case, ns.folder, ns.size_mb, ns.files)


if __name__ == "__main__":
    main()

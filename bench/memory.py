"""Memory: one 1 GB transcript, and 100,000 tiny ones; peak RSS of a full read of each.

    python bench/memory.py                       # both cases, built once under /tmp/cae-memory
    python bench/memory.py --case big --size-mb 200
    python bench/memory.py --case tiny --files 20000
    python bench/memory.py --case breakdown --files 20000   # where the bytes of a file go

`big` is one Claude Code journal of `--size-mb` MB: the recorded turn of 2.1.197
`subagent-foreground` (prompt, a foreground `Agent` call, the answer) again and again under fresh
ids, one turn every 10 s. `tiny` is `--files` sessions of one short recorded turn each (2.1.197
`print-answer`), spread over 100 project folders. Each case is read once by
`coding-agent-exporter metrics` in its own process (the catch-up a `serve` does at start, then
one scrape); prints the command, files, bytes, seconds and that process's peak RSS, and for
`tiny` the bytes per file above the same command over an empty home.

`breakdown` reads the `tiny` home in this process under `tracemalloc` (an `Engine` catch-up with a
cache, as `metrics` reads: files and finished sessions fall asleep; no workers): the bytes still
held afterwards per file, by where they were allocated (paths, followers, readers, sessions,
counted ids, ...), then what writing the catch-up cache adds at its peak (`cache.Cache.dumps`).
Allocation sites, not owners: a string decoded from a record is listed under decoding whichever
object keeps it.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
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


_STARTER = (  # writes the peak RSS of its only child (KB) to the file named first
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[2:]).returncode\n"
    "with open(sys.argv[1], 'w') as f:\n"
    "    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(code)\n"
)


def measure(home: Path, environ: dict[str, str]) -> tuple[list[str], float, float, float, str]:
    """Read `home` with `metrics` in a child process: the command, seconds, peak RSS of that
    process (MB, from the kernel), peak RSS of it and its catch-up workers together (MB, sampled
    every 50 ms), and what it printed.

    The command is started by a small Python in between: a child forked from this process (large
    after listing 100,000 files) would report this process's size as its peak if it never grew
    beyond it (`ru_maxrss` keeps the size from before the `exec`)."""
    command = [sys.executable, "-m", "coding_agent_exporter", "metrics", "--claude.home", str(home)]
    state = tempfile.mkdtemp(prefix="cae-memory-state-")  # no catch-up cache: a cold read
    command += ["--state.dir", state]
    report = Path(state) / "peak"
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        starter = [sys.executable, "-c", _STARTER, str(report), *command]
        process = subprocess.Popen(starter, stdout=out, cwd=ROOT, env=environ)
        tree = _TreePeak(process.pid)
        _, status, _ = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        tree.stop.set()
        tree.join()
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed ({process.returncode})")
        out.seek(0)
        peak = int(report.read_text()) / 1024
        shutil.rmtree(state)
        return command, seconds, peak, tree.peak, out.read().decode()


class _TreePeak(threading.Thread):
    """The largest sum of RSS over the descendants of a process (the starter), sampled."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.process, self.stop, self.peak = psutil.Process(pid), threading.Event(), 0.0
        self.start()

    def run(self) -> None:
        while not self.stop.wait(0.05):
            try:
                tree = self.process.children(recursive=True)  # not the starter
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


_SITES = (  # where an allocation was made (first match) → what it is
    ("/state/seen.py", "state: counted-id digests (seen.SeenIds)"),
    ("/state/asleep.py", "state: sleeping sessions (asleep.Asleep's columns)"),
    ("/state/prices.py", "state: the price list (once)"),
    ("/state/", "state: sessions awake, totals, windows, recent usage"),
    ("/events.py", "state: token counts (events.Usage)"),
    ("/runtime/dormant.py", "sleeping files (dormant: columns, blocks, an int each)"),
    ("/runtime/walking.py", "paths (a str per file: the engine's key, shared)"),
    ("/runtime/cache.py", "the catch-up cache's content, until it is written"),
    ("/runtime/snapshot.py", "the catch-up cache's content, until it is written"),
    ("/runtime/", "engine: the file table, per-file entries"),
    ("/sources/tail.py", "followers (tail.JsonlTail: cursor, identity, first bytes)"),
    ("dataclasses.py", "followers (tail.JsonlTail: cursor, identity, first bytes)"),
    ("pathlib.py", "paths (pathlib)"),
    ("<frozen os>", "paths (os)"),
    ("/harnesses/", "readers, and strings they decoded (a title, a session id)"),
    ("/sources/decode.py", "decoded strings kept (cwd, message ids, version, model)"),
)


def breakdown(home: Path) -> None:
    """Bytes per file held after a catch-up of `home`, by allocation site; then the cache."""
    from coding_agent_exporter.harnesses import HARNESSES
    from coding_agent_exporter.runtime.cache import Cache
    from coding_agent_exporter.runtime.engine import Engine, Source
    from coding_agent_exporter.state.state import State

    state = tempfile.mkdtemp(prefix="cae-memory-state-")
    cache = Cache(Path(state), [("claude-code", home)])  # as `metrics` reads: files and
    engine = Engine([Source(HARNESSES["claude-code"](), home)], State(), cache=cache, workers=0)
    gc.collect()  # finished sessions fall asleep as they are read
    tracemalloc.start()
    started = time.perf_counter()
    engine.catch_up()
    seconds = time.perf_counter() - started
    gc.collect()
    stats = tracemalloc.take_snapshot().statistics("lineno")
    files = len(engine._files)
    groups: Counter[str] = Counter()
    for stat in stats:
        name = stat.traceback[0].filename
        site = next((what for part, what in _SITES if part in name), f"other ({Path(name).name})")
        groups[site] += stat.size
    held = sum(groups.values())
    sessions, asleep = len(engine.state.sessions), len(engine.state.asleep)
    print(f"breakdown: {files} files, {sessions} sessions ({asleep} asleep), {seconds:.1f} s")
    print(f"  {'held after the catch-up, by allocation site':62} {'bytes/file':>10}")
    for site, size in groups.most_common():
        if size >= files:  # a byte per file or more
            print(f"  {site:62} {size / files:10.0f}")
    print(f"  {'total':62} {held / files:10.0f}")
    print("  largest single lines:")
    for stat in stats[:12]:
        frame = stat.traceback[0]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        blocks = stat.count / files
        print(f"    {where:28} {stat.size / files:6.0f} B/file {blocks:6.2f} blocks/file")
    engine._pending = False  # the cache's content (beside it): made again below
    gc.collect()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    body = cache.dumps(engine._snapshot(), engine._files)
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    shutil.rmtree(state)
    size = len(body) if body is not None else 0
    print(
        f"  writing the catch-up cache: {size / files:.0f} bytes/file in the file, "
        f"{peak / files:.0f} bytes/file at its peak above what the catch-up held"
    )


def built(case: str, folder: Path, size_mb: int, files: int) -> Path:
    """The home of a case, built once."""
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
    return home


def run_case(case: str, folder: Path, size_mb: int, files: int) -> None:
    if case == "breakdown":
        breakdown(built("tiny", folder, size_mb, files))
        return
    home = built(case, folder, size_mb, files)
    count = sum(1 for _ in home.rglob("*.jsonl"))
    size = sum(p.stat().st_size for p in home.rglob("*.jsonl"))
    empty = None
    if case == "tiny":  # what the same command holds with nothing to read
        (folder / "empty" / "claude" / "projects").mkdir(parents=True, exist_ok=True)
        empty = measure(folder / "empty" / "claude", dict(os.environ))[2]
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
            + ("" if empty is None else f"; {(peak - empty) * 1e3 / count:.2f} KB per file above "
               f"an empty home ({empty:.0f} MB)")
        )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=["big", "tiny", "both", "breakdown"], default="both")
    parser.add_argument("--size-mb", type=int, default=1000)
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/cae-memory"))
    ns = parser.parse_args()
    print("command: python bench/memory.py " + " ".join(sys.argv[1:]))
    for case in ("big", "tiny") if ns.case == "both" else (ns.case,):
        run_case(case, ns.folder, ns.size_mb, ns.files)


if __name__ == "__main__":
    main()

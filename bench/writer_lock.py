#!/usr/bin/env python3
"""What Codex's writer lock saves: who writes which of 1,000 rollouts, by /proc/locks against the
open-file scan (Linux).

    python3 bench/writer_lock.py [--rollouts 1000] [--writers 4] [--repeat 20]

Makes a scratch CODEX_HOME with `--rollouts` rollout files and a `thread-writer-locks/` folder,
starts `--writers` processes named `codex` that each hold one rollout open (append), an
exclusive flock on its lock file (as `codex exec` does) and `--fds` other files, then times each
finder on every rollout at once (the catch-up's probe) and on one rollout (a file that changed):
median of `--repeat` runs, in milliseconds. Both must find the same writers; the script says so
and stops them.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from coding_agent_exporter.harnesses.codex.harness import Codex
from coding_agent_exporter.sources.holders import holders
from coding_agent_exporter.sources.locks import by_writer_lock

WRITER = (
    "import fcntl,os,sys,time; r=open(sys.argv[1],'a'); f=open(sys.argv[2],'a'); "
    "fcntl.flock(f, fcntl.LOCK_EX); "
    "more=[open(os.path.join(sys.argv[3], f'f{i}'), 'a') for i in range(int(sys.argv[4]))]; "
    "print('ok', flush=True); time.sleep(600)"
)


def home_with(rollouts: int, root: Path) -> list[Path]:
    day = root / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    (root / "thread-writer-locks").mkdir()
    paths = []
    for i in range(rollouts):
        thread = str(uuid.UUID(int=i + 1, version=4))
        path = day / f"rollout-2026-12-01T00-00-{i % 60:02d}-{thread}.jsonl"
        path.write_text('{"type":"session_meta","payload":{}}\n')
        paths.append(path)
    return paths


def writer(root: Path, rollout: Path, fds: int) -> subprocess.Popen[bytes]:
    """A process named codex: the rollout open, its lock flock'ed, `fds` more files open (a
    real Codex holds its SQLite stores, logs, sockets...)."""
    lock = root / "thread-writer-locks" / f"{rollout.name[-42:-6]}.lock"
    other = root / "other" / rollout.name
    other.mkdir(parents=True)
    argv = ["bash", "-c", 'exec -a codex "$0" -c "$@"', sys.executable, WRITER]
    args = [str(rollout), str(lock), str(other), str(fds)]
    process = subprocess.Popen([*argv, *args], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"ok\n"
    return process


def median_ms(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rollouts", type=int, default=1000)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--fds", type=int, default=40, help="other files each writer holds open")
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / ".codex"
        paths = home_with(a.rollouts, root)
        processes = [writer(root, paths[i * 7 % len(paths)], a.fds) for i in range(a.writers)]
        try:
            scan = holders
            lock = by_writer_lock(root, Codex().writer_lock)
            by_scan = {p: [pid for pid, _ in h] for p, h in scan(paths, ("codex",)).items()}
            by_lock = {p: [pid for pid, _ in h] for p, h in lock(paths, ("codex",)).items()}
            assert by_scan == by_lock and len(by_lock) == a.writers, (by_scan, by_lock)
            one = [paths[0]]
            rows = [
                ("open-file scan", scan),
                ("/proc/locks", lock),
            ]
            print(
                f"{a.rollouts} rollouts, {a.writers} writers with {a.fds} other files open each, "
                "same writers found: yes"
            )
            print(f"{'finder':<16} {'all rollouts ms':>16} {'one rollout ms':>15}")
            for name, find in rows:
                every = median_ms(lambda f=find: f(paths, ("codex",)), a.repeat)
                single = median_ms(lambda f=find: f(one, ("codex",)), a.repeat)
                print(f"{name:<16} {every:>16.2f} {single:>15.2f}")
        finally:
            for process in processes:
                process.kill()
                process.wait()
                assert process.stdout is not None
                process.stdout.close()


if __name__ == "__main__":
    main()

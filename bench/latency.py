"""How fast a change shows: the timings the tests used to assert, measured here instead.

    python bench/latency.py                    # 20 rounds of each
    python bench/latency.py --rounds 50 --browser

- `push`: a real `serve` over a recorded Claude Code home (2.1.332 `print-tool`); its live index
  is rewritten busy, then waiting (the way the CLI does), and each rewrite is timed to the
  `/api/events` event carrying the session's row in the new state (tests/test_live.py checks
  that the row comes, with a deadline, not how fast).
- `rename`: the live index renamed into place, then a journal appended, as Claude Code does;
  timed from the append to `Watcher.changed()` reporting it, with watchdog's own 0.5 s hold
  for an unpaired rename in force (tests/test_fsobserver.py proves the pair wakes the queue
  with a minute-long hold instead).
- `--browser`: the same rewrites timed to the row drawn in an open console, Debian's Chromium
  driven by Playwright (tests/test_console.py checks that each rewrite shows, in order).

Prints the median, p99 (the slowest but one of 100; with fewer rounds, the slowest) and the
slowest, in milliseconds. No timing is asserted: the figures go to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "fixtures" / "claude-code" / "2.1.332" / "print-tool"
CHROMIUM = Path("/usr/bin/chromium")
STATES = (({"status": "busy"}, "running"), ({"status": "waiting", "waitingFor": "x"}, "needs_user"))


def summary(name: str, took: list[float]) -> None:
    ms = sorted(t * 1000 for t in took)
    p99 = ms[max(0, round(len(ms) * 0.99) - 1)]
    print(
        f"{name}: median {statistics.median(ms):.1f} ms, p99 {p99:.1f} ms, "
        f"max {ms[-1]:.1f} ms over {len(ms)} rounds",
        flush=True,
    )


def session_home(folder: Path) -> tuple[Path, str]:
    home = folder / "claude"
    shutil.copytree(SCENARIO / "home", home)
    (home / "sessions").mkdir(exist_ok=True)
    doc = json.loads((SCENARIO / "expected.json").read_text())
    return home, doc["sessions"][0]["session_id"]


def push(rounds: int, folder: Path, browser: bool) -> None:
    from coding_agent_exporter.harnesses import HARNESSES
    from tests.backends import run_exporter, write_index

    home, session = session_home(folder)
    others = [f"--no-harness.{name}" for name in HARNESSES if name != "claude-code"]
    agent = subprocess.Popen(["sleep", "3600"])  # stands in for the agent's process
    try:
        write_index(home, agent, session, status="idle")
        with run_exporter(home, folder, *others) as url:
            took = []
            with urllib.request.urlopen(f"{url}/api/events", timeout=60) as stream:
                for i in range(rounds):
                    status, state = STATES[i % 2]
                    started = time.perf_counter()
                    write_index(home, agent, session, **status)
                    _row_in(stream, session, state)
                    took.append(time.perf_counter() - started)
            summary("push: live index rewrite to its row on /api/events", took)
            if browser:
                drawn(rounds, url, lambda s: write_index(home, agent, session, **s), session)
    finally:
        agent.kill()
        agent.wait()


def _row_in(stream: Any, session: str, state: str) -> None:
    for raw in stream:
        line = raw.decode()
        if line.startswith("data: ") and session in line:
            rows = json.loads(line[6:]).get("rows", [])
            if any(r["session_id"] == session and r["state"] == state for r in rows):
                return
    raise RuntimeError("the stream ended")


def drawn(rounds: int, url: str, write: Callable[[dict[str, str]], None], session: str) -> None:
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        page = chromium.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{url}/#/")
        page.wait_for_selector("#live[data-state='live']", timeout=30_000)
        took = []
        for i in range(rounds):
            status, state = STATES[i % 2]
            started = time.perf_counter()
            write(status)
            page.wait_for_selector(f"tr.row[data-session='{session}'].s-{state}", timeout=30_000)
            took.append(time.perf_counter() - started)
        chromium.close()
    summary("browser: live index rewrite to its row drawn in the console", took)


def rename(rounds: int, folder: Path) -> None:
    from coding_agent_exporter.sources.watch import Watcher

    root = folder / "rename"
    (root / "sessions").mkdir(parents=True)
    journal = root / "s.jsonl"
    journal.write_bytes(b"{}\n")
    watcher = Watcher([root])
    watcher.start()
    took = []
    try:
        watcher.changed(timeout=1.0)
        for i in range(rounds):
            tmp, index = root / "sessions" / "1.tmp", root / "sessions" / "1.json"
            tmp.write_text(str(i))
            tmp.replace(index)
            started = time.perf_counter()
            with journal.open("ab") as f:
                f.write(b"{}\n")
            seen: set[Path] = set()
            while journal not in seen:
                seen |= watcher.changed(timeout=10.0)
            took.append(time.perf_counter() - started)
    finally:
        watcher.stop()
    summary("rename: journal append behind a rename to Watcher.changed()", took)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--browser", action="store_true", help="also time the console's drawing")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    print(f"load average before: {psutil.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory(prefix="cae-latency-") as scratch:
        os.environ["XDG_STATE_HOME"] = str(Path(scratch) / "state")  # a state folder of its own
        rename(args.rounds, Path(scratch))
        push(args.rounds, Path(scratch), args.browser)
    print(f"load average after: {psutil.getloadavg()[0]:.1f}")
    print(
        f"python bench/latency.py --rounds {args.rounds}" + (" --browser" if args.browser else "")
    )


if __name__ == "__main__":
    main()

"""The console at 10,000 sessions: first render, a filter, a search and a page turn, in Chromium.

    python bench/console.py                      # 10,000 sessions, 5 rounds
    python bench/console.py --sessions 10000 --rounds 10

Writes `--sessions` tiny Claude Code journals (one prompt, one response each; 50 projects; the
titles "task <n>: ...") into a temporary home, starts `coding-agent-exporter serve` over it (other
harnesses off) and opens the console's history view in Debian's Chromium (`/usr/bin/chromium`,
driven headless by Playwright from PyPI) at 1400x900. Times are read inside the page: the console
marks (`performance.mark`) when a filter, the search or the page changes (`console-asked`), when
the answer of /api/sessions is parsed (`console-fetched`) and when the rows are drawn
(`console-rendered`): the first render is timed from the navigation's start, the others from
the input, split into the fetch and the drawing. The same requests timed from Python alone are
printed beside them. Prints the median and the maximum over `--rounds`. `tests/test_console.py`
writes its 10,000 sessions with `write_sessions` below.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = 50
CHROMIUM = "/usr/bin/chromium"
OTHERS = [
    f"--no-harness.{name}"
    for name in ("gemini-cli", "opencode", "grok", "pi", "oh-my-pi", "vibe", "codex")
]
"""`serve` flags that leave every harness but Claude Code's off."""


def journal(home: Path, number: int, title: str | None = None, turns: int = 1) -> tuple[str, Path]:
    """One finished Claude Code session of `turns` turns, each a prompt (`title`, else
    "task <n>: ...") and one response, in project `project-<n % 50>`; returns its session id
    and journal path."""
    session_id = str(uuid.UUID(int=number + 1))
    project = f"project-{number % PROJECTS}"
    folder = home / "projects" / f"-home-user-work-{project}"
    folder.mkdir(parents=True, exist_ok=True)
    start = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(minutes=number % (28 * 24 * 60))
    base = {
        "sessionId": session_id,
        "cwd": f"/home/user/work/{project}",
        "version": "2.1.332",
        "isSidechain": False,
        "userType": "external",
    }
    prompt = title if title is not None else f"task {number}: fix the build of {project}"
    records: list[dict[str, Any]] = []
    for turn in range(turns):
        at = start + timedelta(seconds=2 * turn)
        records.append(
            {
                **base,
                "type": "user",
                "parentUuid": records[-1]["uuid"] if records else None,
                "uuid": f"u-{number}-{turn}",
                "timestamp": _iso(at),
                "message": {"role": "user", "content": prompt},
            }
        )
        records.append(_reply(base, number, turn, at + timedelta(milliseconds=500)))
    path = folder / f"{session_id}.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return session_id, path


def _iso(at: datetime) -> str:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _reply(base: dict[str, Any], number: int, turn: int, at: datetime) -> dict[str, Any]:
    usage = {
        "input_tokens": 3 + number % 1000,
        "output_tokens": 25,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 10,
    }
    return {
        **base,
        "type": "assistant",
        "parentUuid": f"u-{number}-{turn}",
        "uuid": f"a-{number}-{turn}",
        "timestamp": _iso(at),
        "requestId": f"req_{number}_{turn}",
        "message": {
            "id": f"msg_{number}_{turn}",
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-5-5",
            "content": [{"type": "text", "text": "done"}],
            "stop_reason": "end_turn",
            "usage": usage,
        },
    }


def write_sessions(home: Path, count: int) -> None:
    """`count` sessions: numbers 0..count-1, `journal`'s."""
    for number in range(count):
        journal(home, number)


MARKS = "n => performance.getEntriesByName(n).map(e => e.startTime)"
STEPS = ("first", "filter", "search", "page")


def _marks(page: Any, name: str) -> list[float]:
    found: list[float] = page.evaluate(MARKS, f"console-{name}")
    return found


def _after(page: Any, action: Callable[[], object]) -> tuple[float, float, float]:
    """(input to drawn, of which the fetch, and the drawing) in ms, for `action()`: from the
    page's own marks, `console-asked` (the filter changed) to `console-fetched` (the answer
    parsed) to `console-rendered` (the rows drawn)."""
    seen = len(_marks(page, "rendered"))
    action()
    page.wait_for_selector(f"main[data-rendered='{seen + 1}']", timeout=30_000)
    asked, fetched = _marks(page, "asked")[-1], _marks(page, "fetched")[-1]
    drawn = _marks(page, "rendered")[seen]
    return drawn - asked, fetched - asked, drawn - fetched


PROJECT = "/home/user/work/project-7"
Times = dict[str, list[tuple[float, float, float]]]


def _round(browser: Any, url: str, times: Times) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(url + "/#/?history=1")
    page.wait_for_selector("main[data-rendered='1']", timeout=30_000)
    drawn, fetched = _marks(page, "rendered")[0], _marks(page, "fetched")[0]
    times["first"].append((drawn, fetched, drawn - fetched))  # from the navigation's start
    times["filter"].append(_after(page, lambda: page.select_option("#f-project", PROJECT)))
    times["search"].append(_after(page, lambda: page.fill("#f-q", "task 77")))
    page.fill("#f-q", "")
    page.wait_for_selector("main[data-rendered='4']", timeout=30_000)
    page.select_option("#f-project", "")
    page.wait_for_selector("main[data-rendered='5']", timeout=30_000)
    times["page"].append(_after(page, lambda: page.click("text=Older →")))
    page.close()


def measure(url: str, rounds: int) -> Times:
    from playwright.sync_api import sync_playwright

    times: Times = {step: [] for step in STEPS}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            for _ in range(rounds):
                _round(browser, url, times)
        finally:
            browser.close()
    return times


def _server_ms(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as response:
        response.read()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.backends import run_exporter

    with tempfile.TemporaryDirectory(prefix="cae-console-") as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        write_sessions(work / "claude", args.sessions)
        print(f"{args.sessions} sessions written in {time.perf_counter() - start:.1f} s")
        start = time.perf_counter()
        flags = [*OTHERS, "--state.dir", str(work / "state")]
        with run_exporter(work / "claude", work, *flags) as url:
            print(f"exporter ready in {time.perf_counter() - start:.1f} s")
            times = measure(url, args.rounds)
            base = url + "/api/sessions?history=1&limit=100"
            api = {
                "first": base,
                "filter": f"{base}&project={PROJECT}",
                "search": f"{base}&q=task+77",
                "page": f"{base}&offset=100",
            }
            server = {k: [_server_ms(u) for _ in range(args.rounds)] for k, u in api.items()}
    print(f"console, history view of {args.sessions:,} sessions, 1400x900, {args.rounds} rounds")
    print("medians (max) in ms; first: from the navigation's start; the others: from the input")
    print(f"{'':>8}  {'drawn':>13}  {'fetched':>13}  {'drawing':>11}  {'API alone':>9}")
    for step, values in times.items():
        cells = []
        for column in range(3):
            column_values = [v[column] for v in values]
            cells.append(f"{statistics.median(column_values):>5.0f} ({max(column_values):>4.0f})")
        print(
            f"{step:>8}  {cells[0]:>13}  {cells[1]:>13}  {cells[2]:>11}"
            f"  {statistics.median(server[step]):>9.0f}"
        )
    print("search: after the page's 200 ms pause in typing (not counted)")
    print(f"command: python bench/console.py --sessions {args.sessions} --rounds {args.rounds}")


if __name__ == "__main__":
    main()

"""The console's server side: the JSON API and the event stream of a `serve` over a large history.

    python bench/api.py --history /tmp/cae-many-small      # 3,857 sessions of 27,000 files
    python bench/api.py --history /tmp/cae-memory/tiny-20000 --requests 50

Starts `coding-agent-exporter serve` over the history's Claude Code home (other agents off, a
state folder of its own, so the first start reads every file), waits for `/-/ready`, then:
- times `GET /api/sessions` as the console asks it (history, first page; a text search; the last
  page; one agent and state), `--requests` times each: median and p99 in milliseconds;
- times `GET /api/sessions/<agent>/<id>/turns` for the session read from the most files: the
  first answer replays its files (`runtime.replay`), the next is kept;
- appends a copy of a record to a copy of one journal `--appends` times and times each from the
  write to the stream's event carrying that session's row (`/api/events`);
- with `--clients N`, again under load: N clients ask `/api/sessions?history=1` back to back
  (issue 34: readers starved by API load) while `/metrics` is scraped `--requests` times and
  the appends are timed again; how many API requests were answered and how many refused (503).
Prints one line per measure. No timing is asserted: the numbers go to bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from functools import partial
from pathlib import Path
from typing import Any

OTHERS = ("codex", "gemini-cli", "opencode", "grok", "pi", "oh-my-pi", "vibe")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=120) as response:
        return json.loads(response.read())


def timed(url: str, n: int) -> tuple[float, float, Any]:
    took, doc = [], None
    for _ in range(n):
        started = time.perf_counter()
        doc = get(url)
        took.append((time.perf_counter() - started) * 1000)
    took.sort()
    return statistics.median(took), took[min(len(took) - 1, int(len(took) * 0.99))], doc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history", type=Path, default=Path("/tmp/cae-many-small"))
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--appends", type=int, default=10)
    parser.add_argument("--clients", type=int, default=0, help="API clients hammering, then")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cae-api-") as work:
        home = Path(work) / "claude"
        shutil.copytree(args.history / "claude", home, symlinks=True)
        port = free_port()
        command = [
            sys.executable, "-m", "coding_agent_exporter", "serve", "--claude.home", str(home),
            *[f"--no-harness.{name}" for name in OTHERS],
            "--web.listen-address", f"127.0.0.1:{port}", "--state.dir", f"{work}/state",
        ]  # fmt: skip
        print("$", " ".join(command[1:]))
        process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            started = time.monotonic()
            while True:
                try:
                    with urllib.request.urlopen(url + "/-/ready", timeout=5):
                        break
                except OSError:
                    time.sleep(0.2)
            print(f"ready in {time.monotonic() - started:.1f} s")
            measure(url, home, args)
        finally:
            process.terminate()
            process.wait(timeout=30)


def measure(url: str, home: Path, args: argparse.Namespace) -> None:
    n = args.requests
    first = get(f"{url}/api/sessions?history=1&limit=1")
    total = first["total"]
    print(f"{total:,} sessions")
    last = max(0, total - 100)
    for name, query in (
        ("first page", "history=1"),
        ("text search", "history=1&q=zz-not-in-any-title"),
        ("last page", f"history=1&offset={last}"),
        ("agent and state", "history=1&agent=claude-code&state=ended"),
    ):
        median, p99, doc = timed(f"{url}/api/sessions?{query}", n)
        print(f"/api/sessions {name}: median {median:.1f} ms, p99 {p99:.1f} ms ({doc['total']:,})")
    rows = get(f"{url}/api/sessions?history=1&limit=1000")["sessions"]
    busiest = max(rows, key=lambda r: (r["messages"], r["session_id"]))
    turns = f"{url}/api/sessions/{busiest['agent']}/{busiest['session_id']}/turns"
    started = time.perf_counter()
    doc = get(turns)
    cold = (time.perf_counter() - started) * 1000
    median, _, _ = timed(turns, n)
    spans = sum(len(t["spans"]) for t in doc["turns"])
    print(
        f"turns of the busiest session ({busiest['messages']} messages, {doc['files']} files,"
        f" {doc['total']} turns, {spans} spans): first {cold:.0f} ms (replay"
        f" {doc['replayed_ms']:.0f} ms), kept {median:.1f} ms"
    )
    scrape_median, scrape_p99, _ = timed_raw(f"{url}/metrics", n)
    print(f"/metrics: median {scrape_median:.1f} ms, p99 {scrape_p99:.1f} ms")
    pushed(url, home, args.appends)
    if args.clients:
        under_load(url, home, args)


def timed_raw(url: str, n: int) -> tuple[float, float, None]:
    took = []
    for _ in range(n):
        started = time.perf_counter()
        with urllib.request.urlopen(url, timeout=120) as response:
            response.read()
        took.append((time.perf_counter() - started) * 1000)
    took.sort()
    return statistics.median(took), took[min(len(took) - 1, int(len(took) * 0.99))], None


def under_load(url: str, home: Path, args: argparse.Namespace) -> None:
    """The scrape and the append-to-event again while `--clients` clients hammer the API."""
    stop, answers, lock = threading.Event(), {200: 0, 503: 0}, threading.Lock()

    def hammer() -> None:
        while not stop.is_set():
            try:
                with urllib.request.urlopen(f"{url}/api/sessions?history=1", timeout=120) as r:
                    r.read()
                    status = r.status
            except urllib.error.HTTPError as error:
                status = error.code
            with lock:
                answers[status] = answers.get(status, 0) + 1

    clients = [threading.Thread(target=hammer, daemon=True) for _ in range(args.clients)]
    for client in clients:
        client.start()
    time.sleep(2.0)  # the clients are at it (a bench, not a test)
    started = time.monotonic()
    median, p99, _ = timed_raw(f"{url}/metrics", args.requests)
    print(f"under {args.clients} API clients: /metrics median {median:.1f} ms, p99 {p99:.1f} ms")
    pushed(url, home, args.appends, "bench0000-0000-4000-8000-000000000001")
    stop.set()
    for client in clients:
        client.join(120)
    took = time.monotonic() - started
    print(
        f"under {args.clients} API clients: {answers[200]} API answers, {answers[503]} refused "
        f"(503) in {took:.1f} s"
    )


def pushed(
    url: str, home: Path, appends: int, new: str = "bench0000-0000-4000-8000-000000000000"
) -> None:
    """Write-to-event latency: a journal copied under a new session id, then lines appended."""
    journals = [p for p in home.glob("projects/*/*.jsonl") if not p.name.startswith("bench")]
    source = max(journals, key=lambda p: p.stat().st_size)
    lines = source.read_text().splitlines()
    old = json.loads(lines[0]).get("sessionId") or source.stem
    copy = source.with_name(f"{new}.jsonl")
    body = [line.replace(old, new) for line in lines]
    copy.write_text("\n".join(body[:1]) + "\n")
    arrived: dict[int, float] = {}
    lock = threading.Condition()

    def listen() -> None:
        with urllib.request.urlopen(url + "/api/events", timeout=120) as stream:
            for raw in stream:
                line = raw.decode()
                if line.startswith("data: ") and new in line:
                    doc = json.loads(line[6:])
                    for row in doc.get("rows", []):
                        if row["session_id"] == new:
                            with lock:
                                arrived[row["messages"]] = time.perf_counter()
                                lock.notify_all()

    threading.Thread(target=listen, daemon=True).start()
    time.sleep(1.0)  # the stream is open (a bench, not a test)
    took = []
    assistant = [line for line in body if '"type":"assistant"' in line.replace(" ", "")]
    with copy.open("a") as out:
        for i, line in enumerate(assistant[:appends]):
            record = json.loads(line)
            record["message"]["id"] = f"msg_bench_{i}"
            record["uuid"] = f"bench-{i}"
            started = time.perf_counter()
            out.write(json.dumps(record) + "\n")
            out.flush()
            with lock:
                lock.wait_for(partial(_seen, arrived, i), timeout=10)
                at = max(arrived.values(), default=started)
            took.append((at - started) * 1000)
    took.sort()
    print(
        f"append to event (/api/events): median {statistics.median(took):.0f} ms, "
        f"max {took[-1]:.0f} ms over {len(took)} appends"
    )


def _seen(arrived: dict[int, float], i: int) -> bool:
    return any(m > i for m in arrived)


if __name__ == "__main__":
    main()

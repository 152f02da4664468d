"""Load: live Claude Code sessions appending records while `serve` follows them and is scraped.

    python bench/load.py                          # 50 sessions, 10 minutes, 4 records/s each
    python bench/load.py --sessions 10 --minutes 0.5

Each session is a recorded turn (2.1.197 `subagent-foreground`: prompt, a foreground `Agent`
call, the sub-agent's own journal with a Bash call, the answer) replayed again and again under
fresh ids, one record at a time, with its timestamps set to the moment it is written, and a live
index entry (`sessions/<pid>.json`, a real `sleep` process) that reads busy during a turn and
idle after it. Meanwhile `--scrapers` threads scrape /metrics without pause and the exporter's
RSS is sampled every second. At the end every turn is finished, the exporter must have read
record (no record lost: its history counters must come to equal those of a fresh
`coding-agent-exporter metrics` over the same files, a recount, and count every response
written). Prints the append-to-visible latency (a record is visible once its session's
`coding_agent_session_last_activity_timestamp_seconds` reaches the record's timestamp), scrape
times, RSS over time, and the command line.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from exporter.harnesses import HARNESSES  # noqa: E402

TEMPLATE = (
    ROOT / "fixtures/claude-code/2.1.197/subagent-foreground/home/projects/-home-user-work-shop-api"
)
IDS = re.compile(
    rb"(?:msg_stub_|toolu_stub_|req_stub_)[0-9a-f]{12}"
    rb"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)
STAMP = re.compile(rb'"timestamp":"[^"]*"')
_MESSAGE = re.compile(rb"msg_stub_[0-9a-f]{12}")
_ACTIVITY = re.compile(
    r"^coding_agent_session_last_activity_timestamp_seconds"
    r'\{[^}]*session_id="([^"]+)"[^}]*\} (\S+)$',
    re.MULTILINE,
)
HISTORY = (
    "coding_agent_tokens_total",
    "coding_agent_messages_total",
    "coding_agent_turns_total",
    "coding_agent_tool_calls_total",
    "coding_agent_subagents_total",
    "coding_agent_sessions_total",
    "coding_agent_turn_duration_seconds",
    "coding_agent_tool_call_duration_seconds",
)


@dataclass(frozen=True)
class Template:
    lead: list[bytes]
    sub: list[bytes]
    meta: bytes
    session_id: bytes
    agent_id: bytes
    split: int  # sub-agent records are written after lead[:split]
    messages: int  # distinct model responses in one turn


def template() -> Template:
    (lead_path,) = TEMPLATE.glob("*.jsonl")
    (sub_path,) = TEMPLATE.glob("*/subagents/agent-*.jsonl")
    lead = lead_path.read_bytes().splitlines(keepends=True)
    sub = sub_path.read_bytes().splitlines(keepends=True)
    split = next(i for i, line in enumerate(lead) if b'"name":"Agent"' in line) + 1
    messages = len(set(_MESSAGE.findall(b"".join(lead + sub))))
    agent_id = sub_path.stem.removeprefix("agent-").encode()
    meta = sub_path.with_suffix(".meta.json").read_bytes()
    return Template(lead, sub, meta, lead_path.stem.encode(), agent_id, split, messages)


def _iso(at: datetime) -> bytes:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z").encode()


@dataclass
class Session:
    number: int
    session_id: str
    project: Path
    process: subprocess.Popen[bytes]
    turn: int = 0
    pending: list[tuple[Path, bytes, bool]] = field(default_factory=list)  # path, bytes, record?

    @property
    def cwd(self) -> str:
        return f"/home/user/work/load-{self.number % 10}"


class Load:
    """Writes the sessions' records at `rate` records per second per session."""

    def __init__(self, home: Path, sessions: int, rate: float = 4.0, seed: int = 7) -> None:
        self.home, self.rate, self.template = home, rate, template()
        self.random = random.Random(seed)
        self.records = self.turns = 0
        self.appends: list[tuple[float, str, float]] = []  # when, session, record timestamp
        self.lock = threading.Lock()
        self.sessions: list[Session] = []
        (home / "sessions").mkdir(parents=True, exist_ok=True)
        for n in range(sessions):
            project = home / "projects" / f"-home-user-work-load-{n % 10}"
            project.mkdir(parents=True, exist_ok=True)
            process = subprocess.Popen(["sleep", "86400"])
            session_id = f"10ad0000-0000-4000-8000-{n:012x}"
            self.sessions.append(Session(n, session_id, project, process))

    @property
    def messages(self) -> int:
        return self.turns * self.template.messages

    def run(self, seconds: float, stop: threading.Event | None = None) -> None:
        """Append for `seconds`, then finish every open turn (at the same pace)."""
        stop = stop or threading.Event()
        end = time.monotonic() + seconds
        start = time.monotonic()
        queue = [(start + self.random.uniform(0, 1 / self.rate), s.number) for s in self.sessions]
        heapq.heapify(queue)
        while queue and not stop.is_set():
            when, number = heapq.heappop(queue)
            wait = when - time.monotonic()
            if wait > 0 and stop.wait(wait):
                break
            session = self.sessions[number]
            if not session.pending:
                if time.monotonic() >= end:
                    continue  # this session is done: its last turn ended
                self._start_turn(session)
            self._write_next(session)
            heapq.heappush(queue, (when + 1 / self.rate, number))

    def close(self) -> None:
        for session in self.sessions:
            session.process.kill()
            session.process.wait()

    def _start_turn(self, session: Session) -> None:
        t, n, k = self.template, session.number, session.turn
        session.turn += 1
        suffix = f"{n:03x}{k:05x}".encode()
        agent = f"a{n:04x}{k:012x}".encode()
        sid = session.session_id.encode()

        def fresh(line: bytes) -> bytes:
            line = line.replace(t.agent_id, agent)
            line = IDS.sub(lambda m: sid if m[0] == t.session_id else m[0][:-8] + suffix, line)
            return line.replace(b"/home/user/work/shop-api", session.cwd.encode())

        journal = session.project / f"{session.session_id}.jsonl"
        subs = session.project / session.session_id / "subagents"
        sub_path = subs / f"agent-{agent.decode()}.jsonl"
        writes = [(journal, fresh(line), True) for line in t.lead[: t.split]]
        writes.append((sub_path.with_suffix(".meta.json"), fresh(t.meta), False))
        writes += [(sub_path, fresh(line), True) for line in t.sub]
        writes += [(journal, fresh(line), True) for line in t.lead[t.split :]]
        session.pending = writes
        self._index(session, "busy")

    def _write_next(self, session: Session) -> None:
        path, data, record = session.pending.pop(0)
        path.parent.mkdir(parents=True, exist_ok=True)
        if record:
            now = datetime.now(UTC)
            stamp = now.replace(microsecond=now.microsecond // 1000 * 1000)
            data = STAMP.sub(b'"timestamp":"' + _iso(stamp) + b'"', data)
            with path.open("ab") as f:
                f.write(data)
            with self.lock:
                self.records += 1
                self.appends.append((time.monotonic(), session.session_id, stamp.timestamp()))
        else:  # a whole document: written beside, then renamed into place
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        if not session.pending:
            with self.lock:
                self.turns += 1
            self._index(session, "idle")

    def _index(self, session: Session, status: str) -> None:
        started = int(psutil.Process(session.process.pid).create_time() * 1000)
        now = int(time.time() * 1000)
        doc = {
            "pid": session.process.pid,
            "sessionId": session.session_id,
            "cwd": session.cwd,
            "startedAt": started,
            "kind": "interactive",
            "entrypoint": "cli",
            "status": status,
            "updatedAt": now,
            "statusUpdatedAt": now,
        }
        path = self.home / "sessions" / f"{session.process.pid}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)  # the way Claude Code rewrites its index


# -- the exporter, its scrapes and its memory ----------------------------------------------------


def scrape(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text: str = response.read().decode()
        return text


def value(text: str, name: str) -> float:
    """The sum of all samples of `name` in an exposition."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def history(text: str) -> list[str]:
    return sorted(line for line in text.splitlines() if line.startswith(HISTORY))


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def exporter(home: Path, *argv: str, log: Path | None = None) -> Iterator[tuple[str, int]]:
    """`serve` over `home` (Claude Code only); yields its URL and pid once it is ready."""
    port = free_port()
    out = log.open("ab") if log is not None else subprocess.DEVNULL
    command = [sys.executable, "-m", "exporter", "serve", "--claude.home", str(home)]
    command += ["--state.dir", str(home.parent / "exporter-state")]
    command += [f"--no-harness.{name}" for name in HARNESSES if name != "claude-code"]
    process = subprocess.Popen(
        [*command, "--web.listen-address", f"127.0.0.1:{port}", *argv],
        stdout=out,
        stderr=out,
        cwd=ROOT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        until(lambda: _ready(url), 60, "the exporter ready")
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)
        if log is not None and not isinstance(out, int):
            out.close()


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/-/ready", timeout=5) as response:
            return int(response.status) == 200
    except OSError:
        return False


def until(check: Callable[[], bool], seconds: float, what: str) -> None:
    pause = threading.Event()
    end = time.monotonic() + seconds
    while not check():
        if time.monotonic() > end:
            raise TimeoutError(f"timed out waiting for {what}")
        pause.wait(0.05)


def recount(home: Path) -> str:
    """What a fresh exporter reads from the same files, in one go."""
    command = [sys.executable, "-m", "exporter", "metrics", "--claude.home", str(home)]
    command += ["--state.dir", str(home.parent / "recount-state")]
    command += [f"--no-harness.{name}" for name in HARNESSES if name != "claude-code"]
    return subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT).stdout


class Scrapers:
    """`count` threads, each scraping /metrics every `interval` seconds (staggered, so the
    exporter sees a scrape every interval/count seconds, several at once when one is slow); all
    note when each live session's latest activity became visible."""

    def __init__(self, url: str, count: int, interval: float = 1.0) -> None:
        self.url, self.stop, self.interval, self.count = url, threading.Event(), interval, count
        self.times: list[float] = []  # seconds per scrape
        self.errors = 0
        self.seen: list[tuple[float, dict[str, float]]] = []  # answered, session → activity
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(count)
        ]

    def __enter__(self) -> Scrapers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()

    def _run(self, number: int) -> None:
        if self.stop.wait(number * self.interval / self.count):
            return
        while True:
            started = time.monotonic()
            try:
                text = scrape(self.url)
            except OSError:
                with self.lock:
                    self.errors += 1
                if self.stop.wait(self.interval):
                    return
                continue
            answered = time.monotonic()
            activity = {sid: float(at) for sid, at in _ACTIVITY.findall(text)}
            with self.lock:
                self.times.append(answered - started)
                self.seen.append((answered, activity))
            if self.stop.wait(max(0.0, started + self.interval - time.monotonic())):
                return


def latencies(
    appends: list[tuple[float, str, float]], seen: list[tuple[float, dict[str, float]]]
) -> list[float]:
    """For each append, the time until a scrape first showed its session's activity at (or
    past) the record's timestamp."""
    seen = sorted(seen, key=lambda item: item[0])
    times = [when for when, _ in seen]
    best: dict[str, list[float]] = {}  # session → running maximum of its activity per scrape
    for _, activity in seen:
        for sid in activity.keys() - best.keys():
            best[sid] = [0.0] * (len(best[next(iter(best))]) if best else 0)
        for sid, values in best.items():
            values.append(max(activity.get(sid, 0.0), values[-1] if values else 0.0))
    out = []
    for when, sid, stamp in appends:
        values = best.get(sid, [])
        start = bisect.bisect_left(times, when)
        found = bisect.bisect_left(values, stamp - 0.0005, lo=start)
        if found < len(values):
            out.append(times[found] - when)
    return out


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else 0.0


class Memory:
    """RSS of a process sampled every second."""

    def __init__(self, pid: int) -> None:
        self.process, self.stop = psutil.Process(pid), threading.Event()
        self.samples: list[tuple[float, float]] = []  # seconds since start, MB
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Memory:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        start = time.monotonic()
        while True:
            try:
                rss = self.process.memory_info().rss / 1e6
            except psutil.Error:
                return
            self.samples.append((time.monotonic() - start, rss))
            if self.stop.wait(1.0):
                return


@dataclass
class Result:
    records: int
    turns: int
    messages: float
    expected_messages: int
    counters_equal: bool
    latencies: list[float]
    scrapes: list[float]
    scrape_errors: int
    rss: list[tuple[float, float]]


def run(
    home: Path, sessions: int, seconds: float, rate: float, scrapers: int, interval: float
) -> Result:
    load = Load(home, sessions, rate)
    try:
        with (
            exporter(home) as (url, pid),
            Memory(pid) as memory,
            Scrapers(url, scrapers, interval) as s,
        ):
            load.run(seconds)
            clean = recount(home)
            with suppress(TimeoutError):  # reported below
                until(lambda: history(scrape(url)) == history(clean), 60, "the recount's counters")
            final = scrape(url)
    finally:
        load.close()
    return Result(
        records=load.records,
        turns=load.turns,
        messages=value(final, "coding_agent_messages_total"),
        expected_messages=load.messages,
        counters_equal=history(final) == history(clean),
        latencies=latencies(load.appends, s.seen),
        scrapes=s.times,
        scrape_errors=s.errors,
        rss=memory.samples,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=4.0, help="records per second per session")
    parser.add_argument("--scrapers", type=int, default=4, help="clients scraping /metrics")
    parser.add_argument("--scrape-interval", type=float, default=1.0, help="seconds, per client")
    parser.add_argument("--home", type=Path, help="default: a fresh folder under /tmp")
    ns = parser.parse_args()
    home = ns.home or Path(tempfile.mkdtemp(prefix="cae-load-")) / "claude"
    try:
        result = run(home, ns.sessions, ns.minutes * 60, ns.rate, ns.scrapers, ns.scrape_interval)
    finally:
        if ns.home is None:
            shutil.rmtree(home.parent, ignore_errors=True)
    lat = [x * 1000 for x in result.latencies]
    scrapes = [x * 1000 for x in result.scrapes]
    rss = result.rss
    print("command: python bench/load.py " + " ".join(sys.argv[1:]))
    print(
        f"{ns.sessions} sessions x {ns.rate:g} records/s for {ns.minutes:g} min: "
        f"{result.records} records, {result.turns} turns (with as many sub-agents) written"
    )
    print(
        f"read by the exporter: {result.messages:.0f} responses (written: "
        f"{result.expected_messages}); history counters equal to a recount: "
        f"{result.counters_equal}"
    )
    print(
        f"append-to-visible: p50 {percentile(lat, 50):.0f} ms, p99 {percentile(lat, 99):.0f} ms, "
        f"max {max(lat, default=0):.0f} ms ({len(lat)} records)"
    )
    print(
        f"/metrics, {ns.scrapers} clients every {ns.scrape_interval:g} s: {len(scrapes)} "
        f"scrapes, p50 {percentile(scrapes, 50):.0f} ms, p99 {percentile(scrapes, 99):.0f} ms, "
        f"max {max(scrapes, default=0):.0f} ms, {result.scrape_errors} errors"
    )
    step = max(1, len(rss) // 10)
    points = ", ".join(f"{t:.0f}s {mb:.0f}" for t, mb in rss[::step])
    print(f"RSS (MB) over time: {points}; peak {max(mb for _, mb in rss):.0f} MB")
    lost = result.messages != result.expected_messages or len(lat) != result.records
    sys.exit(1 if lost or not result.counters_equal or result.scrape_errors else 0)


if __name__ == "__main__":
    main()

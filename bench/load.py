"""Load: live Claude Code sessions appending records while `serve` follows them and is scraped.

    python bench/load.py                          # 50 sessions, 10 minutes, 4 records/s each
    python bench/load.py --sessions 50 --minutes 1 --scrapers 4 --scrape-interval 0.2
    python bench/load.py --sessions 50 --minutes 1 --scrapers 8 --scrape-interval 0  # no pause

Each session is a recorded turn (2.1.197 `subagent-foreground`: prompt, a foreground `Agent`
call, the sub-agent's own journal with a Bash call, the answer) replayed again and again under
fresh ids, one record at a time, with its timestamps set to the moment it is written, and a live
index entry (`sessions/<pid>.json`, a real `sleep` process) that reads busy during a turn and
idle after it. The sessions' first writes are spread over one turn's time, so at any moment as
many sessions are at each point of a turn (`--lockstep`: they all begin together, then end and
begin their turns at the same moment, every 4 s at 4 records/s). Meanwhile `--scrapers` threads
scrape /metrics, each every `--scrape-interval` seconds (0: back to back), and the exporter's
RSS is sampled every second. At the end every turn is finished, the exporter must have read
every record (no record lost: its history counters must come to equal those of a fresh
`coding-agent-exporter metrics` over the same files, a recount, and count every response
written). Prints the append-to-visible latency, scrape times, the backlog of records written
but not shown yet, RSS over time, and the command line.

Append to visible is timed per record, each paired with the change in /metrics it must cause
(`effects`; every session has a project of its own, so the project-labelled counters are the
session's): a response's count in `coding_agent_messages_total` and its output tokens in
`coding_agent_tokens_total`, a prompt, a tool call or a tool result moving the session's
`coding_agent_session_last_activity_timestamp_seconds` to the record's time, the record after
the turn's last response ending the turn in `coding_agent_turns_total`. A record shows once
the first scrape answered after it was written shows all of its changes; the time is from just
before the write to that answer, so it includes the wait for the next scrape (a scrape every
`--scrape-interval / --scrapers` seconds). Records that change nothing a scrape can see (queue
operations, attachments, a sub-agent's prompt) are counted apart, not timed.
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
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coding_agent_exporter.harnesses import HARNESSES  # noqa: E402

TEMPLATE = (
    ROOT / "fixtures/claude-code/2.1.197/subagent-foreground/home/projects/-home-user-work-shop-api"
)
IDS = re.compile(
    rb"(?:msg_stub_|toolu_stub_|req_stub_)[0-9a-f]{12}"
    rb"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)
STAMP = re.compile(rb'"timestamp":"[^"]*"')
_MESSAGE = re.compile(rb"msg_stub_[0-9a-f]{12}")
# What a scrape shows of each session (its project is its own): key kind → pattern
_SHOWN = {
    "activity": re.compile(
        r"^coding_agent_session_last_activity_timestamp_seconds"
        r'\{[^}]*session_id="([^"]+)"[^}]*\} (\S+)$',
        re.MULTILINE,
    ),
    "messages": re.compile(
        r'^coding_agent_messages_total\{[^}]*project="([^"]+)"[^}]*\} (\S+)$', re.MULTILINE
    ),
    "output": re.compile(
        r'^coding_agent_tokens_total\{(?=[^}]*type="output")[^}]*project="([^"]+)"[^}]*\} (\S+)$',
        re.MULTILINE,
    ),
    "turns": re.compile(
        r'^coding_agent_turns_total\{(?=[^}]*outcome="completed")[^}]*project="([^"]+)"[^}]*\}'
        r" (\S+)$",
        re.MULTILINE,
    ),
}
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
class Effect:
    """What a record of a turn must change in /metrics once read; zero: nothing of that kind.
    Counts are the session's within the turn (a turn adds them again to what the earlier turns
    left)."""

    activity: bool = False  # the session's last activity reaches the record's time
    messages: int = 0  # the response it carries is counted: the turn's responses so far
    output: int = 0  # its output tokens are counted: the turn's output tokens so far
    turn: bool = False  # it ends the turn (`completed`)

    @property
    def visible(self) -> bool:
        return self.activity or bool(self.messages or self.output) or self.turn


@dataclass(frozen=True)
class Template:
    lead: list[bytes]
    sub: list[bytes]
    meta: bytes
    session_id: bytes
    agent_id: bytes
    split: int  # sub-agent records are written after lead[:split]
    messages: int  # distinct model responses in one turn
    output: int  # output tokens of one turn
    effects: list[Effect]  # one per record, in the order they are written (the meta is no record)


def template() -> Template:
    (lead_path,) = TEMPLATE.glob("*.jsonl")
    (sub_path,) = TEMPLATE.glob("*/subagents/agent-*.jsonl")
    lead = lead_path.read_bytes().splitlines(keepends=True)
    sub = sub_path.read_bytes().splitlines(keepends=True)
    split = next(i for i, line in enumerate(lead) if b'"name":"Agent"' in line) + 1
    messages = len(set(_MESSAGE.findall(b"".join(lead + sub))))
    agent_id = sub_path.stem.removeprefix("agent-").encode()
    meta = sub_path.with_suffix(".meta.json").read_bytes()
    order = [(line, True) for line in lead[:split]] + [(line, False) for line in sub]
    found = effects(order + [(line, True) for line in lead[split:]])
    output = max(e.output for e in found)
    args = (lead_path.stem.encode(), agent_id, split, messages, output, found)
    return Template(lead, sub, meta, *args)


def effects(records: list[tuple[bytes, bool]]) -> list[Effect]:
    """What each record of a turn (its bytes; in the lead journal or a sub-agent's) must change,
    from what the record says (Claude Code's journal format), not from what the exporter
    makes of it: a response (`assistant` with a message id) is counted once, its usage the
    largest of its copies, and moves the session's activity; a tool result, and a prompt in the
    lead journal, move the activity; the lead journal's next record after a response that ended
    the turn (`end_turn`) closes the turn. Anything else (queue operations, attachments, a
    sub-agent's prompt, the `last-prompt` note) changes nothing a scrape can see."""
    output: dict[str, int] = {}  # message id → largest output tokens of its copies
    ending = False  # the lead journal's last response ended the turn
    out = []
    for line, lead in records:
        record = json.loads(line)
        kind, message = record.get("type"), record.get("message")
        message = message if isinstance(message, dict) else {}
        content = message.get("content")
        effect = Effect()
        if lead and ending:
            effect = Effect(turn=True, activity=False)  # the end's time is the response's
            ending = False
        if kind == "assistant" and isinstance(message.get("id"), str):
            mid, before = message["id"], sum(output.values())
            new = mid not in output
            tokens = (message.get("usage") or {}).get("output_tokens") or 0
            output[mid] = max(output.get(mid, 0), tokens)
            effect = Effect(
                activity=True,
                messages=len(output) if new else 0,
                output=sum(output.values()) if sum(output.values()) > before else 0,
                turn=effect.turn,
            )
            ending = lead and message.get("stop_reason") == "end_turn"
        elif kind == "user":
            results = isinstance(content, list) and any(
                isinstance(part, dict) and part.get("type") == "tool_result" for part in content
            )
            if results or (lead and isinstance(content, str)):
                effect = Effect(activity=True, turn=effect.turn)
        out.append(effect)
    return out


def _iso(at: datetime) -> bytes:
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z").encode()


@dataclass
class Session:
    number: int
    session_id: str
    project: Path
    process: subprocess.Popen[bytes]
    cwd: str
    turn: int = 0
    # what is left to write of the turn: path, bytes, the record's effect (None: a document)
    pending: list[tuple[Path, bytes, Effect | None]] = field(default_factory=list)


@dataclass(frozen=True)
class Append:
    """A record written that must show in /metrics: when, and what it must change there."""

    when: float  # time.monotonic() just before the write
    session_id: str
    project: str  # the session's folder name (`load-7`): its own project when one per session
    stamp: float  # the record's timestamp
    turns: int  # turns of the session before this record's
    effect: Effect


class Load:
    """Writes the sessions' records at `rate` records per second per session, the sessions
    spread over `projects` working folders (default 10; `None`: one per session). The sessions
    begin within one write's time of each other, so they begin and end their turns together
    (in lockstep), unless `stagger`: then their first writes are spread over one turn's time
    and as many are at each point of a turn at any moment."""

    def __init__(
        self,
        home: Path,
        sessions: int,
        rate: float = 4.0,
        seed: int = 7,
        projects: int | None = 10,
        stagger: bool = False,
    ) -> None:
        self.home, self.rate, self.template, self.stagger = home, rate, template(), stagger
        self.random = random.Random(seed)
        self.records = self.turns = 0
        self.appends: list[Append] = []
        self.unseen = 0  # records written that change nothing a scrape shows
        self.lock = threading.Lock()
        self.sessions: list[Session] = []
        (home / "sessions").mkdir(parents=True, exist_ok=True)
        for n in range(sessions):
            folder = n % projects if projects else n
            project = home / "projects" / f"-home-user-work-load-{folder}"
            project.mkdir(parents=True, exist_ok=True)
            process = subprocess.Popen(["sleep", "86400"])
            session_id = f"10ad0000-0000-4000-8000-{n:012x}"
            cwd = f"/home/user/work/load-{folder}"
            self.sessions.append(Session(n, session_id, project, process, cwd))

    @property
    def messages(self) -> int:
        return self.turns * self.template.messages

    def run(self, seconds: float, stop: threading.Event | None = None) -> None:
        """Append for `seconds`, then finish every open turn (at the same pace)."""
        stop = stop or threading.Event()
        end = time.monotonic() + seconds
        start = time.monotonic()
        writes = len(self.template.effects) + 1  # the records of a turn and its sub-agent's meta
        spread = writes / self.rate if self.stagger else 1 / self.rate
        queue = [(start + self.random.uniform(0, spread), s.number) for s in self.sessions]
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
        records = [(journal, line) for line in t.lead[: t.split]]
        records += [(sub_path, line) for line in t.sub]
        records += [(journal, line) for line in t.lead[t.split :]]
        writes: list[tuple[Path, bytes, Effect | None]] = [
            (path, fresh(line), effect)
            for (path, line), effect in zip(records, t.effects, strict=True)
        ]
        meta = (sub_path.with_suffix(".meta.json"), fresh(t.meta), None)
        writes.insert(t.split, meta)
        session.pending = writes
        self._index(session, "busy")

    def _write_next(self, session: Session) -> None:
        path, data, effect = session.pending.pop(0)
        path.parent.mkdir(parents=True, exist_ok=True)
        if effect is not None:  # a record
            now = datetime.now(UTC)
            stamp = now.replace(microsecond=now.microsecond // 1000 * 1000)
            data = STAMP.sub(b'"timestamp":"' + _iso(stamp) + b'"', data)
            with path.open("ab", buffering=0) as f:
                written = time.monotonic()  # taken before the write: no latency is flattered
                f.write(data)
            turns = session.turn - 1
            with self.lock:
                self.records += 1
                if effect.visible:
                    append = Append(
                        written,
                        session.session_id,
                        session.cwd.rsplit("/", 1)[-1],
                        stamp.timestamp(),
                        turns,
                        effect,
                    )
                    self.appends.append(append)
                else:
                    self.unseen += 1
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
    command = [sys.executable, "-m", "coding_agent_exporter", "serve", "--claude.home", str(home)]
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
    command = [sys.executable, "-m", "coding_agent_exporter", "metrics", "--claude.home", str(home)]
    command += ["--state.dir", str(home.parent / "recount-state")]
    command += [f"--no-harness.{name}" for name in HARNESSES if name != "claude-code"]
    return subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT).stdout


Key = tuple[str, str]  # what a scrape shows: ("activity", session id) or (counter, project)


class Scrapers:
    """`count` threads, each scraping /metrics every `interval` seconds (staggered, so the
    exporter sees a scrape every interval/count seconds, several at once when one is slow; 0:
    back to back); all note what each scrape showed of `keys` (`_SHOWN`)."""

    def __init__(
        self, url: str, count: int, interval: float = 1.0, keys: list[Key] | None = None
    ) -> None:
        self.url, self.stop, self.interval, self.count = url, threading.Event(), interval, count
        self.keys = {key: i for i, key in enumerate(keys or [])}
        self.times: list[float] = []  # seconds per scrape
        self.errors = 0
        self.seen: list[tuple[float, float, array[float]]] = []  # started, answered, by key
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

    def shown(self, text: str) -> array[float]:
        values = array("d", bytes(8 * len(self.keys)))
        for kind, pattern in _SHOWN.items():
            for name, found in pattern.findall(text):
                if kind != "activity":  # a project: `/home/user/work/load-7` or `~/work/load-7`
                    name = name.rsplit("/", 1)[-1]
                i = self.keys.get((kind, name))
                if i is not None:
                    values[i] += float(found)  # a project's counter: summed over its models
        return values

    def once(self) -> str:
        """One scrape, noted with the others."""
        started = time.monotonic()
        text = scrape(self.url)
        answered = time.monotonic()
        values = self.shown(text)
        with self.lock:
            self.times.append(answered - started)
            self.seen.append((started, answered, values))
        return text

    def _run(self, number: int) -> None:
        if self.stop.wait(number * self.interval / self.count):
            return
        while True:
            started = time.monotonic()
            try:
                self.once()
            except OSError:
                with self.lock:
                    self.errors += 1
                if self.stop.wait(self.interval):
                    return
                continue
            if self.stop.wait(max(0.0, started + self.interval - time.monotonic())):
                return


def expected(append: Append, template: Template) -> list[tuple[Key, float]]:
    """What a scrape must show for `append` to be visible: (key, least value)."""
    e, done = append.effect, append.turns
    out: list[tuple[Key, float]] = []
    if e.activity:
        out.append((("activity", append.session_id), append.stamp - 0.0005))  # ms in the file
    if e.messages:
        out.append((("messages", append.project), done * template.messages + e.messages - 0.5))
    if e.output:
        out.append((("output", append.project), done * template.output + e.output - 0.5))
    if e.turn:
        out.append((("turns", append.project), done + 1 - 0.5))
    return out


def keys(load: Load) -> list[Key]:
    out: list[Key] = []
    for session in load.sessions:
        out.append(("activity", session.session_id))
        project = session.cwd.rsplit("/", 1)[-1]
        out += [(kind, project) for kind in ("messages", "output", "turns")]
    return sorted(set(out))


def latencies(
    appends: list[Append],
    seen: list[tuple[float, float, array[float]]],
    index: dict[Key, int],
    template: Template,
) -> list[float | None]:
    """For each append, the time until the first scrape answered after it showed all that it
    must change (None: never). Values are taken as the running maximum over scrapes in the
    order they were answered (a counter or a timestamp never goes back)."""
    seen = sorted(seen, key=lambda item: item[1])
    times = [answered for _, answered, _ in seen]
    columns: dict[int, list[float]] = {}

    def column(i: int) -> list[float]:
        if i not in columns:
            running, top = [], 0.0
            for _, _, values in seen:
                top = max(top, values[i])
                running.append(top)
            columns[i] = running
        return columns[i]

    out: list[float | None] = []
    for append in appends:
        start = bisect.bisect_left(times, append.when)
        found = start
        for key, least in expected(append, template):
            found = max(found, bisect.bisect_left(column(index[key]), least, lo=start))
        out.append(times[found] - append.when if found < len(times) else None)
    return out


def backlog(appends: list[Append], lags: list[float | None], seen: list[float]) -> list[int]:
    """At each scrape's answer: records written by then that no scrape had shown yet."""
    written = sorted(a.when for a in appends)
    shown = sorted(a.when + lag for a, lag in zip(appends, lags, strict=True) if lag is not None)
    return [
        bisect.bisect_right(written, at) - bisect.bisect_right(shown, at) for at in sorted(seen)
    ]


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
    records: int  # records written
    unseen: int  # of them, records that change nothing a scrape shows (not timed)
    timed: int  # of them, records paired with a change they must cause
    turns: int
    messages: float
    expected_messages: int
    counters_equal: bool
    latencies: list[float]  # seconds, one per timed record that showed
    kinds: list[str]  # beside each latency: what the record changes
    backlog: list[int]  # at each scrape's answer: records written, not shown by any scrape yet
    scrapes: list[float]
    scrape_errors: int
    rss: list[tuple[float, float]]


def kind(effect: Effect) -> str:
    if effect.messages or effect.output:
        return "response"
    return "turn end" if effect.turn else "activity"


def run(
    home: Path,
    sessions: int,
    seconds: float,
    rate: float,
    scrapers: int,
    interval: float,
    *,
    lockstep: bool = False,
) -> Result:
    # a project per session: its own counters; sessions at every point of a turn at any moment
    load = Load(home, sessions, rate, projects=None, stagger=not lockstep)
    wanted = keys(load)
    try:
        with (
            exporter(home) as (url, pid),
            Memory(pid) as memory,
            Scrapers(url, scrapers, interval, wanted) as s,
        ):
            load.run(seconds)
            clean = recount(home)
            with suppress(TimeoutError):  # reported below
                until(lambda: history(scrape(url)) == history(clean), 60, "the recount's counters")
            final = s.once()  # after every record was read: each one's change shows by then
    finally:
        load.close()
    lags = latencies(load.appends, s.seen, s.keys, load.template)
    shown = [(lag, kind(a.effect)) for a, lag in zip(load.appends, lags, strict=True) if lag]
    return Result(
        records=load.records,
        unseen=load.unseen,
        timed=len(load.appends),
        turns=load.turns,
        messages=value(final, "coding_agent_messages_total"),
        expected_messages=load.messages,
        counters_equal=history(final) == history(clean),
        latencies=[lag for lag, _ in shown],
        kinds=[k for _, k in shown],
        backlog=backlog(load.appends, lags, [answered for _, answered, _ in s.seen]),
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
    parser.add_argument(
        "--scrape-interval", type=float, default=1.0, help="seconds, per client (0: back to back)"
    )
    parser.add_argument(
        "--lockstep",
        action="store_true",
        help="sessions begin together, so all of them end and begin their turns at once",
    )
    parser.add_argument("--home", type=Path, help="default: a fresh folder under /tmp")
    ns = parser.parse_args()
    home = ns.home or Path(tempfile.mkdtemp(prefix="cae-load-")) / "claude"
    load_average = os.getloadavg()[0]
    try:
        args = (ns.sessions, ns.minutes * 60, ns.rate, ns.scrapers, ns.scrape_interval)
        result = run(home, *args, lockstep=ns.lockstep)
    finally:
        if ns.home is None:
            shutil.rmtree(home.parent, ignore_errors=True)
    lat = [x * 1000 for x in result.latencies]
    scrapes = [x * 1000 for x in result.scrapes]
    rss = result.rss
    print("command: python bench/load.py " + " ".join(sys.argv[1:]))
    print(f"load average (1 min) before the run: {load_average:.2f}")
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
        f"max {max(lat, default=0):.0f} ms ({len(lat)} of {result.timed} records paired with "
        f"a change shown; {result.unseen} records change nothing a scrape shows, not timed)"
    )
    for name in ("response", "activity", "turn end"):
        part = [x for x, k in zip(lat, result.kinds, strict=True) if k == name]
        print(
            f"  {name}: {len(part)} records, p50 {percentile(part, 50):.0f} ms, "
            f"p99 {percentile(part, 99):.0f} ms"
        )
    per = ns.scrape_interval / max(1, ns.scrapers) * 1000
    print(
        f"/metrics, {ns.scrapers} clients every {ns.scrape_interval:g} s (a scrape every "
        f"{per:.0f} ms at most): {len(scrapes)} scrapes, p50 {percentile(scrapes, 50):.0f} ms, "
        f"p99 {percentile(scrapes, 99):.0f} ms, max {max(scrapes, default=0):.0f} ms, "
        f"{result.scrape_errors} errors"
    )
    waiting = [float(n) for n in result.backlog]
    print(
        f"backlog (records written, not shown yet) at each scrape: p50 "
        f"{percentile(waiting, 50):.0f}, p99 {percentile(waiting, 99):.0f}, max "
        f"{max(waiting, default=0):.0f}"
    )
    step = max(1, len(rss) // 10)
    points = ", ".join(f"{t:.0f}s {mb:.0f}" for t, mb in rss[::step])
    print(f"RSS (MB) over time: {points}; peak {max(mb for _, mb in rss):.0f} MB")
    lost = result.messages != result.expected_messages or len(lat) != result.timed
    sys.exit(1 if lost or not result.counters_equal or result.scrape_errors else 0)


if __name__ == "__main__":
    main()

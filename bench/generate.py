"""A large, realistic agent history built from the recorded fixtures, the same for a given seed.

    python bench/generate.py --out /tmp/cae-history --claude-sessions 2000 --claude-mb 1200
    python bench/generate.py --shape many-small --out /tmp/cae-many-small   # 27,000 journals
    python bench/generate.py --shape many-grown --out /tmp/cae-many-grown   # the same, grown

`--shape many-small` is a heavy user's Claude Code history instead (Claude Code only): `--files`
journals (27,000), sessions whose lead journal is the recorded interactive one, each with
`--subagents` sub-agent journals on average (6: 3,857 sessions; `<session>/subagents/agent-<id>
.jsonl` and `.meta.json`, cloned from the recorded sub-agents), records at their recorded sizes:
~370 MB, ~393,000 records, built in ~5 s. `--shape many-grown`: the same files, each tool result
grown by a seeded filler (`--result-bytes`, 5,400 on average): ~578 MB. One change to the
records: the recording stub's `cache_creation` breakdown of zeros is made to add up to the cache
write beside it, as the API's does, so that ccusage's token totals compare (see `Journal`).

The default shape:

Every session is a recorded fixture session (its lead file, sub-agent files and metadata) copied
under fresh ids: the first 8 hex digits of every UUID and the first 6 of every stub message,
tool and request id become the copy's number, so references inside a copy stay consistent and no two
copies share an id. ISO timestamps move by a per-copy number of minutes (seeded); projects
become `project-<k>` (50 of them). Claude Code tool results get a seeded filler (a file read,
a build log) so the history comes near `--claude-mb` with the recorded record shapes (the
filler estimate undershoots: 1200 gives 1,024 MB). The other agents get sessions in proportion
(`--others`, a fraction of the Claude Code sessions each).

Homes: `<out>/claude` (Claude Code), `<out>/codex`, `<out>/gemini` (Gemini CLI's `.gemini`),
`<out>/pi` (pi's agent folder), `<out>/omp` (oh-my-pi), `<out>/grok`, `<out>/vibe` (Mistral
Vibe's `.vibe`: each copied journal segment is hash-chained again, `record_sha256` recomputed
and linked to the record before, so the copies read as untampered) and `<out>/opencode` (one
SQLite database: the recorded databases' `event` rows, the only table the exporter reads,
copied under fresh ids). Vibe's and OpenCode's own timestamps (`+00:00` strings, epoch
milliseconds) are not moved: their copies overlap in time, which changes no count.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import shutil
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
_UUID = re.compile(rb"\b[0-9a-f]{8}(-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b")
_STUB = re.compile(rb"((?:msg|toolu|req|call|resp|fc|chatcmpl)_stub_)[0-9a-f]{6}([0-9a-f]{6})")
_ISO = re.compile(rb"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")
_GEMINI_FILE = re.compile(r"^(session-\d{4}-\d\d-\d\dT\d\d-\d\d-)[0-9a-f]{8}(\.jsonl)$")
_RESULT = re.compile(rb'("type":"tool_result","content":")')
_VIBE_DIR = re.compile(r"^([a-z]+_\d{8}_\d{6}_)[0-9a-f]{8}$")  # legacy session_<time>_<id8>
_NAMED_UUID = re.compile(r"(?<=_)[0-9a-f]{8}(?=-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")
_VIBE_CHILD = re.compile(rb"(child-)[0-9a-f]{8}([0-9a-f]{16})")
_OPENCODE_ID = re.compile(
    rb"\b((?:ses|msg|prt|evt|per|tod)_)[0-9a-f]{6}([0-9a-f]{6}[0-9A-Za-z]{14})\b"
)
PROJECTS = 50


@dataclass(frozen=True)
class Agent:
    name: str
    out: str  # folder under --out
    templates: Callable[[], list[tuple[Path, list[Path]]]]  # (template home, its session files)
    shared: tuple[str, ...] = ()  # files of a home that list all sessions: merged, not copied


def _homes(agent: str, below: str) -> list[Path]:
    return sorted(p / below if below else p for p in FIXTURES.glob(f"{agent}/*/*/home"))


def _claude() -> list[tuple[Path, list[Path]]]:
    """A recorded home's journals go together: a resumed or forked journal repeats the records of
    the one it came from, which must be there too."""
    found = []
    for home in _homes("claude-code", ""):
        files = sorted(p for p in (home / "projects").rglob("*") if p.is_file())
        if any(p.suffix == ".jsonl" for p in files):
            found.append((home, files))
    return found


def _vibe() -> list[tuple[Path, list[Path]]]:
    """A recorded home's sessions go together: a lead's store and its sub-agents' stores."""
    found = []
    for home in _homes("vibe", ".vibe"):
        sessions = home / "logs" / "session"
        files = sorted(
            p
            for p in sessions.rglob("*")
            if p.is_file() and p.relative_to(sessions).parts[0] != "active"
        )
        if files:
            found.append((home, files))
    return found


def _by_file(agent: str, below: str, pattern: str) -> Callable[[], list[tuple[Path, list[Path]]]]:
    def templates() -> list[tuple[Path, list[Path]]]:
        found = []
        for home in _homes(agent, below):
            for lead in sorted(home.glob(pattern)):
                sub = lead.with_suffix("")
                extra = sorted(p for p in sub.rglob("*") if p.is_file()) if sub.is_dir() else []
                found.append((home, [lead, *extra]))
        return found

    return templates


def _by_folder(agent: str, below: str, pattern: str) -> Callable[[], list[tuple[Path, list[Path]]]]:
    def templates() -> list[tuple[Path, list[Path]]]:
        return [
            (home, sorted(p for p in folder.rglob("*") if p.is_file()))
            for home in _homes(agent, below)
            for folder in sorted(home.glob(pattern))
            if folder.is_dir()
        ]

    return templates


AGENTS = (
    Agent("claude-code", "claude", _claude),
    Agent(
        "codex",
        "codex",
        _by_file("codex", ".codex", "sessions/*/*/*/rollout-*.jsonl"),
        ("session_index.jsonl",),
    ),
    Agent(
        "gemini-cli",
        "gemini",
        _by_file("gemini-cli", ".gemini", "tmp/*/chats/session-*.jsonl"),
        ("projects.json", "logs.json"),
    ),
    Agent("pi", "pi", _by_file("pi", "agent", "sessions/*/*.jsonl")),
    Agent("oh-my-pi", "omp", _by_file("oh-my-pi", "", "agent/sessions/*/*.jsonl")),
    Agent("grok", "grok", _by_folder("grok", ".grok", "sessions/*/*")),
    Agent("vibe", "vibe", _vibe, ("config.toml",)),
)


class Copier:
    """Rewrites one template session as copy number `n`."""

    def __init__(self, n: int, rng: random.Random, filler: int) -> None:
        self.n, self.filler = n, filler
        self.shift = timedelta(minutes=rng.randrange(0, 60 * 24 * 365))
        self.project = f"project-{n % PROJECTS}".encode()
        self.rng = rng

    def text(self, data: bytes) -> bytes:
        data = data.replace(b"shop-api", self.project)
        data = _UUID.sub(lambda m: b"%08x" % self.n + m.group(1), data)
        data = _STUB.sub(lambda m: m.group(1) + b"%06x" % self.n + m.group(2), data)
        data = _VIBE_CHILD.sub(lambda m: m.group(1) + b"%08x" % self.n + m.group(2), data)
        data = _OPENCODE_ID.sub(lambda m: m.group(1) + b"%06x" % self.n + m.group(2), data)
        return _ISO.sub(self._moved, data)

    def _moved(self, m: re.Match[bytes]) -> bytes:
        text = m.group(0).decode()
        when = datetime.fromisoformat(text.replace("Z", "+00:00")) + self.shift
        stamp = when.strftime("%Y-%m-%dT%H:%M:%S")
        if "." in text:
            stamp += "." + when.strftime("%f")[: len(text.split(".")[1]) - 1]
        return (stamp + "Z").encode()

    def name(self, rel: str) -> str:
        parts = [self.text(p.encode()).decode() for p in rel.split("/")]
        found = _GEMINI_FILE.match(parts[-1])
        if found:
            parts[-1] = f"{found.group(1)}{self.n:08x}{found.group(2)}"
        parts = [_VIBE_DIR.sub(lambda m: f"{m.group(1)}{self.n:08x}", p) for p in parts]
        parts = [_NAMED_UUID.sub(f"{self.n:08x}", p) for p in parts]  # pi's <time>_<uuid>
        return "/".join(parts)

    def padded(self, data: bytes) -> bytes:
        """Tool results carry a build log or a file of `filler` bytes on average (seeded)."""
        if not self.filler:
            return data

        def pad(m: re.Match[bytes]) -> bytes:
            size = int(self.rng.expovariate(1 / self.filler))
            return m.group(1) + _filler(size)

        return _RESULT.sub(pad, data)


_WORDS = b"const let fn return await import error warn build test ok passed failed src lib".split()


def _filler(size: int) -> bytes:
    line = b" ".join(_WORDS) + b"\\n"
    return (line * (size // len(line) + 1))[:size].rstrip(b"\\")


def generate(out: Path, claude: int, claude_mb: float, others: float, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    made: dict[str, int] = {}
    for agent in AGENTS:
        templates = agent.templates()
        count = claude if agent.name == "claude-code" else max(1, round(claude * others))
        home = out / agent.out
        filler = _claude_filler(templates, claude, claude_mb) if agent.name == "claude-code" else 0
        merged: dict[str, list[bytes]] = {}
        for n in range(count):
            template_home, files = templates[rng.randrange(len(templates))]
            copier = Copier(n + 1, rng, filler)
            for path in files:
                rel = path.relative_to(template_home).as_posix()
                target = home / copier.name(rel)
                target.parent.mkdir(parents=True, exist_ok=True)
                data = copier.padded(copier.text(path.read_bytes()))
                if agent.name == "vibe" and path.parent.name == "journal":
                    data = rechained(data)
                target.write_bytes(data)
            for name in agent.shared:
                for found in sorted(template_home.rglob(name)):
                    rel = copier.name(found.relative_to(template_home).as_posix())
                    merged.setdefault(rel, []).append(copier.text(found.read_bytes()))
        for rel, pieces in merged.items():
            (home / rel).parent.mkdir(parents=True, exist_ok=True)
            (home / rel).write_bytes(_merge(rel, pieces))
        made[agent.name] = count
    made["opencode"] = opencode(out / "opencode", max(1, round(claude * others)), rng)
    return made


def rechained(journal: bytes) -> bytes:
    """A Vibe journal segment whose records changed: each record's hash again (of the record
    without it, as sorted compact JSON), linked to the record before; the first links to none."""
    out, previous = [], None
    for line in journal.splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        record.pop("record_sha256", None)
        record["previous_record_sha256"] = previous
        body = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        previous = record["record_sha256"] = hashlib.sha256(body.encode()).hexdigest()
        out.append(json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode())
    return b"\n".join(out) + b"\n"


def opencode(home: Path, count: int, rng: random.Random) -> int:
    """One OpenCode database of `count` recorded sessions under fresh ids: the `event` and
    `event_sequence` tables (their recorded schema), the only ones the exporter reads."""
    templates = []
    for path in sorted(FIXTURES.glob("opencode/*/*/home/.local/share/opencode/opencode.db")):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            schema = [sql for (sql,) in db.execute(_SCHEMA)]
            rows = db.execute("SELECT id, aggregate_id, seq, type, data FROM event").fetchall()
            heads = db.execute("SELECT aggregate_id, seq, owner_id FROM event_sequence").fetchall()
            templates.append((schema, rows, heads))
    home.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(home / "opencode.db") as db:
        for sql in templates[0][0]:
            db.execute(sql)
        for n in range(count):
            _, rows, heads = templates[rng.randrange(len(templates))]
            copier = Copier(n + 1, rng, 0)

            def fresh(value: object, copier: Copier = copier) -> object:
                return copier.text(value.encode()).decode() if isinstance(value, str) else value

            db.executemany(_HEADS, [tuple(map(fresh, row)) for row in heads])
            db.executemany(_EVENTS, [tuple(map(fresh, row)) for row in rows])
    return count


_SCHEMA = (
    "SELECT sql FROM sqlite_master WHERE name IN ('event_sequence', 'event') ORDER BY name DESC"
)
_HEADS = "INSERT INTO event_sequence (aggregate_id, seq, owner_id) VALUES (?, ?, ?)"
_EVENTS = "INSERT INTO event (id, aggregate_id, seq, type, data) VALUES (?, ?, ?, ?, ?)"


def _claude_filler(templates: list[tuple[Path, list[Path]]], sessions: int, mb: float) -> int:
    """The mean filler per tool result that brings `sessions` copies to about `mb` MB."""
    plain = sum(p.stat().st_size for _, files in templates for p in files) / len(templates)
    results = sum(
        len(_RESULT.findall(p.read_bytes())) for _, files in templates for p in files
    ) / len(templates)
    wanted = mb * 1e6 / sessions - plain
    return max(0, int(wanted / max(results, 1)))


def _merge(rel: str, pieces: list[bytes]) -> bytes:
    """Index files: JSONL lines appended, JSON lists joined, JSON objects' maps united."""
    if rel.endswith(".jsonl"):
        return b"".join(p if p.endswith(b"\n") else p + b"\n" for p in pieces)
    if rel.endswith(".toml"):
        return pieces[0]  # one configuration (the recorded ones are all the same)
    values = [json.loads(p) for p in pieces]
    if all(isinstance(v, list) for v in values):
        return json.dumps([x for v in values for x in v]).encode()
    united: dict[str, object] = {}
    for value in values:
        for key, inner in value.items():
            if isinstance(inner, dict):
                united.setdefault(key, {}).update(inner)  # type: ignore[union-attr]
            else:
                united[key] = inner
    return json.dumps(united).encode()


# --shape many-small / many-grown: a heavy user's Claude Code history (the issue "A fast, bounded
# core": 27,000 session and sub-agent journals, ~400,000 records).
SHAPES = ("default", "many-small", "many-grown")
GROWN_RESULT = 5_400  # many-grown: mean bytes added to a tool result (seeded, exponential)
_AGENT_ID = re.compile(r"^agent-(a[0-9a-f]{16})\.jsonl$")
# A usage's total cache write, then (in the same object) the stub's breakdown of zeros beside it.
_BREAKDOWN = re.compile(
    rb'("cache_creation_input_tokens":([1-9]\d*),(?:[^{}]|\{[^{}]*\})*?"cache_creation":'
    rb'\{"ephemeral_1h_input_tokens":0,"ephemeral_5m_input_tokens":)0\}'
)


class Journal:
    """One recorded Claude Code journal as a bytes %-template: the copy number goes where
    `Copier.text` puts it (the first 8 hex digits of a UUID, the first 6 of a stub message,
    request or tool id, the first 8 after a sub-agent id's `a`), the session's id for the
    recorded one, the project for `shop-api`, a moved timestamp for each ISO one and the filler
    after each tool result's opening quote, so that a copy is one C-level format.

    One change to the recorded records: the stub API that recorded them wrote a usage's cache
    write (`cache_creation_input_tokens`) beside a `cache_creation` breakdown of zeros, where
    the real API's breakdown adds up to it; the copies carry it as a 5-minute write (ccusage 20
    counts the breakdown, the exporter the total: with it, their totals can be compared)."""

    def __init__(self, home: Path, path: Path) -> None:
        data = _BREAKDOWN.sub(rb"\1\2}", path.read_bytes())
        self.rel = path.relative_to(home).as_posix()
        parts = self.rel.split("/")
        found = _AGENT_ID.match(parts[-1])
        self.agent = found.group(1).encode() if found else b""
        self.session = (parts[2] if found else parts[2].removesuffix(".jsonl")).encode()
        meta = path.with_name(path.name.removesuffix(".jsonl") + ".meta.json")
        self.meta = Journal(home, meta) if found and meta.is_file() else None
        self.records = sum(1 for line in data.splitlines() if line.strip())
        holes: list[tuple[int, int, bytes]] = []  # start, end, what goes there
        for m in _UUID.finditer(data):
            if m.group(0) == self.session:  # the lead's: in a sub-agent's records too
                holes.append((m.start(), m.end(), b"sid"))
            else:
                holes.append((m.start(), m.start() + 8, b"n8"))
        for m in _STUB.finditer(data):
            holes.append((m.end(1), m.end(1) + 6, b"n6"))
        at = data.find(self.agent) if self.agent else -1
        while at >= 0:
            holes.append((at + 1, at + 9, b"n8"))
            at = data.find(self.agent, at + len(self.agent))
        at = data.find(b"shop-api")
        while at >= 0:
            holes.append((at, at + len(b"shop-api"), b"p"))
            at = data.find(b"shop-api", at + 1)
        self.stamps: list[tuple[datetime, int]] = []  # naive UTC, digits of its fraction
        for m in _ISO.finditer(data):
            text = m.group(0).decode()
            when = datetime.fromisoformat(text.removesuffix("Z"))
            digits = len(text.split(".")[1]) - 1 if "." in text else 0
            holes.append((m.start(), m.end(), b"t%d" % len(self.stamps)))
            self.stamps.append((when, digits))
        self.results = 0
        for m in _RESULT.finditer(data):
            holes.append((m.end(), m.end(), b"r%d" % self.results))
            self.results += 1
        holes.sort()
        pieces, done = [], 0
        for start, end, key in holes:
            if start < done:
                raise SystemExit(f"{path}: overlapping ids at {start}")
            pieces += [data[done:start].replace(b"%", b"%%"), b"%(" + key + b")s"]
            done = end
        self.template = b"".join([*pieces, data[done:].replace(b"%", b"%%")])
        self.start = min((w for w, _ in self.stamps), default=datetime(2026, 1, 1))
        self.end = max((w for w, _ in self.stamps), default=self.start)

    def copy(
        self, number: int, session: bytes, project: bytes, shift: timedelta, fill: list[bytes]
    ) -> bytes:
        values = {b"n8": b"%08x" % number, b"n6": b"%06x" % number, b"sid": session}
        values[b"p"] = project
        for i, (when, digits) in enumerate(self.stamps):
            values[b"t%d" % i] = _stamp(when + shift, digits)
        for i in range(self.results):
            values[b"r%d" % i] = fill[i] if fill else b""
        return self.template % values


_TIMESPEC = {0: "seconds", 3: "milliseconds", 6: "microseconds"}


def _stamp(when: datetime, digits: int) -> bytes:
    """`when` as `Copier._moved` writes it: `digits` of the fraction (cut, not rounded), `Z`."""
    spec = _TIMESPEC.get(digits)
    text = when.isoformat(timespec=spec) if spec else when.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return text[: 20 + digits if digits else 19].encode() + b"Z"


def _many_templates(version: str) -> tuple[list[Journal], list[Journal]]:
    """The recorded `interactive` lead journals (a long conversation: split responses, tool
    calls, titles, file snapshots) and every recorded sub-agent journal, of one version.

    2.1.197 by default: its records' sizes give the issue's history (27,000 files: ~370 MB,
    ~393,000 records); 2.1.332's recordings are three times as large (~1.3 GB, ~1 M records)."""
    leads, subagents = [], []
    for home in sorted(FIXTURES.glob(f"claude-code/{version}/*/home")):
        if home.parent.name == "interactive":
            leads += [Journal(home, p) for p in sorted((home / "projects").glob("*/*.jsonl"))]
        for path in sorted((home / "projects").glob("*/*/subagents/agent-*.jsonl")):
            subagents.append(Journal(home, path))
    if not leads or not subagents:
        raise SystemExit(f"no recorded interactive session or sub-agent for Claude Code {version}")
    return leads, subagents


def generate_many(
    out: Path, files: int, subagents: float, filler: int, seed: int, version: str
) -> dict[str, int]:
    """`files` Claude Code journals: sessions whose lead journal is a recorded interactive one,
    each with a seeded number of sub-agent journals (`subagents` on average, spread at random
    over the sessions: some have none, some many) cloned from the recorded sub-agents, under
    `<session>/subagents/agent-<id>.jsonl` with their `.meta.json`, as Claude Code writes them.

    Every journal is a copy under its own number (fresh uuids, message, request and tool ids,
    agent id): no two copies share a message id, while the records of one response that the
    recording split over several records keep their one id. A sub-agent's records carry its
    session's id and project and start at a seeded moment within its lead's span. `filler` > 0
    grows every tool result by a seeded filler of that mean size (its own random stream: the
    same seed makes the same files, only the tool results differ)."""
    leads, children = _many_templates(version)
    rng, grow = random.Random(seed), random.Random(seed + 1)
    projects = out / "claude" / "projects"
    sessions = max(1, round(files / (1 + subagents)))
    owned = [0] * sessions
    for _ in range(max(0, files - sessions)):
        owned[rng.randrange(sessions)] += 1
    made = {"sessions": sessions, "journals": 0, "subagents": 0, "records": 0, "bytes": 0}
    number = 0

    def fill(journal: Journal) -> list[bytes]:
        if not filler:
            return []
        return [_filler(int(grow.expovariate(1 / filler))) for _ in range(journal.results)]

    def write(target: Path, journal: Journal, data: bytes) -> None:
        target.write_bytes(data)
        made["journals"] += 1
        made["records"] += journal.records
        made["bytes"] += len(data)

    for k in range(sessions):
        lead = leads[rng.randrange(len(leads))]
        shift = timedelta(minutes=rng.randrange(0, 60 * 24 * 365))
        project = f"project-{k % PROJECTS}".encode()
        number += 1
        folder = projects / lead.rel.split("/")[1].replace("shop-api", project.decode())
        session = b"%08x" % number + lead.session[8:]
        folder.mkdir(parents=True, exist_ok=True)
        data = lead.copy(number, session, project, shift, fill(lead))
        write(folder / f"{session.decode()}.jsonl", lead, data)
        below = folder / session.decode() / "subagents"
        if owned[k]:
            below.mkdir(parents=True)
        for _ in range(owned[k]):
            child = children[rng.randrange(len(children))]
            moved = shift + lead.start - child.start + (lead.end - lead.start) * rng.random()
            number += 1
            agent = f"agent-a{number:08x}{child.agent[9:].decode()}"
            data = child.copy(number, session, project, moved, fill(child))
            write(below / f"{agent}.jsonl", child, data)
            made["subagents"] += 1
            if child.meta is not None:
                meta = child.meta.copy(number, session, project, moved, [])
                (below / f"{agent}.meta.json").write_bytes(meta)
    return made


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--out", type=Path, default=Path("/tmp/cae-history"))
    args.add_argument(
        "--shape",
        choices=SHAPES,
        default="default",
        help="default: every agent, whole recorded sessions; many-small / many-grown: Claude Code "
        "only, --files journals (sessions and their sub-agents), tool results as recorded / grown",
    )
    args.add_argument("--claude-sessions", type=int, default=2000, help="default shape")
    args.add_argument("--claude-mb", type=float, default=1000.0, help="default shape")
    args.add_argument("--others", type=float, default=0.1, help="sessions per Claude session")
    args.add_argument("--files", type=int, default=27_000, help="many-*: journals (.jsonl) in all")
    args.add_argument("--subagents", type=float, default=6.0, help="many-*: per session, mean")
    args.add_argument(
        "--result-bytes", type=int, default=GROWN_RESULT, help="many-grown: mean growth"
    )
    args.add_argument("--claude-version", default="2.1.197", help="many-*: recordings to clone")
    args.add_argument("--seed", type=int, default=2026)
    ns = args.parse_args()
    shutil.rmtree(ns.out, ignore_errors=True)
    started = time.perf_counter()
    if ns.shape != "default":
        filler = ns.result_bytes if ns.shape == "many-grown" else 0
        made = generate_many(ns.out, ns.files, ns.subagents, filler, ns.seed, ns.claude_version)
        print(
            f"claude-code  {ns.shape}: {made['sessions']:,} sessions, {made['journals']:,} "
            f"files (.jsonl: {made['sessions']:,} lead + {made['subagents']:,} sub-agent "
            f"journals), {made['bytes'] / 1e6:.1f} MB, {made['records']:,} records"
        )
        print(f"built in {time.perf_counter() - started:.1f} s: {ns.out / 'claude'}")
        return
    made = generate(ns.out, ns.claude_sessions, ns.claude_mb, ns.others, ns.seed)
    for agent in (*AGENTS, Agent("opencode", "opencode", list)):
        home = ns.out / agent.out
        size = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
        files = sum(1 for p in home.rglob("*") if p.is_file())
        print(f"{agent.name:12} {made[agent.name]:6} copies {files:7} files {size / 1e6:9.1f} MB")
    journals = list((ns.out / "claude").rglob("*.jsonl"))
    records = sum(p.read_bytes().count(b"\n") for p in journals)
    print(f"claude-code  {len(journals):,} .jsonl files, {records:,} records")
    print(f"built in {time.perf_counter() - started:.1f} s: {ns.out}")


if __name__ == "__main__":
    main()

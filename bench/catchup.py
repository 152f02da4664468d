"""Catch-up speed and memory: a synthetic Claude Code home built from the recorded fixtures.

    python bench/catchup.py --sessions 10000            # builds /tmp/cae-bench-home once, reuses it
    python bench/catchup.py --fixtures                  # every recorded fixture home, one by one

Each synthetic session is a recorded journal (with its sub-agent files) copied under a fresh
session id, with every message id, record uuid and tool-call id made unique, so nothing is
deduplicated away. Prints files, bytes, seconds, MB/s, peak RSS and the number of series.
"""

from __future__ import annotations

import argparse
import re
import resource
import shutil
import sys
import time
import uuid
from pathlib import Path

from prometheus_client import generate_latest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from coding_agent_exporter.runtime.app import App  # noqa: E402
from coding_agent_exporter.runtime.config import parse  # noqa: E402

FIXTURES = ROOT / "fixtures" / "claude-code"
_IDS = re.compile(
    rb"(msg_stub_|toolu_stub_|req_stub_)[0-9a-f]{12}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
)


def _fresh(text: bytes, old_sid: str, sid: str, project: int, suffix: bytes) -> bytes:
    """The same records under new ids: a session, messages and tool calls of their own."""
    text = text.replace(old_sid.encode(), sid.encode())
    text = text.replace(b"/home/user/work/shop-api", f"/home/user/work/project-{project}".encode())
    return _IDS.sub(lambda m: m.group(0)[:-8] + suffix, text)


def build(home: Path, sessions: int) -> None:
    sources = sorted(p for p in FIXTURES.glob("*/*/home/projects/*") if p.is_dir())
    templates = [(j, j.with_suffix("")) for src in sources for j in src.glob("*.jsonl")]
    for n in range(sessions):
        journal, folder = templates[n % len(templates)]
        project = home / "projects" / f"-home-user-work-project-{n % 50}"
        project.mkdir(parents=True, exist_ok=True)
        sid, suffix = str(uuid.UUID(int=n + 1)), f"{n:08x}".encode()
        args = (journal.stem, sid, n % 50, suffix)
        (project / f"{sid}.jsonl").write_bytes(_fresh(journal.read_bytes(), *args))
        sub = folder / "subagents"
        if sub.is_dir():
            out = project / sid / "subagents"
            for f in (f for f in sub.rglob("*") if f.is_file()):  # workflows' agents one deeper
                (out / f.relative_to(sub)).parent.mkdir(parents=True, exist_ok=True)
                (out / f.relative_to(sub)).write_bytes(_fresh(f.read_bytes(), *args))


def measure(home: Path) -> dict[str, float]:
    config = parse(["metrics", "--claude.home", str(home)], {"HOME": "/home/user"})
    app = App(config, process_metrics=False, clock=lambda: 2e9, probe=lambda pid: None)
    started = time.perf_counter()
    app.catch_up()
    seconds = time.perf_counter() - started
    scrape_started = time.perf_counter()
    text = generate_latest(app.registry).decode()
    scrape = time.perf_counter() - scrape_started
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    size = app.stats.bytes_read["claude-code"]
    return {
        "files": sum(app.stats.files.values()),
        "sessions": len(app.state.sessions),
        "mb": size / 1e6,
        "seconds": seconds,
        "mb_per_s": size / 1e6 / seconds if seconds else 0.0,
        "scrape_ms": scrape * 1000,
        "series": series,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--sessions", type=int, default=10000)
    args.add_argument("--home", type=Path, default=Path("/tmp/cae-bench-home"))
    args.add_argument("--rebuild", action="store_true")
    args.add_argument("--fixtures", action="store_true")
    ns = args.parse_args()
    if ns.fixtures:
        homes = sorted(FIXTURES.glob("*/*/home"))
        started = time.perf_counter()
        for home in homes:
            measure(home)
        total = time.perf_counter() - started
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{len(homes)} fixture homes: {total:.2f} s in all, peak RSS {rss:.1f} MB")
        return
    marker = ns.home / f".built-{ns.sessions}"
    if ns.rebuild or not marker.exists():
        shutil.rmtree(ns.home, ignore_errors=True)
        t = time.perf_counter()
        build(ns.home, ns.sessions)
        marker.touch()
        print(f"built {ns.sessions} sessions in {ns.home} ({time.perf_counter() - t:.1f} s)")
    result = measure(ns.home)
    print(
        "{files:.0f} files, {sessions:.0f} sessions, {mb:.1f} MB read in {seconds:.2f} s "
        "({mb_per_s:.1f} MB/s); scrape {scrape_ms:.0f} ms, {series:.0f} series; "
        "peak RSS {peak_rss_mb:.1f} MB".format(**result)
    )


if __name__ == "__main__":
    main()

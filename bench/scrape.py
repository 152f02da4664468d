"""Scrape latency and size, and RSS after catch-up, with live sessions over a large history.

    python bench/scrape.py --history 10000 --live 200        # issue 6, items 5 and 6
    python bench/scrape.py --history 1000 --live 0

The history is `bench/catchup.py`'s synthetic Claude Code home (`--history` recorded sessions
copied under fresh ids, built once in /tmp/cae-bench-home-<n>), linked file by file into a fresh
home (never written: new sessions get new files). `--live` sessions are started there by
`bench/load.py`'s writer (a real `sleep` process and a live index entry each, one recorded turn
written, then idle: live but quiet). Then `coding-agent-exporter metrics` catches up cold
(its wall time and peak RSS are printed: the RSS after a cold catch-up), which leaves the
catch-up cache; `serve` starts on it, and once ready its RSS is read and `/metrics` is scraped
`--scrapes` times one after another, by a Python client asking for the text format. Then a real
Prometheus (Debian's `prometheus`, as the tests use) scrapes the same `serve` every second for
`--prometheus-seconds`, asking for OpenMetrics as it does by default; its own
`scrape_duration_seconds` is what a user's Prometheus would see. Prints latency p50/p99/max of
both, exposition size and series count, live sessions seen, RSS, and the commands.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
from catchup import build
from compare import timed
from load import HARNESSES, Load, exporter, percentile, value

from tests.backends import prometheus_config, query, run_prometheus


def history_home(sessions: int) -> Path:
    """The synthetic history of `sessions` sessions, built once (or `bench/catchup.py`'s)."""
    if (Path("/tmp/cae-bench-home") / f".built-{sessions}").exists():
        return Path("/tmp/cae-bench-home")
    home = Path(f"/tmp/cae-bench-home-{sessions}")
    marker = home / f".built-{sessions}"
    if not marker.exists():
        shutil.rmtree(home, ignore_errors=True)
        build(home, sessions)
        marker.touch()
    return home


def scrape_once(url: str) -> tuple[float, str]:
    started = time.perf_counter()
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        text: str = response.read().decode()
    return time.perf_counter() - started, text


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--history", type=int, default=10000, help="historical sessions")
    args.add_argument("--live", type=int, default=200, help="live sessions")
    args.add_argument("--scrapes", type=int, default=200)
    args.add_argument(
        "--prometheus-seconds", type=int, default=60, help="a real Prometheus scrapes (0: not)"
    )
    ns = args.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cae-scrape-"))
    home, state = root / "claude", root / "state"
    shutil.copytree(history_home(ns.history), home, copy_function=os.link)
    load = Load(home, ns.live, rate=8.0)
    try:
        load.run(3.0)  # a turn or two per live session (all begin in 3 s); then idle
        others = [f"--no-harness.{name}" for name in HARNESSES if name != "claude-code"]
        cold = [sys.executable, "-m", "coding_agent_exporter", "--claude.home", str(home), *others]
        cold_s, cold_rss, _ = timed([*cold, "--state.dir", str(state), "metrics"])
        started = time.perf_counter()
        with exporter(home, "--state.dir", str(state)) as (url, pid):
            ready = time.perf_counter() - started
            rss = psutil.Process(pid).memory_info().rss / 1e6
            scrape_once(url)  # the first scrape after ready is not the steady state
            times, text = [], ""
            for _ in range(ns.scrapes):
                seconds, text = scrape_once(url)
                times.append(seconds * 1000)
            seen_by_prometheus = prometheus_scrapes(url, root, ns.prometheus_seconds)
    finally:
        load.close()
        shutil.rmtree(root, ignore_errors=True)
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    live = value(text, "coding_agent_sessions")
    print(f"command: python bench/scrape.py {' '.join(sys.argv[1:])}")
    print(f"cold: {' '.join(cold)} --state.dir STATE metrics")
    print(
        f"{ns.history} historical + {ns.live} live Claude Code sessions: cold `metrics` "
        f"{cold_s:.1f} s, peak RSS {cold_rss:.1f} MB; `serve` on its cache ready in {ready:.1f} s, "
        f"RSS {rss:.1f} MB; live sessions shown {live:.0f}"
    )
    print(
        f"/metrics, {ns.scrapes} scrapes one after another: p50 {percentile(times, 50):.1f} ms, "
        f"p99 {percentile(times, 99):.1f} ms, max {max(times):.1f} ms, mean "
        f"{statistics.mean(times):.1f} ms; {len(text.encode()) / 1024:.0f} KiB, {series} series"
    )
    if seen_by_prometheus:
        print(seen_by_prometheus)


def prometheus_scrapes(url: str, root: Path, seconds: int) -> str:
    """`seconds` of a real Prometheus scraping `url` every second: its scrape durations."""
    if seconds <= 0:
        return ""
    workdir = root / "prometheus"
    workdir.mkdir()
    target = url.removeprefix("http://")
    with run_prometheus(workdir, prometheus_config(target)) as prometheus:
        time.sleep(seconds + 2)  # a benchmark's wall time, not a test's wait
        window = f"scrape_duration_seconds{{job='exporter'}}[{seconds}s]"
        figures = {}
        for name, expr in [
            ("p50", f"quantile_over_time(0.5, {window})"),
            ("p99", f"quantile_over_time(0.99, {window})"),
            ("max", f"max_over_time({window})"),
            ("scrapes", f"count_over_time({window})"),
            ("up", f"min_over_time(up{{job='exporter'}}[{seconds}s])"),
        ]:
            result = query(prometheus, expr)
            figures[name] = float(result[0]["value"][1]) if result else float("nan")
    return (
        f"Prometheus, every 1 s for {seconds} s (OpenMetrics): scrape_duration_seconds "
        f"p50 {figures['p50'] * 1000:.1f} ms, p99 {figures['p99'] * 1000:.1f} ms, max "
        f"{figures['max'] * 1000:.1f} ms over {figures['scrapes']:.0f} scrapes, "
        f"up {figures['up']:.0f}"
    )


if __name__ == "__main__":
    main()

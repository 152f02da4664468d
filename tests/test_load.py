"""Load, the short version of `bench/load.py`: ten live Claude Code sessions (each turn with a
sub-agent) append several records per second while `serve` follows them and three clients
scrape /metrics. Every record written becomes visible, no response is lost or counted twice,
the history counters equal a recount from the files, and every scrape is answered. No timing
is asserted (the machine is shared); the figures are printed."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
try:
    from load import percentile, run  # type: ignore[import-not-found]
finally:
    sys.path.remove(str(BENCH))


def test_ten_live_sessions_lose_nothing_under_concurrent_scrapes(tmp_path: Path) -> None:
    result = run(tmp_path / "claude", sessions=10, seconds=8.0, rate=5.0, scrapers=3, interval=0.5)
    assert result.turns >= 10 and result.records >= 10 * 15  # every session wrote whole turns
    assert result.messages == result.expected_messages  # each response once, none lost
    assert result.counters_equal  # the live run's counters are a recount's
    assert len(result.latencies) == result.records  # every record became visible
    assert result.scrape_errors == 0 and result.scrapes
    latency = [x * 1000 for x in result.latencies]
    print(
        f"{result.records} records: append-to-visible p50 {percentile(latency, 50):.0f} ms, "
        f"p99 {percentile(latency, 99):.0f} ms; {len(result.scrapes)} scrapes; "
        f"peak RSS {max(mb for _, mb in result.rss):.0f} MB"
    )

"""Load, the short version of `bench/load.py`: ten live Claude Code sessions (each turn with a
sub-agent) append several records per second while `serve` follows them and three clients
scrape /metrics. Every record written that must change /metrics shows its change, no response is
lost or counted twice, the history counters equal a recount from the files, and every scrape is
answered. No timing is asserted (the machine is shared); the figures are printed."""

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
    assert result.timed + result.unseen == result.records
    assert result.unseen < result.timed  # queue operations, attachments, a sub-agent's prompt
    assert len(result.latencies) == result.timed  # every change a record must cause showed
    assert result.scrape_errors == 0 and result.scrapes
    latency = [x * 1000 for x in result.latencies]
    print(
        f"{result.records} records ({result.unseen} not timed): append-to-visible p50 "
        f"{percentile(latency, 50):.0f} ms, p99 {percentile(latency, 99):.0f} ms; "
        f"{len(result.scrapes)} scrapes; "
        f"peak RSS {max(mb for _, mb in result.rss):.0f} MB"
    )


def test_back_to_back_scrapers_do_not_hold_the_reading_back(tmp_path: Path) -> None:
    """Issue 7: eight clients scraping /metrics with no pause while 50 live sessions write 5
    records a second each. Before, each scrape held the state's lock while it rendered and the
    reading loop could hardly get it: records showed seconds late, later and later (p50 3 s, p99
    14 s after 8 s of this), and here a few never showed, the counters never equalling a
    recount. Now a scrape holds the lock only to copy what it shows, and scrapes that arrive
    together share a render. The bound is loose (the machine is shared; a rename can hold
    watchdog's events 0.5 s): p99 under 1.5 s, where the fix measures 0.1 to 0.4 s."""
    result = run(tmp_path / "claude", sessions=50, seconds=6.0, rate=5.0, scrapers=8, interval=0)
    assert len(result.latencies) == result.timed and result.scrape_errors == 0
    latency = [x * 1000 for x in result.latencies]
    print(
        f"{result.timed} timed records, {len(result.scrapes)} scrapes back to back: "
        f"append-to-visible p50 {percentile(latency, 50):.0f} ms, "
        f"p99 {percentile(latency, 99):.0f} ms; backlog at most {max(result.backlog)} records"
    )
    assert percentile(latency, 99) < 1500

"""`CachedProbe`: a process is asked once; an exit it is told of, or its age, makes it ask again."""

from __future__ import annotations

import subprocess
from collections import Counter

from coding_agent_exporter.sources.processes import CachedProbe, _spread, process_start


class Counting:
    def __init__(self, answers: dict[int, float | None]) -> None:
        self.answers, self.asked = answers, 0

    def __call__(self, pid: int) -> float | None:
        self.asked += 1
        return self.answers.get(pid)


def test_a_running_process_is_asked_once() -> None:
    probe = Counting({7: 100.0})
    cached = CachedProbe(probe)
    assert [cached(7) for _ in range(5)] == [100.0] * 5
    assert probe.asked == 1


def test_an_exit_it_is_told_of_makes_it_ask_again() -> None:
    probe = Counting({7: 100.0})
    cached = CachedProbe(probe)
    cached(7)
    probe.answers[7] = None  # the process exited (and its pid may come back as another one)
    cached.forget({7})
    assert cached(7) is None
    probe.answers[7] = 200.0  # a new process under the same pid
    assert cached(7) == 200.0
    assert probe.asked == 3


def test_a_missing_process_is_never_remembered() -> None:
    probe = Counting({})
    cached = CachedProbe(probe)
    assert cached(9) is None and cached(9) is None
    assert probe.asked == 2


def test_an_answer_is_kept_no_longer_than_its_ttl() -> None:
    probe = Counting({7: 100.0})
    cached = CachedProbe(probe, ttl=0.0)
    cached(7)
    cached(7)
    assert probe.asked == 2


def test_with_a_real_process() -> None:
    process = subprocess.Popen(["sleep", "30"])
    cached = CachedProbe()
    try:
        assert cached(process.pid) == process_start(process.pid) is not None
    finally:
        process.kill()
        process.wait()
    cached.forget({process.pid})
    assert cached(process.pid) is None


def test_an_answer_got_across_an_exit_is_not_kept() -> None:
    """A scrape probes a process while another thread is told it exited: the answer it got
    before the exit must not outlive the exit (it would keep a dead session live)."""
    cached: CachedProbe

    def exiting(pid: int) -> float | None:
        cached.forget({pid})  # told of the exit while this probe was on its way
        return 100.0

    cached = CachedProbe(exiting)
    assert cached(7) == 100.0
    cached._probe = lambda pid: None  # the process is gone now
    assert cached(7) is None


def test_answers_of_processes_started_together_expire_apart() -> None:
    """200 sessions started in a row (neighbouring pids) are not all asked again at once: each
    answer is kept between half the ttl and the ttl, spread evenly."""
    spreads = [_spread(pid) for pid in range(31_000, 31_200)]
    assert all(0.5 <= s <= 1.0 for s in spreads)
    buckets = Counter(int((s - 0.5) * 40) for s in spreads)  # 20 slices of the spread
    assert len(buckets) >= 19 and max(buckets.values()) <= 20

"""5-hour usage windows: hand-computed cases (a gap of more than 5 hours, responses exactly on
the boundary) and, for any responses in any order, the windows of ccusage's rule applied to the
responses sorted by time."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import example, given
from hypothesis import strategies as st

from coding_agent_exporter.events import Usage
from coding_agent_exporter.state.windows import LENGTH, Windows


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def usage(n: int) -> Usage:
    return Usage(input=n, output=2 * n, cache_read=10 * n, cache_write=3 * n)


def starts(windows: Windows) -> list[str]:
    found = [datetime.fromtimestamp(w.start, UTC) for w in windows.windows()]
    return [f"{d:%H:%M}" for d in found]


def test_a_window_opens_at_the_hour_of_its_first_response() -> None:
    windows = Windows()
    windows.add(at("2026-11-30T10:55:30"), usage(1), 0.25)
    (window,) = windows.windows()
    assert (window.start, window.end) == (at("2026-11-30T10:00"), at("2026-11-30T15:00"))
    assert (window.first, window.last) == (at("2026-11-30T10:55:30"), at("2026-11-30T10:55:30"))
    assert window.burn_rate() is None  # one instant: no rate


def test_responses_within_5_hours_of_the_start_share_its_window() -> None:
    windows = Windows()
    for when in ("10:00", "11:00", "12:30", "14:59:59"):
        windows.add(at(f"2026-11-30T{when}"), usage(1), 1.0)
    (window,) = windows.windows()
    assert window.tokens == Usage(4, 8, 40, 12) and window.cost == 4.0 and window.responses == 4
    minutes = (at("2026-11-30T14:59:59") - at("2026-11-30T10:00")) / 60
    assert window.burn_rate() == (12 / minutes, 4.0 / minutes)  # input and output only


def test_a_gap_of_more_than_5_hours_opens_a_window_at_the_next_response_s_hour() -> None:
    windows = Windows()
    for when in ("10:20", "12:10", "18:45"):
        windows.add(at(f"2026-11-30T{when}"), usage(1))
    assert starts(windows) == ["10:00", "18:00"]
    assert [w.responses for w in windows.windows()] == [2, 1]


def test_a_response_exactly_on_the_boundary_joins_and_the_next_instant_does_not() -> None:
    windows = Windows()
    windows.add(at("2026-11-30T10:30"), usage(1))
    windows.add(at("2026-11-30T15:00:00"), usage(2))  # start + 5 h exactly: in
    windows.add(at("2026-11-30T15:00:00.001"), usage(4))  # later: a new window, at 15:00
    assert starts(windows) == ["10:00", "15:00"]
    first, second = windows.windows()
    assert first.tokens == usage(3) and first.last == at("2026-11-30T15:00")
    assert second.tokens == usage(4) and second.first == at("2026-11-30T15:00:00.001")


def test_a_response_within_the_window_but_after_a_long_pause_still_joins() -> None:
    """Start 10:00; 10:00:00 then 14:59: under 5 hours from the start, so the same window."""
    windows = Windows()
    windows.add(at("2026-11-30T10:00"), usage(1))
    windows.add(at("2026-11-30T14:59"), usage(1))
    assert starts(windows) == ["10:00"]


def test_the_current_window_and_the_largest_past_one() -> None:
    windows = Windows()
    windows.add(at("2026-11-29T08:10"), usage(5))
    windows.add(at("2026-11-29T20:00"), usage(1))
    windows.add(at("2026-11-30T10:05"), usage(9))  # the newest: active at 11:00
    now = at("2026-11-30T11:00")
    current = windows.current(now)
    assert current is not None and current.start == at("2026-11-30T10:00")
    largest = windows.largest(now)
    assert largest is not None and largest.tokens == usage(5)  # the active one is not past
    assert windows.current(at("2026-11-30T15:00")) is None  # ended
    assert windows.current(at("2026-11-30T14:59")) is not None


def reference(responses: list[tuple[float, int]]) -> list[tuple[float, float, float, int]]:
    """ccusage's `identifySessionBlocks`, on the responses themselves, sorted by time:
    (start, first, last, tokens) of each window (its gap blocks left out)."""
    found: list[list[float]] = []
    for when, n in sorted(responses):
        window = found[-1] if found else None
        if window is None or when - window[0] > LENGTH or when - window[2] > LENGTH:
            found.append([when // 3600 * 3600, when, when, 0])
            window = found[-1]
        window[2] = when
        window[3] += n
    return [(w[0], w[1], w[2], int(w[3])) for w in found]


moments = st.integers(min_value=0, max_value=3 * 24 * 3600 * 1000).map(
    lambda ms: at("2026-11-28T00:00") + ms / 1000
)
hours = st.integers(min_value=0, max_value=72).map(lambda h: at("2026-11-28T00:00") + h * 3600)


@given(st.lists(st.tuples(st.one_of(moments, hours), st.integers(1, 1000)), max_size=60))
def test_any_responses_in_any_order_give_ccusage_s_windows(
    responses: list[tuple[float, int]],
) -> None:
    windows = Windows()
    for when, n in responses:
        windows.add(when, Usage(input=n))
    got = [(w.start, w.first, w.last, w.tokens.input) for w in windows.windows()]
    assert got == reference(responses)


@given(st.lists(st.tuples(st.one_of(moments, hours), st.integers(1, 1000)), max_size=40))
def test_windows_asked_for_between_responses_are_those_of_the_responses_so_far(
    responses: list[tuple[float, int]],
) -> None:
    """The windows are found again only from the change on: asked for after every response
    (as scrapes do while responses come), they are the rule's on the responses so far."""
    windows = Windows()
    for seen, (when, n) in enumerate(responses, 1):
        windows.add(when, Usage(input=n))
        got = [(w.start, w.first, w.last, w.tokens.input) for w in windows.windows()]
        assert got == reference(responses[:seen])


@given(
    st.lists(st.tuples(st.one_of(moments, hours), st.integers(1, 1000)), max_size=40),
    st.integers(min_value=0, max_value=4 * 24 * 3600),
)
@example(  # a response put into the last window kept, which then has the most (found in CI)
    [(1795824000.0, 847), (1795845600.0, 847), (1795867200.0, 1), (1795849200.0, 1)], 39600
)
def test_the_largest_past_window_is_the_first_with_the_most_tokens(
    responses: list[tuple[float, int]], later: int
) -> None:
    windows = Windows()
    now = at("2026-11-28T00:00") + later
    for when, n in responses:
        windows.add(when, Usage(input=n))
        windows.windows()  # asked for as it grows: the kept windows' best too
    past = [w for w in windows.windows() if not w.active(now)]
    want = max(past, key=lambda w: w.tokens.input, default=None)
    assert windows.largest(now) is want

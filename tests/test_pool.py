"""Catch-up on several cores gives, byte for byte, the exposition of a catch-up in one process:
on every recorded scenario of the harnesses read by workers, and when a worker fails."""

from __future__ import annotations

import multiprocessing
import pickle
import threading
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from coding_agent_exporter.runtime import pool
from coding_agent_exporter.runtime.app import App
from coding_agent_exporter.runtime.config import parse
from coding_agent_exporter.runtime.engine import Source
from coding_agent_exporter.sources import platform, tail

from .conftest import NOW, agent_of, all_scenarios, home_flags, scenario_id

PARALLEL_SCENARIOS = [s for s in all_scenarios() if agent_of(s) in pool.PARALLEL]


def app(home: Path, workers: int, *, steal: bool = False) -> App:
    config = parse(["metrics", *home_flags(home)], {"HOME": "/home/user"})
    result = App(config, process_metrics=False, clock=lambda: NOW, probe=lambda _: None)
    result.engine.workers, result.engine.min_bytes, result.engine.steal = workers, 0, steal
    return result


def exposition(result: App) -> str:
    result.catch_up()
    return generate_latest(result.registry).decode()


def test_the_scenarios_include_both_harnesses_read_by_workers() -> None:
    assert {agent_of(s) for s in PARALLEL_SCENARIOS} == pool.PARALLEL


@pytest.mark.parametrize("scenario", PARALLEL_SCENARIOS, ids=scenario_id)
def test_workers_give_the_exposition_of_one_process(scenario: Path) -> None:
    one = exposition(app(scenario / "home", workers=0))
    parallel = app(scenario / "home", workers=2)
    handed = adopted(parallel)
    assert exposition(parallel) == one
    assert handed  # the workers did read files: this was not one process again


@pytest.mark.parametrize("scenario", PARALLEL_SCENARIOS[::3], ids=scenario_id)
def test_workers_note_each_session_s_files_as_one_process_does(scenario: Path) -> None:
    """What a session's turns are replayed from (`runtime.replay`) when workers read them."""

    def files(result: App) -> dict[tuple[str, str], list[str]]:
        result.catch_up()
        return {k: sorted(s.file_names) for k, s in result.state.sessions.items() if s.counted}

    one = files(app(scenario / "home", workers=0))
    parallel = app(scenario / "home", workers=2)
    handed = adopted(parallel)
    assert files(parallel) == one and all(one.values())
    assert handed


@pytest.mark.parametrize("scenario", PARALLEL_SCENARIOS[::5], ids=scenario_id)
def test_workers_read_large_files_in_pieces_to_the_same_exposition(
    scenario: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tail, "READ_LIMIT", 2048)
    fork = multiprocessing.get_context("fork")  # workers that share the limit set here
    monkeypatch.setattr(pool, "_context", lambda: fork)
    one = exposition(app(scenario / "home", workers=0))
    parallel = app(scenario / "home", workers=2)
    handed = adopted(parallel)
    assert exposition(parallel) == one
    assert handed


@pytest.mark.parametrize("scenario", PARALLEL_SCENARIOS[::7], ids=scenario_id)
def test_reading_what_no_worker_began_gives_the_same_exposition(scenario: Path) -> None:
    one = exposition(app(scenario / "home", workers=0))
    assert exposition(app(scenario / "home", workers=2, steal=True)) == one


def test_workers_spawned_beside_other_threads_give_the_same_exposition() -> None:
    """`serve` catches up with threads running: its workers are spawned, not forked."""
    home = next(s for s in PARALLEL_SCENARIOS if agent_of(s) == "codex") / "home"
    one = exposition(app(home, workers=0))
    parallel = app(home, workers=2)
    handed, stop = adopted(parallel), threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert pool._context().get_start_method() == "spawn"
        assert exposition(parallel) == one
    finally:
        stop.set()
        thread.join()
    assert handed


@pytest.mark.parametrize(("probes", "system"), [("auto", "darwin"), ("portable", "linux")])
def test_workers_spawned_where_fork_is_unsafe_give_the_same_exposition(
    probes: str, system: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """macOS (fork unsafe), Windows (no fork) and the portable probes start workers with
    `spawn`, even with a single thread: the same exposition, real spawned workers here."""
    monkeypatch.setattr(platform, "_chosen", platform.detect(probes, system))
    monkeypatch.setattr(threading, "active_count", lambda: 1)  # a process of one thread
    home = next(s for s in PARALLEL_SCENARIOS if agent_of(s) == "claude-code") / "home"
    one = exposition(app(home, workers=0))
    parallel = app(home, workers=2)
    handed = adopted(parallel)
    assert pool._context().get_start_method() == "spawn"
    assert exposition(parallel) == one
    assert handed


def test_a_worker_that_fails_costs_only_time(caplog: pytest.LogCaptureFixture) -> None:
    home = next(s for s in PARALLEL_SCENARIOS if agent_of(s) == "claude-code") / "home"
    one = exposition(app(home, workers=0))
    parallel = app(home, workers=2)
    (source,) = parallel.engine.sources
    source.harness.poison = lambda: None  # type: ignore[attr-defined]  # will not pickle
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(source.harness)
    handed = adopted(parallel)
    assert exposition(parallel) == one
    assert handed == []  # every file read by the main process instead
    assert "catch-up worker failed on a file" in caplog.text


def test_workers_only_for_cores_left_idle_unless_asked() -> None:
    assert pool.workers_wanted({pool.ENV: "3"}, load=lambda: 0.0, cores=2) == 3
    assert pool.workers_wanted({pool.ENV: "0"}, load=lambda: 0.0, cores=8) == 0
    assert pool.workers_wanted({}, load=lambda: 0.2, cores=8) == 7  # the main process reads too
    assert pool.workers_wanted({}, load=lambda: 6.5, cores=8) == 1
    assert pool.workers_wanted({}, load=lambda: 7.5, cores=8) == 0  # a busy machine: none
    assert pool.workers_wanted({}, load=lambda: 0.0, cores=2) == 0  # two cores: no gain
    assert pool.workers_wanted({}, load=lambda: 0.0) >= 0
    assert pool.workers_wanted({}, load=lambda: None, cores=8) == 7  # no load average kept


def test_the_load_average_where_the_system_keeps_one(monkeypatch: pytest.MonkeyPatch) -> None:
    for probes, system in (("auto", "linux"), ("portable", "linux"), ("auto", "darwin")):
        monkeypatch.setattr(platform, "_chosen", platform.detect(probes, system))
        found = platform.load_average()
        assert found is not None and found >= 0
    monkeypatch.setattr(platform, "_chosen", platform.detect("auto", "win32"))
    assert platform.load_average() is None  # Windows keeps none: the check is skipped


def adopted(result: App) -> list[Path]:
    """The files the main process will take from a worker, as it takes them."""
    handed: list[Path] = []
    adopt = result.engine._adopt

    def counted(path: Path, source: Source, taken: pool.Read) -> None:
        handed.append(path)
        adopt(path, source, taken)

    result.engine._adopt = counted  # type: ignore[method-assign]
    return handed

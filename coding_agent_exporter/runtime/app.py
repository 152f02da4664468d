"""One configuration's state, reader and registry (`App`), and its traces pipeline (`Spans`)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from ..harnesses import HARNESSES, Probes, make
from ..prometheus.collectors import ExporterCollector, StateCollector
from ..sources.places import user_home
from ..sources.processes import process_start
from ..sources.terminals import omp_terminal
from ..state.health import Stats
from ..state.liveness import Probe
from ..state.state import State
from .cache import Cache
from .config import Config
from .engine import Engine, Source

if TYPE_CHECKING:  # OpenTelemetry is imported only when traces are on
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger("coding_agent_exporter")
PROBES = Probes(terminal=omp_terminal)
"""What harnesses may ask of this machine, answered by `sources`."""
CHECKPOINT_EVERY = 5.0
"""Seconds between writes of the traces checkpoint (and one more at shutdown)."""


class App:
    """State, reader and registry for one configuration."""

    def __init__(
        self,
        config: Config,
        *,
        process_metrics: bool = True,
        clock: Callable[[], float] = time.time,
        probe: Probe = process_start,
        spans: Spans | None = None,
        cache: bool = False,
        settle: bool = False,
    ) -> None:
        """`cache`: start from the catch-up cache, if there is one; `settle`: what it holds
        lives as long as the process (a command's own start: `cache.Cache`'s `keep`)."""
        self.config, self.clock, self.probe, self.spans = config, clock, probe, spans
        self.state = State(spans.writer if spans is not None else None, config.pricing)
        if spans is not None:
            self.state.traced_since = spans.writer.since  # exemplars link to those traces
        self.stats = Stats()
        sources = self._sources()
        store = None  # no catch-up cache under traces: spans need the turns seen as they are read
        if cache and spans is None and config.state_dir is not None:
            homes = [(s.harness.name, s.home) for s in sources]
            read = _read(sources)
            store = Cache(config.state_dir, homes, priced_by=config.pricing, read=read, keep=settle)
        self.engine = Engine(sources, self.state, self.stats, store)
        agents = list(config.homes)
        self.registry = CollectorRegistry(auto_describe=True)
        collector = StateCollector(
            self.state, agents, config.project, clock=clock, probe=probe, limit=config.window_limit
        )
        self.collector = collector
        self.registry.register(collector)
        counts = spans.exporter.counts if spans is not None else None
        self.registry.register(ExporterCollector(self.stats, agents, counts))
        if process_metrics:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)

    def catch_up(self, watch: Callable[[], None] | None = None) -> None:
        """Read the agents' files (`Engine.catch_up`; `watch`: the watcher's start)."""
        started, last = time.monotonic(), [time.monotonic()]
        for name, found in self.config.settings.items():  # a mistyped home says so at once
            if found.home.is_dir():
                log.info("%s: reading %s", name, found.home)
            else:
                flag = HARNESSES[name].home_flag
                log.info("%s: no folder %s (not used here? else set --%s)", name, found.home, flag)

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] >= 2.0 or (done == total and now - started >= 2.0):
                last[0] = now
                log.info("catching up: %d/%d files (%d%%)", done, total, 100 * done // total)

        self.engine.catch_up(progress, watch)
        self.refresh()
        with self.state.lock:  # the sessions whose work the refresh ended are finished now
            self.state.doze(everything=True)
        per_agent = ", ".join(f"{a} {n}" for a, n in sorted(self.stats.files.items()) if n)
        log.info(
            "caught up: %d files, %d sessions in %.1fs%s",
            sum(self.stats.files.values()),
            len(self.state.sessions),
            time.monotonic() - started,
            f" ({per_agent})" if per_agent else "",
        )

    def _sources(self) -> list[Source]:
        return [
            Source(make(name, found, PROBES), found.home)
            for name, found in self.config.settings.items()
        ]

    def changed(self, paths: list[Path]) -> None:
        """What the watcher reported, read; if a file was written again from its start, every
        file is read again (`rebuild`): what it said before must not count any more."""
        self.engine.changed(paths)
        if self.engine.rewritten:
            first, more = self.engine.rewritten[0], len(self.engine.rewritten) - 1
            also = f" (and {more} more)" if more else ""
            log.info("%s%s was written again from its start: reading every file again", first, also)
            self.rebuild()

    def rebuild(self) -> None:
        """A state made from today's files alone, in place of the one that counted what a
        rewritten file said before. Read with no observer (the turns were traced as they
        happened), then swapped in whole; the health counters go on."""
        started = time.monotonic()
        fresh, read = State(pricing=self.config.pricing), Stats()
        fresh.traced_since = self.state.traced_since
        cache = self.engine.cache  # files fall asleep again as they are read (memory)
        engine = Engine(self._sources(), fresh, read, cache, workers=self.engine.workers)
        engine.catch_up()
        engine.save_cache()
        engine.stats = self.stats
        with self.state.lock, fresh.lock:
            fresh.observer = self.state.observer
            fresh.refresh(self.clock(), self.probe)
            self.state, self.engine, self.collector.state = fresh, engine, fresh
            self.stats.went_on(read)
        log.info("read every file again in %.1fs", time.monotonic() - started)

    def refresh(self) -> None:
        """Decide again which sessions are live (and end the work of those that are not)."""
        with self.state.lock:
            self.state.refresh(self.clock(), self.probe)


def _read(sources: list[Source]) -> list[Path]:
    """The agents' folders, where the cache is never written: each home, but of a home that is
    the user's own (`$OPENCODE_DB=~/opencode.db` makes it OpenCode's) only what is read there;
    else the default state folder, under the user's home, could never hold the cache."""
    mine = user_home(os.environ).resolve()
    found = []
    for source in sources:
        if source.home.resolve() == mine:
            found += [source.home / d for d in source.harness.watch_dirs]
        else:
            found.append(source.home)
    return found


class Spans:
    """The SDK pipeline and the writer that feeds it, when traces are on."""

    def __init__(
        self,
        config: Config,
        environ: Mapping[str, str],
        started: float,
        *,
        exporter: SpanExporter | None = None,
        backfill: float | None = None,
    ) -> None:
        from ..otlp.resource import resource
        from ..traces.checkpoint import Checkpoint
        from ..traces.sdk import CountingExporter, otlp_exporter, tracer, tracer_provider
        from ..traces.spans import SpanWriter
        from ..traces.spool import Spool

        self.checkpoint = Checkpoint(config.state_dir if exporter is None else None)
        spool = Spool(config.state_dir) if exporter is None and config.state_dir else None
        inner = exporter or otlp_exporter(environ)
        self.exporter = CountingExporter(inner, self.checkpoint, spool)
        self.checkpoint.errors = self.exporter.counts  # its failed saves, shown with the spans'
        found = resource(environ, config.user, config.state_dir)
        self.provider = tracer_provider(environ, self.exporter, resource=found)
        since = started  # by default no history: only turns from now on
        backfill = config.backfill if backfill is None else backfill
        if backfill is not None:
            since = started - backfill
        elif self.checkpoint.since is not None:
            since = self.checkpoint.since  # every turn since tracing began that was not sent
        self.checkpoint.begin(since)
        self.writer = SpanWriter(
            tracer(self.provider),
            config.project,
            since=since,
            checkpoint=self.checkpoint,
            capture=config.capture,
        )
        self._saved = time.monotonic()

    def save(self, *, now: float, force: bool = False) -> None:
        if force or time.monotonic() - self._saved >= CHECKPOINT_EVERY:
            self.checkpoint.save(now)
            self._saved = time.monotonic()

    def shutdown(self) -> None:
        self.provider.shutdown()
        self.checkpoint.save(time.time())

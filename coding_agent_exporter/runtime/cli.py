"""The commands: the only module that knows about threads, signals, logging and the HTTP
server (`App`, what one configuration reads and shows, is in `app`)."""

from __future__ import annotations

import errno
import gc
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import NoReturn

from prometheus_client import generate_latest

from ..prometheus.collectors import StateErrorsCollector
from ..sources import heap, mounts, platform, statedir
from ..sources.processes import CachedProbe, process_start
from ..web.views import iso, session_rows, table
from .app import App, Spans
from .config import Config, parse
from .options import endpoint_configured
from .pushing import push, pusher_of

log = logging.getLogger("coding_agent_exporter")
RESCAN_EVERY = 30.0
"""Seconds between rescans of the agent folders when file events cannot be had."""
REFRESH_EVERY = 10.0
"""Seconds between liveness checks when nothing changed (process exits are watched apart)."""
REFRESH_AFTER_CHANGE = 0.1
"""Seconds at most between a change and the liveness check that follows it, and at least
between two such checks while changes keep coming (a check walks every live session; a scrape
makes its own, and a turn ended by an index gone idle ends at the index's time either way)."""
SWITCH_INTERVAL = 0.001
"""Seconds a thread may hold the interpreter while another waits for it (Python's default is
0.005). The reading loop gives the interpreter up at each read of a file; a scrape's render
holds it for tens of milliseconds: the shorter interval gets the loop its turn back sooner."""


def main(argv: Sequence[str] | None = None) -> int:
    config = parse(sys.argv[1:] if argv is None else argv, os.environ)
    platform.choose(config.probes)
    _logging(config)
    program = argv is None  # the program itself, not a caller that goes on
    if program:
        heap.give_back_large_blocks()
    if config.command == "sessions":
        return _sessions(config, program)
    if config.command == "metrics":
        return _metrics(config, program)
    if config.command == "notify":
        return _notify(config)
    if config.command == "traces":
        return _traces(config)
    if config.command == "push":
        return _holding(config, push)
    if config.command == "service":
        return _service(config)
    return _holding(config, serve)


def exit_now(code: int) -> NoReturn:
    """End a one-shot command that wrote all it had to (its output, the cache) at once, while
    what it built is still referred to: returning, then the interpreter's teardown, would free
    every object the catch-up made, one by one, for nothing. Only where no thread has work left
    (no OTLP export, no server)."""
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


def _holding(config: Config, command: Callable[[Config], int]) -> int:
    """Run a command that writes the state folder while holding it (`statedir`): exit 2,
    naming the other process, when another exporter holds it; temporary files a killed
    exporter left are removed first."""
    folder = config.state_dir
    if folder is None:
        return command(config)
    try:
        lock = statedir.hold(folder)
    except statedir.Held as held:
        log.error(
            "state folder %s is in use by another exporter (pid %s): stop it, or give this one "
            "its own folder with --state.dir",
            held.folder,
            held.pid if held.pid is not None else "unknown",
        )
        return 2
    except OSError as error:  # a read-only or full disk: the exporter runs, as it always did
        log.warning(
            "state folder %s cannot be locked (%s): not checked for another exporter", folder, error
        )
        return command(config)
    with lock:
        for stale in statedir.clean(folder):
            log.info("removed %s, left by an exporter that was stopped while writing it", stale)
        return command(config)


def _notify(config: Config) -> int:
    from ..web.notify import NotifyServer, command_notifier, default_command

    command = default_command(config.notify_command)
    host, port = config.notify_address
    try:
        notifier = command_notifier(command, os.environ) if command else None
        server = NotifyServer((host, port), notifier)
    except OSError as error:
        log.error("notify: cannot listen on %s: %s", hostport(host, port), error)
        return 1
    shown = command[0] if command else "the log only"
    log.info("notify: Alertmanager's webhook at http://%s/alerts → %s", hostport(host, port), shown)

    def stop(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.serve_forever()
    server.server_close()
    return 0


def _service(config: Config) -> int:
    from . import service

    system = service.SYSTEMS[config.service_for]
    found = service.service_for(system, os.environ, service.launcher())
    return service.main(config.service_action, found, dry_run=config.dry_run)


def hostport(host: str, port: int) -> str:
    """`host:port`, an IPv6 address in brackets (`[::1]:10464`)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def settle_heap() -> None:
    """Leave what the catch-up built out of the cycle collector's full passes: it lives as long
    as the process, and walking it took a full pass 120-130 ms at 10,000 sessions, a scrape's
    p99 (`bench/scrape.py`); frozen, 1-2 ms. Objects made later are collected as usual; what is
    frozen is still freed when nothing refers to it, only a cycle in it would stay."""
    gc.collect()
    gc.freeze()


def serve(config: Config) -> int:
    # imported here: `metrics` and `sessions` start without them
    from ..sources import livefiles
    from ..sources.procwatch import ProcessWatch
    from ..sources.watch import Watcher
    from ..web import api, webconfig
    from ..web.hosts import HostPolicy
    from ..web.live import Feed
    from ..web.server import Server
    from .replay import Replays

    try:
        web_config = webconfig.load(config.web_config) if config.web_config else None
    except webconfig.WebConfigError as error:
        log.error("--web.config.file: %s", error)
        return 2
    try:
        spans = Spans(config, os.environ, time.time()) if config.traces else None
    except ValueError as error:
        log.error("traces: %s", error)
        return 2
    sys.setswitchinterval(SWITCH_INTERVAL)
    probe = CachedProbe()  # told of every exit below: a scrape probes only new processes
    app = App(config, spans=spans, cache=True, settle=True, probe=probe)
    try:
        pusher = pusher_of(app, config) if config.otlp_metrics else None
    except ValueError as error:
        log.error("metrics: %s", error)
        return 2
    counts = spans.exporter.counts if spans is not None else None
    app.registry.register(StateErrorsCollector(app.stats, counts))
    ready, stop = threading.Event(), threading.Event()

    console = api.Api(
        config.project,
        api.Links(config.grafana_url, config.trace_url, config.external_url),
        config.telemetry_path,
        config.capture,
        tuple(config.homes),
        Replays(app).turns,
    )

    feed = Feed(config.project, console.linked)

    def json_api(path: str, query: dict[str, list[str]]) -> tuple[int, object]:
        with app.state.lock:
            app.state.refresh(time.time(), process_start)
        return console.answer(app.state, path, query, ready=ready.is_set())

    try:
        address = (config.host, config.port)
        hosts = HostPolicy.of(config.host, config.external_url, config.allowed_hosts)
        server = Server(
            address,
            app.registry,
            config.telemetry_path,
            ready,
            web_config,
            json_api,
            feed,
            hosts=hosts,
            max_connections=config.max_connections,
        )
    except OSError as error:
        hint = ""
        if error.errno == errno.EADDRINUSE:
            hint = (
                " (is another exporter running? choose another port with --web.listen-address"
                " or CODING_AGENT_EXPORTER_WEB_LISTEN_ADDRESS)"
            )
        log.error("cannot listen on %s: %s%s", hostport(config.host, config.port), error, hint)
        return 1
    server.start()
    scheme = "https" if web_config is not None and web_config.tls is not None else "http"
    where = hostport(config.host, config.port)
    log.info("listening on %s://%s%s", scheme, where, config.telemetry_path)
    log.info("console at %s/", config.external_url or f"{scheme}://{where}")
    if config.host in ("0.0.0.0", "::", ""):
        log.warning(
            "listening on every network interface: /metrics and the live sessions are open to "
            "the network; --web.listen-address 127.0.0.1:%d keeps them on this machine "
            "(or protect them with --web.config.file)",
            config.port,
        )

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("received %s, shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    watcher = Watcher(app.engine.roots)  # started by the catch-up once the live state is read
    live = livefiles.make(watcher.report)  # macOS, Windows: the live files followed directly
    live.start()
    rescanned = _rescanned(app, config.wsl_rescan)

    def exited(pids: set[int]) -> None:  # a live session's process exited
        probe.forget(pids)
        app.refresh()
        feed.publish(app.state)

    procs = ProcessWatch(exited)
    procs.start()
    try:
        app.catch_up(watch=watcher.start)  # nothing written from then on is missed
        ready.set()
        feed.publish(app.state, reset=True, ready=True)
        if pusher is not None:
            pusher.start()  # after the catch-up: never a count lower than the files' own
        app.engine.save_cache()
        settle_heap()
        last_rescan = last_refresh = last_wsl = time.monotonic()
        refresh_due: float | None = None  # something changed: refresh by then
        while not stop.is_set():
            with app.state.lock:
                procs.watch((e.pid, e.started_at) for e in app.state.entries.values())
            wait = 1.0 if refresh_due is None else max(0.0, refresh_due - time.monotonic())
            if rescanned:
                wait = min(wait, max(0.0, last_wsl + config.wsl_rescan - time.monotonic()))
            if app.engine.unfinished:  # a large file's next piece: after a look for changes
                wait = 0.0
            changed = watcher.changed(timeout=min(1.0, wait))
            if changed:
                app.changed(sorted(changed))
                feed.publish(app.state)
                if refresh_due is None:
                    refresh_due = max(time.monotonic(), last_refresh + REFRESH_AFTER_CHANGE)
            now = time.monotonic()
            due = refresh_due is not None and now >= refresh_due
            if due or now - last_refresh >= REFRESH_EVERY:
                app.refresh()  # an index gone idle ends its turn without waiting for a scrape
                feed.publish(app.state)
                last_refresh, refresh_due = time.monotonic(), None
            if live.needed:
                live.follow(app.engine.live_files())
            app.stats.rescanning = watcher.degraded
            if app.stats.rescanning and time.monotonic() - last_rescan >= RESCAN_EVERY:
                app.engine.rescan()  # a slow, bounded look instead of going blind
                last_rescan = time.monotonic()
            if rescanned and time.monotonic() - last_wsl >= config.wsl_rescan:
                app.engine.rescan(rescanned)  # WSL: Windows' writes there give no events
                feed.publish(app.state)
                last_wsl = time.monotonic()
            if app.engine.retry or app.engine.unfinished:  # short of descriptors; large files
                app.changed(app.engine.retried())
                feed.publish(app.state)
            if spans is not None:
                spans.save(now=time.time())
    finally:
        feed.close()
        live.stop()
        watcher.stop()
        procs.stop()
        server.shutdown()
        server.server_close()
        if pusher is not None and ready.is_set():
            pusher.shutdown()  # one last export
        if spans is not None:
            spans.shutdown()  # sends what is still queued
    return 0


def _rescanned(app: App, every: float) -> list[Path]:
    """The watched folders to rescan every `every` seconds (under WSL, those on a Windows drive),
    counted per agent in `coding_agent_exporter_rescanned_roots` and logged; none if `every`
    is 0."""
    watched = app.engine.watched()
    found = set(mounts.rescanned([root for _, root in watched])) if every > 0 else set()
    for agent, root in watched:
        if root in found:
            app.stats.rescanned[agent] += 1
            log.info(
                "%s: %s is on a Windows drive: rescanning it every %g s (writes made from "
                "Windows give no file events in WSL)",
                agent,
                root,
                every,
            )
    return sorted(found)


def _sessions(config: Config, program: bool = False) -> int:
    app = App(config, process_metrics=False, cache=True, settle=program)
    app.catch_up()
    app.engine.save_cache()
    rows = session_rows(app.state, config.project, history=config.all, internal=config.internal)
    if config.json:
        print(json.dumps(rows, indent=2))
    elif rows:
        print(table(rows))
    else:
        print("No live sessions." + ("" if config.all else " (--all lists history too)"))
    if program:
        exit_now(0)
    return 0


def _metrics(config: Config, program: bool = False) -> int:
    app = App(config, cache=True, settle=program)
    app.catch_up()
    sys.stdout.write(generate_latest(app.registry).decode())
    sys.stdout.flush()
    app.engine.save_cache()
    if program:
        exit_now(0)
    return 0


def _traces(config: Config) -> int:
    if config.output is None and not endpoint_configured(os.environ):
        log.error(
            "no OTLP endpoint: set OTEL_EXPORTER_OTLP_ENDPOINT, or write a file with --output"
        )
        return 2
    from ..traces.sdk import JsonLinesExporter

    exporter = JsonLinesExporter(config.output) if config.output is not None else None
    spans = Spans(config, os.environ, time.time(), exporter=exporter, backfill=config.since)
    app = App(config, process_metrics=False, spans=spans)
    app.catch_up()
    spans.shutdown()
    counts = spans.exporter.counts
    where = config.output or "the OTLP endpoint"
    log.info("sent %d spans to %s (%d failed)", counts["exported"], where, counts["failed"])
    return 0 if counts["failed"] == 0 else 1


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _logging(config: Config) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if config.log_format == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(message)s"))
    level = {"warn": "WARNING"}.get(config.log_level, config.log_level.upper())
    logging.basicConfig(level=level, handlers=[handler], force=True)
    logging.getLogger("watchdog").setLevel(max(logging.INFO, logging.getLogger().level))

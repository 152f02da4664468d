"""The metrics push of `serve --otlp.metrics` (`pusher_of`) and the one-shot `push` command."""

from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING

from .app import App, Spans
from .config import Config

if TYPE_CHECKING:  # OpenTelemetry is imported only when something is pushed
    from ..otlp.push import Pusher

log = logging.getLogger("coding_agent_exporter")


def pusher_of(app: App, config: Config) -> Pusher:
    """`app`'s registry pushed as OTEL_* says; `ValueError` for a bad variable."""
    from ..otlp.push import pusher

    user, state = config.user, config.state_dir
    return pusher(app.registry, os.environ, user=user, state_dir=state, started=time.time())


def push(config: Config) -> int:
    """Once: read, send the metrics and the turns not sent yet, exit (1 if either failed, 2 for
    no endpoint or a bad variable)."""
    from ..otlp.push import metrics_endpoint_configured
    from ..traces.checkpoint import Checkpoint

    if not metrics_endpoint_configured(os.environ):
        log.error("no OTLP endpoint: set OTEL_EXPORTER_OTLP_ENDPOINT")
        return 2
    try:
        spans = None
        if config.traces:  # every turn the first time (a runner's whole history), then new ones
            first = Checkpoint(config.state_dir).since is None
            every = config.backfill is None and first
            backfill = float("inf") if every else config.backfill
            spans = Spans(config, os.environ, time.time(), backfill=backfill)
        app = App(config, process_metrics=False, spans=spans)
        metrics = pusher_of(app, config)
    except ValueError as error:
        log.error("push: %s", error)
        return 2
    app.catch_up()
    sent = metrics.push()
    metrics.shutdown(final=False)
    failed = 0
    if spans is not None:
        spans.shutdown()
        failed = spans.exporter.counts["failed"]
        log.info("pushed %d spans (%d failed)", spans.exporter.counts["exported"], failed)
    log.info("pushed the metrics: %s", "accepted" if sent else "FAILED")
    return 0 if sent and failed == 0 else 1

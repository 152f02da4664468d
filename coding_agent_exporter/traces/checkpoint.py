"""Which turns were already sent as traces, kept in the exporter's own state folder.

A restart reads the same files again and would send the same turns again. The checkpoint is
written by the export thread just before each batch goes out (`admit`), so it never lags
behind what was sent, whenever the process is killed: it lists the trace ids of the turns whose
root span was sent (with when they ended), so the writer skips them, and the span ids already
sent of the turns still open, so their spans are sent once when the turn is built again. It
also keeps `since`, when tracing began: a restart builds again every turn from then on that is
not finished, so turns that started while the exporter was down, or were open when it stopped,
are sent in full. A kill between the write and the send loses that batch, never doubles it.
Entries older than `KEEP` are dropped. Written atomically (a temporary file, then a rename);
never in an agent's folder.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..sources import statedir

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

log = logging.getLogger(__name__)
KEEP = 30 * 86400.0
FILE = "traces-sent.json"
OPEN_TRACES = 10_000
"""Open turns whose sent spans are remembered at most (the oldest forgotten first)."""


class Checkpoint:
    def __init__(self, folder: Path | None) -> None:
        self.path = folder / FILE if folder is not None else None
        self.sent: dict[str, float] = {}  # trace id (hex) → when its turn ended
        self.open: dict[str, set[str]] = {}  # trace id → span ids sent, root not sent yet
        self.since: float | None = None  # when tracing began
        self.saved_at: float | None = None
        self.dirty = False
        self.errors: Counter[str] = Counter()  # "checkpoint_write": saves that failed
        self._said: str | None = None  # the last failure logged: a new one is logged again
        self._lock = threading.RLock()  # the reading loop and the export thread share it
        self._load()

    def _load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
            self.sent = {str(k): float(v) for k, v in data["sent"].items()}
            self.open = {str(k): {str(s) for s in v} for k, v in data.get("open", {}).items()}
            self.saved_at = float(data["saved_at"])
            since = data.get("since", self.saved_at)  # a file from before `since`: its save
            self.since = None if since is None else float(since)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            self.sent, self.open, self.since, self.saved_at = {}, {}, None, None
            log.warning(
                "traces checkpoint %s unreadable (%s): starting without it", self.path, error
            )

    def __contains__(self, trace_id: int) -> bool:
        with self._lock:
            return f"{trace_id:032x}" in self.sent

    def begin(self, since: float) -> None:
        """Tracing covers turns from `since` on (the earliest wins, within `KEEP`)."""
        with self._lock:
            if self.since is None or since < self.since:
                self.since, self.dirty = since, True

    def add(self, trace_id: int, ended: float) -> None:
        with self._lock:
            self.sent[f"{trace_id:032x}"] = ended  # its open spans stay known for this run:
            self.dirty = True  # built again after a restart, its children can follow it

    def admit(self, spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
        """The spans not sent yet, noted (and written down) as sent before they go out."""
        fresh = []
        with self._lock:
            for span in spans:
                context = span.get_span_context()
                if context is None:
                    continue
                trace, span_id = f"{context.trace_id:032x}", f"{context.span_id:016x}"
                if span_id in self.open.get(trace, ()):
                    continue
                fresh.append(span)
                if span.parent is None:  # the turn's own span: the turn is done
                    self.add(context.trace_id, (span.end_time or 0) / 1e9)
                elif trace not in self.sent:
                    self.open.setdefault(trace, set()).add(span_id)
                    self.dirty = True
            while len(self.open) > OPEN_TRACES:
                del self.open[next(iter(self.open))]
            if fresh:
                self.save(time.time())
        return fresh

    def save(self, now: float) -> None:
        with self._lock:
            if self.path is None or not self.dirty:
                return
            self.sent = {k: v for k, v in self.sent.items() if v >= now - KEEP}
            since = None if self.since is None else max(self.since, now - KEEP)
            data: dict[str, object] = {"saved_at": now, "since": since, "sent": self.sent}
            data["open"] = {k: sorted(v) for k, v in self.open.items() if k not in self.sent}
            try:
                statedir.write(self.path, json.dumps(data))
            except OSError as error:
                self._failed(error)
                return
            self.saved_at, self.dirty, self._said = now, False, None

    def _failed(self, error: OSError) -> None:
        """A save that failed: counted each time, logged once per distinct error (a full disk
        would otherwise repeat it at every save, `CHECKPOINT_EVERY`), again after a success."""
        self.errors["checkpoint_write"] += 1
        said = f"{type(error).__name__}: {error.strerror or error}"
        if said != self._said:
            self._said = said
            log.warning(
                "cannot write traces checkpoint %s: %s (said once until it changes or a save "
                "succeeds)",
                self.path,
                error,
            )

"""Which turns were already sent as traces, kept in the exporter's own state folder.

A restart reads the same files again and would send the same turns again; the checkpoint lists
their trace ids (with when they ended), so they are skipped, and remembers when it was last
written, so turns that started while the exporter was down are still sent. Entries older than
`KEEP` are dropped. Written atomically (a temporary file, then a rename); never in an agent's
folder.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)
KEEP = 30 * 86400.0
FILE = "traces-sent.json"


def default_dir(environ: Mapping[str, str]) -> Path:
    base = environ.get("XDG_STATE_HOME") or str(Path(environ.get("HOME", "~")) / ".local/state")
    return Path(base).expanduser() / "coding-agent-exporter"


class Checkpoint:
    def __init__(self, folder: Path | None) -> None:
        self.path = folder / FILE if folder is not None else None
        self.sent: dict[str, float] = {}  # trace id (hex) → when its turn ended
        self.saved_at: float | None = None
        self.dirty = False
        self._load()

    def _load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
            self.sent = {str(k): float(v) for k, v in data["sent"].items()}
            self.saved_at = float(data["saved_at"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            log.warning(
                "traces checkpoint %s unreadable (%s): starting without it", self.path, error
            )

    def __contains__(self, trace_id: int) -> bool:
        return f"{trace_id:032x}" in self.sent

    def add(self, trace_id: int, ended: float) -> None:
        self.sent[f"{trace_id:032x}"] = ended
        self.dirty = True

    def save(self, now: float) -> None:
        if self.path is None or not self.dirty:
            return
        self.sent = {k: v for k, v in self.sent.items() if v >= now - KEEP}
        tmp = self.path.with_suffix(".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"saved_at": now, "sent": self.sent}))
            os.replace(tmp, self.path)
        except OSError as error:
            log.warning("cannot write traces checkpoint %s: %s", self.path, error)
            return
        self.saved_at, self.dirty = now, False

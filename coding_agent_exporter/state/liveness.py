"""Which live-index entries describe a running process, and which entry holds a session.

An agent writes one index entry per running process. An entry is stale when its pid is gone or
now belongs to another program (the process started more than `PID_REUSE_TOLERANCE` seconds away
from the entry's own start time). Of several live entries naming one session, the one started
last holds it. A daemon spare (`hidden`) holds nothing; a terminal that parked its conversation on
a running background job (`parked_job_id` = that job's `job_id`) yields to the job's entry.

`probe(pid)` returns the process start time in Unix seconds, or None when there is no such
process. It is the only I/O liveness needs and is passed in: the real one is
`sources.processes.process_start`; tests use plain functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..events import LiveIndexRead

Probe = Callable[[int], float | None]
PID_REUSE_TOLERANCE = 5.0


def alive(entry: LiveIndexRead, probe: Probe) -> bool:
    started = probe(entry.pid)
    if started is None:
        return False
    if entry.started_at is None:
        return True
    if entry.opened_after_start:
        return started <= entry.started_at + PID_REUSE_TOLERANCE
    return abs(started - entry.started_at) <= PID_REUSE_TOLERANCE


def holders(
    entries: Iterable[tuple[str, LiveIndexRead]], probe: Probe
) -> tuple[dict[tuple[str, str], LiveIndexRead], set[tuple[str, str]]]:
    """(agent, session id) → the entry holding it; and the sessions named only by stale entries."""
    running = []
    stale: set[tuple[str, str]] = set()
    for agent, entry in entries:
        if alive(entry, probe):
            running.append((agent, entry))
        else:
            stale.add((agent, entry.session_id))
    jobs = {(agent, e.job_id) for agent, e in running if e.job_id and not e.hidden}
    held: dict[tuple[str, str], LiveIndexRead] = {}
    for agent, entry in running:
        if entry.hidden or (agent, entry.parked_job_id) in jobs:
            continue
        key = (agent, entry.session_id)
        current = held.get(key)
        if current is None or (entry.started_at or 0.0) >= (current.started_at or 0.0):
            held[key] = entry
    return held, stale - set(held)

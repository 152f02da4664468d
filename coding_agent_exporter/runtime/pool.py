"""Cold catch-up on every core: worker processes read whole files, the main process folds.

Most of a cold catch-up goes to reading bytes, splitting them into lines, decoding them and the
readers walking each record; few events come out of that, and folding them is cheap. So a file
whose reader keeps to its own file (`PARALLEL`: Claude Code and Codex) is handed whole to a
worker process, which returns the file's follower and reader where they stopped and what the
reader said, record by record (`Fed`); the main process folds that at the very place in the
catch-up's order where it would have read the file itself, so the result is the same as reading
in one process. Harnesses whose readers share memory across the files of a session (Gemini CLI,
pi, oh-my-pi, Grok, Vibe), documents and SQLite databases are read by the main process, in turn.

Workers exist only for a catch-up worth them (`MIN_BYTES` of unread files to hand out), one
per core the machine leaves idle beside the main process (which reads too, what no worker has
begun, while it waits: `Ahead`); they are forked on Linux (spawned when the main process has
threads, `serve`, and on macOS and Windows: `platform.worker_start`), and they stop when the
catch-up ends. A worker that fails costs only time: the
main process reads that file itself. `CODING_AGENT_EXPORTER_CATCHUP_WORKERS` sets how many
workers (0: none), for benchmarks and for a machine shared with other work.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import BrokenExecutor, Executor, Future
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import PurePosixPath
from types import TracebackType
from typing import TYPE_CHECKING

from ..events import Event, ModelResponded, ToolCallEnded, ToolCallStarted, TurnStarted
from ..harnesses import FileReader, Harness, RecordRejected
from ..sources import platform
from ..sources.decode import Decode, lean, loads
from ..sources.tail import JsonlTail, Line, TailResult, ZstdJsonl

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext

log = logging.getLogger(__name__)
PARALLEL = frozenset({"claude-code", "codex"})
"""Harnesses whose readers keep to their own file (no memory shared between files)."""
MIN_BYTES = 64 * 1024 * 1024
"""Below this much to read, starting workers costs more than they save."""
AHEAD = 4
"""Batches handed out per worker beyond the one the main process folds."""
BATCH_BYTES = 4 * 1024 * 1024
BATCH_FILES = 64
ENV = "CODING_AGENT_EXPORTER_CATCHUP_WORKERS"
MIN_CORES = 3
"""Fewer cores than this: no worker unless asked (measured on two: no gain, `bench/RESULTS.md`)."""


@dataclass(slots=True)
class Fed:
    """What a reader said about some records, in order: the events of each record that had
    some, the records fed, and the records it could not use as (reason, detail)."""

    groups: list[list[Event]] = field(default_factory=list)
    records: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)


def feed(reader: FileReader, record: object, where: str | int, fed: Fed) -> None:
    """One record into its reader; a rejected record or a reader bug costs that record.
    `where` names the record in an error: a line number, or words."""
    fed.records += 1
    try:
        events = reader.feed(record)
    except RecordRejected as error:  # the reader's own verdict: counted under its reason
        fed.errors.append((error.reason, f"{_named(where)}: {error}"))
        return
    except Exception as error:  # a reader bug costs one record, never the loop
        fed.errors.append(("reader_error", f"{_named(where)}: {error!r}"))
        return
    if events:
        fed.groups.append(events)


def _named(where: str | int) -> str:
    return f"line {where}" if isinstance(where, int) else where


def decoder(harness: Harness, content: bool) -> Decode:
    """How `harness`'s JSONL lines are decoded: only the fields its readers look at (its `lean`
    schema, if it has one) unless spans show content."""
    schema = getattr(harness, "lean", None)
    return loads if content or schema is None else _schema_decoder(schema)


@cache
def _schema_decoder(schema: type) -> Decode:
    return lean(schema)


def feed_lines(reader: FileReader, lines: Iterable[Line], decode: Decode = loads) -> Fed:
    fed = Fed()
    for line in lines:
        try:
            record = decode(line.text)
        except ValueError as error:
            fed.errors.append(("invalid_json", f"line {line.number}: {error}"))
            continue
        feed(reader, record, line.number, fed)  # named only if it fails
    return fed


@dataclass(frozen=True, slots=True)
class Job:
    """A file for a worker: where it stands in the catch-up's order, and how to read it."""

    position: int
    harness: Harness
    rel: PurePosixPath
    path: str
    """The file's name as the walk made it (a `Path` per file costs more to make and to send)."""
    compressed: bool
    content: bool
    """Keep what the records say (prompts, replies, tool arguments and results): only spans
    with content capture use it, and it is most of the bytes a worker would send back."""


@dataclass(frozen=True, slots=True)
class Read:
    """A worker's reading of one file: its follower and reader where they stopped, what the
    follower found (without the lines) and what the reader said."""

    tail: JsonlTail | ZstdJsonl
    reader: FileReader
    result: TailResult
    fed: Fed


def read(jobs: list[Job]) -> list[Read]:
    """In a worker: read some files, each from its start."""
    return [_read(job) for job in jobs]


def _read(job: Job) -> Read:
    """The whole file, piece by piece (`tail.READ_LIMIT`). A piece that cannot be read ends
    the reading: as the first piece, its error goes back; later, what was read goes back with
    `more`, and the main process reads on from there (meeting that error itself, if it lasts)."""
    tail = ZstdJsonl(job.path) if job.compressed else JsonlTail(job.path)
    reader = job.harness.reader(job.rel)
    fed, nread, oversized, first = Fed(), 0, 0, 0
    result = tail.read()
    if result.error is not None:
        return Read(tail, reader, replace(result, lines=[]), fed)
    decode = decoder(job.harness, job.content)
    while True:
        piece = feed_lines(reader, result.lines, decode)
        fed.groups += piece.groups if job.content else [list(map(_lean, g)) for g in piece.groups]
        fed.records += piece.records
        fed.errors += piece.errors
        nread, oversized = nread + result.bytes_read, oversized + result.oversized
        first = first or result.oversized_line
        more = result.more
        if more:
            result = tail.read()
        if not more or result.error is not None:
            summed = TailResult([], False, nread, None, oversized, more, first)
            return Read(tail, reader, summed, fed)


def _lean(event: Event) -> Event:
    """The event without its content (for spans with content capture only)."""
    if isinstance(event, ToolCallEnded) and event.result is not None:
        return replace(event, result=None)
    if isinstance(event, ModelResponded) and event.text is not None:
        return replace(event, text=None)
    if isinstance(event, TurnStarted) and event.prompt is not None:
        return replace(event, prompt=None)
    if isinstance(event, ToolCallStarted) and event.arguments is not None:
        return replace(event, arguments=None)
    return event


def workers_wanted(
    environ: Mapping[str, str] = os.environ,
    load: Callable[[], float | None] = platform.load_average,
    cores: int | None = None,
) -> int:
    """Workers for a large catch-up: the variable's number, else one per core that stands idle
    (by the 1-minute load average) beside the one the main process keeps busy, on a machine of
    at least `MIN_CORES`. On two cores one worker no longer pays since the readers decode only
    what they use: the main process, which folds every event, is the critical path, and a
    worker's start and pickling cost what it saves (`bench/RESULTS.md`, round 3). On a busy
    machine a worker only takes CPU from others. Where the system keeps no load average
    (Windows), every core but the main process's."""
    raw = environ.get(ENV, "").strip()
    if raw.isdigit():
        return int(raw)
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    if cores < MIN_CORES:
        return 0
    busy = load()
    return cores - 1 if busy is None else max(0, min(cores - 1, int(cores - busy)))


def batches(jobs: list[Job], sizes: list[int]) -> list[list[Job]]:
    """Consecutive jobs in batches of about `BATCH_BYTES` (at most `BATCH_FILES` files): one
    round trip to a worker per batch, not per file."""
    out: list[list[Job]] = []
    batch: list[Job] = []
    size = 0
    for job, bytes_ in zip(jobs, sizes, strict=True):
        batch.append(job)
        size += bytes_
        if size >= BATCH_BYTES or len(batch) >= BATCH_FILES:
            out.append(batch)
            batch, size = [], 0
    return [*out, batch] if batch else out


def _context() -> BaseContext:
    """The start method this system allows (`platform.worker_start`)."""
    import multiprocessing  # here: most starts need no workers, nor the time to import it

    return multiprocessing.get_context(platform.worker_start())


class Ahead:
    """Hands batches of jobs to `workers` processes, at most `AHEAD` per worker beyond the one
    being folded, and gives back each file's `Read` when its turn comes (`take`). While the
    batch whose turn it is is not done, the main process reads the furthest batch no worker has
    begun (unless `steal` is off): waiting would leave its core idle."""

    def __init__(self, work: list[list[Job]], workers: int, *, steal: bool = True) -> None:
        self._work, self._next, self._steal = work, 0, steal
        self._batch_of = {job.position: i for i, batch in enumerate(work) for job in batch}
        self._window = max(1, workers) * AHEAD
        self._futures: dict[int, Future[list[Read]]] = {}
        self._reads: dict[int, Read] = {}  # by position: batches done, not folded yet
        from concurrent.futures import ProcessPoolExecutor

        self._executor: Executor | None = ProcessPoolExecutor(workers, _context())
        self.handed = self.stolen = 0  # batches read by workers, and by the main process

    def __enter__(self) -> Ahead:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)

    def take(self, position: int) -> Read | None:
        """A worker's reading of the file at `position`; None when the main process is to read
        it itself (not handed out, or the worker failed)."""
        batch = self._batch_of.get(position)
        if batch is None:
            return None
        self._fill(batch)
        future = self._futures.pop(batch, None)
        if future is not None:
            while self._steal and not future.done() and self._read_one_ahead():
                pass
            self._collect(batch, future)
        return self._reads.pop(position, None)

    def _read_one_ahead(self) -> bool:
        """Read here the furthest batch no worker has begun; False if there is none."""
        for batch in sorted(self._futures, reverse=True):
            if self._futures[batch].cancel():
                del self._futures[batch]
                self._keep(batch, read(self._work[batch]))
                self.stolen += 1
                return True
        return False

    def _collect(self, batch: int, future: Future[list[Read]]) -> None:
        try:
            self._keep(batch, future.result())
            self.handed += 1
        except BrokenExecutor as error:
            log.warning("catch-up workers stopped (%s): reading on in one process", error)
            self._stop()
        except Exception as error:
            log.warning("catch-up worker failed on a file (%r): reading it here", error)

    def _keep(self, batch: int, reads: list[Read]) -> None:
        for job, done in zip(self._work[batch], reads, strict=True):
            self._reads[job.position] = done

    def _fill(self, batch: int) -> None:
        while self._executor is not None and self._next < len(self._work):
            if self._next > batch + self._window:
                return
            try:
                self._futures[self._next] = self._executor.submit(read, self._work[self._next])
            except (BrokenExecutor, RuntimeError) as error:
                log.warning("catch-up workers unavailable (%s): reading in one process", error)
                self._stop()
                return
            self._next += 1

    def _stop(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        self._executor = None
        self._futures = {}  # what no worker read, the main process reads in its turn

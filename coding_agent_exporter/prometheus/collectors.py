"""The /metrics view: built from `State` and `Stats` at each scrape, nothing kept in between.

Live series (one per live session, gone when the session stops being live):
    coding_agent_sessions{agent,state}
    coding_agent_session_state{agent,session_id,project,state,reason} 1
    coding_agent_session_state_since_timestamp_seconds{agent,session_id,project}
    coding_agent_session_last_activity_timestamp_seconds{agent,session_id,project}
    coding_agent_session_cost_usd{agent,session_id,project}
    coding_agent_subagents_running{agent,subagent_type}
Recent sessions, live or not (the 200 with the latest records, of the last 7 days):
    coding_agent_session_activity_timestamp_seconds{agent,session_id,project}
History counters (rebuilt from the files, so equal after a restart):
    coding_agent_{tokens,messages,turns,tool_calls,subagents,sessions}_total, and the
    coding_agent_{turn,tool_call}_duration_seconds histograms, and
    coding_agent_reviews_total{agent,outcome} once an agent ran an automatic review.
    coding_agent_compactions_total{agent} and coding_agent_compaction_tokens_total{agent,type}
    once an agent compacted a conversation.
Cost and the 5-hour usage windows: `spend`.
Exporter health: coding_agent_exporter_{build_info,files_watched,bytes_read_total,
    records_total,parse_errors_total,reader_up}.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import fields
from typing import NamedTuple

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.samples import Exemplar

from .. import __version__
from ..state.base import MAX_LABEL_VALUES, RECENT_SESSIONS
from ..state.health import Stats
from ..state.labels import STATES, ProjectLabel
from ..state.liveness import Probe
from ..state.state import State
from ..state.totals import Histogram, Totals
from .spend import Limit, families, shown

RECENT_FOR = 7 * 86400.0
"""How far back a session's latest record may be for `..._activity_timestamp_seconds`."""


class StateCollector:
    def __init__(
        self,
        state: State,
        agents: Sequence[str],
        project: ProjectLabel,
        *,
        clock: Callable[[], float] = time.time,
        probe: Probe,
        limit: Limit = None,
    ) -> None:
        self.state, self.agents, self.project = state, list(agents), project
        self.clock, self.probe, self.limit = clock, probe, limit
        self.projects = BoundedProjects(project)  # the history counters' project label

    def collect(self) -> Iterator[Metric]:
        """The state's lock is held only to decide liveness and copy what the scrape shows
        (the live sessions' few fields, the totals' tallies); the families are built and
        rendered after it is let go, so the reading loop never waits for a render."""
        now = self.clock()
        with self.state.lock:
            self.state.refresh(now, self.probe)
            live = self._live_rows()
            recent = self._recent_rows(now)
            totals = _copy(self.state.totals)
            spend = shown(self.state.spend, now)
        yield from self._live(live)
        yield self._recent(recent)
        yield from self._totals(totals)
        yield from families(spend, self.projects, now, self.limit)

    def _live_rows(self) -> list[_LiveRow]:
        """Under the lock: what the live series show of each live session, in series order."""
        rows = []
        for (agent, session_id), entry in sorted(self.state.live.items()):
            session = self.state.session(agent, session_id)
            state, reason, state_at = self.state.status((agent, session_id), entry)
            latest = max(filter(None, (session.updated_at, entry.updated_at)), default=None)
            running = [
                sub.subagent_type or "unknown"
                for sub in session.unique_subagents()
                if sub.state == "running"
            ]
            cwd = session.cwd or entry.cwd
            row = (agent, session_id, cwd, state, reason, state_at, latest, running, session.cost)
            rows.append(_LiveRow(*row))
        return rows

    def _recent_rows(self, now: float) -> list[tuple[str, str, str | None, float]]:
        """Under the lock: agent, id, cwd and latest record of the sessions a picker offers."""
        rows = []
        for key in self.state.recent:
            session = self.state.sessions.get(key)
            at = session.updated_at if session is not None else None
            if session is not None and at is not None and now - RECENT_FOR <= at:
                rows.append((key[0], key[1], session.cwd, at))
        rows.sort(key=lambda row: (-row[3], row[1]))
        return rows[:RECENT_SESSIONS]

    def _recent(self, rows: list[tuple[str, str, str | None, float]]) -> Metric:
        family = GaugeMetricFamily(
            "coding_agent_session_activity_timestamp_seconds",
            f"Time of the latest record of each of the {RECENT_SESSIONS} sessions, live or not, "
            "with the latest records of the last 7 days (what a session picker offers).",
            labels=["agent", "session_id", "project"],
        )
        for agent, session_id, cwd, at in sorted(rows):
            family.add_metric([agent, session_id, self.project(cwd)], at)
        return family

    def _live(self, rows: list[_LiveRow]) -> Iterator[Metric]:
        per_state = GaugeMetricFamily(
            "coding_agent_sessions", "Live sessions by state.", labels=["agent", "state"]
        )
        one = GaugeMetricFamily(
            "coding_agent_session_state",
            "1 for each live session, labelled with its state and why it waits.",
            labels=["agent", "session_id", "project", "state", "reason"],
        )
        since = GaugeMetricFamily(
            "coding_agent_session_state_since_timestamp_seconds",
            "When the live session entered its current state.",
            labels=["agent", "session_id", "project"],
        )
        last = GaugeMetricFamily(
            "coding_agent_session_last_activity_timestamp_seconds",
            "Time of the live session's latest record or status change.",
            labels=["agent", "session_id", "project"],
        )
        cost = GaugeMetricFamily(
            "coding_agent_session_cost_usd",
            "Estimated cost of the live session so far in USD (its sub-agents included).",
            labels=["agent", "session_id", "project"],
        )
        running = GaugeMetricFamily(
            "coding_agent_subagents_running",
            "Sub-agents still running in live sessions.",
            labels=["agent", "subagent_type"],
        )
        counts: Counter[tuple[str, str]] = Counter()
        subagents: Counter[tuple[str, str]] = Counter()
        for row in rows:
            agent, project = row.agent, self.project(row.cwd)
            counts[(agent, row.state)] += 1
            one.add_metric([agent, row.session_id, project, row.state, row.reason or ""], 1)
            ids = [agent, row.session_id, project]
            if row.state_at is not None:
                since.add_metric(ids, row.state_at)
            if row.latest is not None:
                last.add_metric(ids, row.latest)
            cost.add_metric(ids, row.cost)
            for kind in row.running:
                subagents[(agent, kind)] += 1
        for agent in self.agents:
            for state in STATES:
                per_state.add_metric([agent, state], counts[(agent, state)])
        for key, value in sorted(subagents.items()):
            running.add_metric(list(key), value)
        yield from (per_state, one, since, last, cost, running)

    def _totals(self, totals: Totals) -> Iterator[Metric]:
        yield _counter(
            "coding_agent_tokens",
            "Tokens used by model responses, each response counted once.",
            ["agent", "model", "project", "type"],
            self._by_project(totals.tokens, 2),
        )
        yield _counter(
            "coding_agent_messages",
            "Model responses, each counted once however many records repeat it.",
            ["agent", "model", "project"],
            self._by_project(totals.messages, 2),
        )
        yield _counter(
            "coding_agent_turns",
            "Turns (a user prompt and the work it started) by how they ended.",
            ["agent", "project", "outcome"],
            self._by_project(totals.turns, 1),
        )
        yield _histogram(
            "coding_agent_turn_duration_seconds",
            "Time from a user prompt to the end of its turn.",
            ["agent"],
            {(agent,): h for agent, h in totals.turn_durations.items()},
        )
        yield _counter(
            "coding_agent_tool_calls",
            "Tool calls by outcome (ok, error, rejected by the user, cancelled).",
            ["agent", "tool", "outcome"],
            totals.tool_calls,
        )
        yield _histogram(
            "coding_agent_tool_call_duration_seconds",
            "Time from a tool call to its result.",
            ["agent", "tool"],
            totals.tool_durations,
        )
        yield _counter(
            "coding_agent_subagents",
            "Sub-agents that ended, by type and outcome.",
            ["agent", "subagent_type", "outcome"],
            totals.subagents,
        )
        yield _counter(
            "coding_agent_sessions",
            "Sessions seen, live or not.",
            ["agent", "project"],
            self._by_project(totals.sessions, 1),
        )
        if totals.reviews:
            yield _counter(
                "coding_agent_reviews",
                "Automatic reviews the agent ran on its own actions (Codex guardian), by verdict.",
                ["agent", "outcome"],
                totals.reviews,
            )
        if totals.compactions:
            yield _counter(
                "coding_agent_compactions",
                "Context compactions: a conversation's history replaced by a summary.",
                ["agent"],
                totals.compactions,
            )
            yield _counter(
                "coding_agent_compaction_tokens",
                "Tokens of the compactions' own model requests where the agent recorded them "
                "(a part of coding_agent_tokens_total).",
                ["agent", "type"],
                totals.compaction_tokens,
            )

    def _by_project(self, tally: Counter[tuple[str, ...]], at: int) -> Counter[tuple[str, ...]]:
        """Render the cwd at position `at` as a project; two cwds may share one project."""
        out: Counter[tuple[str, ...]] = Counter()
        for key, value in tally.items():
            out[(*key[:at], self.projects(key[at]), *key[at + 1 :])] += value
        return out


class BoundedProjects:
    """The `project` label of the history counters (tokens, messages, turns, sessions, cost),
    bounded as the other labels are (`state.MAX_LABEL_VALUES`): the first projects met keep
    their own value for the life of the process; once that many are kept, any other is
    `other`. A project never moves between its own value and `other`, so a counter never
    jumps. (20,000 folders gave 120,000 series; the live sessions' own series are bounded by
    the sessions shown, `--sessions.window-limit`, and keep their project.)"""

    def __init__(self, project: Callable[[str | None], str], limit: int = MAX_LABEL_VALUES) -> None:
        self.project, self.limit = project, limit
        self._kept: set[str] = set()
        self._lock = threading.Lock()  # a scrape and an OTLP push may collect at once

    def __call__(self, cwd: str | None) -> str:
        value = self.project(cwd)
        if value in self._kept:
            return value
        with self._lock:
            if len(self._kept) >= self.limit:
                return "other"
            self._kept.add(value)
        return value


class _LiveRow(NamedTuple):
    agent: str
    session_id: str
    cwd: str | None
    state: str
    reason: str | None
    state_at: float | None
    latest: float | None  # the latest record or status change
    running: list[str]  # the types of its sub-agents still running
    cost: float


def _copy(totals: Totals) -> Totals:
    """The totals as they are now, for a scrape to read while the reading loop goes on: the
    tallies copied (at C speed), each histogram's counts too."""
    copied: dict[str, object] = {}
    for name in (f.name for f in fields(totals)):
        value = getattr(totals, name)
        if isinstance(value, Counter):
            copied[name] = Counter(value)
        else:  # histograms by label values
            copied[name] = {key: _histogram_copy(h) for key, h in value.items()}
    return Totals(**copied)  # type: ignore[arg-type]


def _histogram_copy(h: Histogram) -> Histogram:
    return Histogram(h.buckets, list(h.counts), h.total, h.count, dict(h.exemplars))


class ExporterCollector:
    def __init__(
        self, stats: Stats, agents: Sequence[str], spans: Counter[str] | None = None
    ) -> None:
        self.stats, self.agents, self.spans = stats, list(agents), spans

    def collect(self) -> Iterator[Metric]:
        stats = self.stats
        info = GaugeMetricFamily(
            "coding_agent_exporter_build_info", "Exporter version.", labels=["version"]
        )
        info.add_metric([__version__], 1)
        yield info
        files = GaugeMetricFamily(
            "coding_agent_exporter_files_watched", "Agent files followed.", labels=["agent"]
        )
        up = GaugeMetricFamily(
            "coding_agent_exporter_reader_up",
            "1 if the agent's home could be read at the last look.",
            labels=["agent"],
        )
        for agent in self.agents:
            files.add_metric([agent], stats.files[agent])
            up.add_metric([agent], 1 if stats.up.get(agent, True) else 0)
        yield files
        yield up
        rescanning = GaugeMetricFamily(
            "coding_agent_exporter_rescanning",
            "1 while file events cannot be had (inotify watches exhausted) and the exporter "
            "rescans the agent folders instead.",
        )
        rescanning.add_metric([], 1 if stats.rescanning else 0)
        yield rescanning
        if stats.rescanned:  # only where some are (WSL): the exposition elsewhere is as it was
            rescanned = GaugeMetricFamily(
                "coding_agent_exporter_rescanned_roots",
                "The agent's watched folders rescanned on an interval because no file events "
                "come from them (under WSL, on a Windows drive: --platform.wsl-rescan-interval).",
                labels=["agent"],
            )
            for agent in self.agents:
                rescanned.add_metric([agent], stats.rescanned[agent])
            yield rescanned
        yield _counter(
            "coding_agent_exporter_bytes_read",
            "Bytes read from agent files.",
            ["agent"],
            {(a,): stats.bytes_read[a] for a in self.agents},
        )
        yield _counter(
            "coding_agent_exporter_records",
            "Records (lines or documents) read from agent files.",
            ["agent"],
            {(a,): stats.records[a] for a in self.agents},
        )
        yield _counter(
            "coding_agent_exporter_parse_errors",
            "Records or files that could not be used, by reason.",
            ["agent", "reason"],
            stats.parse_errors,
        )
        if self.spans is not None:
            yield _counter(
                "coding_agent_exporter_spans_exported",
                "Spans the OTLP endpoint accepted.",
                [],
                {(): self.spans["exported"]},
            )
            yield _counter(
                "coding_agent_exporter_spans_dropped",
                "Spans dropped: the export queue or the state folder's spool was full "
                "(endpoint down or slow).",
                [],
                {(): self.spans["dropped"] + self.spans["dropped_spooled"]},
            )
            yield _counter(
                "coding_agent_exporter_span_export_errors",
                "Spans in export attempts the OTLP endpoint refused or could not be reached "
                "for (with a state folder they wait in it and are sent again).",
                [],
                {(): self.spans["failed"]},
            )
            waiting = GaugeMetricFamily(
                "coding_agent_exporter_spans_waiting",
                "Spans the OTLP endpoint has not accepted yet, kept in the state folder.",
            )
            waiting.add_metric([], self.spans["waiting"])
            yield waiting


class StateErrorsCollector:
    """`coding_agent_exporter_state_errors_total{reason}` of a serving exporter (the one-shot
    commands log these and exit): its state folder's failures."""

    REASONS = ("cache_refused", "cache_damaged", "checkpoint_write")

    def __init__(self, stats: Stats, spans: Counter[str] | None = None) -> None:
        self.stats, self.spans = stats, spans

    def collect(self) -> Iterator[Metric]:
        errors = {(reason,): self.stats.state_errors[reason] for reason in self.REASONS}
        if self.spans is not None:
            errors[("checkpoint_write",)] = self.spans["checkpoint_write"]
        yield _counter(
            "coding_agent_exporter_state_errors",
            "Failures with the exporter's own state folder, by reason: a catch-up cache refused "
            "(it names code the exporter may not run) or damaged, a traces checkpoint not written.",
            ["reason"],
            errors,
        )


def _counter(name: str, doc: str, labels: list[str], values: object) -> CounterMetricFamily:
    family = CounterMetricFamily(name, doc, labels=labels)
    assert isinstance(values, dict)
    for key, value in sorted(values.items()):
        family.add_metric(list(key), value)
    return family


def _histogram(
    name: str, doc: str, labels: list[str], values: dict[tuple[str, ...], Histogram]
) -> HistogramMetricFamily:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for key, hist in sorted(values.items()):
        counts = [*(hist.counts or [0] * len(hist.buckets)), hist.count]
        bounds = [*map(_le, hist.buckets), "+Inf"]
        buckets: list[tuple[str, float] | tuple[str, float, Exemplar]] = []
        for i, (bound, count) in enumerate(zip(bounds, counts, strict=True)):
            found = hist.exemplars.get(i)
            if found is None:
                buckets.append((bound, count))
                continue
            trace_id, span_id, value, at = found
            ids = {"trace_id": f"{trace_id:032x}", "span_id": f"{span_id:016x}"}
            buckets.append((bound, count, Exemplar(ids, value, at)))
        family.add_metric(list(key), buckets, hist.total)
    return family


def _le(bound: float) -> str:
    return repr(float(bound))

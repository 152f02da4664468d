"""Metrics over OTLP: `push` and `serve --otlp.metrics` send the /metrics families to a real OTLP
metrics endpoint (tests/otlp_metric_sink.py, HTTP/protobuf and gRPC), under names that
Prometheus' OTLP translation turns back into the scraped ones; through restarts, delta
temporality and an outage."""

from __future__ import annotations

import gc
import itertools
import os
import re
import shutil
import socket
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from coding_agent_exporter.otlp.bridge import Delta, Series, read
from coding_agent_exporter.otlp.push import Pusher, pusher, temporalities
from coding_agent_exporter.otlp.resource import resource
from coding_agent_exporter.runtime.app import App
from coding_agent_exporter.runtime.cli import main
from coding_agent_exporter.runtime.config import parse

from .backends import free_port, run_exporter, wait_for
from .otlp_metric_sink import GrpcMetricSink, HttpMetricSink, MetricSink, Point
from .test_otlp import SCENARIO, write_later_turn

# --- Prometheus' OTLP → Prometheus name translation (github.com/prometheus/otlptranslator,
# MetricNamer.Build with UTF8Allowed false: what Prometheus' OTLP receiver does by default and
# the Collector's prometheus and prometheusremotewrite exporters do), written out from its rules.
UNITS = {"d": "days", "h": "hours", "min": "minutes", "s": "seconds", "ms": "milliseconds"}
UNITS |= {"us": "microseconds", "ns": "nanoseconds", "By": "bytes", "KiBy": "kibibytes"}
UNITS |= {"MiBy": "mebibytes", "GiBy": "gibibytes", "KBy": "kilobytes", "MBy": "megabytes"}
UNITS |= {"m": "meters", "V": "volts", "A": "amperes", "J": "joules", "W": "watts", "g": "grams"}
UNITS |= {"Cel": "celsius", "Hz": "hertz", "1": "", "%": "percent"}
PER = {"s": "second", "m": "minute", "h": "hour", "d": "day", "w": "week", "mo": "month"}


def _clean(unit: str) -> str:
    return re.sub("_+", "_", re.sub("[^a-zA-Z0-9:]", "_", unit)).lstrip("_")


def translate(name: str, unit: str, kind: str, *, suffixes: bool = True) -> str:
    """`kind`: counter (a monotonic sum), gauge or histogram."""
    tokens = [t for t in re.split("[^a-zA-Z0-9:]", name) if t]
    if not suffixes:
        return "_".join(tokens)
    main_unit, _, per_unit = unit.partition("/")
    main_unit, per_unit = main_unit.strip(), per_unit.strip()
    main = UNITS.get(main_unit, main_unit) if main_unit and "{" not in main_unit else ""
    per = PER.get(per_unit, per_unit) if per_unit and "{" not in per_unit else ""
    main, per = _clean(main), _clean("per_" + per if per else "")
    if main and main not in tokens:
        tokens.append(main.rstrip("_") if per else main)
    if per and per not in tokens:  # a per unit is one token with its underscore: never found
        tokens.append(per.rstrip("_"))
    if kind == "counter":
        tokens = [t for t in tokens if t != "total"] + ["total"]
    if unit == "1" and kind == "gauge":
        tokens = [t for t in tokens if t != "ratio"] + ["ratio"]
    return "_".join(tokens)


@pytest.mark.parametrize(
    ("name", "unit", "kind", "expected"),
    [  # the examples of otlptranslator's and the Collector's documentation
        ("http.server.duration", "s", "histogram", "http_server_duration_seconds"),
        ("requests.count", "1", "counter", "requests_count_total"),
        ("memory.usage", "By", "gauge", "memory_usage_bytes"),
        ("system.filesystem.usage", "By", "gauge", "system_filesystem_usage_bytes"),
        ("system.network.dropped", "{packets}", "counter", "system_network_dropped_total"),
        ("system.network.dropped", "packets", "gauge", "system_network_dropped_packets"),
        ("system.memory.utilization", "1", "gauge", "system_memory_utilization_ratio"),
        ("network.io", "By/s", "gauge", "network_io_bytes_per_second"),
        ("cost.usage", "USD", "counter", "cost_usage_USD_total"),
        ("x_total_count", "", "counter", "x_count_total"),
    ],
)
def test_the_translation_rules_give_prometheus_own_examples(
    name: str, unit: str, kind: str, expected: str
) -> None:
    assert translate(name, unit, kind) == expected


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "claude"
    shutil.copytree(SCENARIO / "home", home)
    (tmp_path / "user").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "user"))  # no other agent's real folder is read
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    return home


def _argv(home: Path, tmp_path: Path, *more: str) -> list[str]:
    return ["push", "--claude.home", str(home), "--state.dir", str(tmp_path / "state"), *more]


def _scraped(home: Path, tmp_path: Path) -> App:
    config = parse(_argv(home, tmp_path)[1:], {"HOME": str(tmp_path / "user")})
    app = App(config)
    app.catch_up()
    return app


def test_every_scraped_family_is_pushed_under_a_name_that_translates_back_to_it(
    home: Path, tmp_path: Path
) -> None:
    """Both ways: each OTLP metric, translated as Prometheus does (with the unit and type
    suffixes, and without them), is the series it came from; and every scraped series (but
    `_created`) is one OTLP metric's, each histogram's `_bucket`, `_sum`, `_count` included."""
    app = _scraped(home, tmp_path)
    pushed = [s for s in read(app.registry) if s.points]  # a family with no series: not sent
    kinds = {"sum": "counter", "gauge": "gauge", "histogram": "histogram"}
    for series in pushed:
        for suffixes in (True, False):
            translated = translate(series.name, series.unit, kinds[series.kind], suffixes=suffixes)
            assert translated == series.name, (series.name, series.unit, suffixes)
    names = set()
    for series in pushed:
        parts = ("_bucket", "_sum", "_count") if series.kind == "histogram" else ("",)
        names |= {series.name + part for part in parts}
    text = generate_latest(app.registry).decode()
    scraped = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    assert names == {n for n in scraped if not n.endswith("_created")}
    assert len(pushed) == len({s.name for s in pushed})  # one metric per name
    units = {s.name: s.unit for s in pushed}
    assert units["coding_agent_tokens_total"] == "{token}"
    assert units["coding_agent_turn_duration_seconds"] == "s"
    assert units["coding_agent_exporter_bytes_read_total"] == "By"
    assert units["coding_agent_cost_usd_total"] == "{USD}"


@pytest.fixture(params=["http/protobuf", "grpc"])
def sink(
    request: pytest.FixtureRequest, home: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[MetricSink]:
    """After `home`, which clears the OTEL_* variables."""
    grpc = request.param == "grpc"
    receiver: HttpMetricSink | GrpcMetricSink = GrpcMetricSink() if grpc else HttpMetricSink()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", request.param)
    path = "" if grpc else "/v1/metrics"  # a signal's own endpoint is taken as the whole URL
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", receiver.endpoint + path)
    yield receiver
    receiver.close()


def _expected(app: App) -> dict[tuple[str, tuple[tuple[str, str], ...]], object]:
    """What a scrape shows, as the sink's points hold it (the process's own families aside)."""
    text = generate_latest(app.registry).decode()
    found: dict[tuple[str, tuple[tuple[str, str], ...]], object] = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith(("process_", "python_")):
            continue
        if family.type != "histogram":
            for s in family.samples:
                if not s.name.endswith("_created"):
                    found[(s.name, tuple(sorted(s.labels.items())))] = s.value
            continue
        by_labels: dict[tuple[tuple[str, str], ...], dict[str, object]] = {}
        for s in family.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            entry = by_labels.setdefault(labels, {"buckets": []})
            if s.name.endswith("_bucket"):
                entry["buckets"].append((float(s.labels["le"]), s.value))  # type: ignore[attr-defined]
            elif s.name.endswith(("_sum", "_count")):
                entry[s.name.rsplit("_", 1)[1]] = s.value
        for labels, entry in by_labels.items():
            buckets = sorted(entry["buckets"])  # type: ignore[call-overload]
            cumulative = [c for _, c in buckets]
            counts = tuple(b - a for a, b in zip([0.0, *cumulative], cumulative, strict=False))
            bounds = tuple(b for b, _ in buckets if b != float("inf"))
            found[(family.name, labels)] = (bounds, counts, entry["sum"], entry["count"])
    return found


def _received(point: Point) -> object:
    if point.kind == "histogram":
        bounds, counts, total, count = point.value
        return (bounds, tuple(float(c) for c in counts), total, float(count))
    return float(point.value)


def test_push_sends_what_a_scrape_shows(sink: MetricSink, home: Path, tmp_path: Path) -> None:
    assert main(_argv(home, tmp_path)) == 0
    (export,) = sink.exports
    expected = _expected(_scraped(home, tmp_path))
    received = {(p.name, p.labels): _received(p) for p in export.points}
    assert received.keys() == expected.keys()
    for key, value in expected.items():
        if key[0] != "coding_agent_exporter_files_watched":  # the fixture's files: equal
            assert received[key] == value, key
    tokens = [p for p in export.points if p.name == "coding_agent_tokens_total"]
    assert sum(p.value for p in tokens) == 13000 + 7110 + 22 + 145  # the stub's usage
    assert {p.temporality for p in tokens} == {2} and all(p.monotonic for p in tokens)


def test_the_metrics_variables_of_the_sdk_are_honoured(
    sink: MetricSink, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Headers and compression of the metrics (`_METRICS_` over the general ones) reach the
    receiver as the SDK defines them; the service name is OTEL_SERVICE_NAME."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer general")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "authorization=Bearer team-token")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_COMPRESSION", "gzip")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "agents-of-alice")
    assert main(_argv(home, tmp_path)) == 0
    (headers,) = sink.headers
    assert headers["authorization"] == "Bearer team-token"
    if isinstance(sink, HttpMetricSink):  # gRPC's compression is below its metadata
        assert headers["content-encoding"] == "gzip"
    assert sink.exports[0].resource["service.name"] == "agents-of-alice"


def test_the_resource_names_the_machine_the_instance_and_the_user(
    sink: MetricSink, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "user.name=bob,team=platform")
    assert main(_argv(home, tmp_path)) == 0
    assert main(_argv(home, tmp_path, "--label.user", "alice")) == 0  # the flag wins
    assert main(_argv(home, tmp_path / "other")) == 0  # another state folder: another instance
    first, second, other = (e.resource for e in sink.exports)
    assert first["host.name"] == socket.gethostname()
    assert first["service.name"] == "coding-agent-exporter"
    assert (first["user.name"], second["user.name"]) == ("bob", "alice")
    assert first["team"] == "platform"
    assert first["service.instance.id"] == second["service.instance.id"]  # stable: no churn
    assert other["service.instance.id"] != first["service.instance.id"]


def test_delta_temporality_sends_each_increase_once_across_restarts(
    sink: MetricSink, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each push a new process: the base is kept in the state folder, so the second sends only
    the later turn, the third nothing, and the increases add up to what a scrape counts."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta")
    assert main(_argv(home, tmp_path)) == 0
    write_later_turn(home)
    assert main(_argv(home, tmp_path)) == 0
    assert main(_argv(home, tmp_path)) == 0
    exports = [{(p.name, p.labels): p for p in e.points} for e in sink.exports]
    turns = [
        sum(p.value for k, p in e.items() if k[0] == "coding_agent_turns_total") for e in exports
    ]
    assert turns == [1, 1, 0]
    sums = [k for k, p in exports[-1].items() if p.kind in ("sum", "histogram")]
    assert all(exports[-1][k].temporality == 1 for k in sums)
    assert exports[1][sums[0]].start == exports[0][sums[0]].time  # from the last accepted
    expected = _expected(_scraped(home, tmp_path))
    for key in sums:
        if key[0].endswith("_total"):
            assert sum(e[key].value for e in exports if key in e) == expected[key], key


def test_a_restart_sends_the_same_counts_with_a_later_start_time(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve --otlp.metrics`, stopped and started again: the first export of the second run
    carries the counts the last of the first did (rebuilt from the files), with a later start
    time; no counter ever goes down, so a rate() sees no reset; the later turn counts once."""
    receiver = HttpMetricSink()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "200")
    try:
        runs = []
        for run in range(2):
            before = len(receiver.exports)
            with run_exporter(home, tmp_path, "--otlp.metrics", "--state.dir", str(tmp_path)):
                wait_for("two exports", lambda b=before: len(receiver.exports) >= b + 2)
                if run == 1:
                    write_later_turn(home)
                    wait_for("the later turn", lambda: _turns(receiver) == 2)
            runs.append(receiver.exports[before:])  # the last one sent at shutdown
    finally:
        receiver.close()
    assert _turns(receiver) == 2
    starts = [{p.start for e in run for p in e.points if p.kind == "sum"} for run in runs]
    assert len(starts[0]) == len(starts[1]) == 1 and max(starts[0]) < min(starts[1])
    last = {(p.name, p.labels): p.value for p in runs[0][-1].points if p.kind == "sum"}
    first = {(p.name, p.labels): p.value for p in runs[1][0].points if p.kind == "sum"}
    counts = {k: v for k, v in last.items() if _history(k[0])}
    assert counts and {k: first[k] for k in counts} == counts  # the files' counts
    history: dict[object, list[float]] = {}
    for export in (e for run in runs for e in run):
        for p in export.points:
            if p.kind == "sum" and _history(p.name):
                history.setdefault((p.name, p.labels), []).append(p.value)
    assert all(a <= b for values in history.values() for a, b in itertools.pairwise(values))


def _history(name: str) -> bool:
    """A history counter (not the exporter's nor the process's own, which start again)."""
    return name.startswith("coding_agent_") and not name.startswith("coding_agent_exporter_")


def _turns(sink: MetricSink) -> float:
    if not sink.exports:
        return 0
    return sum(p.value for p in sink.exports[-1].points if p.name == "coding_agent_turns_total")


@pytest.mark.parametrize("temporality", ["cumulative", "delta"])
def test_an_outage_loses_no_count_and_keeps_no_backlog(
    home: Path, tmp_path: Path, temporality: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The endpoint up, then down for several exports while a turn happens, then up again on
    its port: the first accepted export after it carries the turn (cumulative: the whole
    count; delta: exactly the increase)."""
    port = free_port()
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "1",
        "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": temporality,
    }
    for name, value in env.items():  # the SDK's exporters read os.environ themselves
        monkeypatch.setenv(name, value)
    app = _scraped(home, tmp_path)
    state = tmp_path / "state"
    push = pusher(app.registry, os.environ, user=None, state_dir=state, started=time.time())
    receiver = HttpMetricSink(port)
    assert push.push()
    receiver.close()
    write_later_turn(home)
    app.changed(sorted(home.rglob("*.jsonl")))
    for _ in range(3):
        assert not push.push()
    receiver = HttpMetricSink(port)
    try:
        assert push.push()
    finally:
        receiver.close()
    (export,) = receiver.exports  # the new receiver's: the one after the outage
    turns = sum(p.value for p in export.points if p.name == "coding_agent_turns_total")
    assert turns == (2 if temporality == "cumulative" else 1)
    assert push.counts == {"accepted": 2, "failed": 3}


class Refusing(MetricExporter):
    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: object
    ) -> MetricExportResult:
        return MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
        pass


@pytest.mark.parametrize("temporality", ["cumulative", "delta"])
def test_failed_exports_hold_no_memory(home: Path, tmp_path: Path, temporality: str) -> None:
    """An endpoint that refuses every export, 150 times: the memory held grows by less than
    one export's worth (each failed export is dropped; the next reads the registry again)."""
    app = _scraped(home, tmp_path)
    env = {"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": temporality}
    push = Pusher(
        app.registry, Refusing(), resource(env), env, started=time.time(), state_dir=tmp_path
    )
    tracemalloc.start()
    one = tracemalloc.get_traced_memory()[0]
    kept = read(app.registry)
    one = tracemalloc.get_traced_memory()[0] - one  # one export's series
    for _ in range(20):
        assert not push.push()
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(150):
        assert not push.push()
    gc.collect()  # what is held, not the garbage the cycle collector has not reached yet
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert kept and grown < one, (grown, one)


def test_push_needs_an_endpoint_and_a_known_temporality(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv(home, tmp_path)) == 2
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "sometimes")
    assert main(_argv(home, tmp_path)) == 2
    named = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE='sometimes'"
    assert named in capsys.readouterr().err


def test_otlp_flags_and_their_variables() -> None:
    environ = {"HOME": "/home/alice"}
    config = parse(["serve"], environ)
    assert (config.otlp_metrics, config.user) == (False, None)
    both = {"CODING_AGENT_EXPORTER_OTLP_METRICS": "true", "CODING_AGENT_EXPORTER_LABEL_USER": "al"}
    config = parse(["serve"], environ | both)
    assert (config.otlp_metrics, config.user) == (True, "al")
    config = parse(["serve", "--no-otlp.metrics", "--label.user", "bo"], environ | both)
    assert (config.otlp_metrics, config.user) == (False, "bo")
    assert parse(["push"], environ).command == "push"
    with pytest.raises(SystemExit):
        parse(["serve"], environ | {"CODING_AGENT_EXPORTER_OTLP_METRICS": "maybe"})


def test_temporality_preference_and_export_interval_are_read_as_the_sdk_defines_them() -> None:
    cumulative, delta = AggregationTemporality.CUMULATIVE, AggregationTemporality.DELTA
    name = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
    assert temporalities({}) == (cumulative, cumulative)
    assert temporalities({name: "Delta"}) == (delta, delta)
    assert temporalities({name: "lowmemory"}) == (cumulative, delta)  # counters are observed
    push = Pusher(
        CollectorRegistry(),
        Refusing(),
        resource({}),
        {"OTEL_METRIC_EXPORT_INTERVAL": "250"},
        started=0.0,
        state_dir=None,
    )
    assert (push.interval, push.timeout, push.delta) == (0.25, 30.0, None)
    with pytest.raises(ValueError, match="OTEL_METRIC_EXPORT_INTERVAL='soon'"):
        Pusher(
            CollectorRegistry(),
            Refusing(),
            resource({}),
            {"OTEL_METRIC_EXPORT_INTERVAL": "soon"},
            started=0.0,
            state_dir=None,
        )


def test_delta_sends_nothing_for_a_count_that_went_down_and_counts_on_from_it(
    tmp_path: Path,
) -> None:
    """An agent deleting old sessions lowers the history counters: the delta sent is 0 (no
    work), the lower value the new base, and the next increase is counted from it."""
    labels = (("agent", "claude-code"),)

    def series(value: float) -> list[Series]:
        return [Series("coding_agent_turns_total", "sum", "", "", {labels: value})]

    delta = Delta(tmp_path, 0)
    sent = []
    for value in (10.0, 4.0, 6.0):
        increases, values = delta.since(series(value))
        sent.append(increases[0].points[labels])
        delta.commit(values, int(value))
    assert sent == [10.0, 0.0, 2.0]
    assert Delta(tmp_path, 0).sent == delta.sent  # read back by the next start

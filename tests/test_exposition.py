"""coding_agent_exporter.prometheus.exposition: the body is the library's own, byte for byte,
and a family is written again only when it changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.process_collector import ProcessCollector

from coding_agent_exporter.prometheus.exposition import FamilyRenders

from .conftest import all_scenarios, app_for, scenario_id

TEXT = "text/plain"
OPENMETRICS = "application/openmetrics-text; version=1.0.0"


def renders(registry: CollectorRegistry, accept: str) -> tuple[FamilyRenders, bytes]:
    """The cached renderer for `accept`, and the library's own body for the same registry."""
    encoder, content_type = choose_encoder(accept)
    return FamilyRenders(registry, encoder, content_type), encoder(registry)


class Families:
    """A collector whose families a test sets."""

    def __init__(self, *families: Metric) -> None:
        self.families = list(families)

    def collect(self) -> list[Metric]:
        return self.families


def gauge(name: str, value: float, **labels: str) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, f"help of {name}", labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family


@pytest.mark.parametrize("accept", [TEXT, OPENMETRICS])
@pytest.mark.parametrize("home", all_scenarios()[::5], ids=scenario_id)
def test_same_bytes_as_the_library(home: Path, accept: str) -> None:
    """Every family of a recorded home: rendered, then again from what was kept (the clock is
    fixed, so nothing changed and nothing is written again)."""
    registry = app_for(home / "home").registry
    write, library = renders(registry, accept)
    assert write() == library
    written = write.rendered
    assert write() == library
    assert write.rendered == written


@pytest.mark.parametrize("accept", [TEXT, OPENMETRICS])
def test_process_figures_written_again_the_rest_kept(accept: str) -> None:
    """The process's and the collector's own figures change by themselves: written again when
    they did, the rest kept."""
    app = app_for(all_scenarios()[0] / "home")
    ProcessCollector(registry=app.registry)
    GCCollector(registry=app.registry)
    write, _ = renders(app.registry, accept)
    first = write()
    written = write.rendered
    again = write()
    assert write.rendered - written <= 6  # process_* and python_gc_* families at most
    library = renders(app.registry, accept)[1]
    assert _without_process(first) == _without_process(again) == _without_process(library)


@pytest.mark.parametrize("accept", [TEXT, OPENMETRICS])
def test_changed_family_written_again_and_only_it(accept: str) -> None:
    families = Families(gauge("a", 1.0, x="1"), gauge("b", 2.0), CounterMetricFamily("c", "c", 3))
    registry = CollectorRegistry()
    registry.register(families)
    write, library = renders(registry, accept)
    assert write() == library and write.rendered == 3
    families.families[1] = gauge("b", 2.5)
    _, library = renders(registry, accept)
    assert write() == library and write.rendered == 4


def test_label_value_sign_of_zero_and_help_are_part_of_a_family() -> None:
    families = Families(gauge("a", 0.0, x="1"))
    registry = CollectorRegistry()
    registry.register(families)
    write, library = renders(registry, TEXT)
    assert write() == library
    for changed in (gauge("a", -0.0, x="1"), gauge("a", -0.0, x="2")):
        families.families[0] = changed
        assert write() == renders(registry, TEXT)[1]
    families.families[0] = GaugeMetricFamily("a", "other help", value=-0.0)
    assert write() == renders(registry, TEXT)[1]
    assert write.rendered == 4


def test_gone_family_is_let_go_and_duplicates_kept_apart() -> None:
    families = Families(gauge("a", 1.0), gauge("b", 1.0))
    registry = CollectorRegistry()
    registry.register(families)
    write, _ = renders(registry, OPENMETRICS)
    write()
    families.families = [gauge("a", 1.0)]
    assert write() == renders(registry, OPENMETRICS)[1]
    assert write.kept == 1


def test_library_metrics_objects_still_render() -> None:
    registry = CollectorRegistry()
    g = Gauge("g", "a library gauge", ["k"], registry=registry)
    g.labels("v").set(4)
    write, library = renders(registry, OPENMETRICS)
    assert write() == library
    g.labels("v").set(5)
    assert write() == renders(registry, OPENMETRICS)[1]


def _without_process(body: bytes) -> bytes:
    """The body less the process's own figures (CPU, memory, GC: they change by themselves)."""
    own = tuple(f"{p}{n}".encode() for p in ("", "# HELP ", "# TYPE ") for n in _OWN)
    return b"\n".join(line for line in body.split(b"\n") if not line.startswith(own))


_OWN = ("process_", "python_gc_")

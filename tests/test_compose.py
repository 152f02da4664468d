"""docker-compose.yml and the Dockerfile, checked without a Docker engine (none runs here).

Debian's `docker-compose` validates the file against the Compose schema and resolves it
(`docker-compose config`); the resolved model is then held to the stack's promises: every port on
127.0.0.1, every image pinned (Prometheus and Alertmanager to the versions whose promtool and
amtool check the rules and config in CI), agent folders read-only, the host pid namespace, the
configs mounted from dashboards/ where Grafana's provisioning and Prometheus expect them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from coding_agent_exporter.harnesses import HARNESSES
from coding_agent_exporter.runtime.config import parse

from .backends import binary
from .conftest import ROOT

COMPOSE = ROOT / "docker-compose.yml"


def compose(
    *argv: str, file: Path = COMPOSE, home: str = "/home/alice"
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "DOCKER_"))}
    env.update(HOME=home)
    return subprocess.run(
        [binary("docker-compose", "docker-compose"), "-f", str(file), *argv],
        cwd=file.parent,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def model() -> dict[str, Any]:
    result = compose("config")
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = yaml.safe_load(result.stdout)
    return data


def version(argv: list[str]) -> str:
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    found = re.search(r"version (\d+\.\d+\.\d+)", out.stdout + out.stderr)
    assert found, out
    return found[1]


def test_compose_file_validates() -> None:
    result = compose("config", "-q")
    assert result.returncode == 0, result.stderr


def test_the_validator_catches_mistakes(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(
        COMPOSE.read_text().replace("    pid: host\n", "    pid: host\n    portz: []\n")
    )
    result = compose("config", "-q", file=broken)
    assert result.returncode != 0 and "portz" in result.stderr, result.stderr


def test_services_ports_and_images(model: dict[str, Any]) -> None:
    services = model["services"]
    base = {name for name, service in services.items() if "profiles" not in service}
    assert {name for name in services if name not in base} == {"otel-collector"}
    assert base == {
        "exporter",
        "prometheus",
        "alertmanager",
        "tempo-init",
        "tempo",
        "grafana",
    }
    for name, service in services.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)
        if name != "exporter":  # built here; the others are pulled, by exact version
            assert re.fullmatch(r"[\w./-]+:v?\d+\.\d+\.\d+", service["image"]), service["image"]
    ports = {p for name in base for p in services[name].get("ports", [])}
    assert len(ports) == 7  # exporter, prometheus, alertmanager, grafana, tempo x3
    assert len({p for s in services.values() for p in s.get("ports", [])}) == 9  # + the Collector


def test_prometheus_and_alertmanager_match_the_tested_versions(model: dict[str, Any]) -> None:
    services = model["services"]
    promtool = version([binary("promtool", "prometheus"), "--version"])
    assert services["prometheus"]["image"] == f"prom/prometheus:v{promtool}"
    alertmanager = version(
        [binary("prometheus-alertmanager", "prometheus-alertmanager"), "--version"]
    )
    assert services["alertmanager"]["image"] == f"prom/alertmanager:v{alertmanager}"
    command = services["prometheus"]["command"]
    assert "--enable-feature=exemplar-storage" in command
    assert "--config.file=/etc/prometheus/prometheus.yml" in command


def test_exporter_reads_agent_folders_read_only_in_the_host_pid_namespace(
    model: dict[str, Any],
) -> None:
    exporter = model["services"]["exporter"]
    assert exporter["pid"] == "host"
    assert exporter["build"]["context"] == str(ROOT)
    assert "/home/alice:/home/alice:ro" in exporter["volumes"]  # every agent's folder
    assert exporter["environment"]["HOME"] == "/home/alice"
    # the command line the container runs is one the exporter accepts, and it reads every
    # agent's folder where it is on the host
    config = parse(exporter["command"], {"HOME": "/home/alice"})
    assert config.command == "serve"
    assert (config.host, config.port) == ("0.0.0.0", 10464)
    assert len(config.homes) == len(HARNESSES)
    for agent, home in config.homes.items():
        assert home.is_relative_to("/home/alice"), agent


def test_bind_mounts_exist_and_land_where_the_configs_expect(model: dict[str, Any]) -> None:
    mounts: dict[str, str] = {}
    for service in model["services"].values():
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            if source.startswith("/") and not source.startswith("/home/alice"):
                assert Path(source).exists(), volume
                assert Path(source).resolve().is_relative_to(ROOT), volume
                assert volume.endswith(":ro"), volume
                mounts[target] = source
    assert mounts["/etc/prometheus/prometheus.yml"] == str(
        ROOT / "dashboards/prometheus/prometheus.yml"
    )
    assert mounts["/etc/prometheus/rules"] == str(ROOT / "dashboards/prometheus/rules")
    assert mounts["/etc/alertmanager"] == str(ROOT / "dashboards/alertmanager")
    assert mounts["/etc/tempo/tempo.yml"] == str(ROOT / "dashboards/tempo/tempo.yml")
    assert mounts["/etc/grafana/provisioning"] == str(ROOT / "dashboards/grafana/provisioning")
    dashboards = mounts["/etc/grafana/dashboards"]
    assert dashboards == str(ROOT / "dashboards/grafana/dashboards")
    provider = yaml.safe_load(
        (ROOT / "dashboards/grafana/provisioning/dashboards/dashboards.yml").read_text()
    )["providers"][0]
    assert provider["options"]["path"] == "/etc/grafana/dashboards"
    grafana = model["services"]["grafana"]["environment"]
    assert grafana["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert grafana["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    home = grafana["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (Path(dashboards) / Path(home).name).exists()


def test_services_the_configs_name_exist(model: dict[str, Any]) -> None:
    """Hosts in the Prometheus, Grafana and Tempo configs are compose services, ports match."""
    services = set(model["services"])
    texts = [
        (ROOT / "dashboards/prometheus/prometheus.yml").read_text(),
        (ROOT / "dashboards/grafana/provisioning/datasources/datasources.yml").read_text(),
    ]
    for text in texts:
        for host in re.findall(r"(?:http://|\")([a-z-]+):\d+", text):
            assert host in services | {"localhost"}, host
    tempo = yaml.safe_load((ROOT / "dashboards/tempo/tempo.yml").read_text())
    assert tempo["server"]["http_listen_port"] == 3200
    otlp = tempo["distributor"]["receivers"]["otlp"]["protocols"]
    assert otlp["grpc"]["endpoint"].endswith(":4317") and otlp["http"]["endpoint"].endswith(":4318")
    endpoint = model["services"]["exporter"]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert endpoint == "http://tempo:4318"


def test_dockerfile() -> None:
    text = (ROOT / "Dockerfile").read_text()
    (base,) = re.findall(r"^FROM (\S+)$", text, flags=re.M)
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", base), base  # a patch release
    assert "pip install --no-cache-dir --no-deps -r requirements.lock" in text
    assert "pip install --no-cache-dir --no-deps ." in text
    assert 'CMD ["--web.listen-address", "0.0.0.0:10464"]' in text
    assert 'ENTRYPOINT ["coding-agent-exporter"]' in text
    for copied in re.findall(r"^COPY (.+) \S+$", text, flags=re.M):
        for name in copied.split():
            assert (ROOT / name).exists(), name
    assert shutil.which("docker-compose")


def test_the_lock_pins_every_runtime_dependency_and_ci_tests_those() -> None:
    """requirements.lock: an exact version of every dependency in pyproject.toml (and of
    theirs); .ci/run installs it, so the tests run on what the image installs."""
    import tomllib
    from importlib.metadata import version

    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, pinned = line.split("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = pinned
    wanted = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for requirement in wanted:
        name = re.sub(r"[-_.]+", "-", re.split(r"[<>=!~ ;\[]", requirement)[0]).lower()
        assert name in pins, requirement
    assert "-r requirements.lock" in (ROOT / ".ci/run").read_text()
    if Path(sys.prefix).resolve() == (ROOT / ".venv").resolve():  # .ci/run's: it has the lock
        for name, pinned in pins.items():
            assert version(name) == pinned, name


def test_the_fleet_profile_forwards_metrics_to_prometheus_and_spans_to_tempo(
    model: dict[str, Any],
) -> None:
    """`--profile fleet`: a pinned Collector (contrib) takes OTLP on 4317/4318 and forwards the
    metrics to Prometheus' remote-write receiver, the spans to Tempo's OTLP gRPC port; every
    component its pipelines name is configured; the labels host, user and team come from the
    resource, as the dashboards and the per-team recording rules expect."""
    assert compose("--profile", "fleet", "config", "-q").returncode == 0
    collector = model["services"]["otel-collector"]
    assert collector["profiles"] == ["fleet"]
    assert collector["image"].startswith("otel/opentelemetry-collector-contrib:")
    assert sorted(str(p).split(":")[-1] for p in collector["ports"]) == ["4317/tcp", "4318/tcp"]
    assert "--web.enable-remote-write-receiver" in model["services"]["prometheus"]["command"]
    path = ROOT / "dashboards/otel-collector/config.yaml"
    mounted = f"{path}:/etc/otelcol-contrib/config.yaml:ro"
    assert collector["volumes"] == [mounted]
    assert collector["command"] == ["--config=/etc/otelcol-contrib/config.yaml"]
    config = yaml.safe_load(path.read_text())
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert protocols["http"]["endpoint"] == "0.0.0.0:4318"
    pipelines = config["service"]["pipelines"]
    for pipeline in pipelines.values():
        for kind in ("receivers", "processors", "exporters"):
            for name in pipeline[kind]:
                assert name in config[kind], (kind, name)
    (metrics,) = pipelines["metrics"]["exporters"]
    assert config["exporters"][metrics]["endpoint"] == "http://prometheus:9090/api/v1/write"
    (traces,) = pipelines["traces"]["exporters"]
    tempo = yaml.safe_load((ROOT / "dashboards/tempo/tempo.yml").read_text())
    grpc = tempo["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    assert config["exporters"][traces]["endpoint"] == "tempo:" + grpc.rsplit(":", 1)[1]
    assert pipelines["metrics"]["processors"][0] == "memory_limiter"
    statements = config["processors"]["transform/labels"]["metric_statements"][0]["statements"]
    labels = {re.match(r'set\(attributes\["(\w+)"\]', s)[1] for s in statements}  # type: ignore[index]
    assert labels == {"host", "user", "team"}

"""The shipped Prometheus rules and the Prometheus and Alertmanager configs, by the real tools.

`promtool` (Debian's prometheus 2.42, the version docker-compose.yml pins) checks and unit-tests
the rules; `amtool` (Debian's prometheus-alertmanager) checks the Alertmanager config as shipped
and with every commented example enabled.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from .backends import binary
from .conftest import ROOT

DASHBOARDS = ROOT / "dashboards"
RULES = sorted((DASHBOARDS / "prometheus" / "rules").glob("*.yml"))
RULE_TESTS = sorted((DASHBOARDS / "prometheus" / "rules" / "tests").glob("*.yml"))
ALERTS = {
    "CodingAgentNeedsYou",
    "CodingAgentStuck",
    "CodingAgentTokenBurn",
    "CodingAgentExporterDown",
    "CodingAgentReaderDown",
    "CodingAgentParseErrors",
    "CodingAgentDailyBudget",
    "CodingAgentWindowLimit",
    "CodingAgentUnpricedTokens",
}


def run(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)


def rules() -> list[dict[str, Any]]:
    return [
        rule
        for path in RULES
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
    ]


def test_there_are_rules_and_tests() -> None:
    assert {p.name for p in RULES} == {"alerts.yml", "recording.yml", "fleet.yml"}
    assert RULE_TESTS


@pytest.mark.parametrize("path", RULES, ids=lambda p: p.name)
def test_promtool_check_rules(path: Path) -> None:
    result = run(binary("promtool", "prometheus"), "check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("path", RULE_TESTS, ids=lambda p: p.name)
def test_promtool_test_rules(path: Path) -> None:
    result = run(binary("promtool", "prometheus"), "test", "rules", path.name, cwd=path.parent)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_labels_annotations_and_unit_tests_both_ways() -> None:
    alerts = {r["alert"]: r for r in rules() if "alert" in r}
    assert set(alerts) == ALERTS
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, name
        assert {"summary", "description"} <= set(rule["annotations"]), name
    fires: set[str] = set()
    silent: set[str] = set()
    for path in RULE_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                (fires if check.get("exp_alerts") else silent).add(check["alertname"])
    assert fires == ALERTS, "alerts never seen firing in a unit test"
    assert silent == ALERTS, "alerts never seen staying silent in a unit test"


def test_session_alerts_name_agent_project_and_session() -> None:
    alerts = {r["alert"]: r for r in rules() if "alert" in r}
    for name in ("CodingAgentNeedsYou", "CodingAgentStuck"):
        text = alerts[name]["annotations"]["description"]
        for label in ("agent", "project", "session_id"):
            assert f"$labels.{label}" in text, (name, label)
    assert alerts["CodingAgentNeedsYou"]["for"] == "1m"


def test_prometheus_config(tmp_path: Path) -> None:
    """The compose config names rules by their path in the container: check a copy that points
    at the repository's rule files, so promtool loads and checks the rules too."""
    text = (DASHBOARDS / "prometheus" / "prometheus.yml").read_text()
    assert "/etc/prometheus/rules/*.yml" in text
    rules_dir = DASHBOARDS / "prometheus" / "rules"
    copy = tmp_path / "prometheus.yml"
    copy.write_text(text.replace("/etc/prometheus/rules/*.yml", f"{rules_dir}/*.yml"))
    result = run(binary("promtool", "prometheus"), "check", "config", str(copy))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(RULES)} rule files found" in result.stdout, result.stdout
    config = yaml.safe_load(text)
    assert config["scrape_configs"][0]["job_name"] == "coding-agents"


def test_alertmanager_config_as_shipped_and_with_every_example(tmp_path: Path) -> None:
    amtool = binary("amtool", "prometheus-alertmanager")
    shipped = DASHBOARDS / "alertmanager" / "alertmanager.yml"
    result = run(amtool, "check-config", str(shipped))
    assert result.returncode == 0, result.stdout + result.stderr

    lines = shipped.read_text().splitlines()
    config = [line for line in lines if not line.lstrip().startswith("##")]
    enabled = [re.sub(r"^(\s*)# ", r"\1", line) for line in config]
    assert enabled != config, "no commented examples found"
    every = tmp_path / "alertmanager.yml"
    every.write_text("\n".join(enabled) + "\n")
    result = run(amtool, "check-config", str(every))
    assert result.returncode == 0, result.stdout + result.stderr
    receivers = {r["name"] for r in yaml.safe_load(every.read_text())["receivers"]}
    assert receivers == {"webhook", "desktop", "slack", "email"}

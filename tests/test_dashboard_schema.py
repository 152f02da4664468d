"""The dashboards checked with Grafana's own npm packages (dashboards/check/check.mjs), in Node:

- the JSON against Grafana's dashboard schema: the JSON schema of @grafana/schema's `Dashboard`
  type (and each panel's `Options` and `FieldConfig` from its panel plugin's schema), so a
  misspelt option, a wrong enum value, a panel type Grafana has no plugin for, a missing field
  of a link fail;
- every TraceQL query through @grafana/lezer-traceql, the grammar of Grafana's Tempo editor, and
  every span attribute the grammar sees in it is one that
  coding_agent_exporter/traces/semconv.py defines.

The packages are pinned in dashboards/check/package-lock.json and installed with `npm ci` into
a cache folder outside the checkout on first use (~6 s; CODING_AGENT_EXPORTER_NODE_CACHE moves
it). Without node and npm (Debian: nodejs, npm) these tests are skipped, saying so; the schema
version and panel types are then still checked against the pinned list below.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import missing_tool
from .test_dashboards import DASHBOARDS, JSON_FILES, SPAN_ATTRIBUTES, all_panels, load

pytestmark = pytest.mark.timeout(420)  # the first test may wait for `npm ci` (up to 300 s)

CHECK = DASHBOARDS / "check"
SCHEMA_VERSION = 39  # Grafana 11.6, the compose stack's, migrates it forward on load
PANEL_TYPES = {"row", "stat", "timeseries", "table", "state-timeline", "traces", "nodeGraph"}
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
SESSION_ID = "6f9619ff-8b86-d011-b42d-00c04fc964ff"


def tempo_queries() -> list[str]:
    return [
        target["query"]
        for path in JSON_FILES
        for panel in all_panels(load(path))
        for target in panel.get("targets", [])
        if target["datasource"]["type"] == "tempo"
    ]


def as_sent(query: str) -> str:
    """The query as Grafana sends it, its variables filled in."""
    return query.replace("$session", SESSION_ID).replace("$min_duration", "30s")


@pytest.fixture(scope="module")
def node_check() -> Path:
    """A folder with check.mjs and its pinned node_modules."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        missing_tool("node and npm are not installed (Debian: nodejs npm): no Grafana packages")
    manifest = [CHECK / "package.json", CHECK / "package-lock.json"]
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in manifest)).hexdigest()[:12]
    cache = os.environ.get("CODING_AGENT_EXPORTER_NODE_CACHE") or (
        Path.home() / ".cache" / "coding-agent-exporter"
    )
    folder = Path(cache) / f"dashboard-check-{digest}"
    if not (folder / "node_modules" / ".package-lock.json").exists():
        folder.mkdir(parents=True, exist_ok=True)
        for path in manifest:
            shutil.copy(path, folder)
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
            cwd=folder,
            check=True,
            capture_output=True,
            timeout=300,
        )
    shutil.copy(CHECK / "check.mjs", folder)
    return folder


def run_check(folder: Path, *argv: str, stdin: str | None = None) -> Any:
    result = subprocess.run(
        ["node", str(folder / "check.mjs"), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_schema_version_and_panel_types_are_pinned() -> None:
    for path in JSON_FILES:
        dashboard = load(path)
        assert dashboard["schemaVersion"] == SCHEMA_VERSION, path.name
        types = {panel["type"] for panel in all_panels(dashboard)}
        assert types <= PANEL_TYPES, f"{path.name}: {types - PANEL_TYPES}"


def test_dashboards_match_grafanas_schema(node_check: Path) -> None:
    found = run_check(node_check, "schema", *map(str, JSON_FILES))
    assert found == {str(path): [] for path in JSON_FILES}


def test_schema_check_finds_what_grafana_would_not_load(node_check: Path, tmp_path: Path) -> None:
    dashboard = load(JSON_FILES[0])
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    stat = next(p for p in panels if p["type"] == "stat")
    stat["options"]["textMode"] = "bogus"
    stat["options"]["colourMode"] = "value"
    series = next(p for p in panels if p["type"] == "timeseries")
    series["fieldConfig"]["defaults"]["custom"]["drawStyle"] = "lines"
    panels[-1]["type"] = "graph2"
    del dashboard["links"][0]["icon"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(dashboard))
    (errors,) = run_check(node_check, "schema", str(broken)).values()
    text = "\n".join(errors)
    for expected in ("textMode", "colourMode", "drawStyle", "graph2", "'icon'"):
        assert expected in text, f"{expected} not found in {text}"


def test_traceql_parses_in_tempos_grammar(node_check: Path) -> None:
    queries = tempo_queries()
    searches = [q for q in queries if q != "$trace"]  # "$trace" is a trace id: a lookup
    assert len(searches) >= 7 and len(queries) - len(searches) >= 3
    for found in run_check(node_check, "traceql", stdin=json.dumps(list(map(as_sent, searches)))):
        assert found["errors"] == [], f"{found['query']}: errors at {found['errors']}"
        assert found["attributes"], found["query"]
        for attribute in found["attributes"]:
            name = re.sub(r"^(span|resource)?\.", "", attribute)
            assert name in SPAN_ATTRIBUTES, (
                f"{attribute} is not in coding_agent_exporter/traces/semconv.py"
            )


def test_traceql_check_finds_broken_queries(node_check: Path) -> None:
    broken = [
        '{ span.gen_ai.conversation.id = "x" ',  # unclosed
        '{ span.gen_ai.conversation.id == "x" }',  # == is not TraceQL
        '{ span.gen_ai.tool.name = "Bash" && }',
        '{ span.gen_ai.tool.name = "Bash" } | select(span.gen_ai.tool.name',
        TRACE_ID,  # a trace id is not a query
    ]
    for found in run_check(node_check, "traceql", stdin=json.dumps(broken)):
        assert found["errors"], found["query"]

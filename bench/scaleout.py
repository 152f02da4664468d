"""Scale-out on paper: what a team's exporters send to one Prometheus/Mimir and one Tempo.

    python bench/generate.py --out /tmp/cae-team --claude-sessions 200 --claude-mb 20 --others 1
    python bench/scaleout.py --history /tmp/cae-team --developers 1000 --live 5
    python bench/generate.py --out /tmp/cae-fleet --claude-sessions 43 --claude-mb 5 --others 0.025
    python bench/scaleout.py --history /tmp/cae-fleet --developers 100 --teams 10 --live 2

Reads one machine's history (a `bench/generate.py` tree: every agent the generator makes) once
with `coding-agent-exporter metrics` (the series of one machine, by metric family) and once with
`coding-agent-exporter traces --output` (spans per turn), then multiplies: series by the
developers (`--live` live sessions each add their per-session series), samples per second by the
scrape interval, spans per second by an assumed pace of turns per developer (`--turns-per-hour`,
at the busiest hour). Measured figures and assumptions are printed apart, with the commands.

Then the fleet (docs/fleet.md): each developer's machine pushes the same series with its own
`host`, `user` and `team` labels (`--teams` teams of equal size), and the series the per-team
recording rules of dashboards/prometheus/rules/fleet.yml keep are counted by grouping the
measured series as each rule's `by (...)` does (its label matchers applied).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import yaml

HOMES = {
    "claude": "claude",
    "codex": "codex",
    "gemini": "gemini",
    "pi": "pi",
    "omp": "omp",
    "grok": "grok",
    "vibe": "vibe",
    "opencode": "opencode",
}
PER_LIVE_SESSION = (
    "coding_agent_session_state",
    "coding_agent_session_state_since_timestamp_seconds",
    "coding_agent_session_last_activity_timestamp_seconds",
)
"""The series each live session adds (one each; `coding_agent_sessions` is per agent and state)."""
_FAMILY = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*?)(?:_bucket|_count|_sum|_created)?[{ ]")


def command(history: Path, state: Path, *tail: str) -> list[str]:
    homes = [x for flag, name in HOMES.items() for x in (f"--{flag}.home", str(history / name))]
    return [sys.executable, "-m", "coding_agent_exporter", *homes, "--state.dir", str(state), *tail]


def families(exposition: str) -> Counter[str]:
    found: Counter[str] = Counter()
    for line in exposition.splitlines():
        match = _FAMILY.match(line) if line and not line.startswith("#") else None
        if match:
            found[match.group(1)] += 1
    return found


def spans_and_turns(lines: str) -> tuple[int, int]:
    """Spans in OTLP/JSON lines, and turns (one trace each)."""
    spans, traces = 0, set()
    for line in lines.splitlines():
        for resource in json.loads(line).get("resourceSpans", []):
            for scope in resource.get("scopeSpans", []):
                for span in scope.get("spans", []):
                    spans += 1
                    traces.add(span["traceId"])
    return spans, len(traces)


ROOT = Path(__file__).resolve().parent.parent
FLEET_RULES = ROOT / "dashboards" / "prometheus" / "rules" / "fleet.yml"
_RULE = re.compile(
    r"(?:sum|count) by \(([^)]*)\) \(\s*(?:rate|increase)?\(?([a-zA-Z_:][a-zA-Z0-9_:]*)"
    r"(?:\{([^}]*)\})?"
)
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+")


def samples(exposition: str) -> list[tuple[str, dict[str, str]]]:
    """(series name, labels) of every sample line."""
    found = []
    for line in exposition.splitlines():
        match = _SAMPLE.match(line) if line and not line.startswith("#") else None
        if match:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
            found.append((match.group(1), labels))
    return found


def rule_series(exposition: str, developers: int, teams: int) -> dict[str, int]:
    """Series each fleet recording rule keeps when `developers` machines (one user each, in
    `teams` teams) push what `exposition` holds."""
    per_machine = samples(exposition)
    out = {}
    for group in yaml.safe_load(FLEET_RULES.read_text())["groups"]:
        for rule in group["rules"]:
            match = _RULE.search(rule["expr"])
            assert match, rule["expr"]
            by = [x.strip() for x in match.group(1).split(",")]
            wanted = dict(re.findall(r'(\w+)="([^"]*)"', match.group(3) or ""))
            chosen = [
                labels
                for name, labels in per_machine
                if name == match.group(2) and wanted.items() <= labels.items()
            ]
            keys = set()
            for machine in range(developers):
                own = {"team": f"t{machine % teams}", "user": f"u{machine}", "host": f"h{machine}"}
                for labels in chosen:
                    keys.add(tuple((labels | own).get(label, "") for label in by))
            out[rule["record"]] = len(keys)
    return out


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--history", type=Path, default=Path("/tmp/cae-team"))
    args.add_argument("--developers", type=int, default=1000)
    args.add_argument("--live", type=int, default=5, help="live sessions per machine")
    args.add_argument("--scrape-interval", type=float, default=15.0, help="seconds")
    args.add_argument("--turns-per-hour", type=float, default=30.0, help="per developer, peak")
    args.add_argument("--teams", type=int, default=10, help="for the fleet rules")
    args.add_argument("--label-project", default="path", choices=["path", "basename", "none"])
    args.add_argument("--push-interval", type=float, default=60.0, help="seconds (OTLP push)")
    ns = args.parse_args()
    with tempfile.TemporaryDirectory(prefix="cae-scaleout-") as tmp:
        project = ("--label.project", ns.label_project)
        metrics = command(ns.history, Path(tmp) / "m", "metrics", *project)
        text = subprocess.run(metrics, capture_output=True, text=True, check=True).stdout
        out = Path(tmp) / "spans.jsonl"
        traces = command(ns.history, Path(tmp) / "t", "traces", "--output", str(out))
        subprocess.run(traces, capture_output=True, text=True, check=True)
        spans, turns = spans_and_turns(out.read_text())
    found = families(text)
    own = sum(n for name, n in found.items() if name.startswith(("process_", "python_")))
    series = sum(found.values())
    machine = series + ns.live * len(PER_LIVE_SESSION)
    per_turn = spans / turns if turns else 0.0
    print("commands:")
    print("  " + " ".join(metrics).replace(tmp, "TMP"))
    print("  " + " ".join(traces).replace(tmp, "TMP"))
    print(f"measured, one machine ({ns.history}):")
    print(f"  series: {series} ({own} of them the process's own), by family:")
    for name, n in found.most_common(12):
        print(f"    {n:5} {name}")
    print(f"  spans: {spans} for {turns} turns = {per_turn:.1f} spans per turn")
    print("assumed:")
    print(
        f"  {ns.developers} developers, {ns.live} live sessions each "
        f"(+{len(PER_LIVE_SESSION)} series per live session), scraped every "
        f"{ns.scrape_interval:g} s, {ns.turns_per_hour:g} turns per developer in the busiest hour"
    )
    team = machine * ns.developers
    samples = team / ns.scrape_interval
    rate = ns.developers * ns.turns_per_hour * per_turn / 3600
    print("to one Prometheus/Mimir and one Tempo:")
    print(f"  active series: {machine} per machine x {ns.developers} = {team:,}")
    print(f"  samples/s: {team:,} / {ns.scrape_interval:g} s = {samples:,.0f}")
    print(f"  spans/s at the busiest hour: {rate:,.1f} ({rate * 3600:,.0f} spans an hour)")
    fleet(text, machine, own, ns)


def fleet(text: str, machine: int, own: int, ns: argparse.Namespace) -> None:
    pushed = machine - own + 1  # `push` leaves the process's own out; target_info is one more
    team = pushed * ns.developers
    print(
        f"fleet: {ns.developers} machines pushing OTLP every {ns.push_interval:g} s, "
        f"{ns.teams} teams, labels host, user, team"
    )
    print(f"  raw series: ({machine - own} + target_info) per machine x {ns.developers} = {team:,}")
    print(f"  samples/s: {team / ns.push_interval:,.0f}")
    kept = rule_series(text, ns.developers, ns.teams)
    print(f"  recording rules ({FLEET_RULES.relative_to(ROOT)}): {sum(kept.values()):,} series")
    for name, n in kept.items():
        print(f"    {n:6,} {name}")


if __name__ == "__main__":
    main()

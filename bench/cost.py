"""Our estimated cost against ccusage's, session by session, on the same Claude Code history.

    python bench/generate.py --shape many-small --out /tmp/cae-many-small   # once
    python bench/cost.py --history /tmp/cae-many-small

Runs `coding-agent-exporter sessions --all --json` and ccusage (its installed launcher,
`session --json --offline`: its own offline price table) over the same `claude/` home, pairs
the sessions by id, and prints both totals, the largest difference of one session, and the
sessions whose costs differ by more than 1 % with their models (so each difference can be
traced to a named price). Exits 1 when the totals differ by more than 1 %.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from compare import EXPORTER, ccusage_launcher, claude_only


def ours(history: Path) -> dict[str, tuple[float, list[str]]]:
    state = tempfile.mkdtemp(prefix="cae-cost-state-")
    argv = [*EXPORTER, *claude_only(history), "--state.dir", state, "sessions", "--all", "--json"]
    rows = json.loads(subprocess.run(argv, capture_output=True, check=True, text=True).stdout)
    return {r["session_id"]: (r["cost_usd"], [r["model"] or "-"]) for r in rows}


def theirs(history: Path) -> dict[str, tuple[float, list[str]]]:
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(history / "claude")}
    argv = [str(ccusage_launcher()), "session", "--json", "--offline"]
    out = subprocess.run(argv, capture_output=True, check=True, text=True, env=env).stdout
    return {s["period"]: (s["totalCost"], s["modelsUsed"]) for s in json.loads(out)["session"]}


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--history", type=Path, default=Path("/tmp/cae-many-small"))
    ns = args.parse_args()
    mine, ccusage = ours(ns.history), theirs(ns.history)
    both = sorted(set(mine) & set(ccusage))
    total_ours = sum(mine[s][0] for s in both)
    total_theirs = sum(ccusage[s][0] for s in both)
    print(f"sessions: ours {len(mine)}, ccusage {len(ccusage)}, in both {len(both)}")
    print(f"total USD: ours {total_ours:.6f}, ccusage {total_theirs:.6f}", end=" ")
    relative = abs(total_ours - total_theirs) / total_theirs if total_theirs else 0.0
    print(f"(difference {relative:.6%})")
    worst = max(both, key=lambda s: abs(mine[s][0] - ccusage[s][0]), default=None)
    if worst is not None:
        print(f"largest session difference: {worst} ours {mine[worst][0]:.6f} ccusage ", end="")
        print(f"{ccusage[worst][0]:.6f} (models: {', '.join(ccusage[worst][1])})")
    apart = [s for s in both if abs(mine[s][0] - ccusage[s][0]) > 0.01 * max(ccusage[s][0], 1e-9)]
    print(f"sessions more than 1% apart: {len(apart)}")
    for session in apart[:20]:
        print(f"  {session}: ours {mine[session][0]:.6f} ccusage {ccusage[session][0]:.6f}", end="")
        print(f" models {', '.join(ccusage[session][1])}")
    return 0 if relative <= 0.01 else 1


if __name__ == "__main__":
    sys.exit(main())

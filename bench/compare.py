"""Cold catch-up, warm restart, ccusage and the decode floor, side by side in one run.

    python bench/generate.py --out /tmp/cae-history        # once: the history to read
    python bench/compare.py --history /tmp/cae-history --repeat 3

Each round runs, one after another on the same files (page cache warm): the exporter's
`metrics` over Claude Code's history with an empty cache (cold) and again with the cache the cold
run wrote (warm), `serve` started on that cache until `/-/ready` answers, ccusage
(`npx ccusage@20.0.24 session --json --offline`, `CLAUDE_CONFIG_DIR` = the same history), and
the decode floor (one thread reading every line of every file and decoding it with msgspec). The
median of the rounds is printed with each command; then the token totals of the exporter and
ccusage, side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CCUSAGE = "ccusage@20.0.24"
EXPORTER = [sys.executable, "-m", "exporter"]
_TOKENS = re.compile(r'^coding_agent_tokens_total\{agent="([^"]+)",.*type="(\w+)"\} (\S+)$', re.M)


def claude_only(history: Path) -> list[str]:
    return ["--claude.home", str(history / "claude"), *_others_off("claude-code")]


def every_home(history: Path) -> list[str]:
    """Flags for every generated home (bench/generate.py makes no OpenCode or Vibe history)."""
    names = ("claude", "codex", "gemini", "pi", "omp", "grok")
    pairs = [x for name in names for x in (f"--{name}.home", str(history / name))]
    return [*pairs, "--no-harness.opencode", "--no-harness.vibe"]


def _others_off(keep: str) -> list[str]:
    from exporter.harnesses import HARNESSES

    return [f"--no-harness.{name}" for name in HARNESSES if name != keep]


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) and stdout of one command."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    out = process.stdout.read() if process.stdout else b""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {process.returncode}")
    return seconds, usage.ru_maxrss / 1024, out.decode()


def decode_floor(history: Path) -> tuple[float, float, str]:
    code = (
        "import msgspec,os,sys\n"
        "d=msgspec.json.Decoder().decode\n"
        "for top,_,names in os.walk(sys.argv[1]):\n"
        " for n in names:\n"
        "  if n.endswith('.jsonl'):\n"
        "   with open(os.path.join(top,n),'rb') as f:\n"
        "    for line in f:\n"
        "     line.strip() and d(line)\n"
    )
    return timed([sys.executable, "-c", code, str(history / "claude")])


def ready_seconds(args: list[str], state: Path) -> float:
    """`serve` started on a warm cache: seconds until `/-/ready` answers 200."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    listen = ["--web.listen-address", f"127.0.0.1:{port}"]
    argv = [*EXPORTER, *args, "--state.dir", str(state), *listen]
    started = time.perf_counter()
    process = subprocess.Popen([*argv, "serve"], stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - started < 300:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return time.perf_counter() - started
            except OSError:
                time.sleep(0.01)
        raise SystemExit("serve never became ready")
    finally:
        process.terminate()
        process.wait()


def tokens_of(exposition: str, agent: str) -> dict[str, int]:
    totals: dict[str, int] = {}
    for found, kind, value in _TOKENS.findall(exposition):
        if found == agent:
            totals[kind] = totals.get(kind, 0) + int(float(value))
    return totals


def ccusage_tokens(out: str) -> dict[str, int]:
    data = json.loads(out)
    t = data["totals"]
    return {
        "input": t["inputTokens"],
        "output": t["outputTokens"],
        "cache_write": t["cacheCreationTokens"],
        "cache_read": t["cacheReadTokens"],
    }


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--history", type=Path, default=Path("/tmp/cae-history"))
    args.add_argument("--repeat", type=int, default=3)
    ns = args.parse_args()
    history: Path = ns.history
    flags = claude_only(history)
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(history / "claude")}
    ccusage = ["npx", "-y", CCUSAGE, "session", "--json", "--offline"]
    rows: dict[str, list[tuple[float, float]]] = {}
    outputs: dict[str, str] = {}
    for _ in range(ns.repeat):
        state = Path(tempfile.mkdtemp(prefix="cae-bench-state-"))
        try:
            cold = [*EXPORTER, *flags, "--state.dir", str(state), "metrics"]
            runs = {
                "exporter metrics, cold (empty cache)": lambda c=cold: timed(c),
                "exporter metrics, warm (second start)": lambda c=cold: timed(c),
                "exporter serve, warm: start to /-/ready": lambda s=state: (
                    ready_seconds(flags, s),
                    0.0,
                    "",
                ),
                f"ccusage {CCUSAGE.split('@')[1]} session --json --offline": lambda: timed(
                    ccusage, env
                ),
                "decode floor (msgspec, one thread)": lambda: decode_floor(history),
            }
            for name, run in runs.items():
                seconds, rss, out = run()
                rows.setdefault(name, []).append((seconds, rss))
                outputs[name] = out or outputs.get(name, "")
        finally:
            shutil.rmtree(state, ignore_errors=True)
    size = sum(p.stat().st_size for p in (history / "claude").rglob("*.jsonl"))
    print(f"Claude Code history: {history / 'claude'} ({size / 1e6:.0f} MB of JSONL)")
    print(f"median of {ns.repeat} rounds (each round runs every line once, in this order)")
    for name, values in rows.items():
        seconds = statistics.median(v[0] for v in values)
        rss = statistics.median(v[1] for v in values)
        each = " ".join(f"{v[0]:.2f}" for v in values)
        print(f"  {name:48} {seconds:7.2f} s  (runs: {each})  peak RSS {rss:6.1f} MB")
    print("commands:")
    print(f"  {sys.executable} -m exporter {' '.join(flags)} --state.dir STATE metrics")
    print(f"  CLAUDE_CONFIG_DIR={history / 'claude'} {' '.join(ccusage)}")
    ours = tokens_of(outputs["exporter metrics, cold (empty cache)"], "claude-code")
    theirs = ccusage_tokens(outputs[f"ccusage {CCUSAGE.split('@')[1]} session --json --offline"])
    print("token totals, Claude Code:        exporter         ccusage      difference")
    for kind in ("input", "output", "cache_read", "cache_write"):
        a, b = ours.get(kind, 0), theirs[kind]
        print(f"  {kind:30} {a:15,} {b:15,} {a - b:+15,}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()

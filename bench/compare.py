"""Cold catch-up, warm restart, ccusage and the decode floor, side by side in one run.

    python bench/generate.py --out /tmp/cae-history        # once: the history to read
    python bench/compare.py --history /tmp/cae-history --repeat 3
    python bench/generate.py --shape many-small --out /tmp/cae-many   # a heavy user's: 27,000
    python bench/compare.py --history /tmp/cae-many --repeat 3        # journals, ~400,000 records

Each round runs, one after another on the same files (page cache warm): the exporter's
`metrics` over Claude Code's history with an empty cache (cold: with as many catch-up workers as
the load leaves idle cores), cold again in one process and with one worker whatever the load
(`CODING_AGENT_EXPORTER_CATCHUP_WORKERS=0`, `=1`: the three expositions must be identical, less
the process's own metrics) and again with the cache the cold run wrote (warm),
`serve` started on that cache until `/-/ready` answers, ccusage through its installed launcher
as its users run it (`<prefix>/node_modules/.bin/ccusage session --json --offline`,
`CLAUDE_CONFIG_DIR` = the same history; installed once with `npm install --prefix
~/.cache/coding-agent-exporter/ccusage-20.0.24 ccusage@20.0.24`: `npx` would add ~0.7 s to every
run), and the decode floor (one thread reading every line of every file and decoding it with
msgspec). `--skip-one-process` and `--skip-forced-worker` leave those two cold rows out. The
package is byte-compiled first, as an installed one is, and the start floor measured (the median
of `--floor-runs` runs of `python -c pass` and of
`python -c "import coding_agent_exporter.runtime.cli"`).

The median of the rounds is printed with each command, with the CPU seconds it used (workers
included) and the load average before it (the machine may be shared); then each row's cost per
record and per file (records: lines of every `.jsonl` under the Claude home; files: those
`.jsonl` files; "net": less the import floor for the exporter, less the bare interpreter for the
decode floor), the ratios (ours cold / ccusage, ours cold / decode floor, ccusage / ours
warm, ccusage / serve ready) and the token totals of the exporter and ccusage, side by side.
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
import threading
import time
import urllib.request
from pathlib import Path

CCUSAGE = "ccusage@20.0.24"
CCUSAGE_PREFIX = Path.home() / ".cache" / "coding-agent-exporter" / "ccusage-20.0.24"
EXPORTER = [sys.executable, "-m", "coding_agent_exporter"]
LAST_CPU, LOAD = [0.0], [0.0]
WORKERS = "CODING_AGENT_EXPORTER_CATCHUP_WORKERS"
_OWN = re.compile(r"^(process_|python_gc_)", re.M)
_TOKENS = re.compile(r'^coding_agent_tokens_total\{agent="([^"]+)",.*type="(\w+)"\} (\S+)$', re.M)


def ccusage_launcher() -> Path:
    """ccusage's installed launcher (`npm install --prefix CCUSAGE_PREFIX`, once)."""
    launcher = CCUSAGE_PREFIX / "node_modules" / ".bin" / "ccusage"
    package = CCUSAGE_PREFIX / "node_modules" / "ccusage" / "package.json"
    wanted = CCUSAGE.split("@")[1]
    installed = json.loads(package.read_text()).get("version") if package.is_file() else None
    if launcher.exists() and installed == wanted:
        return launcher
    install = ["npm", "install", "--prefix", str(CCUSAGE_PREFIX), CCUSAGE]
    print(f"installing: {' '.join(install)}", flush=True)
    subprocess.run(install, check=True, stdout=subprocess.DEVNULL)
    if not launcher.exists():
        raise SystemExit(f"{launcher} missing after {' '.join(install)}")
    return launcher


def history_counts(claude: Path) -> tuple[int, int, int]:
    """Files (`.jsonl` under the Claude home), records (their lines) and bytes."""
    files = records = size = 0
    for path in claude.rglob("*.jsonl"):
        data = path.read_bytes()
        files += 1
        records += data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        size += len(data)
    return files, records, size


def start_floor(runs: int) -> dict[str, tuple[float, float]]:
    """Median wall and CPU seconds of `runs` starts: a bare interpreter, then the CLI's imports."""
    floors = {}
    for name, code in (
        ("python -c pass", "pass"),
        (_IMPORT, "import coding_agent_exporter.runtime.cli"),
    ):
        walls, cpus = [], []
        for _ in range(runs):
            walls.append(timed([sys.executable, "-c", code])[0])
            cpus.append(LAST_CPU[0])
        floors[name] = (statistics.median(walls), statistics.median(cpus))
    LAST_CPU[0] = 0.0
    return floors


def _costs(seconds: float, records: int, files: int) -> str:
    return f"{seconds / records * 1e6:8.2f} µs/record {seconds / files * 1e6:8.1f} µs/file"


_IMPORT = 'python -c "import coding_agent_exporter.runtime.cli"'


def claude_only(history: Path) -> list[str]:
    return ["--claude.home", str(history / "claude"), *_others_off("claude-code")]


def every_home(history: Path) -> list[str]:
    """Flags for every home `bench/generate.py` makes."""
    names = ("claude", "codex", "gemini", "pi", "omp", "grok", "vibe", "opencode")
    return [x for name in names for x in (f"--{name}.home", str(history / name))]


def _others_off(keep: str) -> list[str]:
    from coding_agent_exporter.harnesses import HARNESSES

    return [f"--no-harness.{name}" for name in HARNESSES if name != keep]


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) and stdout of one command (its CPU seconds: `LAST_CPU`).

    The peak is the command's own `VmHWM`, read every 10 ms while it runs: `wait4`'s
    `ru_maxrss` would keep this process's own size from before the command's `exec`."""
    LOAD[0] = os.getloadavg()[0]
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    peak, done = [0.0], threading.Event()
    watcher = threading.Thread(target=_watch_peak, args=(process.pid, peak, done))
    watcher.start()
    out = process.stdout.read() if process.stdout else b""
    done.set()
    watcher.join()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    LAST_CPU[0] = usage.ru_utime + usage.ru_stime  # with the children it waited for
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {process.returncode}")
    return seconds, peak[0], out.decode()


def _watch_peak(pid: int, peak: list[float], done: threading.Event) -> None:
    status = Path(f"/proc/{pid}/status")
    while True:
        try:
            text = status.read_text()
        except OSError:
            return
        for line in text.splitlines():
            if line.startswith("VmHWM:"):
                peak[0] = max(peak[0], int(line.split()[1]) / 1024)
        if done.wait(0.01):
            return


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


def own_less(exposition: str) -> list[str]:
    """The exposition less the process's own metrics (CPU, memory, GC: never the same)."""
    return [line for line in exposition.splitlines() if not _OWN.match(line)]


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


def compiled() -> None:
    """Byte-compile the package first, as `pip install` does: a start then loads `.pyc` files
    instead of compiling every module (this machine sets PYTHONDONTWRITEBYTECODE, so nothing
    else would write them; ~0.2 s of CPU per start)."""
    import compileall

    compileall.compile_dir(
        Path(__file__).resolve().parent.parent / "coding_agent_exporter", quiet=1
    )
    print("byte-compiled coding_agent_exporter/ (as an installed package is)")


COLD = "exporter metrics, cold (empty cache)"
ONE_PROCESS = "exporter metrics, cold, one process"
ONE_WORKER = "exporter metrics, cold, one worker (forced)"
WARM = "exporter metrics, warm (second start)"
READY = "exporter serve, warm: start to /-/ready"
CCUSAGE_ROW = f"ccusage {CCUSAGE.split('@')[1]} session --json --offline"
FLOOR = "decode floor (msgspec, one thread)"


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--history", type=Path, default=Path("/tmp/cae-history"))
    args.add_argument("--repeat", type=int, default=3)
    args.add_argument("--floor-runs", type=int, default=5, help="starts per start-floor median")
    args.add_argument("--skip-one-process", action="store_true", help="no WORKERS=0 cold row")
    args.add_argument("--skip-forced-worker", action="store_true", help="no WORKERS=1 cold row")
    ns = args.parse_args()
    history: Path = ns.history
    compiled()
    flags = claude_only(history)
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(history / "claude")}
    ccusage = [str(ccusage_launcher()), "session", "--json", "--offline"]
    files, records, size = history_counts(history / "claude")
    if not files:
        raise SystemExit(f"no .jsonl under {history / 'claude'}")
    floors = start_floor(ns.floor_runs)
    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    outputs: dict[str, str] = {}
    for _ in range(ns.repeat):
        state = Path(tempfile.mkdtemp(prefix="cae-bench-state-"))
        try:
            cold = [*EXPORTER, *flags, "--state.dir", str(state), "metrics"]
            one = [*EXPORTER, *flags, "--state.dir", str(state / "one"), "metrics"]
            two = [*EXPORTER, *flags, "--state.dir", str(state / "two"), "metrics"]
            runs = {
                COLD: lambda c=cold: timed(c),
                ONE_PROCESS: lambda c=one: timed(c, {**os.environ, WORKERS: "0"}),
                ONE_WORKER: lambda c=two: timed(c, {**os.environ, WORKERS: "1"}),
                WARM: lambda c=cold: timed(c),
                READY: lambda s=state: (ready_seconds(flags, s), 0.0, ""),
                CCUSAGE_ROW: lambda: timed(ccusage, env),
                FLOOR: lambda: decode_floor(history),
            }
            if ns.skip_one_process:
                del runs[ONE_PROCESS]
            if ns.skip_forced_worker:
                del runs[ONE_WORKER]
            for name, run in runs.items():
                seconds, rss, out = run()
                rows.setdefault(name, []).append((seconds, rss, LAST_CPU[0], LOAD[0]))
                LAST_CPU[0] = 0.0
                outputs[name] = out or outputs.get(name, "")
            cold_runs = [outputs[name] for name in runs if ", cold" in name]
            if any(own_less(out) != own_less(cold_runs[0]) for out in cold_runs):
                raise SystemExit("the cold expositions differ (one process, workers)")
        finally:
            shutil.rmtree(state, ignore_errors=True)
    print(
        f"Claude Code history: {history / 'claude'} ({size / 1e6:.0f} MB of JSONL, "
        f"{files:,} files, {records:,} records)"
    )
    print(f"start floor (median of {ns.floor_runs} runs each):")
    for name, (wall, cpu) in floors.items():
        print(f"  {name:48} {wall:7.3f} s  CPU {cpu:5.3f} s")
    print(f"median of {ns.repeat} rounds (each round runs every line once, in this order)")
    medians: dict[str, float] = {}
    for name, values in rows.items():
        seconds = medians[name] = statistics.median(v[0] for v in values)
        rss = statistics.median(v[1] for v in values)
        cpu = statistics.median(v[2] for v in values)
        each = " ".join(f"{v[0]:.2f}" for v in values)
        load = " ".join(f"{v[3]:.1f}" for v in values)
        print(
            f"  {name:48} {seconds:7.2f} s  (runs: {each}; load before: {load})  "
            f"CPU {cpu:5.2f} s  peak RSS {rss:6.1f} MB"
        )
    cold_names = [name for name in (COLD, ONE_PROCESS, ONE_WORKER) if name in rows]
    if len(cold_names) > 1:
        print("  cold runs: identical expositions (less process_* and python_gc_*)")
    imports, bare = floors[_IMPORT][0], floors["python -c pass"][0]
    print(
        f"cost per record ({records:,} records) and per file ({files:,} files); 'net': less the "
        f"start floor (exporter rows: the import floor, {imports:.3f} s; decode floor: the bare "
        f"interpreter, {bare:.3f} s)"
    )
    for name in [*cold_names, WARM, CCUSAGE_ROW, FLOOR]:
        seconds = medians[name]
        line = f"  {name:48} {_costs(seconds, records, files)}"
        start = imports if name.startswith("exporter") else bare if name == FLOOR else None
        if start is not None:
            line += f"   net {_costs(seconds - start, records, files)}"
        print(line)
    print("ratios:")
    for label, top, bottom in (
        ("ours cold / ccusage", COLD, CCUSAGE_ROW),
        ("ours cold / decode floor", COLD, FLOOR),
        ("ccusage / ours warm", CCUSAGE_ROW, WARM),
        ("ccusage / serve ready", CCUSAGE_ROW, READY),
    ):
        print(f"  {label:30} {medians[top] / medians[bottom]:7.2f}x")
    print("commands:")
    module = "coding_agent_exporter"
    print(f"  {sys.executable} -m {module} {' '.join(flags)} --state.dir STATE metrics")
    print(f"  CLAUDE_CONFIG_DIR={history / 'claude'} {' '.join(ccusage)}")
    ours = tokens_of(outputs[COLD], "claude-code")
    theirs = ccusage_tokens(outputs[CCUSAGE_ROW])
    print("token totals, Claude Code:        exporter         ccusage      difference")
    for kind in ("input", "output", "cache_read", "cache_write"):
        a, b = ours.get(kind, 0), theirs[kind]
        print(f"  {kind:30} {a:15,} {b:15,} {a - b:+15,}")
    same = all(ours.get(kind, 0) == theirs[kind] for kind in theirs)
    print("  token totals: identical" if same else "  token totals: DIFFERENT")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main()

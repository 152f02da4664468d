"""Idle cost and RSS of `serve` over a whole history: CPU seconds used in 60 s with no activity.

    python bench/idle.py --history /tmp/cae-history --seconds 60

Starts `serve` on the generated homes with its own state folder, waits for `/-/ready`, then
reads the process's CPU time (user + system, from /proc) at the start and the end of the idle
window, and its RSS after catch-up. Nothing is scraped meanwhile.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare import every_home


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--history", type=Path, default=Path("/tmp/cae-history"))
    args.add_argument("--seconds", type=float, default=60.0)
    args.add_argument("--port", type=int, default=10499)
    ns = args.parse_args()
    state = tempfile.mkdtemp(prefix="cae-idle-state-")
    argv = [
        sys.executable,
        "-m",
        "coding_agent_exporter",
        *every_home(ns.history),
        "--state.dir",
        state,
    ]
    argv += ["--web.listen-address", f"127.0.0.1:{ns.port}", "serve"]
    process = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    try:
        started = time.perf_counter()
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ns.port}/-/ready", timeout=1):
                    break
            except OSError:
                time.sleep(0.05)
        ready = time.perf_counter() - started
        time.sleep(2.0)  # the cache is written just after ready
        before, rss = cpu_seconds(process.pid), rss_mb(process.pid)
        time.sleep(ns.seconds)
        used = cpu_seconds(process.pid) - before
    finally:
        process.terminate()
        process.wait()
    print(f"command: {' '.join(argv)}")
    print(f"cold start to ready {ready:.1f} s; RSS after catch-up {rss:.1f} MB")
    share = 100 * used / ns.seconds
    print(f"idle: {used:.2f} CPU s in {ns.seconds:.0f} s = {share:.2f}% of a core")


if __name__ == "__main__":
    main()

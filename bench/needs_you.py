"""Needs-you at a cold start: seconds from starting `serve` to `/metrics` showing a waiting session.

    python bench/generate.py --shape many-small --out /tmp/cae-many-small   # once
    python bench/needs_you.py --history /tmp/cae-many-small --repeat 5

The history's Claude Code home is linked file by file into a scratch home (hard links: the same
files, nothing copied), whose `sessions/` holds one live index entry (`sessions/<pid>.json`, a
`sleep` standing in for the agent's process) saying that the history's last session waits for
the user, as Claude Code writes it. Each run starts `serve` over that home with an empty state
folder (a cold start: the whole history is still to be read) and asks `/metrics` every few
milliseconds until the session's `coding_agent_session_state` series says `needs_user` (with
`--ready`, then `/-/ready` until it answers: how long the whole catch-up took). Prints each
run's seconds and their median, with the load average before each run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(1, str(ROOT))
from compare import EXPORTER, claude_only  # noqa: E402

from tests.backends import free_port, write_index  # noqa: E402

POLL = 0.005
"""Seconds between two asks of `/metrics` (and of the port, until it answers)."""
DEADLINE = 600.0


def linked_home(history: Path, scratch: Path) -> Path:
    """`history`'s `claude` home, its files hard-linked (copied where links cannot be made)."""
    home = scratch / "claude"

    def link(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    shutil.copytree(history / "claude", home, copy_function=link)
    (home / "sessions").mkdir(exist_ok=True)
    return home


def last_session(home: Path) -> str:
    """The id of the lead journal read last by a catch-up (the deepest name, then the latest)."""
    journals = sorted((home / "projects").glob("*/*.jsonl"))
    if not journals:
        raise SystemExit(f"no journal under {home / 'projects'}")
    return journals[-1].stem


def waiting(body: str, session: str) -> bool:
    needle = f'session_id="{session}"'
    return any(
        line.startswith("coding_agent_session_state{") and needle in line and "needs_user" in line
        for line in body.splitlines()
    )


def get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            body: bytes = answer.read()
            return body.decode()
    except OSError:
        return None


def one_run(home: Path, session: str, scratch: Path, ready: bool) -> tuple[float, float]:
    """Seconds to the session shown waiting, and to `/-/ready` (0 unless asked for)."""
    state = Path(tempfile.mkdtemp(prefix="state-", dir=scratch))
    port = free_port()
    argv = [*EXPORTER, *claude_only(home.parent), "--state.dir", str(state)]
    argv += ["--web.listen-address", f"127.0.0.1:{port}", "serve"]
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        shown = None
        while time.perf_counter() - started < DEADLINE:
            if process.poll() is not None:
                raise SystemExit(f"serve exited {process.returncode}")
            body = get(url + "/metrics")
            if body is not None and waiting(body, session):
                shown = time.perf_counter() - started
                break
            time.sleep(POLL)
        if shown is None:
            raise SystemExit("the session never showed as waiting")
        if not ready:
            return shown, 0.0
        while get(url + "/-/ready") is None and time.perf_counter() - started < DEADLINE:
            time.sleep(0.05)
        return shown, time.perf_counter() - started
    finally:
        process.kill()  # a SIGTERM would wait for the catch-up to end
        process.wait()
        shutil.rmtree(state, ignore_errors=True)


def main() -> None:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--history", type=Path, default=Path("/tmp/cae-many-small"))
    args.add_argument("--repeat", type=int, default=5)
    args.add_argument("--ready", action="store_true", help="also time /-/ready (the catch-up)")
    ns = args.parse_args()
    with tempfile.TemporaryDirectory(prefix="cae-needs-you-") as name:
        scratch = Path(name)
        home = linked_home(ns.history, scratch)
        session = last_session(home)
        agent = subprocess.Popen(["sleep", "3600"])  # stands in for the agent's process
        try:
            write_index(home, agent, session, status="waiting", waitingFor="permission prompt")
            runs = []
            for _ in range(ns.repeat):
                load = psutil.getloadavg()[0]
                shown, ready = one_run(home, session, scratch, ns.ready)
                runs.append(shown)
                after = f"  ready {ready:6.2f} s" if ns.ready else ""
                print(f"needs-you {shown:6.3f} s{after}  (load {load:.1f})", flush=True)
        finally:
            agent.kill()
            agent.wait()
    print(f"median needs-you of {len(runs)}: {statistics.median(runs):.3f} s")
    flag = " --ready" if ns.ready else ""
    print(f"python bench/needs_you.py --history {ns.history} --repeat {ns.repeat}{flag}")


if __name__ == "__main__":
    main()

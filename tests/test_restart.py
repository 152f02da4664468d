"""The exporter killed with SIGKILL at random moments of its catch-up, then started again: the
history counters come out exactly as a clean run's, and a damaged state file is discarded."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from exporter.checkpoint import Checkpoint

from .backends import free_port, get, wait_for

BENCH = Path(__file__).resolve().parent.parent / "bench"


def counters(text: str) -> list[str]:
    """The history counters of an exposition (live gauges and exporter health left out)."""
    keep = (
        "coding_agent_tokens_total",
        "coding_agent_messages_total",
        "coding_agent_turns_total",
        "coding_agent_tool_calls_total",
        "coding_agent_subagents_total",
        "coding_agent_sessions_total",
        "coding_agent_turn_duration_seconds",
        "coding_agent_tool_call_duration_seconds",
    )
    return sorted(line for line in text.splitlines() if line.startswith(keep))


def test_sigkill_during_catch_up_then_restart_gives_a_clean_run(tmp_path: Path) -> None:
    home = tmp_path / "claude"
    sys.path.insert(0, str(BENCH))
    try:
        from catchup import build  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(BENCH))
    build(home, 300)  # recorded journals under fresh ids: catch-up takes a little while
    argv = [sys.executable, "-m", "exporter", "--claude.home", str(home)]
    clean = subprocess.run([*argv, "metrics"], capture_output=True, text=True, check=True).stdout
    rng = random.Random(2026)
    for _ in range(3):
        port = free_port()
        process = subprocess.Popen(
            [*argv, "serve", "--web.listen-address", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.2, 1.2))  # a random moment of the catch-up (or after it)
        process.send_signal(signal.SIGKILL)
        process.wait()
    port = free_port()
    process = subprocess.Popen(
        [*argv, "serve", "--web.listen-address", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for("ready", lambda: get(url + "/-/ready")[0] == 200)
        assert counters(get(url + "/metrics")[1]) == counters(clean)
        assert len(counters(clean)) > 50
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0


def test_a_damaged_checkpoint_is_discarded(tmp_path: Path) -> None:
    (tmp_path / "traces-sent.json").write_text('{"saved_at": 12, "sent": {"ab')  # cut short
    checkpoint = Checkpoint(tmp_path)
    assert checkpoint.sent == {} and checkpoint.saved_at is None
    checkpoint.add(0xAB, 100.0)
    checkpoint.save(200.0)  # written whole again (a temporary file, then a rename)
    assert 0xAB in Checkpoint(tmp_path)
    assert not list(tmp_path.glob("*.tmp"))

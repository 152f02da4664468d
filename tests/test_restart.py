"""The exporter killed with SIGKILL during its catch-up, and while it follows live sessions that
keep writing, then started again: the history counters come out exactly as a clean run's, every
span is sent exactly once, and a damaged state file is discarded.

Each kill comes at a point the exporter itself signals, never at a moment drawn from the clock:
once its /metrics says it has read a given number of records (`..._records_total`), or once its
catch-up cache is written. So each run of a test kills at the same points of the work."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from coding_agent_exporter.traces.checkpoint import Checkpoint

from .backends import free_port, get, wait_for
from .otlp_sink import HttpSink

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))
try:
    from load import Load, history, recount  # type: ignore[import-not-found]
finally:
    sys.path.remove(str(BENCH))


def records_read(text: str) -> float:
    """`coding_agent_exporter_records_total` of an exposition, every agent added up."""
    found = re.findall(r"^coding_agent_exporter_records_total\{[^}]*\} (\S+)$", text, re.M)
    return sum(float(value) for value in found)


def kill_once(process: subprocess.Popen[bytes], url: str, point: Callable[[str], bool]) -> None:
    """SIGKILL `process` as soon as `point(url)` holds (polled every 10 ms, 45 s at most)."""
    end = time.monotonic() + 45.0
    while not point(url):
        assert time.monotonic() < end and process.poll() is None, "the kill point never came"
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()


def has_read(count: float) -> Callable[[str], bool]:
    """The kill point: the exporter at `url` has read at least `count` records."""

    def point(url: str) -> bool:
        try:
            status, body = get(url + "/metrics")
        except OSError:
            return False  # not listening yet
        return status == 200 and records_read(body) >= count

    return point


@pytest.mark.timeout(300)
def test_sigkill_during_catch_up_then_restart_gives_a_clean_run(tmp_path: Path) -> None:
    """Killed once a quarter, a half and three quarters of the records were read (the catch-up
    takes ~1.5 s here; on a faster machine a point may come only after it, which changes
    nothing asserted), then once its catch-up cache was written; the start after that reads
    the cache. Each start shows exactly a clean run's history counters."""
    home = tmp_path / "claude"
    sys.path.insert(0, str(BENCH))
    try:
        from catchup import build  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(BENCH))
    build(home, 300)  # recorded journals under fresh ids: catch-up takes a little while
    argv = [sys.executable, "-m", "coding_agent_exporter", "--claude.home", str(home)]
    clean = subprocess.run([*argv, "metrics"], capture_output=True, text=True, check=True).stdout
    total = records_read(clean)
    cache = Path(os.environ["XDG_STATE_HOME"]) / "coding-agent-exporter"
    points = [has_read(total * share) for share in (0.25, 0.5, 0.75)]
    points.append(lambda url: any(cache.glob("catch-up-*.cache")))  # written after the catch-up
    for point in points:
        port = free_port()
        process = subprocess.Popen(
            [*argv, "serve", "--web.listen-address", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        kill_once(process, f"http://127.0.0.1:{port}", point)
    assert total > 10_000 and any(cache.glob("catch-up-*.cache"))
    port = free_port()
    process = subprocess.Popen(
        [*argv, "serve", "--web.listen-address", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for("ready", lambda: get(url + "/-/ready")[0] == 200)
        assert history(get(url + "/metrics")[1]) == history(clean)
        assert len(history(clean)) > 50
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


def serve(home: Path, port: int) -> tuple[subprocess.Popen[bytes], str]:
    """`serve` over `home`, once it is ready."""
    argv = [sys.executable, "-m", "coding_agent_exporter", "serve", "--claude.home", str(home)]
    process = subprocess.Popen(
        [*argv, "--web.listen-address", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    wait_for("ready", lambda: get(url + "/-/ready")[0] == 200)
    return process, url


def span_ids(path: Path) -> set[tuple[str, str]]:
    """(trace id, span id) of every span in an OTLP/JSON lines file."""
    return {
        (span["traceId"], span["spanId"])
        for line in path.read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    }


@pytest.mark.timeout(300)
def test_sigkill_while_following_live_sessions_then_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, probes: str
) -> None:
    """Six live sessions (sub-agents included) keep writing while the exporter, sending each turn
    as a trace, is killed three times, each once it has read 200 records more than at its
    start, and started again. At the end: the counters of a recount, the checkpoint whole after
    every kill, and every span of a one-shot `traces` run over the same files received exactly
    once, once the turns open at the last stop were sent by one more start (a turn's spans go
    when it is complete).
    With Linux's own probes, then with the portable ones (watchdog's own observer, the live
    files followed by the stat follower, reads by seek and read)."""
    sink = HttpSink()
    state = tmp_path / "state"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    monkeypatch.setenv("CODING_AGENT_EXPORTER_STATE_DIR", str(state))
    home = tmp_path / "claude"
    load = Load(home, sessions=6, rate=8.0)
    writer = threading.Thread(target=load.run, args=(25.0,))
    try:
        process, url = serve(home, free_port())
        writer.start()  # turns from now on are traces
        for _ in range(3):
            kill_once(process, url, has_read(records_read(get(url + "/metrics")[1]) + 200))
            checkpoint = state / "traces-sent.json"
            if checkpoint.exists():  # whole, whenever the kill came
                assert {"saved_at", "sent"} <= set(json.loads(checkpoint.read_text()))
            process, url = serve(home, free_port())
        writer.join()
        clean = recount(home)
        metrics = url + "/metrics"
        wait_for("a recount's counters", lambda: history(get(metrics)[1]) == history(clean))
    finally:
        process.send_signal(signal.SIGTERM)  # sends what is still queued
        process.wait(timeout=20)
        load.close()
    try:
        everything = tmp_path / "all.jsonl"
        env = {k: v for k, v in os.environ.items() if k != "OTEL_EXPORTER_OTLP_ENDPOINT"}
        env["CODING_AGENT_EXPORTER_STATE_DIR"] = str(tmp_path / "fresh-state")
        command = [
            sys.executable,
            "-m",
            "coding_agent_exporter",
            "traces",
            "--claude.home",
            str(home),
        ]
        once = [*command, "--since", "1h", "--output", str(everything)]
        subprocess.run(once, check=True, env=env)
        everything_ids = span_ids(everything)
        # the turns still open at the last stop are sent, whole, by the next start once they end
        process, url = serve(home, free_port())
        try:
            wait_for(
                "every span, the turns open at the last stop's too",
                lambda: everything_ids <= {(s.trace_id, s.span_id) for s in sink.spans},
            )
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=20)
    finally:
        sink.close()
    sent = Counter((s.trace_id, s.span_id) for s in sink.spans)
    assert sent and max(sent.values()) == 1, [k for k, n in sent.items() if n > 1]
    assert set(sent) == everything_ids, (len(set(sent) - everything_ids), len(everything_ids))

"""The exporter's own state folder under attack and fault (issue #34, points 8 to 10): one
exporter per folder, nothing a kill left behind kept, nothing readable by other users, nothing
renamed before it is on the disk, no code run from a crafted cache, a full disk said once."""

from __future__ import annotations

import io
import json
import logging
import os
import pickle
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard
from prometheus_client import generate_latest

from coding_agent_exporter.prometheus.collectors import StateErrorsCollector
from coding_agent_exporter.runtime.cache import MAGIC
from coding_agent_exporter.runtime.dormant import Sleepers
from coding_agent_exporter.sources import statedir
from coding_agent_exporter.traces.checkpoint import Checkpoint

from .backends import free_port, get, wait_for
from .test_cache import INTERACTIVE, app, cache_files, exposition

POSIX = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")


def serve(state: Path, home: Path, *more: str) -> tuple[subprocess.Popen[bytes], str]:
    """`serve` over `home` with `state` as its folder; its log in `<state>.<n>.log`."""
    port = free_port()
    argv = [sys.executable, "-m", "coding_agent_exporter", "serve", "--claude.home", str(home)]
    argv += ["--state.dir", str(state), "--web.listen-address", f"127.0.0.1:{port}", *more]
    log = state.with_name(f"{state.name}.{port}.log")
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=out)
    process.log = log  # type: ignore[attr-defined]
    return process, f"http://127.0.0.1:{port}"


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0


# ---- 8. One exporter per state folder ------------------------------------------------


def test_a_second_exporter_on_the_same_state_folder_exits_2_naming_the_first(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    first, url = serve(state, INTERACTIVE)
    try:
        wait_for("first ready", lambda: get(url + "/-/ready")[0] == 200)
        second, _ = serve(state, INTERACTIVE)
        try:
            assert second.wait(timeout=60) == 2
        finally:  # one that ran on (the bug) is stopped, never left behind
            if second.poll() is None:
                second.kill()
                second.wait()
        said = second.log.read_text()  # type: ignore[attr-defined]
        assert f"pid {first.pid}" in said and str(state) in said, said
        assert (state / statedir.LOCK).read_text().strip() == str(first.pid)
        assert get(url + "/-/healthy")[0] == 200  # the first goes on
    finally:
        stop(first)
    third, url = serve(state, INTERACTIVE)  # the lock goes with its process
    try:
        wait_for("third ready", lambda: get(url + "/-/ready")[0] == 200)
    finally:
        stop(third)


def test_a_killed_exporter_s_lock_is_taken_by_the_next_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first, url = serve(state, INTERACTIVE)
    wait_for("first ready", lambda: get(url + "/-/ready")[0] == 200)
    first.send_signal(signal.SIGKILL)
    first.wait()
    second, url = serve(state, INTERACTIVE)
    try:
        wait_for("second ready", lambda: get(url + "/-/ready")[0] == 200)
        assert (state / statedir.LOCK).read_text().strip() == str(second.pid)
    finally:
        stop(second)


# ---- 9. State left or exposed --------------------------------------------------------


def test_temporary_files_a_kill_left_are_removed_at_start(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "traces-spool").mkdir(parents=True)
    left = [
        state / "catch-up-0123456789abcdef.cache.4242.tmp",
        state / "traces-sent.json.4242.tmp",
        state / "traces-spool" / "0000000000000007.json.4242.tmp",
    ]
    for path in left:
        path.write_bytes(b"half written")
    kept = state / "notes.txt"  # not ours to judge: left alone
    kept.write_text("x")
    process, url = serve(state, INTERACTIVE)
    try:
        wait_for("ready", lambda: get(url + "/-/ready")[0] == 200)
        assert [p for p in left if p.exists()] == []
        assert kept.exists()
    finally:
        stop(process)


@POSIX
def test_the_state_folder_is_private_to_the_user(tmp_path: Path) -> None:
    """The folder 0700 and each file 0600, whatever the umask: the cache holds titles and
    folders, the spool prompts and tool output (with --traces.capture-content)."""
    state = tmp_path / "state"
    old = os.umask(0o022)
    try:
        process, url = serve(state, INTERACTIVE)
        try:
            wait_for("ready", lambda: get(url + "/-/ready")[0] == 200)
            wait_for("cache written", lambda: cache_files(state))
        finally:
            stop(process)
        checkpoint = Checkpoint(state)
        checkpoint.add(0xAB, 100.0)
        checkpoint.save(200.0)
    finally:
        os.umask(old)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    files = [p for p in state.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {
        statedir.LOCK,
        "traces-sent.json",
        cache_files(state)[0].name,
    }
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {
        p.name: "0o600" for p in files
    }


def test_every_state_file_is_on_the_disk_before_it_replaces_the_old_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cache, checkpoint, spool and OTLP delta each `fsync` their temporary file before the
    rename (the order of the real calls, on real files)."""
    from coding_agent_exporter.otlp.bridge import Delta
    from coding_agent_exporter.traces.spool import Spool

    calls: list[str] = []
    fsync, replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append("fsync") or fsync(fd))
    monkeypatch.setattr(
        os, "replace", lambda a, b: calls.append(f"replace {Path(b).name}") or replace(a, b)
    )
    app(INTERACTIVE, tmp_path)
    checkpoint = Checkpoint(tmp_path)
    checkpoint.add(0xAB, 100.0)
    checkpoint.save(200.0)
    Spool(tmp_path).put([])
    Delta(tmp_path, 0).commit({}, 1)
    renames = [i for i, call in enumerate(calls) if call.startswith("replace")]
    assert len(renames) == 4, calls
    for i in renames:
        assert calls[i - 1] == "fsync", calls


def crafted(body: object, header: bytes) -> bytes:
    out = io.BytesIO()
    out.write(MAGIC + header)
    writer = zstandard.ZstdCompressor().stream_writer(out, closefd=False)
    Sleepers().write(writer)
    pickle.dump(body, writer)
    writer.flush(zstandard.FLUSH_FRAME)
    return out.getvalue()


class RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return os.system, (f"touch {self.marker}",)


class GetsAttr:
    """A method reached with `getattr` on an object not the exporter's (a path's `touch`),
    then called: what a pickle escape is made of."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return self.marker.touch, ()  # pickled as getattr(PosixPath(marker), "touch")


@pytest.mark.parametrize("payload", ["os.system", "getattr"])
def test_a_cache_crafted_to_run_code_is_refused_counted_and_ignored(
    tmp_path: Path, payload: str, caplog: pytest.LogCaptureFixture
) -> None:
    reference = exposition(INTERACTIVE, None)
    state = tmp_path / "state"
    first = app(INTERACTIVE, state)
    assert first.engine.cache is not None
    (path,) = cache_files(state)
    marker = tmp_path / "ran"
    body = RunsCode(marker) if payload == "os.system" else GetsAttr(marker)
    path.write_bytes(crafted(body, first.engine.cache.header))
    with caplog.at_level(logging.WARNING):
        again = app(INTERACTIVE, state)
    assert not marker.exists()
    assert again.stats.state_errors["cache_refused"] == 1
    assert any("refused" in r.getMessage() for r in caplog.records)
    assert generate_latest(again.registry).decode() == reference  # caught up from the files
    shown = "".join(
        f"{s.name}{s.labels}={s.value}\n"
        for family in StateErrorsCollector(again.stats).collect()
        for s in family.samples
    )
    assert "{'reason': 'cache_refused'}=1\n" in shown
    assert app(INTERACTIVE, state).stats.state_errors["cache_refused"] == 0  # written anew


# ---- 10. A full disk repeats the checkpoint warning ----------------------------------


def test_a_checkpoint_that_cannot_be_written_is_said_once_per_error_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "state"
    blocked.write_text("a file where the folder should be")  # every save fails the same way
    checkpoint = Checkpoint(blocked)
    with caplog.at_level(logging.WARNING):
        for at in range(5):
            checkpoint.add(at, 100.0 + at)
            checkpoint.save(200.0 + at)
    said = [r for r in caplog.records if "traces checkpoint" in r.getMessage()]
    assert len(said) == 1 and checkpoint.errors["checkpoint_write"] == 5
    blocked.unlink()
    checkpoint.save(300.0)  # the disk is back: written, and the next failure said again
    assert json.loads((blocked / "traces-sent.json").read_text())["saved_at"] == 300.0
    (blocked / "traces-sent.json").unlink()
    blocked.rmdir()
    blocked.write_text("again")
    checkpoint.add(99, 150.0)
    with caplog.at_level(logging.WARNING):
        checkpoint.save(301.0)
    said = [r for r in caplog.records if "traces checkpoint" in r.getMessage()]
    assert len(said) == 2 and checkpoint.errors["checkpoint_write"] == 6


WINDOWS_HOLD = """
import fcntl, os, sys, types
from pathlib import Path
fake = types.ModuleType("msvcrt")  # msvcrt.locking's byte-range lock, made of a POSIX one
fake.LK_NBLCK = 2
def locking(fd, mode, nbytes):
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, nbytes, os.lseek(fd, 0, os.SEEK_CUR))
fake.locking = locking
sys.modules["msvcrt"] = fake
sys.platform = "win32"
from coding_agent_exporter.sources import statedir
try:
    held = statedir.hold(Path(sys.argv[1]))
except statedir.Held as error:
    print("held by", error.pid, flush=True)
    sys.exit(2)
print("holding", flush=True)
sys.stdin.read()
"""


@POSIX
def test_windows_lock_names_the_holder_too(tmp_path: Path) -> None:
    """The Windows branch (`msvcrt.locking`, a byte past the pid locked), run here with a
    byte-range lock in its place: the second process reads the first one's pid."""
    script = [sys.executable, "-c", WINDOWS_HOLD, str(tmp_path / "state")]
    first = subprocess.Popen(script, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert first.stdout is not None and first.stdout.readline() == b"holding\n"
        second = subprocess.run(script, capture_output=True, timeout=60)
        assert second.returncode == 2
        assert second.stdout.decode() == f"held by {first.pid}\n"
    finally:
        first.communicate(b"", timeout=60)

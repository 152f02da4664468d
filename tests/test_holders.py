"""Finding the processes that hold a file open (real processes, real /proc)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from coding_agent_exporter.sources.holders import holders

from .backends import holding, wait_for


def test_a_process_holding_the_file_is_found_until_it_exits(tmp_path: Path) -> None:
    rollout = tmp_path / "rollout-x.jsonl"
    rollout.write_text("")
    process = subprocess.Popen(holding(rollout, "fake-codex"), stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"held\n"
        found = holders([rollout], ["fake-codex"])
        assert [pid for pid, _ in found[rollout]] == [process.pid]
        assert holders([rollout], ["someone-else"]) == {}
    finally:
        process.kill()
        process.wait()
        assert process.stdout is not None
        process.stdout.close()
    assert wait_for("exit", lambda: holders([rollout], ["fake-codex"]) == {})


def test_our_own_open_files_do_not_count(tmp_path: Path) -> None:
    rollout = tmp_path / "rollout-y.jsonl"
    with rollout.open("a"):
        assert holders([rollout], ["python", "pytest"]) == {}

"""Sleeping files (`runtime.dormant.Sleepers`): pickles kept in compressed blocks, woken exactly
as they fell asleep, and written to the cache and read back as columns."""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import pytest

from coding_agent_exporter.harnesses.claude_code.harness import MetaReader
from coding_agent_exporter.harnesses.claude_code.journal import JournalReader
from coding_agent_exporter.runtime.dormant import BLOCK, NAMES_CHUNK, Sleepers
from coding_agent_exporter.sources.tail import DocResult, JsonDoc, JsonlTail


def _asleep(count: int) -> Sleepers:
    sleepers = Sleepers()
    for n in range(count):
        reader = JournalReader(f"session-{n}")
        reader.request_id = f"msg_{n}"
        sleepers.add(
            n % 3, f"/home/u/.claude/projects/p/{n}.jsonl", (1, n, 10 * n, n), JsonlTail(""), reader
        )
    return sleepers


def _check_woken(sleepers: Sleepers, at: int) -> None:
    tail, reader = sleepers.woken(at)
    assert tail.file == sleepers.names[at] == f"/home/u/.claude/projects/p/{at}.jsonl"
    assert (reader.session_id, reader.request_id) == (f"session-{at}", f"msg_{at}")
    assert sleepers.key(at) == (1, at, 10 * at, at)
    assert sleepers.sources[at] == at % 3


def test_a_full_block_is_compressed_and_every_file_wakes_as_it_slept() -> None:
    sleepers = _asleep(2 * BLOCK + 5)
    assert len(sleepers.blocks) == 2 and len(sleepers) == 2 * BLOCK + 5
    raw = sum(
        len(pickle.dumps((JsonlTail(""), JournalReader(f"session-{n}")), -1)) for n in range(BLOCK)
    )
    assert len(sleepers.blocks[0]) < raw / 4  # the same shapes again and again
    for at in (0, BLOCK - 1, BLOCK, 2 * BLOCK + 4, 3):  # sealed, sealed, next, open, back
        _check_woken(sleepers, at)


def test_the_columns_written_to_the_cache_read_back_the_same() -> None:
    sleepers = _asleep(NAMES_CHUNK + BLOCK + 1)  # names in two chunks, blocks and an open one
    out = io.BytesIO()
    sleepers.write(out)
    out.write(b"what follows")
    stream = io.BytesIO(out.getvalue())
    loaded = Sleepers.read(stream)
    assert stream.read() == b"what follows"
    assert loaded.names == sleepers.names and loaded.blocks == sleepers.blocks
    for at in (0, NAMES_CHUNK, len(loaded) - 1):
        _check_woken(loaded, at)


def test_an_empty_set_of_sleepers_reads_back_empty() -> None:
    out = io.BytesIO()
    Sleepers().write(out)
    assert len(Sleepers.read(io.BytesIO(out.getvalue()))) == 0


@pytest.mark.parametrize("cut", [3, 40, -1])
def test_columns_cut_short_are_refused(cut: int) -> None:
    out = io.BytesIO()
    _asleep(BLOCK + 1).write(out)
    with pytest.raises(ValueError):
        Sleepers.read(io.BytesIO(out.getvalue()[:cut]))


def test_columns_that_do_not_match_are_refused() -> None:
    sleepers = _asleep(5)
    sleepers.keys.append(7)
    out = io.BytesIO()
    sleepers.write(out)
    with pytest.raises(ValueError, match="keys or blocks"):
        Sleepers.read(io.BytesIO(out.getvalue()))


def test_a_document_sleeps_as_its_names_and_error_and_wakes_the_same(tmp_path: Path) -> None:
    """A sub-agent's `.meta.json` (half the files of a large history) sleeps as a few values:
    its follower's last result by its error alone, its reader by its three names."""
    good, bad = tmp_path / "agent-a1.meta.json", tmp_path / "agent-a2.meta.json"
    good.write_text('{"agentType": "Explore"}')
    bad.write_text("{not json")
    sleepers = Sleepers()
    for n, path in enumerate((good, bad)):
        doc = JsonDoc(path)
        doc.read()
        key = doc.settled()
        assert key is not None
        sleepers.add(0, str(path), key, doc, MetaReader("session", f"a{n}", run_id="run"))
    for at, error in ((0, None), (1, "invalid_json")):
        assert b"DocResult" not in sleepers.pickle(at)
        doc, reader = sleepers.woken(at)
        assert (doc.file, doc.settled()) == (sleepers.names[at], sleepers.key(at))
        assert doc.read() == DocResult(False, None, error, 0)  # unchanged: says it again
        names = (reader.session_id, reader.subagent_id, reader.run_id)
        assert names == ("session", f"a{at}", "run")

"""Decoding only the fields a reader looks at (`decode.lean`) changes nothing it says.

Every line of every recorded Claude Code journal is read twice: decoded whole, and decoded
against the harness's schema (tool arguments and results left undecoded); the reader's events
must be the same, less the content only spans with content capture show (`pool._lean`)."""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath

import pytest

from coding_agent_exporter.events import ToolCallEnded
from coding_agent_exporter.harnesses.claude_code.harness import ClaudeCode
from coding_agent_exporter.harnesses.claude_code.schema import Record
from coding_agent_exporter.runtime.pool import _lean, decoder
from coding_agent_exporter.sources.decode import lean, loads

FIXTURES = Path(__file__).parent.parent / "fixtures" / "claude-code"
decode = lean(Record)


def _home(path: Path) -> Path:
    return next(p for p in path.parents if p.name == "home")


JOURNALS = sorted(  # the journals the harness reads (not a workflow's own run journal)
    path
    for path in FIXTURES.glob("*/*/home/projects/**/*.jsonl")
    if ClaudeCode().match(PurePosixPath(path.relative_to(_home(path)))) == "jsonl"
)


def events(path: Path, decode_line: object) -> list[object]:
    harness = ClaudeCode()
    reader = harness.reader(PurePosixPath(path.relative_to(_home(path))))
    found: list[object] = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            record = decode_line(line)  # type: ignore[operator]
        except ValueError:
            continue
        found += [_lean(event) for event in reader.feed(record)]
    return found


def test_every_recorded_journal_is_read() -> None:
    assert len(JOURNALS) >= 39


@pytest.mark.parametrize("path", JOURNALS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_lean_decoding_gives_the_same_events(path: Path) -> None:
    assert events(path, decode) == events(path, loads)


def test_the_schema_is_used_only_without_content() -> None:
    assert decoder(ClaudeCode(), content=False) is decoder(ClaudeCode(), content=False)
    assert decoder(ClaudeCode(), content=True) is loads


def test_skipped_fields_are_not_built() -> None:
    line = {
        "type": "user",
        "message": {"content": [{"type": "tool_result", "tool_use_id": "t", "content": "x" * 99}]},
        "toolUseResult": {"stdout": "y" * 99, "agentId": "a1"},
        "huge": ["z" * 99],
    }
    record = decode(json.dumps(line).encode())
    assert isinstance(record, dict)
    assert "huge" not in record
    assert record["toolUseResult"] == {"agentId": "a1"}
    assert bytes(record["message"]["content"][0]["content"]) == b'"' + b"x" * 99 + b'"'


@pytest.mark.parametrize(
    "line",
    [b'{"type": "user", "message": "a string"}', b'{"message": {"content": 7}}', b"[1, 2]", b"3"],
)
def test_a_record_the_schema_does_not_fit_is_decoded_whole(line: bytes) -> None:
    assert decode(line) == json.loads(line)


@pytest.mark.parametrize("line", [b'{"type": "user",', b'{"a": NaN}', b"\xff"])
def test_invalid_lines_get_the_same_verdict(line: bytes) -> None:
    def verdict(fn: object) -> str:
        try:
            return repr(fn(line))  # type: ignore[operator]
        except ValueError:
            return "invalid"

    assert verdict(decode) == verdict(loads)


def test_a_refusal_is_still_seen_in_undecoded_results() -> None:
    reader = ClaudeCode().reader(PurePosixPath("projects/p/s.jsonl"))
    refusal = "The user doesn't want to proceed with this tool use."
    for content in (refusal, [{"type": "text", "text": refusal}]):
        result = {"type": "tool_result", "tool_use_id": "t", "content": content}
        record = {"type": "user", "timestamp": "2026-01-01T00:00:00Z"}
        record["message"] = {"content": [result]}
        (ended,) = reader.feed(decode(json.dumps(record).encode()))
        assert isinstance(ended, ToolCallEnded)
        assert ended.outcome == "rejected"

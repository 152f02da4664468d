"""Property-based fuzzing of every reader and of the tailer: nothing escapes, nothing is lost.

The readers get arbitrary JSON values and records with the known record types and wrong types in
their fields; the tailer gets a stream split at random points, with invalid UTF-8 and empty
lines. Run more cases with `HYPOTHESIS_PROFILE=deep pytest tests/test_fuzz.py`.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coding_agent_exporter.harnesses import HARNESSES
from coding_agent_exporter.sources.tail import JsonlTail
from coding_agent_exporter.state.state import State

settings.register_profile("default", max_examples=150, deadline=None)
settings.register_profile("deep", max_examples=5000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
if os.environ.get("HYPOTHESIS_PROFILE") == "deep":
    pytestmark = pytest.mark.timeout(3600)  # 5,000 cases each, on demand

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text()
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
KEYS = [
    "type",
    "message",
    "content",
    "payload",
    "timestamp",
    "uuid",
    "sessionId",
    "cwd",
    "id",
    "model",
    "usage",
    "stop_reason",
    "tool_use_id",
    "is_error",
    "toolUseResult",
    "origin",
    "isMeta",
    "subtype",
    "attachment",
    "name",
    "input",
    "role",
    "call_id",
    "output",
    "session_id",
    "parent_thread_id",
    "source",
    "info",
    "pid",
    "status",
    "agentId",
]
TYPES = [
    "user",
    "assistant",
    "system",
    "attachment",
    "custom-title",
    "ai-title",
    "session_meta",
    "event_msg",
    "response_item",
    "turn_context",
    "token_usage_record",
    "queue-operation",
]
RECORDS = st.builds(
    lambda kind, fields: {**fields, "type": kind},
    st.sampled_from(TYPES),
    st.dictionaries(st.sampled_from(KEYS), JSON, max_size=6),
)
FILES = {
    "claude-code": [
        "projects/-p/s1.jsonl",
        "projects/-p/s1/subagents/agent-a1.jsonl",
        "projects/-p/s1/subagents/agent-a1.meta.json",
        "sessions/42.json",
        "projects/-p/s1/custom-title.json",
    ],
    "codex": [
        "sessions/2026/11/30/rollout-2026-11-30T09-00-00-01a22bda-93f9-70e3-9117-d0034240d54f.jsonl",
        "session_index.jsonl",
    ],
}


def feed_all(records: list[Any]) -> None:
    state = State()
    for agent, files in FILES.items():
        harness = HARNESSES[agent]()
        for rel in files:
            reader = harness.reader(PurePosixPath(rel))
            for record in records:
                for event in reader.feed(record):
                    state.apply(agent, event)
    state.refresh(2e9, lambda pid: 1.0)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(JSON, max_size=8))
def test_readers_take_any_json(records: list[Any]) -> None:
    feed_all(records)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORDS, max_size=12))
def test_readers_take_known_records_with_wrong_fields(records: list[Any]) -> None:
    feed_all(records)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=8),
)
def test_tailer_yields_every_line_once_whatever_the_write_boundaries(
    tmp_path_factory: Any, lines: list[bytes], cuts: list[int]
) -> None:
    path: Path = tmp_path_factory.mktemp("fuzz") / "t.jsonl"
    data = b"".join(line + b"\n" for line in lines)
    tail = JsonlTail(path)
    got: list[bytes] = []
    written = 0
    path.write_bytes(b"")
    for cut in sorted({min(c, len(data)) for c in cuts} | {len(data)}):
        with path.open("ab") as f:
            f.write(data[written:cut])
        written = cut
        got += [line.text for line in tail.read().lines]
    assert got == [line.removesuffix(b"\r") for line in lines if line.removesuffix(b"\r")]

"""Trace and span ids derived from records' own ids, shared by the span writer and the
exemplars on /metrics: the same turn always gets the same ids, in every process."""

from __future__ import annotations

from hashlib import blake2b


def derive(size: int, *parts: str) -> int:
    """An id of `size` bytes from `parts` (never 0, which OpenTelemetry treats as invalid)."""
    value = int.from_bytes(blake2b("\x1f".join(parts).encode(), digest_size=size).digest(), "big")
    return value or 1


def turn_trace(agent: str, session_id: str, record_id: str) -> int:
    return derive(16, "turn", agent, session_id, record_id)


def turn_span(agent: str, session_id: str, record_id: str) -> int:
    return derive(8, "turn", agent, session_id, record_id)


def tool_span(call_id: str) -> int:
    return derive(8, "tool", call_id)

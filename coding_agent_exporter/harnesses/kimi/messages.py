"""What one message of Kimi CLI's wire says (Kimi CLI 1.51.0, `fixtures/kimi/`): the usage of
a step, a tool call, a tool's result, a prompt.

A wire record is `{"timestamp": <epoch s>, "message": {"type": T, "payload": {...}}}`; the
payloads read here are those of `StatusUpdate` (`token_usage {input_other, output,
input_cache_read, input_cache_creation}` and `message_id`: one per model response),
`ToolCall` (`{id, function {name, arguments}}`, the arguments as JSON text), `ToolResult`
(`{tool_call_id, return_value {is_error, output, message, display}}`) and `TurnBegin`
(`user_input`: text, or a list of content parts).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

from ...events import ToolOutcome, Usage
from ..fields import count, nonempty

REJECTED = "Rejected by user"
"""The brief Kimi CLI's `ToolRejectedError` shows (its source: `kimi_cli/tools/utils.py`)."""


def usage_of(token_usage: Mapping[str, Any]) -> Usage:
    """`token_usage` in our convention: Kimi already splits the prompt (`input_other` without
    the cache, `input_cache_read`, `input_cache_creation`); `output` holds the reasoning, which
    Kimi does not count apart."""
    return Usage(
        input=count(token_usage.get("input_other")),
        output=count(token_usage.get("output")),
        cache_read=count(token_usage.get("input_cache_read")),
        cache_write=count(token_usage.get("input_cache_creation")),
    )


def response_of(payload: Mapping[str, Any]) -> tuple[str, Usage] | None:
    """A `StatusUpdate` that reports a response: its message id and usage (other status
    updates, e.g. plan mode switched, carry neither)."""
    message_id = nonempty(payload.get("message_id"))
    token_usage = payload.get("token_usage")
    if message_id is None or not isinstance(token_usage, dict):
        return None
    return message_id, usage_of(token_usage)


def call_of(payload: Mapping[str, Any]) -> tuple[str, str, object] | None:
    """A `ToolCall`: its id, tool name and arguments (parsed when they are JSON)."""
    function = payload.get("function")
    call_id = nonempty(payload.get("id"))
    if call_id is None or not isinstance(function, dict):
        return None
    name = nonempty(function.get("name")) or "unknown"
    arguments: object = function.get("arguments")
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    return call_id, name, arguments


def result_of(payload: Mapping[str, Any]) -> tuple[str, ToolOutcome, str | None] | None:
    """A `ToolResult`: the call it ends, its outcome (`is_error`; refused by the user when its
    brief says so) and its output text."""
    call_id = nonempty(payload.get("tool_call_id"))
    value = payload.get("return_value")
    if call_id is None or not isinstance(value, dict):
        return None
    outcome: ToolOutcome = "ok"
    if value.get("is_error"):
        outcome = "rejected" if _brief(value) == REJECTED else "error"
    output = value.get("output")
    return call_id, outcome, output if isinstance(output, str) else None


def _brief(value: Mapping[str, Any]) -> str | None:
    display = value.get("display")
    for block in display if isinstance(display, list) else []:
        if isinstance(block, dict) and block.get("type") == "brief":
            return nonempty(block.get("text"))
    return None


def prompt_of(payload: Mapping[str, Any]) -> str | None:
    """A `TurnBegin`'s user input as text (the text parts of a list joined)."""
    given = payload.get("user_input")
    if isinstance(given, str):
        return given
    if isinstance(given, list):
        texts = [p.get("text") for p in given if isinstance(p, dict)]
        return "".join(t for t in texts if isinstance(t, str)) or None
    return None

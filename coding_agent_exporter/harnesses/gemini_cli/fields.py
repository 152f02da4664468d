"""What a Gemini CLI chat record's fields say: a response's usage, a tool call's outcome and
output, the user's own words in a `user` record, the workspace a `<session_context>` block
names. Pure functions of one record, used by `gemini_chat.ChatReader` (`fields` has the
readers every harness shares).

Tokens: Gemini's `input` includes the cached input and `output` excludes the thoughts, so
input = input - cached, cache_read = cached, output = output, reasoning = thoughts (on top of
output, not a part of it), cache_write = 0.

Approvals are not recorded: a denied call is `cancelled` without `resultDisplay` (rejected), a
call stopped while it ran is `cancelled` with its partial output (cancelled). A shell command
that fails is `success` with `Exit Code: N` in its output (error).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...events import ToolOutcome, Usage
from ..fields import count

CONTEXT = "<session_context>"
_WORKSPACE = re.compile(r"\*\*Workspace Directories:\*\*\s*\n\s*- ([^\n]+)")
_EXIT_CODE = re.compile(r"Exit Code: (-?\d+)")
_SHELL = "run_shell_command"


def usage_of(raw: Mapping[str, Any]) -> Usage:
    """Gemini tokens → ours. Gemini counts the cached input inside input and the thoughts
    outside output; ours: input without the cached part, output with the thoughts (reasoning is
    a part of output for every agent), reasoning = the thoughts."""
    cached, thoughts = count(raw.get("cached")), count(raw.get("thoughts"))
    return Usage(
        input=max(0, count(raw.get("input")) - cached),
        output=count(raw.get("output")) + thoughts,
        cache_read=cached,
        reasoning=thoughts,
    )


def tool_outcome(call: Mapping[str, Any]) -> ToolOutcome | None:
    """A finished call's outcome, or None while it has no final status."""
    status = call.get("status")
    if status == "success":
        code = _EXIT_CODE.search(result_text(call)) if call.get("name") == _SHELL else None
        return "error" if code is not None and int(code.group(1)) != 0 else "ok"
    if status == "error":
        return "error"
    if status == "cancelled":
        denied = "denied" in result_text(call) or not call.get("resultDisplay")
        return "rejected" if denied else "cancelled"
    return None


def result_text(call: Mapping[str, Any]) -> str:
    """The output (or error) the call returned to the model."""
    texts: list[str] = []
    for part in call.get("result") or []:
        answer = part.get("functionResponse") if isinstance(part, dict) else None
        response = answer.get("response") if isinstance(answer, dict) else None
        if isinstance(response, dict):
            texts += [str(response[k]) for k in ("output", "error") if k in response]
    return "\n".join(texts)


def prompt_of(record: Mapping[str, Any]) -> str | None:
    """The user's own words in a `user` record; None for tool results and injected context."""
    parts = record.get("content")
    texts = [p.get("text") for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
    text = next((t for t in texts if isinstance(t, str)), None)
    if text is None or not text.strip() or text.startswith(CONTEXT):
        return None
    return text


def workspace_of(messages: object) -> str | None:
    """The first workspace directory named in a `<session_context>` message."""
    for message in messages if isinstance(messages, list) else []:
        parts = message.get("content") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else []:
            text = part.get("text") if isinstance(part, dict) else None
            found = _WORKSPACE.search(text) if isinstance(text, str) else None
            if found is not None and text is not None and text.startswith(CONTEXT):
                return found.group(1).strip()
    return None

"""What Cline's records say in our terms: usage, tool outcomes, prompts, live status words.

Only what Cline 3.0.65 was seen to write (`fixtures/cline/3.0.65/`); anything else reads as
unknown, never as a guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from ...events import ToolOutcome, Usage
from ..fields import count

_USER_INPUT = re.compile(r"<user_input[^>]*>(.*?)</user_input>", re.DOTALL)
REJECTED = "rejected by the user"
"""How a tool result says the user denied the call (`{"error": "This tool call was rejected by
the user and not executed. …"}`)."""

LIVE_STATUS = {"running": "busy", "pending": "waiting", "idle": "idle"}
"""A session file's `status` while its process works (`running`), waits for the user to approve
a tool call (`pending`) or for a prompt (`idle`), in the words of the live index. The others
(`completed`, `failed`, and whatever ends a session) mean no process holds it."""


def usage_of(metrics: Mapping[str, object]) -> Usage:
    """An assistant message's `metrics`. Its `inputTokens` is the request's whole prompt, the
    cached part included (the stub's `prompt_tokens`): the part read from cache is taken out,
    so `input` is what was not cached. Cline keeps no reasoning count."""
    cached = count(metrics.get("cacheReadTokens"))
    return Usage(
        input=max(count(metrics.get("inputTokens")) - cached, 0),
        output=count(metrics.get("outputTokens")),
        cache_read=cached,
        cache_write=count(metrics.get("cacheWriteTokens")),
    )


def prompt_of(text: str) -> str:
    """A prompt as typed: the text of its `<user_input mode="…">` wrapper when it has one."""
    found = _USER_INPUT.findall(text)
    return "\n".join(found).strip() if found else text.strip()


def text_of(content: object) -> str | None:
    """The text blocks of a message's content (a string or a list of blocks), or None."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = [
        b["text"]
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    return "\n".join(texts) if texts else None


def tool_outcome(content: object) -> ToolOutcome:
    """How a `tool_result` says its call ended. `run_commands` (and the other batch tools)
    return a list of `{…, success}`: ok when every one succeeded; a refused call returns
    `{"error": "… rejected by the user …"}`; `spawn_agent` returns its sub-agent's report as
    JSON text with `finishReason`; any other `{"error": …}` is an error, anything else ok."""
    if isinstance(content, str):
        content = _json(content)
    if isinstance(content, list):
        entries = [c for c in content if isinstance(c, dict)]
        return "error" if any(c.get("success") is False for c in entries) else "ok"
    if isinstance(content, dict):
        error = content.get("error")
        if isinstance(error, str) and REJECTED in error:
            return "rejected"
        if error:
            return "error"
        reason = content.get("finishReason")
        if isinstance(reason, str) and reason != "completed":
            return "error"
    return "ok"


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text

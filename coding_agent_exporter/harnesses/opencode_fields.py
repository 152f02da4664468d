"""What an OpenCode (or Kilo Code) message's tokens and a tool part's state say in our terms:
pure functions of one field, used by `opencode_database.DatabaseReader` (`fields` has the
readers every harness shares).

Tokens: OpenCode stores `input` without the cached input and `output` without the reasoning, so
input = input, cache_read = cache.read, cache_write = cache.write, reasoning = reasoning, and
output = output + reasoning (our `output` includes the reasoning, as for every agent).

Tool outcomes: completed with exit 0 or no exit code -> ok, another exit code -> error, no exit
code and `User aborted the command` (Esc while it ran) -> cancelled; error saying the user
rejected or denied it -> rejected, aborted or interrupted -> cancelled, any other -> error.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..events import ToolOutcome, Usage
from .fields import count

_REJECTED = re.compile(r"reject|denied|deny", re.IGNORECASE)
_ABORTED = re.compile(r"abort|interrupt|cancel", re.IGNORECASE)
_USER_ABORTED = "User aborted the command"


def usage_of(tokens: object) -> Usage:
    """OpenCode's split → ours: the reasoning is a part of our output."""
    if not isinstance(tokens, dict):
        return Usage()
    cache = tokens.get("cache")
    cache = cache if isinstance(cache, dict) else {}
    reasoning = count(tokens.get("reasoning"))
    return Usage(
        input=count(tokens.get("input")),
        output=count(tokens.get("output")) + reasoning,
        cache_read=count(cache.get("read")),
        cache_write=count(cache.get("write")),
        reasoning=reasoning,
    )


def tool_outcome(state: Mapping[str, Any]) -> ToolOutcome | None:
    """The outcome of a finished tool part, None while it runs."""
    status = state.get("status")
    if status == "completed":
        metadata = state.get("metadata")
        code = metadata.get("exit") if isinstance(metadata, dict) else None
        if code is None and _USER_ABORTED in str(state.get("output", "")):
            return "cancelled"
        return "error" if isinstance(code, int) and code != 0 else "ok"
    if status == "error":
        error = str(state.get("error", ""))
        if _REJECTED.search(error):
            return "rejected"
        return "cancelled" if _ABORTED.search(error) else "error"
    return None

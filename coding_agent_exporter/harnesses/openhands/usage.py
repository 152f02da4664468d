"""The tokens of one model call as OpenHands (LiteLLM) writes them in `token_usages`:
`prompt_tokens` includes the cached ones (`cache_read_tokens`), `completion_tokens` includes
the reasoning ones (`reasoning_tokens`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...events import Usage
from ..fields import count


def usage_of(entry: Mapping[str, Any]) -> Usage:
    prompt, cached = count(entry.get("prompt_tokens")), count(entry.get("cache_read_tokens"))
    return Usage(
        input=max(prompt - cached, 0),
        output=count(entry.get("completion_tokens")),
        cache_read=cached,
        cache_write=count(entry.get("cache_write_tokens")),
        reasoning=count(entry.get("reasoning_tokens")),
    )

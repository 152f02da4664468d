"""Obvious secrets out of text that goes into span attributes (only with capture-content).

Best effort, for the common shapes: provider API keys, GitHub / Slack / AWS tokens, bearer
tokens, passwords in URLs, and `key=value` pairs whose key says secret. Not a guarantee: content
capture stays off unless asked for.
"""

from __future__ import annotations

import re

MASK = "[REDACTED]"
MAX_CHARS = 8192
"""Longest attribute value kept; the rest is cut (spans stay small)."""

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}"), MASK),
    (
        re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"),
        MASK,
    ),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), MASK),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), MASK),
    (re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/-]{8,}=*"), r"\1" + MASK),
    (re.compile(r"(://[^/\s:@]+:)[^@\s/]+(@)"), r"\1" + MASK + r"\2"),
    (
        re.compile(
            r"(?i)((?:api[_-]?key|token|secret|password|passwd)[\"']?\s?[=:]\s?[\"']?)[^\s\"',;]{4,}"
        ),
        r"\1" + MASK,
    ),
)


def redact(text: str) -> str:
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    if len(text) > MAX_CHARS:
        text = text[:MAX_CHARS] + f"…[{len(text) - MAX_CHARS} characters cut]"
    return text

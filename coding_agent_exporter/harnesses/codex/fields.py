"""What a Codex rollout's records say, read from their fields: a thread's role and kind from its
`session_meta`, a response's usage (the mapping in `codex_rollout`'s docstring), the user's own
words in a message, a tool call's name and its output's outcome, a guardian review's verdict.
Pure functions of one payload, used by `codex_rollout.RolloutReader` (`fields` has the readers
every harness shares).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from ...events import Kind, ToolOutcome, Usage
from ..fields import count, nonempty, title_of

Role = Literal["root", "subagent", "review", "internal"]
_NOT_PROMPTS = (
    "<",
    "# AGENTS.md instructions",
    "These AGENTS.md instructions replace",
    "The previously provided AGENTS.md instructions",
)
_REQUEST_MARK = "## My request for Codex:"
_ABORTED = re.compile(r"(^|\n)aborted by user\s*$")
_EXIT_CODE = re.compile(r"(?:Process exited with code |\AExit code: )(-?\d+)")
REFUSED_WITHOUT_CODE = frozenset({"apply_patch"})
"""Tools whose failure Codex records as error text only (no exit code, no `FileChange`)."""
_INTERNAL_SOURCES = frozenset({"memory_consolidation"})


def usage_of(raw: object) -> Usage:
    """OpenAI usage → ours: cached input and reasoning are parts of input and output."""
    if not isinstance(raw, dict):
        return Usage()
    cached = count(raw.get("cached_input_tokens"))
    return Usage(
        input=max(0, count(raw.get("input_tokens")) - cached),
        output=count(raw.get("output_tokens")),
        cache_read=cached,
        cache_write=count(raw.get("cache_write_input_tokens")),
        reasoning=count(raw.get("reasoning_output_tokens")),
    )


def role_of(meta: Mapping[str, Any]) -> Role:
    source, thread_source = meta.get("source"), meta.get("thread_source")
    thread_source = thread_source if isinstance(thread_source, str) else None
    spawned = source.get("subagent") if isinstance(source, dict) else None
    other = spawned.get("other") if isinstance(spawned, dict) else None
    if thread_source == "guardian_review" or other == "guardian":
        return "review"
    if thread_source in _INTERNAL_SOURCES or other is not None:
        return "internal"
    if meta.get("parent_thread_id") or spawned is not None or thread_source == "subagent":
        return "subagent"
    return "root"


def kind_of(meta: Mapping[str, Any]) -> Kind:
    headless = meta.get("originator") == "codex_exec" or meta.get("source") in ("exec", "mcp")
    return "headless" if headless else "interactive"


def prompt_text(content: object) -> str | None:
    """The user's own words in a role-user message, or None for injected harness messages."""
    parts = content if isinstance(content, list) else []
    texts = [p.get("text") for p in parts if isinstance(p, dict)]
    text = "\n".join(t for t in texts if isinstance(t, str)).strip()
    if _REQUEST_MARK in text:
        text = text.split(_REQUEST_MARK, 1)[1].strip()
    if not text or text.startswith(_NOT_PROMPTS):
        return None
    return title_of(text)


def output_outcome(
    payload: Mapping[str, Any], exit_code: int | None, *, coded: bool = False
) -> ToolOutcome:
    """A tool output's outcome; `coded`: a tool whose success always shows an exit code (its
    item's or its output's), so an output without one is its error text."""
    output = payload.get("output")
    if isinstance(output, list):
        output = " ".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    text = output if isinstance(output, str) else json.dumps(output)
    if _ABORTED.search(text):
        return "cancelled"  # an interrupted command, or a denied approval: the same record
    if exit_code is None:
        found = _EXIT_CODE.search(text)
        exit_code = int(found.group(1)) if found else None
    if exit_code not in (0, None) or payload.get("success") is False:
        return "error"
    if coded and exit_code is None:
        return "error"
    if isinstance(output, dict) and output.get("success") is False:
        return "error"
    return "ok"


def verdict_of(text: object) -> str:
    """A guardian review's outcome from its JSON verdict (`allow`, `deny`, ...)."""
    try:
        verdict = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return "unknown"
    outcome = verdict.get("outcome") if isinstance(verdict, dict) else None
    return outcome.lower() if isinstance(outcome, str) and outcome else "unknown"


def tool_name(payload: Mapping[str, Any]) -> str:
    """`namespace.name`, except an MCP server's tools (namespace `mcp__<server>`): Codex's own
    identifier `mcp__<server>__<tool>`, the spelling Claude Code uses too."""
    kind = str(payload.get("type"))
    name = nonempty(payload.get("name")) or kind.removesuffix("_call")
    namespace = nonempty(payload.get("namespace"))
    if namespace and namespace.startswith("mcp__"):
        return f"{namespace.rstrip('_')}__{name}"
    return f"{namespace}.{name}" if namespace else name


def exit_of(item: Mapping[str, Any]) -> int | None:
    """A tool's end told by its `item_completed`, as an exit code: a `CommandExecution`'s own
    (1 when it failed without one); an `McpToolCall` that failed or whose result is an error
    (`isError`) 1, else 0; a `FileChange` (a patch applied) 0, or 1 when it failed. None: the
    item does not say."""
    kind, code = item.get("type"), item.get("exit_code")
    if kind == "FileChange":
        return 0 if item.get("status") == "completed" else 1
    if kind == "CommandExecution":
        failed = item.get("status") == "failed" and not isinstance(code, int)
        return 1 if failed else code if isinstance(code, int) else None
    if kind == "McpToolCall":
        result = item.get("result")
        error = isinstance(result, dict) and result.get("isError") is True
        return 1 if error or item.get("status") == "failed" else 0
    return None

"""The fields of a Claude Code journal record that `claude_journal.JournalReader` looks at.

Decoding a record against this schema (`decode.lean`; msgspec decodes a `TypedDict` straight
into a dict) builds those fields only, as the dicts and lists whole decoding makes: tool outputs,
file contents, thinking blocks and everything else the reader never looks at are skipped without
being built, which is most of a journal's bytes. Tool arguments and tool results are kept as
undecoded JSON (`msgspec.Raw`): the reader decodes one only when it needs it (a sub-agent's
arguments, a result that may say the user refused). Used only when no span shows content; a
record that does not fit (a field of another type) is decoded whole, as always.
"""

from __future__ import annotations

from typing import Any, TypedDict

import msgspec

__all__ = ["Record"]


class _Part(TypedDict, total=False):
    type: Any
    text: Any
    id: Any
    name: Any
    input: msgspec.Raw
    tool_use_id: Any
    is_error: Any
    content: msgspec.Raw


class _Message(TypedDict, total=False):
    id: Any
    model: Any
    stop_reason: Any
    usage: Any
    content: str | list[_Part] | None


class _UseResult(TypedDict, total=False):
    agentId: Any
    status: Any
    isAsync: Any
    runId: Any
    workflowName: Any


class _Attachment(TypedDict, total=False):
    type: Any
    prompt: Any


class Record(TypedDict, total=False):
    type: Any
    subtype: Any
    timestamp: Any
    uuid: Any
    sessionId: Any
    cwd: Any
    entrypoint: Any
    version: Any
    message: _Message | None
    toolUseResult: str | list[msgspec.Raw] | _UseResult | None  # a list: an MCP tool's content
    toolDenialKind: Any
    origin: Any
    attachment: _Attachment | None
    isMeta: Any
    isCompactSummary: Any
    isVisibleInTranscriptOnly: Any
    turnCompanion: Any
    isApiErrorMessage: Any
    apiErrorStatus: Any
    apiError: Any
    error: Any
    customTitle: Any
    aiTitle: Any
    modelUsage: Any

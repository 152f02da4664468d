"""The fields of a Claude Code journal record that `claude_code.JournalReader` looks at.

Decoding a record against this schema (`decode.lean`) builds those fields only: tool outputs,
file contents, thinking blocks and everything else the reader never looks at are skipped without
being built, which is most of a journal's bytes. Tool arguments and tool results are kept as
undecoded JSON (`msgspec.Raw`): the reader decodes one only when it needs it (a sub-agent's
arguments, a result that may say the user refused). Used only when no span shows content; a
record that does not fit (a field of another type) is decoded whole, as always.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["Record"]

_NONE = msgspec.Raw()  # absent (left out of the decoded dict)


class _Part(msgspec.Struct, omit_defaults=True):
    type: Any = None
    text: Any = None
    id: Any = None
    name: Any = None
    input: msgspec.Raw = _NONE
    tool_use_id: Any = None
    is_error: Any = None
    content: msgspec.Raw = _NONE


class _Message(msgspec.Struct, omit_defaults=True):
    id: Any = None
    model: Any = None
    stop_reason: Any = None
    usage: Any = None
    content: str | list[_Part] | None = None


class _UseResult(msgspec.Struct, omit_defaults=True):
    agentId: Any = None
    status: Any = None
    isAsync: Any = None


class _Attachment(msgspec.Struct, omit_defaults=True):
    type: Any = None
    prompt: Any = None


class Record(msgspec.Struct, omit_defaults=True):
    type: Any = None
    subtype: Any = None
    timestamp: Any = None
    uuid: Any = None
    sessionId: Any = None
    cwd: Any = None
    entrypoint: Any = None
    version: Any = None
    message: _Message | None = None
    toolUseResult: str | _UseResult | None = None
    toolDenialKind: Any = None
    origin: Any = None
    attachment: _Attachment | None = None
    isMeta: Any = None
    isCompactSummary: Any = None
    isVisibleInTranscriptOnly: Any = None
    turnCompanion: Any = None
    isApiErrorMessage: Any = None
    apiErrorStatus: Any = None
    apiError: Any = None
    error: Any = None
    customTitle: Any = None
    aiTitle: Any = None

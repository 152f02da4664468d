"""`sessions/<cwd slug>/<session id>.settings.json`: a Droid session's settings, rewritten whole
after every model call.

What is read: `tokenUsage` {inputTokens (without the cached part), outputTokens,
cacheReadTokens, cacheCreationTokens, thinkingTokens}, the session's own totals so far, and
`model`, the model they are counted for (one model per session: a session whose model was
changed counts all of its tokens for the last one). They become one `UsageTotalsRead`: totals
that replace the last ones read, never added to them.

A sub-agent's own session has its own settings file: its totals count for the lead under the
sub-agent (its `subagent` tag names the calling session and call). Not read:
`lastCallTokenUsage`, the last call's usage, because a reader sees only the rewrites
it reads: two calls between two reads (or a history read at start) leave the earlier call's
usage nowhere, so counting per call from it would undercount; `inclusiveTokenUsage` and
`childInclusiveTokenUsageBySessionId`, the same totals with the session's sub-agents' added
(each sub-agent's own settings file counts them once). Droid writes
no time here: the totals count at the journal's latest record time (`shared`). Its `tags`
say whether `droid exec` made the session (`exec`: headless).
"""

from __future__ import annotations

from collections.abc import Mapping

from ...events import Event, Kind, SessionSeen, Usage
from ..fields import count, nonempty
from .shared import Shared


class SettingsReader:
    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.told: Usage | None = None

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []  # gone, or not a document: what was counted stays counted
        return self._kind(record) + self._totals(record)

    def _kind(self, record: Mapping[str, object]) -> list[Event]:
        """`headless` for a session `droid exec` made (its tag `exec`; the TUI's has none); a
        sub-agent's session is tagged `subagent` with its caller."""
        tags = record.get("tags")
        tags = [t for t in tags if isinstance(t, dict)] if isinstance(tags, list) else []
        for tag in tags:
            metadata = tag.get("metadata")
            if tag.get("name") == "subagent" and isinstance(metadata, dict):
                self.shared.called(
                    metadata.get("callingSessionId"), metadata.get("callingToolUseId")
                )
        kind: Kind | None = "headless" if any(t.get("name") == "exec" for t in tags) else None
        if kind is None or kind == self.shared.kind or self.shared.calling is not None:
            return []
        self.shared.kind = kind
        if self.shared.at is None:
            return []  # the journal's SessionSeen, later, says it
        return [SessionSeen(session_id=self.shared.session_id, at=self.shared.at, kind=kind)]

    def _totals(self, record: Mapping[str, object]) -> list[Event]:
        usage = totals(record.get("tokenUsage"))
        model = nonempty(record.get("model")) or self.shared.model
        if usage is None or model is None or usage == self.told:
            return []
        self.told = usage
        return self.shared.totals(model, usage)


def totals(value: object) -> Usage | None:
    if not isinstance(value, Mapping):
        return None
    return Usage(
        input=count(value.get("inputTokens")),
        output=count(value.get("outputTokens")),
        cache_read=count(value.get("cacheReadTokens")),
        cache_write=count(value.get("cacheCreationTokens")),
        reasoning=count(value.get("thinkingTokens")),
    )

"""A pi or oh-my-pi transcript, a lead session's or an oh-my-pi sub-agent's, as events; and
`Shared`, what the files of one home tell each other.

A transcript is a list of entries forming a tree by `id`/`parentId` (every entry is counted,
whichever branch it lies on): `session{id, timestamp, cwd}`, `model_change`, `message` whose
`message.role` is `user`, `assistant{content, model, usage, stopReason, responseId}` or
`toolResult{toolCallId, isError}`, `compaction`, `session_info{name}`, and oh-my-pi's
`title_change`, `session_init{agent}` (sub-agents) and `custom` entries (`tool_execution_start`,
`session_exit`). oh-my-pi's line 1 is a fixed-width `title` slot rewritten in place, which the
tailer sees as a new file: the new reader replays what the file's earlier reader already reported
silently (`Shared.fed`), so only the title is told again.

Tokens are a 1:1 copy of the provider's usage (input = input, output = output, cache_read =
cacheRead, cache_write = cacheWrite), one response per `responseId`. A user message starts a
turn; `stop`/`length` end it completed, `error` failed (not a response: no `responseId`, zero
usage), `aborted` interrupted; oh-my-pi's `session_exit` ends a turn still open interrupted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from ...events import (
    Event,
    Kind,
    ModelFailed,
    ModelResponded,
    SessionSeen,
    SubagentEnded,
    SubagentOutcome,
    SubagentStarted,
    TitleSet,
    TitleSource,
    ToolCallEnded,
    ToolCallStarted,
    TurnEnded,
    TurnOutcome,
    TurnStarted,
    Usage,
)
from ..fields import count, nonempty, timestamp, title_of, usd
from .live import Live

_ENDS: dict[str, TurnOutcome] = {
    "stop": "completed",
    "length": "completed",
    "error": "failed",
    "aborted": "interrupted",
}
_FINISH = {"toolUse": "tool_calls"}
_STATUS = re.compile(r"^(\d{3}) ")  # `errorMessage` of an HTTP error: `400 {…body…}`


@dataclass(slots=True)
class Shared:
    """What the files of one home tell each other: how many records of each file were already
    reported (a re-read after a rewrite of line 1 repeats none), the sessions the TUI ran and the
    lead sessions already seen."""

    history: bool  # the agent keeps a prompt history (oh-my-pi): it tells the TUI's sessions
    fed: dict[PurePosixPath, int] = field(default_factory=dict)
    interactive: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)
    roots: dict[str, str] = field(default_factory=dict)  # lead session → the root telling it
    live: Live | None = None  # oh-my-pi: its running processes and what their sessions do


def usage_of(raw: Mapping[str, Any]) -> Usage:
    """The provider's usage as pi copies it: already split like ours."""
    return Usage(
        input=count(raw.get("input")),
        output=count(raw.get("output")),
        cache_read=count(raw.get("cacheRead")),
        cache_write=count(raw.get("cacheWrite")),
        reasoning=count(raw.get("reasoningTokens")),  # oh-my-pi, a part of output
    )


def _reported(usage: object) -> float | None:
    """What pi says the response cost (`usage.cost.total`, from its own model table)."""
    cost = usage.get("cost") if isinstance(usage, dict) else None
    return usd(cost.get("total")) if isinstance(cost, dict) else None


def text_of(content: object) -> str:
    """The text blocks of a message's content (or the content itself when it is text)."""
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else []
    texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    return " ".join(t for t in texts if isinstance(t, str))


def model_name(entry: Mapping[str, Any]) -> str | None:
    """`model_change`: pi names `modelId`, oh-my-pi `provider/model`."""
    model = nonempty(entry.get("modelId"))
    if model is None and (named := nonempty(entry.get("model"))) is not None:
        model = named.partition("/")[2] or named
    return model


def when(entry: Mapping[str, Any]) -> float | None:
    """When an entry happened. The first entries are written together once the first reply
    ended, so a message's own time (ms) beats its entry's; a reply's is when it started."""
    message = entry.get("message")
    message = message if isinstance(message, dict) else {}
    if message.get("role") == "assistant":
        return timestamp(message.get("completedAt")) or timestamp(entry.get("timestamp"))
    return timestamp(message.get("timestamp")) or timestamp(entry.get("timestamp"))


class TranscriptReader:
    """One transcript: a lead session's, or an oh-my-pi sub-agent's (`root` = its session),
    below the root `origin` (oh-my-pi: "" or `profiles/<name>`)."""

    def __init__(
        self,
        shared: Shared,
        rel: PurePosixPath,
        *,
        root: str | None = None,
        subagent: str | None = None,
        origin: str = "",
    ) -> None:
        self.shared, self.rel, self.origin = shared, rel, origin
        self.elsewhere = False  # its session is told from another root's copy
        self.replay = shared.fed.get(rel, 0)  # records an earlier reader of this file reported
        self.count = 0
        self.session_id = root
        self.subagent_id = subagent
        self.title: tuple[str, TitleSource] | None = None  # line 1 comes before the header
        self.at = 0.0
        self.prompted = False
        self.turn: str | None = None  # the open turn's record id
        self.tasks: dict[str, list[str]] = {}  # task call id → the sub-agents it started

    @property
    def main(self) -> bool:
        return self.subagent_id is None

    def feed(self, record: object) -> list[Event]:
        self.count += 1
        self.shared.fed[self.rel] = max(self.count, self.replay)
        if not isinstance(record, dict) or self.elsewhere:
            return []
        if record.get("type") == "title":
            return self._title(record)
        before = self.turn
        events = self._entry(record)
        if self.elsewhere:
            return []
        if self.count <= self.replay:
            events = []  # an earlier reader of this file told it: only the state is rebuilt
        if record.get("type") == "session" and self.title is not None:
            events += self._title({"title": self.title[0], "source": self.title[1]})  # line 1
        return events + self._live(before)

    def _live(self, before: str | None) -> list[Event]:
        """oh-my-pi: the session's processes, again, when its turn opened or closed."""
        live, session = self.shared.live, self.session_id
        if live is None or session is None or not self.main:
            return []
        live.activity[session] = max(live.activity.get(session, 0.0), self.at)
        first = session not in live.written
        live.written.add(session)
        if self.turn is not None and before is None:
            live.open_turns[session] = self.at
        elif self.turn is None and before is not None:
            live.open_turns.pop(session, None)
        elif not first:
            return []
        return live.showing(session)

    def _entry(self, entry: Mapping[str, Any]) -> list[Event]:
        self.at = max(self.at, when(entry) or 0.0)
        kind = nonempty(entry.get("type"))
        if kind == "session":
            return self._header(entry)
        if self.session_id is None:
            return []
        if kind == "model_change":
            model = model_name(entry)
            if model is None or not self.main:
                return []
            return [SessionSeen(session_id=self.session_id, at=self.at, model=model)]
        if kind == "title_change":
            return self._title(entry)
        if kind == "session_info" and (name := nonempty(entry.get("name"))) is not None:
            return self._title({"title": name, "source": "user"})
        if kind == "session_init" and not self.main:
            return [self._started(nonempty(entry.get("agent")))]
        if kind == "custom" and entry.get("customType") == "session_exit":
            return self._ended("interrupted")
        message = entry.get("message")
        if kind != "message" or not isinstance(message, dict):
            return []  # compaction, branch_summary, label, thinking_level_change, ...
        role = message.get("role")
        if role == "user":
            return self._user(entry, message)
        if role == "assistant":
            return self._assistant(message)
        if role == "toolResult":
            return self._tool_result(message)
        return []  # bashExecution (`!` commands), custom, branchSummary, compactionSummary

    # -- the session ------------------------------------------------------------------------

    def _header(self, header: Mapping[str, Any]) -> list[Event]:
        own = nonempty(header.get("id"))
        if own is None:
            return []
        lead = own if self.main else self.session_id
        assert lead is not None
        if self.shared.roots.setdefault(lead, self.origin) != self.origin:
            self.elsewhere = True
            return []
        cwd = nonempty(header.get("cwd"))
        if self.main:
            self.session_id = own
            self.shared.seen.add(own)
            kind: Kind | None = None  # pi has no prompt history: its files do not say
            if self.shared.history:
                kind = "interactive" if own in self.shared.interactive else "headless"
            return [SessionSeen(session_id=own, at=self.at, cwd=cwd, kind=kind)]
        assert self.session_id is not None
        return [
            SessionSeen(session_id=self.session_id, at=self.at, cwd=cwd, main=False),
            self._started(None),
        ]

    def _title(self, entry: Mapping[str, Any]) -> list[Event]:
        title = nonempty(entry.get("title"))
        if title is None or not self.main:
            return []
        source: TitleSource = "user" if entry.get("source") == "user" else "harness"
        self.title = (title_of(title), source)
        if self.session_id is None:
            return []
        return [TitleSet(session_id=self.session_id, title=self.title[0], source=source)]

    def _started(self, kind: str | None) -> SubagentStarted:
        assert self.session_id is not None and self.subagent_id is not None
        parent, dot, _ = self.subagent_id.rpartition(".")
        return SubagentStarted(
            session_id=self.session_id,
            at=self.at,
            subagent_id=self.subagent_id,
            subagent_type=kind,
            parent_id=parent if dot else None,
        )

    # -- turns ------------------------------------------------------------------------------

    def _user(self, entry: Mapping[str, Any], message: Mapping[str, Any]) -> list[Event]:
        record_id = nonempty(entry.get("id"))
        text = text_of(message.get("content"))
        if not self.main or record_id is None or self.session_id is None:
            return []  # a sub-agent's assignment is not a turn of its own
        events = self._ended("interrupted")
        self.turn = f"{self.session_id}:{record_id}"  # entry ids are 8 hex digits
        events.append(
            TurnStarted(session_id=self.session_id, at=self.at, record_id=self.turn, prompt=text)
        )
        if not self.prompted and text.strip():
            self.prompted = True
            title = title_of(text)
            events.append(TitleSet(session_id=self.session_id, title=title, source="prompt"))
        return events

    def _ended(self, outcome: TurnOutcome) -> list[Event]:
        if self.turn is None or self.session_id is None:
            return []
        self.turn = None
        return [TurnEnded(session_id=self.session_id, at=self.at, outcome=outcome)]

    # -- responses and tools ----------------------------------------------------------------

    def _assistant(self, message: Mapping[str, Any]) -> list[Event]:
        assert self.session_id is not None
        started = timestamp(message.get("timestamp"))  # the entry's own time: when it ended
        requested = started if started is not None and started <= self.at else None
        stop = str(message.get("stopReason") or "")
        model = nonempty(message.get("model")) or "unknown"
        content = message.get("content")
        events: list[Event] = []
        response, usage = nonempty(message.get("responseId")), message.get("usage")
        if stop == "error":
            status = _STATUS.match(str(message.get("errorMessage") or ""))
            events.append(
                ModelFailed(
                    session_id=self.session_id,
                    at=self.at,
                    error=status.group(1) if status else "api_error",  # `400 {…}`: not the body
                    model=model,
                    subagent_id=self.subagent_id,
                    requested_at=requested,
                )
            )
        elif response is not None:
            events.append(
                ModelResponded(
                    session_id=self.session_id,
                    at=self.at,
                    message_id=response,
                    model=model,
                    usage=usage_of(usage) if isinstance(usage, dict) else Usage(),
                    subagent_id=self.subagent_id,
                    main=self.main,
                    requested_at=requested,
                    finish_reason=_FINISH.get(stop, stop or None),
                    text=text_of(content) or None,
                    reported_cost=_reported(usage),
                )
            )
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                events += self._tool_call(block)
        outcome = _ENDS.get(stop)
        if outcome is not None and self.main:
            events += self._ended(outcome)
        if stop in ("error", "aborted") and not self.main:
            ended: SubagentOutcome = "failed" if stop == "error" else "cancelled"
            events.append(self._subagent_ended(self.subagent_id, ended))
        return events

    def _tool_call(self, block: Mapping[str, Any]) -> list[Event]:
        call_id = nonempty(block.get("id"))
        if call_id is None or self.session_id is None:
            return []
        name, args = nonempty(block.get("name")) or "unknown", block.get("arguments")
        events: list[Event] = [
            ToolCallStarted(
                session_id=self.session_id,
                at=self.at,
                call_id=call_id,
                tool=name,
                subagent_id=self.subagent_id,
                arguments=args,
            )
        ]
        if name == "task" and isinstance(args, dict):
            tasks = args.get("tasks")
            named = [t for t in tasks if isinstance(t, dict)] if isinstance(tasks, list) else [args]
            launched = [
                (n, nonempty(t.get("agent"))) for t in named if (n := nonempty(t.get("name")))
            ]
            self.tasks[call_id] = [self._child(n) for n, _ in launched]
            one = len(launched) == 1  # a call that starts several cannot name each one
            events += [
                SubagentStarted(
                    session_id=self.session_id,
                    at=self.at,
                    call_id=call_id if one else None,
                    subagent_id=self._child(child),
                    subagent_type=kind,
                    parent_id=self.subagent_id,
                )
                for child, kind in launched
            ]
        return events

    def _child(self, name: str) -> str:
        """A sub-agent's id (its file's stem) from the name its parent gave it."""
        return f"{self.subagent_id}.{name}" if self.subagent_id else name

    def _tool_result(self, message: Mapping[str, Any]) -> list[Event]:
        call_id = nonempty(message.get("toolCallId"))
        if call_id is None or self.session_id is None:
            return []
        details = message.get("details")
        details = details if isinstance(details, dict) else {}
        events: list[Event] = [
            ToolCallEnded(
                session_id=self.session_id,
                at=self.at,
                call_id=call_id,
                outcome="error" if message.get("isError") else "ok",
                result=text_of(message.get("content")) or None,
            )
        ]
        if message.get("toolName") == "yield" and not self.main:
            done: SubagentOutcome = "completed" if details.get("status") == "success" else "failed"
            events.append(self._subagent_ended(self.subagent_id, done))
        results = details.get("results")
        for result in results if isinstance(results, list) and call_id in self.tasks else []:
            child = nonempty(result.get("id")) if isinstance(result, dict) else None
            if child is None:
                continue
            code = result.get("exitCode")
            outcome: SubagentOutcome = (
                "cancelled" if result.get("aborted") else "completed" if code == 0 else "failed"
            )
            events.append(self._subagent_ended(self._child(child), outcome))
        return events

    def _subagent_ended(self, subagent_id: str | None, outcome: SubagentOutcome) -> SubagentEnded:
        assert self.session_id is not None
        return SubagentEnded(
            session_id=self.session_id, at=self.at, outcome=outcome, subagent_id=subagent_id
        )


__all__ = ["Shared", "TranscriptReader"]

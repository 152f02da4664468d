"""`base_state.json` of a conversation (rewritten whole as it runs): where it runs, the model
it is set to, and the tokens of each model call (`stats.usage_to_metrics`).

`usage_to_metrics` holds one entry per user of a model: `agent` (the conversation's own calls),
`condenser` (the calls that summarize a long history; no event names them) and, in a lead's
document, `task:<task id>` per sub-agent it ran: those are the sub-agent's calls again, which
its own folder's document tells (`subagents/<id>/base_state.json`): left out here, so each
response counts once. Per-call `token_usages` (with `response_id`) are counted; the
`accumulated_token_usage` totals are their sum and are not used. A response is told with the
time its events gave (`Shared`; a condenser call's is its `Condensation` event), or held until
they give it; a condenser call read after the events without its event, with the time of the
conversation's latest event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...events import Event, ModelResponded, SessionSeen
from ..fields import nonempty, timestamp
from .shared import Shared
from .usage import usage_of

AGENT, CONDENSER = "agent", "condenser"


class StateReader:
    def __init__(self, shared: Shared, conversation: str, session_id: str, sub: str | None):
        self.shared = shared
        self.conversation = conversation  # the folder's key in `shared`
        self.session_id = session_id
        self.subagent_id = sub
        self.told: tuple[object, ...] | None = None
        self.counted: dict[str, int] = {}  # usage user → token_usages entries read

    def feed(self, record: object) -> list[Event]:
        if not isinstance(record, dict):
            return []
        events = self._seen(record)
        stats = record.get("stats")
        metrics = stats.get("usage_to_metrics") if isinstance(stats, dict) else None
        if not isinstance(metrics, dict):
            return events
        for user in (AGENT, CONDENSER):
            entry = metrics.get(user)
            if isinstance(entry, dict):
                events += self._calls(user, entry)
        return events

    def _seen(self, record: Mapping[str, Any]) -> list[Event]:
        agent = record.get("agent")
        llm = agent.get("llm") if isinstance(agent, dict) else None
        context = agent.get("agent_context") if isinstance(agent, dict) else None
        workspace = record.get("workspace")
        cwd = nonempty(workspace.get("working_dir")) if isinstance(workspace, dict) else None
        model = nonempty(llm.get("model")) if isinstance(llm, dict) else None
        opened = timestamp(context.get("current_datetime")) if isinstance(context, dict) else None
        if model is not None:
            self.shared.model[self.conversation] = model
        key = (cwd, model, opened)
        if key == self.told or opened is None:
            return []
        self.told = key
        main = self.subagent_id is None
        return [
            SessionSeen(
                session_id=self.session_id,
                at=opened,
                cwd=cwd,
                model=model if main else None,
                main=main,
            )
        ]

    def _calls(self, user: str, entry: Mapping[str, Any]) -> list[Event]:
        calls = entry.get("token_usages")
        if not isinstance(calls, list):
            return []
        done = self.counted.get(user, 0)
        if len(calls) < done:  # fewer than before: a conversation written anew
            done = 0
        self.counted[user] = len(calls)
        events: list[Event] = []
        fallback = nonempty(entry.get("model_name")) or "unknown"
        for call in calls[done:]:
            if not isinstance(call, dict):
                continue
            response = nonempty(call.get("response_id"))
            if response is None:
                continue
            model = nonempty(call.get("model")) or fallback
            event = self._response(user, response, model, call)
            if event is not None:
                events.append(event)
        return events

    def _response(
        self, user: str, response: str, model: str, call: Mapping[str, Any]
    ) -> ModelResponded | None:
        key = (self.conversation, response)
        usage = usage_of(call)
        seen = self.shared.seen.pop(key, None)
        if seen is None and user == CONDENSER:
            at = self.shared.last.get(self.conversation)
            if at is not None:
                return self._told(response, model, usage, at, None, "stop")
        if seen is None:
            self.shared.usage[key] = (model, usage)  # its events will tell it
            return None
        return self._told(response, model, usage, seen.at, seen.requested_at, seen.finish_reason)

    def _told(
        self, response: str, model: str, usage: Any, at: float, asked: float | None, finish: str
    ) -> ModelResponded:
        return ModelResponded(
            session_id=self.session_id,
            at=at,
            message_id=response,
            model=model,
            usage=usage,
            subagent_id=self.subagent_id,
            main=self.subagent_id is None,
            requested_at=asked,
            finish_reason=finish,
        )

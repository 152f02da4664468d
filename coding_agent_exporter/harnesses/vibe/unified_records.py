"""What the records of Vibe's unified store (`vibe_unified`) tell, folded into the session's
`Store`: journal records, snapshot chunks, a checkpoint's history and runtime states.

Turns come from the projection envelope's `latestTurn`, responses and their usage from
`completion_succeeded` results, tools from `tool` actions and from the model's calls that the
runtime runs itself, approvals from `callback_registered` / `callback_resolved`.

The usage of responses whose journal is gone (deleted before it was read: history, or records
missed while following) is in no entry: every envelope's cumulative `tokenUsage`, less the
usage of the responses the journal showed, is that; the largest such remainder is counted as
carried usage (tokens without a message). 2.26 resets `tokenUsage` when it writes a generation
mid-turn: a remainder never goes down, so a reset costs nothing, but what a reset hid before
the journal that was read cannot be recovered.
"""

from __future__ import annotations

import json
from typing import Any

from ...events import Event, SessionSeen, SubagentStarted, ToolOutcome, TurnOutcome, Usage
from ..fields import nonempty, timestamp
from .store import (
    Store,
    action_of,
    at_least_zero,
    listed,
    result_outcome,
    text_of,
    tool_name,
    usage,
)

_ENDED: dict[str, TurnOutcome] = {
    "completed": "completed",
    "interrupted": "interrupted",
    "failed": "failed",
    "cancelled": "interrupted",
}


def learn_root(store: Store, record: dict[str, Any]) -> None:
    """A sub-agent's lead (and parent), from the session its journal record's envelopes name."""
    for state in _envelopes(record):
        session = state.get("session")
        if isinstance(session, dict) and nonempty(session.get("rootSessionId")):
            store.root = session["rootSessionId"]
            store.parent = nonempty(session.get("parentSessionId"))
            return


def dispatch(store: Store, kind: str, record: Any) -> list[Event]:
    """One record of a `journal`, `chunk`, `history` or `runtime` file, folded into `store`."""
    if kind == "chunk":
        return _chunk(store, record)
    if kind == "history":
        return history(store, record)
    if kind == "runtime":
        return _runtime(store, record)
    return _journal(store, record)


def _runtime(store: Store, record: dict[str, Any]) -> list[Event]:
    events: list[Event] = []
    actions = record.get("actions")
    for action in actions if isinstance(actions, list) else []:
        if (
            isinstance(action, dict)
            and action.get("kind") == "completion"
            and action.get("state") == "succeeded"
            and nonempty(action.get("action_id"))
        ):
            events += store.responded(action["action_id"], usage(None))
    return events


# -- snapshot chunks ---------------------------------------------------------------------------


def is_entry(value: object) -> bool:
    """A projection entry: a message or an effect."""
    return isinstance(value, dict) and value.get("type") in ("message", "effect") and "id" in value


def _chunk(store: Store, entries: list[Any]) -> list[Event]:
    """A snapshot's history, oldest first: turns end where the next one starts; the last one is
    left to the journal (it always holds the latest turn's end)."""
    events: list[Event] = []
    current: str | None = None
    for entry in entries:
        if not is_entry(entry):
            continue
        store.tick(timestamp(entry.get("updatedAt")) or timestamp(entry.get("createdAt")))
        turn = nonempty(entry.get("turnId"))
        if entry.get("role") == "user" and turn and turn != current:
            if current is not None:
                events += store.turn_ended(current, "completed")
            current = turn
            prompt = text_of(entry.get("content"))
            events += store.turn_started(turn, timestamp(entry.get("createdAt")), prompt)
        events += _entry(store, entry)
    return events


def _entry(store: Store, entry: dict[str, Any]) -> list[Event]:
    """A projection entry, from a chunk or from the journal."""
    entry_id = str(entry.get("id"))
    if entry.get("type") == "message" and entry.get("role") == "assistant":
        outcome = entry.get("outcome")
        if isinstance(outcome, dict) and outcome.get("type") == "discarded":
            if entry.get("turnId") == store.open_turn:
                store.turn_broken = True
            return []
        action = action_of(entry_id, "assistant-")
        at = timestamp(entry.get("createdAt"))
        return store.responded(action, usage(None), at=at) if action else []
    return []


def is_history(value: object) -> bool:
    """An item of a checkpoint's history (what the model is sent again)."""
    return isinstance(value, dict) and value.get("source") == "history" and "message" in value


def history(store: Store, items: list[Any]) -> list[Event]:
    """A checkpoint's conversation (what the model is sent again): the model's tool calls and
    their results, by the model's call ids, with no times of their own. Told between turns (held
    while one is open), so that no call of an older turn lands in the open one; the open turn's
    own calls are told by the journal first."""
    if store.open_turn is not None:
        store.history.append(items)
        return []
    events: list[Event] = []
    for item in items:
        message = item.get("message") if is_history(item) else None
        if not isinstance(message, dict):
            continue
        if message.get("role") == "assistant":
            for part in listed(message.get("content")):
                if _is_call(part):
                    events += store.tool_started(part["id"], str(part.get("name") or "tool"))
        elif message.get("role") == "tool" and nonempty(message.get("tool_call_id")):
            outcome = _history_outcome(message)
            events += store.tool_ended(message["tool_call_id"], outcome)
    return events


def _is_call(part: object) -> bool:
    return (
        isinstance(part, dict)
        and part.get("type") == "tool_call"
        and bool(nonempty(part.get("id")))
    )


def _history_outcome(message: dict[str, Any]) -> ToolOutcome:
    text = text_of(message.get("content")) or ""
    if message.get("outcome") != "success":
        return "rejected" if '"tool_denied"' in text else "error"
    try:
        result = json.loads(text)
    except ValueError:
        return "ok"
    return result_outcome({"structured_content": result}) if isinstance(result, dict) else "ok"


# -- the journal -------------------------------------------------------------------------------


def _envelopes(record: dict[str, Any]) -> list[dict[str, Any]]:
    if record.get("type") != "projection_delta":
        return []
    payload = record.get("payload")
    delta = payload.get("delta") if isinstance(payload, dict) else None
    return [
        d["state"]
        for d in (delta if isinstance(delta, list) else [])
        if isinstance(d, dict)
        and d.get("op") == "set_envelope"
        and isinstance(d.get("state"), dict)
    ]


def _journal(store: Store, record: dict[str, Any]) -> list[Event]:
    payload = record.get("payload")
    if not isinstance(payload, dict):
        return []
    kind = nonempty(record.get("type"))
    if kind == "core_input":
        determinism = payload.get("input")
        if isinstance(determinism, dict) and isinstance(determinism.get("determinism"), dict):
            store.tick(timestamp(determinism["determinism"].get("time_unix_ms")))
        return []
    if kind == "command_reserved":
        command = str(payload.get("client_command_id", ""))
        if payload.get("method") == "turn/start":
            store.kind = "interactive" if command.startswith("queue-") else "headless"
        return []
    if kind == "projection_delta":
        return _projection(store, payload)
    if kind == "action_intent":
        return _intent(store, payload)
    if kind == "action_result":
        return _result(store, payload)
    if kind in ("callback_registered", "callback_resolved"):
        return _callback(store, kind, payload)
    return []


def _projection(store: Store, payload: dict[str, Any]) -> list[Event]:
    events: list[Event] = []
    delta = payload.get("delta")
    for change in delta if isinstance(delta, list) else []:
        if not isinstance(change, dict):
            continue
        entry = change.get("entry")
        if change.get("op") in ("append_entry", "replace_entry") and isinstance(entry, dict):
            if not is_entry(entry):
                continue
            store.tick(timestamp(entry.get("updatedAt")) or timestamp(entry.get("createdAt")))
            if entry.get("role") == "user" and nonempty(entry.get("turnId")):
                store.prompts[entry["turnId"]] = text_of(entry.get("content"))
            events += _entry(store, entry)
        elif change.get("op") == "set_envelope" and isinstance(change.get("state"), dict):
            events += _envelope(store, change["state"])
    return events


def _envelope(store: Store, state: dict[str, Any]) -> list[Event]:
    events: list[Event] = []
    session = state.get("session") if isinstance(state.get("session"), dict) else {}
    assert isinstance(session, dict)
    store.tick(timestamp(session.get("updatedAt")))
    if "tokenUsage" in session:  # what the journal did not show response by response
        unseen = at_least_zero(usage(session["tokenUsage"]).minus(store.journal_usage))
        store.unseen = store.unseen.max(unseen)
        if store.unseen != Usage():
            events += store.responded(f"{store.name}:unseen", store.unseen, carried=True)
    turn = state.get("latestTurn")
    if isinstance(turn, dict) and store.lead and not store.kind_told and store.root:
        store.kind = store.kind or ("interactive" if turn.get("queueItemId") else "headless")
        store.kind_told = True
        events.append(SessionSeen(session_id=store.root, at=store.now(), kind=store.kind))
    if isinstance(turn, dict) and nonempty(turn.get("id")):
        turn_id = turn["id"]
        started = timestamp(turn.get("startedAt"))
        events += store.turn_started(turn_id, started, store.prompts.pop(turn_id, None))
        outcome = _ENDED.get(str(turn.get("status")))
        if outcome is not None:
            store.tick(timestamp(turn.get("completedAt")))
            if store.lead:
                events += store.turn_ended(turn_id, outcome)
            elif turn_id not in store.ended_turns:
                store.ended_turns.add(turn_id)
                events += store.child_ended(outcome)
    busy = session.get("status")
    was = (bool(store.open_turn), tuple(store.waiting))
    if isinstance(busy, dict) and busy.get("type") == "idle" and store.open_turn and store.lead:
        events += store.turn_ended(store.open_turn, "completed")
    if (bool(store.open_turn), tuple(store.waiting)) != was:
        store.status_at = store.clock
    return events + store.live()


def _intent(store: Store, payload: dict[str, Any]) -> list[Event]:
    action = nonempty(payload.get("action_id"))
    request = payload.get("request")
    if action is None or not isinstance(request, dict):
        return []
    if payload.get("kind") == "completion":
        events = store.settle_calls()
        store.requested[action] = store.now()
        return events
    if payload.get("kind") != "tool":
        return []
    call = request.get("call") if isinstance(request.get("call"), dict) else {}
    assert isinstance(call, dict)
    call_id = nonempty(request.get("call_id")) or action
    store.actions[action] = call_id
    name = store.calls.pop(call_id, None) or tool_name(str(call.get("name", "tool")))
    return store.tool_started(call_id, name, call.get("arguments"))


def _result(store: Store, payload: dict[str, Any]) -> list[Event]:
    action = nonempty(payload.get("action_id"))
    outer = payload.get("result")
    if action is None or not isinstance(outer, dict):
        return []
    kind = nonempty(outer.get("type"))
    inner = outer.get("result") if isinstance(outer.get("result"), dict) else {}
    assert isinstance(inner, dict)
    if kind == "completion_succeeded":
        used = usage(inner.get("usage"))
        store.journal_usage = store.journal_usage.plus(used)
        events = store.responded(
            action,
            used,
            finish=nonempty(inner.get("finish_reason")),
            text=text_of(inner.get("parts")),
        )
        for part in listed(inner.get("parts")):
            if (
                isinstance(part, dict)
                and part.get("type") == "tool_call"
                and nonempty(part.get("id"))
            ):
                store.calls[part["id"]] = str(part.get("name") or "tool")
        return events
    if kind == "completion_failed":
        store.requested.pop(action, None)
        return []
    events = _spawned(store, inner)
    if kind in ("tool_succeeded", "tool_failed"):
        if kind == "tool_failed":
            outcome: ToolOutcome = "error"
        elif _denied(outer, inner):
            outcome = "rejected"
        else:
            outcome = result_outcome(inner)
        call_id = store.actions.pop(action, None) or nonempty(outer.get("call_id")) or action
        events += store.tool_ended(call_id, outcome)
    return events


def _spawned(store: Store, result: dict[str, Any]) -> list[Event]:
    """A sub-agent's spawn (an action of `run_typescript`): its store's name and agent."""
    meta = result.get("_meta")
    sub = meta.get("mistral.vibe.subagent") if isinstance(meta, dict) else None
    if not (isinstance(sub, dict) and nonempty(sub.get("childSessionId")) and store.root):
        return []
    return [
        SubagentStarted(
            session_id=store.root,
            at=store.clock,
            subagent_id=sub["childSessionId"],
            subagent_type=nonempty(sub.get("agentType")),
            title=nonempty(sub.get("agentName")),
        )
    ]


def _denied(outer: dict[str, Any], inner: dict[str, Any]) -> bool:
    for error in (outer.get("error"), inner.get("error")):
        if isinstance(error, dict) and error.get("code") == "tool_denied":
            return True
    return False


def _callback(store: Store, kind: object, payload: dict[str, Any]) -> list[Event]:
    callback = nonempty(payload.get("callback_id"))
    if callback is None:
        return []
    if kind == "callback_registered":
        if payload.get("kind") != "approval":
            return []
        routing = payload.get("routing") if isinstance(payload.get("routing"), dict) else {}
        assert isinstance(routing, dict)
        store.tick(timestamp(routing.get("createdAt")))
        detail = routing.get("detail") if isinstance(routing.get("detail"), dict) else {}
        assert isinstance(detail, dict)
        effect = detail.get("effect") if isinstance(detail.get("effect"), dict) else {}
        assert isinstance(effect, dict)
        store.waiting[callback] = tool_name(str(effect.get("toolName") or "tool"))
    else:
        if store.waiting.pop(callback, None) is None:
            return []
        result = payload.get("result") if isinstance(payload.get("result"), dict) else {}
        assert isinstance(result, dict)
        output = result.get("output") if isinstance(result.get("output"), dict) else {}
        assert isinstance(output, dict)
        decision = output.get("decision") if isinstance(output.get("decision"), dict) else {}
        assert isinstance(decision, dict)
        if decision.get("type") == "deny":
            store.denied.add(callback.removeprefix("approval-"))
    store.status_at = store.clock
    return store.live()

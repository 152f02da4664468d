"""What one Qwen Code chat record says, shared by the lead's and the sub-agents' readers: its
usage, its tool calls and their results (records of Qwen Code 0.24.4, `fixtures/qwen-code/`).

A chat file is Claude-Code-like JSONL: `uuid`, `parentUuid`, `sessionId`, `timestamp`, `type`
(`user`, `assistant`, `tool_result`, `system`), a Gemini-shaped `message` (`role` `user` or
`model`, `parts` of `text` (`thought: true` for reasoning), `functionCall {id, name, args}`,
`functionResponse {id, name, response}`). An assistant record carries the usage of its
response as `usageMetadata`; a sub-agent's transcript may split one response into a record
with the usage (and no parts) and one with the call (and no usage).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...events import Event, ToolCallEnded, ToolCallStarted, ToolOutcome, Usage
from ..fields import count

OUTCOMES: dict[str, ToolOutcome] = {
    "success": "ok",
    "error": "error",
    "cancelled": "cancelled",
}
"""`toolCallResult.status` → the call's outcome (a `cancelled` call the user refused is
`rejected`: its response says so)."""
REFUSED = "User did not allow"


def usage_of(metadata: Mapping[str, Any]) -> Usage:
    """`usageMetadata` in our convention. Over the OpenAI wire Qwen Code writes
    `promptTokenCount` = prompt tokens with the cached ones, `candidatesTokenCount` = completion
    tokens with the reasoning ones (`thoughtsTokenCount`), no cache writes."""
    cached = count(metadata.get("cachedContentTokenCount"))
    prompt = count(metadata.get("promptTokenCount"))
    return Usage(
        input=max(0, prompt - cached),
        output=count(metadata.get("candidatesTokenCount")),
        cache_read=cached,
        reasoning=count(metadata.get("thoughtsTokenCount")),
    )


def parts(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    message = record.get("message")
    found = message.get("parts") if isinstance(message, dict) else None
    return [p for p in found if isinstance(p, dict)] if isinstance(found, list) else []


def calls(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The `functionCall`s of an assistant record that have an id and a name."""
    out = []
    for part in parts(record):
        call = part.get("functionCall")
        if isinstance(call, dict) and isinstance(call.get("id"), str) and call.get("name"):
            out.append(call)
    return out


def text_of(record: Mapping[str, Any], thought: bool = False) -> str:
    """The text parts (the answer, or with `thought` the reasoning) joined."""
    return "".join(
        str(p["text"])
        for p in parts(record)
        if isinstance(p.get("text"), str) and bool(p.get("thought")) == thought
    )


def started(
    session_id: str, at: float, record: Mapping[str, Any], subagent_id: str | None
) -> list[Event]:
    return [
        ToolCallStarted(
            session_id=session_id,
            at=at,
            call_id=call["id"],
            tool=str(call["name"]),
            subagent_id=subagent_id,
            arguments=call.get("args"),
        )
        for call in calls(record)
    ]


def ended(session_id: str, at: float, record: Mapping[str, Any]) -> list[ToolCallEnded]:
    """A `tool_result` record: the end of the call it answers (`toolCallResult`)."""
    result = record.get("toolCallResult")
    if not isinstance(result, dict) or not isinstance(result.get("callId"), str):
        return []
    display = result.get("resultDisplay")
    return [
        ToolCallEnded(
            session_id=session_id,
            at=at,
            call_id=result["callId"],
            outcome=outcome_of(result, record),
            result=display if isinstance(display, str) else None,
        )
    ]


def outcome_of(result: Mapping[str, Any], record: Mapping[str, Any]) -> ToolOutcome:
    """`toolCallResult.status`; a sub-agent's results have none (`{callId, durationMs}`): its
    `functionResponse` then says it, `{"error": ...}` or `{"output": ...}`."""
    status = result.get("status")
    if status is None:
        responses = [p.get("functionResponse") for p in parts(record)]
        failed = any(isinstance(r, dict) and _has_error(r.get("response")) for r in responses)
        return "error" if failed else "ok"
    outcome = OUTCOMES.get(str(status), "error")
    if outcome == "cancelled" and REFUSED in str(record.get("message")):
        return "rejected"
    return outcome


def _has_error(response: object) -> bool:
    return isinstance(response, dict) and "error" in response

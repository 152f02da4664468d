"""Span trees for every recorded scenario (InMemorySpanExporter), and the rules behind them."""

from __future__ import annotations

import os
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from coding_agent_exporter.events import Event, ModelResponded, UsageTotalsRead
from coding_agent_exporter.runtime.engine import Engine
from coding_agent_exporter.runtime.following import Following
from coding_agent_exporter.runtime.found import Source
from coding_agent_exporter.state.health import Stats
from coding_agent_exporter.state.labels import ProjectLabel
from coding_agent_exporter.state.state import State
from coding_agent_exporter.traces.sdk import tracer, tracer_provider
from coding_agent_exporter.traces.spans import SpanWriter

from .conftest import FIXTURES, GOLDEN, NOW, scenario_id, source_for

SHOWN = (
    "gen_ai.response.id",
    "gen_ai.response.finish_reasons",
    "gen_ai.tool.name",
    "gen_ai.agent.id",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "coding_agent.turn.outcome",
    "coding_agent.tool.outcome",
    "coding_agent.subagent.outcome",
    "coding_agent.subagent.background",
    "error.type",
)


def spans_for(home: Path, *, since: float = 0.0) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = tracer_provider({}, memory, batch=False)
    writer = SpanWriter(tracer(provider), ProjectLabel("path", "/home/user"), since=since)
    state = State(observer=writer)
    engine = Engine([source_for(home)], state, Stats())
    engine.catch_up()
    state.refresh(NOW, lambda pid: None)  # every recorded process is gone: all work ends
    provider.shutdown()
    return list(memory.get_finished_spans())


def render(spans: list[ReadableSpan]) -> str:
    """The span trees as indented text: name, offset and duration from the trace's root, and
    the attributes that matter, children in start order."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(span)
    lines: list[str] = []

    def walk(span: ReadableSpan, depth: int, origin: int) -> None:
        start, end = span.start_time or 0, span.end_time or 0
        attrs = span.attributes or {}
        shown = " ".join(
            f"{k.removeprefix('gen_ai.usage.')}={_value(attrs[k])}" for k in SHOWN if k in attrs
        )
        status = " ERROR" if span.status.status_code.name == "ERROR" else ""
        lines.append(
            f"{'  ' * depth}{span.name} +{(start - origin) / 1e9:.3f}s "
            f"{(end - start) / 1e9:.3f}s{status} {shown}".rstrip()
        )
        for child in sorted(by_parent.get(span.context.span_id, []), key=_order):
            walk(child, depth + 1, origin)

    for root in sorted(by_parent.get(None, []), key=_order):
        lines.append(f"trace {root.context.trace_id:032x}")
        walk(root, 1, root.start_time or 0)
    return "\n".join(lines) + "\n"


def _order(span: ReadableSpan) -> tuple[int, str]:
    return (span.start_time or 0, span.name)


def _value(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return str(value)


def test_golden_span_trees(scenario: Path) -> None:
    """`UPDATE_GOLDEN=1 pytest tests/test_traces.py` rewrites them after a deliberate change."""
    golden = GOLDEN / "traces" / f"{scenario_id(scenario)}.txt"
    text = render(spans_for(scenario / "home"))
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}: run with UPDATE_GOLDEN=1"
    assert text == golden.read_text()


def test_every_span_ends_and_times_come_from_the_records(scenario: Path) -> None:
    spans = spans_for(scenario / "home")
    for span in spans:
        assert span.end_time is not None and span.start_time is not None
        assert span.end_time >= span.start_time
        assert 1.7e18 < span.start_time < NOW * 1e9  # a record's time, not the exporter's clock


def test_same_files_same_ids(scenario: Path) -> None:
    first = {(s.context.trace_id, s.context.span_id) for s in spans_for(scenario / "home")}
    second = {(s.context.trace_id, s.context.span_id) for s in spans_for(scenario / "home")}
    assert first == second


def test_history_is_not_sent_unless_asked(scenario: Path) -> None:
    assert spans_for(scenario / "home", since=NOW) == []


def test_waiting_for_the_user_is_a_span_under_the_blocked_tool() -> None:
    from coding_agent_exporter.events import (
        LiveIndexRead,
        SessionSeen,
        ToolCallStarted,
        TurnEnded,
        TurnStarted,
    )

    memory = InMemorySpanExporter()
    provider = tracer_provider({}, memory, batch=False)
    state = State(observer=SpanWriter(tracer(provider), ProjectLabel()))
    a, s = "claude-code", "s1"

    def index(status: str, at: float, reason: str | None = None) -> None:
        state.apply(
            a,
            LiveIndexRead(
                pid=7,
                session_id=s,
                started_at=50.0,
                status=status,
                reason=reason,
                status_at=at,
                source="sessions/7.json",
            ),
        )
        state.refresh(at, lambda pid: 50.0)

    state.apply(a, SessionSeen(session_id=s, at=100.0, cwd="/w"))
    state.apply(a, TurnStarted(session_id=s, at=100.0, record_id="u1"))
    state.apply(a, ToolCallStarted(session_id=s, at=101.0, call_id="t1", tool="Bash"))
    index("waiting", 102.0, "permission prompt")
    index("busy", 110.0)
    state.apply(a, TurnEnded(session_id=s, at=111.0, outcome="completed"))
    state.refresh(111.0, lambda pid: 50.0)  # the turn is complete: its spans are sent
    provider.force_flush()
    (wait,) = [span for span in memory.get_finished_spans() if span.name.startswith("wait")]
    assert wait.name == "wait permission prompt"
    assert (wait.start_time, wait.end_time) == (102 * 10**9, 110 * 10**9)
    tool_span_id = _span_id("tool", "t1")
    assert wait.parent is not None and wait.parent.span_id == tool_span_id


def _span_id(*parts: str) -> int:
    from coding_agent_exporter.state.ids import derive

    return derive(8, *parts)


def test_duration_histograms_carry_trace_exemplars_in_openmetrics() -> None:
    from prometheus_client import generate_latest
    from prometheus_client.openmetrics.exposition import generate_latest as openmetrics

    from coding_agent_exporter.runtime.app import App, Spans
    from coding_agent_exporter.runtime.config import parse

    from .conftest import FIXTURES

    home = FIXTURES / "claude-code" / "2.1.197" / "subagent-foreground" / "home"
    config = parse(["metrics", "--claude.home", str(home), "--codex.home", "/nonexistent"], {})
    spans = Spans(config, {}, NOW, exporter=InMemorySpanExporter(), backfill=float("inf"))
    app = App(config, process_metrics=False, spans=spans, clock=lambda: NOW)
    app.catch_up()
    spans.shutdown()
    (root,) = [s for s in spans.exporter.inner.get_finished_spans() if s.parent is None]  # type: ignore[attr-defined]
    text = openmetrics(app.registry).decode()
    turn = f'trace_id="{root.context.trace_id:032x}"'
    assert any(
        line.startswith("coding_agent_turn_duration_seconds_bucket") and turn in line
        for line in text.splitlines()
    )
    assert any(
        line.startswith('coding_agent_tool_call_duration_seconds_bucket{agent="claude-code",le=')
        and turn in line
        and 'tool="Bash"' in line
        for line in text.splitlines()
    )
    assert "trace_id" not in generate_latest(app.registry).decode()  # the text format has none


def test_no_exemplars_without_traces() -> None:
    from prometheus_client.openmetrics.exposition import generate_latest as openmetrics

    from .conftest import FIXTURES, app_for

    app = app_for(FIXTURES / "claude-code" / "2.1.197" / "subagent-foreground" / "home")
    assert "trace_id" not in openmetrics(app.registry).decode()


CONTENT = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
)


def captured_spans(home: Path, capture: bool) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = tracer_provider({}, memory, batch=False)
    writer = SpanWriter(tracer(provider), ProjectLabel(), capture=capture)
    state = State(observer=writer)
    Engine([source_for(home)], state, Stats()).catch_up()
    state.refresh(NOW, lambda pid: None)
    provider.shutdown()
    return list(memory.get_finished_spans())


def test_no_content_in_spans_unless_asked(scenario: Path) -> None:
    for span in captured_spans(scenario / "home", capture=False):
        assert not set(CONTENT) & set(span.attributes or {}), span.name


def test_capture_content_puts_prompt_reply_and_tool_io_in_spans() -> None:
    import json

    from .conftest import FIXTURES

    spans = captured_spans(FIXTURES / "claude-code" / "2.1.197" / "print-tool" / "home", True)
    by_name = {s.name: s.attributes or {} for s in spans}
    (prompt,) = json.loads(str(by_name["invoke_agent claude-code"]["gen_ai.input.messages"]))
    assert prompt["role"] == "user" and "echo hi" in prompt["parts"][0]["content"]
    assert "echo hi" in str(by_name["execute_tool Bash"]["gen_ai.tool.call.arguments"])
    assert by_name["execute_tool Bash"]["gen_ai.tool.call.result"] == "hi"
    replies = [s.attributes or {} for s in spans if s.name.startswith("chat")]
    assert all("gen_ai.output.messages" in r for r in replies)


def test_captured_secrets_are_redacted() -> None:
    from coding_agent_exporter.events import (
        SessionSeen,
        ToolCallEnded,
        ToolCallStarted,
        TurnStarted,
    )

    memory = InMemorySpanExporter()
    provider = tracer_provider({}, memory, batch=False)
    state = State(observer=SpanWriter(tracer(provider), ProjectLabel(), capture=True))
    a, s = "claude-code", "s1"
    state.apply(a, SessionSeen(session_id=s, at=100.0, cwd="/w"))
    state.apply(
        a,
        TurnStarted(
            session_id=s,
            at=100.0,
            record_id="u1",
            prompt="use key sk-ant-abcdefghijklmnopqrstu to deploy",
        ),
    )
    state.apply(
        a,
        ToolCallStarted(
            session_id=s,
            at=101.0,
            call_id="t1",
            tool="Bash",
            arguments={"command": "curl https://bob:hunter22@x.org"},
        ),
    )
    state.apply(
        a,
        ToolCallEnded(
            session_id=s,
            at=102.0,
            call_id="t1",
            outcome="ok",
            result="Authorization: Bearer abcdefghijk123",
        ),
    )
    state.refresh(NOW, lambda pid: None)
    provider.shutdown()
    text = " ".join(str(span.attributes) for span in memory.get_finished_spans())
    for secret in ("abcdefghijklmnopqrstu", "hunter22", "abcdefghijk123"):
        assert secret not in text
    assert text.count("[REDACTED]") == 3


_USAGE_KEYS = {
    "input": "gen_ai.usage.input_tokens",
    "output": "gen_ai.usage.output_tokens",
    "cache_read": "gen_ai.usage.cache_read.input_tokens",
    "cache_write": "gen_ai.usage.cache_creation.input_tokens",
    "reasoning": "gen_ai.usage.reasoning.output_tokens",
}


def _carried(monkeypatch: pytest.MonkeyPatch) -> dict[tuple[str, str], dict[str, int]]:
    """Per session and id, the usage no response can show (`carried`: Vibe's totals of
    responses whose records are gone; a session's totals as the agent states them,
    `UsageTotalsRead`: Droid's), the largest per id as the state counts it: noted as the engine
    folds each event (around its fold: a `State` compiled by mypyc, `setup.py`, takes no
    interpreted subclass)."""
    carried: dict[tuple[str, str], dict[str, int]] = {}
    fold = Following._apply

    def noting(self: Following, source: Source, events: list[Event], read_from: Any = None) -> None:
        for event in events:
            key: tuple[str, str] | None = None
            if isinstance(event, ModelResponded) and event.carried:
                key = (event.session_id, event.message_id)
            elif isinstance(event, UsageTotalsRead):
                sub, scope = event.subagent_id or "", event.scope
                key = (event.session_id, f"totals {sub} {event.model} {scope}")
            if key is not None:
                known = carried.setdefault(key, {})
                for kind, value in event.usage.as_dict().items():  # type: ignore[union-attr]
                    known[kind] = max(known.get(kind, 0), value)
        fold(self, source, events, read_from)

    monkeypatch.setattr(Following, "_apply", noting)
    return carried


def test_chat_spans_are_the_responses_the_metrics_count(
    scenario: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One chat span per model response (one per response id, never two spans with one id),
    and over each session's traces their usage sums to its token counters, less usage no
    response shows."""
    memory = InMemorySpanExporter()
    provider = tracer_provider({}, memory, batch=False)
    state = State(SpanWriter(tracer(provider), ProjectLabel("path", "/home/user")))
    noted = _carried(monkeypatch)
    Engine([source_for(scenario / "home")], state, Stats()).catch_up()
    state.refresh(NOW, lambda pid: None)
    provider.shutdown()
    spans = memory.get_finished_spans()
    ids = [(s.context.trace_id, s.context.span_id) for s in spans]
    assert len(ids) == len(set(ids)), "two spans with one id"
    chats = [s for s in spans if (s.attributes or {}).get("gen_ai.response.id")]
    responses = [(s.attributes or {})["gen_ai.response.id"] for s in chats]
    assert len(responses) == len(set(responses)), "a response told by two chat spans"
    session_of = {
        s.context.trace_id: (s.attributes or {})["gen_ai.conversation.id"]
        for s in spans
        if s.parent is None
    }
    for (_, session_id), session in state.sessions.items():
        mine = [s for s in chats if session_of[s.context.trace_id] == session_id]
        carried = [c for (owner, _), c in noted.items() if owner == session_id]
        for kind, key in _USAGE_KEYS.items():
            shown = sum(int((s.attributes or {}).get(key, 0)) for s in mine)  # type: ignore[arg-type]
            less = sum(c.get(kind, 0) for c in carried)
            assert shown == getattr(session.tokens, kind) - less, (session_id, kind)


def test_invoke_agent_spans_carry_the_usage_of_the_chats_beneath(scenario: Path) -> None:
    spans = spans_for(scenario / "home")
    children: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        if span.parent is not None:
            children.setdefault(span.parent.span_id, []).append(span)

    def beneath(span: ReadableSpan) -> int:
        below = children.get(span.context.span_id, [])
        own = sum(
            int((c.attributes or {}).get("gen_ai.usage.output_tokens", 0))  # type: ignore[arg-type]
            for c in below
            if (c.attributes or {}).get("gen_ai.operation.name") == "chat"
        )
        return own + sum(beneath(c) for c in below if not c.name.startswith("chat"))

    for span in spans:
        if span.name.startswith("invoke_agent"):
            attributes = span.attributes or {}
            assert attributes.get("gen_ai.usage.output_tokens") == beneath(span), span.name


@pytest.mark.parametrize(
    "recording",
    [
        "2.1.332/handback-auto",  # the reply to a background sub-agent's notification
        "2.1.197/interactive",  # the reply when a background shell finished
    ],
)
def test_a_reply_no_prompt_began_is_a_turn_of_its_own_linked_to_the_one_before(
    recording: str,
) -> None:
    """Claude Code replies with no prompt after background work ends: a continuation turn,
    a trace of its own, linked to the session's turn before it."""
    spans = spans_for(FIXTURES / "claude-code" / recording / "home")
    roots = sorted((s for s in spans if s.parent is None), key=lambda s: s.start_time or 0)
    triggers = [(s.attributes or {}).get("coding_agent.turn.trigger") for s in roots]
    assert "continuation" in triggers and triggers[0] == "prompt"
    for before, root in pairwise(roots):
        links = [link.context.span_id for link in root.links]
        if (root.attributes or {}).get("coding_agent.turn.trigger") == "continuation":
            assert root.context.trace_id != before.context.trace_id
            assert links == [before.context.span_id]
        else:
            assert links == []


def test_a_turn_in_progress_at_start_is_sent_whole_when_it_ends() -> None:
    """Tracing begins (`since`) in the middle of a turn: that turn is sent, with the work read
    before `since`; the turns that ended before are not, those after are."""
    home = FIXTURES / "claude-code/2.1.197/interactive/home"
    every = spans_for(home)
    roots = [s for s in every if s.parent is None]
    longest = max(roots, key=lambda s: (s.end_time or 0) - (s.start_time or 0))
    start, end = longest.start_time or 0, longest.end_time or 0
    since = (start + end) / 2 / 1e9
    kept = {r.context.trace_id for r in roots if (r.end_time or 0) / 1e9 >= since}
    assert longest.context.trace_id in kept and len(kept) < len(roots)
    sent = spans_for(home, since=since)
    assert {s.context.trace_id for s in sent} == kept
    whole = [s for s in every if s.context.trace_id == longest.context.trace_id]
    assert sorted(
        s.context.span_id for s in sent if s.context.trace_id in {longest.context.trace_id}
    ) == sorted(s.context.span_id for s in whole)


def test_a_live_response_read_before_its_prompt_waits_for_the_turn_that_takes_it() -> None:
    """Claude Code writes an interactive prompt after its response's first records; the
    exporter may refresh in between (a live read): the response still goes under the prompt's
    turn, not into a turn of its own."""
    from coding_agent_exporter.events import SessionSeen, TurnEnded, TurnStarted, Usage

    memory = InMemorySpanExporter()
    provider = tracer_provider({}, memory, batch=False)
    state = State(observer=SpanWriter(tracer(provider), ProjectLabel()))
    a, s = "claude-code", "s1"
    state.apply(a, SessionSeen(session_id=s, at=100.0, cwd="/w"))
    usage = Usage(input=3, output=25)
    state.apply(a, ModelResponded(session_id=s, at=100.2, message_id="m1", model="x", usage=usage))
    state.refresh(101.0, lambda pid: None)  # a refresh while the prompt is not written yet
    assert memory.get_finished_spans() == ()
    state.apply(a, TurnStarted(session_id=s, at=100.3, record_id="u1"))
    state.apply(a, TurnEnded(session_id=s, at=100.4, outcome="completed"))
    state.refresh(102.0, lambda pid: None)
    spans = memory.get_finished_spans()
    (root,) = [x for x in spans if x.parent is None]
    assert (root.attributes or {})["coding_agent.turn.trigger"] == "prompt"
    (chat,) = [x for x in spans if x.name.startswith("chat")]
    assert chat.parent is not None and chat.parent.span_id == root.context.span_id
    assert (root.attributes or {})["gen_ai.usage.output_tokens"] == 25


def test_a_sub_agent_told_again_by_a_rebuilt_state_keeps_its_one_span() -> None:
    """After a rewrite the state is read again, and the sub-agent of a turn still open is a
    new object with the same id: its work goes under the span it has, never a second one."""
    from coding_agent_exporter.events import ToolCallStarted
    from coding_agent_exporter.state.session import Session, Subagent

    memory = InMemorySpanExporter()
    provider = tracer_provider({}, memory, batch=False)
    writer = SpanWriter(tracer(provider), ProjectLabel())
    session = Session(agent="claude-code", session_id="s1")
    writer.turn_started(session, 100.0, "u1", None)
    call = ToolCallStarted(session_id="s1", at=101.0, call_id="t1", tool="Agent")
    writer.tool_started(session, None, call)
    before = Subagent(call_id="t1", agent_id="a1", started_at=101.0)
    writer.subagent_started(session, before)
    writer.tool_started(session, before, replace(call, call_id="t2", tool="Bash", at=102.0))
    again = Subagent(call_id="t1", agent_id="a1", started_at=101.0)  # the rebuilt state's
    writer.tool_started(session, again, replace(call, call_id="t3", tool="Read", at=103.0))
    writer.subagent_ended(session, again, "completed", 104.0)
    writer.turn_ended(session, 105.0, "completed")
    writer.settled(106.0)
    provider.shutdown()
    spans = memory.get_finished_spans()
    (sub,) = [s for s in spans if s.name.startswith("invoke_agent") and s.parent is not None]
    tools = [s for s in spans if s.name in ("execute_tool Bash", "execute_tool Read")]
    assert len(tools) == 2 and all(t.parent.span_id == sub.context.span_id for t in tools)
    assert len({(s.context.trace_id, s.context.span_id) for s in spans}) == len(spans)

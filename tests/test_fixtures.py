"""Every recorded scenario yields the facts in its expected.json (derived from the stub's log)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from coding_agent_exporter.web.views import session_rows

from .conftest import agent_of, app_for, expected

OUTPUT_WITHOUT_REASONING = frozenset({"opencode", "kilo-code", "gemini-cli"})
"""Agents whose expected.json keeps the agent's own split (output without the reasoning); our
`output` includes the reasoning, as the metrics table says."""
TITLE_SOURCES = {"ai": "harness", "auto": "harness"}  # a title the agent generated itself
TASK_STATES = {"completed": "completed", "error": "failed"}  # OpenCode: the task part's status
KIND_UNRECORDED = frozenset({"hermes", "openhands", "pi", "qwen-code"})
"""Agents whose files do not say whether a session ran in the TUI or headless (Qwen Code: only
the TUI's runtime file says interactive; `tests/test_qwen.py` checks it; OpenHands: nothing;
Hermes: `source` is `cli` for all three ways)."""


def ours(scenario: Path, tokens: dict[str, int]) -> dict[str, int]:
    """Expected tokens in our convention."""
    if agent_of(scenario) not in OUTPUT_WITHOUT_REASONING:
        return tokens
    return {**tokens, "output": tokens["output"] + tokens.get("reasoning", 0)}


def sub_facts(sub: dict[str, Any]) -> tuple[str, str, str]:
    """(id, type, state) of an expected sub-agent, whichever recorder wrote it."""
    state = sub.get("state") or TASK_STATES.get(sub.get("task_status") or "", "running")
    if "store" in sub:  # Vibe's unified engine: a child store, its agent type unrecorded
        return sub["store"], "unknown", "completed"
    kind = sub.get("type") or sub.get("agent") or sub["subagent_type"]  # pi: `agent`
    if "relative_path" in sub:  # Vibe's legacy engine: the task ended with the session
        state = "completed"
    return sub.get("id") or sub["session_id"], kind, state


def killed(scenario: Path) -> bool:
    """The recording ended with a SIGKILL of the agent (`runs.json`): what ran then is over."""
    runs = scenario / "runs.json"
    if not runs.is_file():
        return False
    return any(run.get("mode") == "kill9_in_tool" for run in json.loads(runs.read_text())["runs"])


def rows_by_id(scenario: Path) -> dict[str, dict[str, Any]]:
    app = app_for(scenario / "home")
    return {r["session_id"]: r for r in session_rows(app.state, app.config.project, history=True)}


def files_facts(scenario: Path) -> dict[str, Any]:
    """The facts the final files can still show. Vibe: a sub-agent store that 2.26 deleted
    (`present_at_end` false) took its messages with it, a session whose journal records were
    deleted before any copy caught them shows its files' view (`files_view`), and a killed
    legacy session that left no folder (`orphan_locks`) shows nothing."""
    facts = expected(scenario)
    if agent_of(scenario) != "vibe":
        return facts
    sessions = []
    for want in facts["sessions"]:
        lost = [s for s in want["subagents"] if s.get("present_at_end") is False]
        sessions.append(
            {
                **want,
                "messages": want["messages"] - sum(s["messages"] for s in lost),
                "tokens": want["files_view"]["tokens"],
                "subagents": [s for s in want["subagents"] if s not in lost],
            }
        )
    home = {
        "messages": sum(s["messages"] for s in sessions),
        "tokens": {k: sum(s["tokens"][k] for s in sessions) for k in facts["home"]["tokens"]},
    }
    return {**facts, "home": home, "sessions": sessions}


def test_home_totals(scenario: Path) -> None:
    facts = files_facts(scenario)["home"]
    app = app_for(scenario / "home")
    totals = app.state.totals
    assert sum(totals.messages.values()) == facts["messages"]
    tokens = ours(scenario, facts["tokens"])
    for kind in tokens:  # Codex fixtures add reasoning
        got = sum(v for k, v in totals.tokens.items() if k[3] == kind)
        assert got == tokens[kind], kind
    for model, per_model in facts.get("models", {}).items():
        assert sum(v for k, v in totals.messages.items() if k[1] == model) == per_model["messages"]


def test_sessions(scenario: Path) -> None:
    rows = rows_by_id(scenario)
    for want in files_facts(scenario)["sessions"]:
        got = rows[want["session_id"]]
        where = f"{scenario.name} {want['session_id']}"
        assert got["messages"] == want["messages"], where
        tokens = ours(scenario, want["tokens"])
        assert {k: got["tokens"][k] for k in tokens} == tokens, where
        for key in ("cwd", "model", "kind", "title"):
            wanted = want[key]
            if key == "title" and isinstance(wanted, str):
                wanted = " ".join(wanted.split())  # titles are shown on one line
            if key != "kind" or agent_of(scenario) not in KIND_UNRECORDED:
                assert got[key] == wanted, f"{where} {key}"
        source = want["title_source"]
        if want["title"] is not None:  # Vibe names a source even without a title
            assert got["title_source"] == TITLE_SOURCES.get(source, source), where
        turns = dict(want["turns"])
        if want.get("only_in"):  # oh-my-pi's prompt history: its turn is not counted
            turns = dict.fromkeys(turns, 0)
        unfinished = turns.pop("unfinished", 0)
        turns["interrupted"] += unfinished  # no process left: an open turn ends interrupted
        assert got["turns"] == turns, where
        assert got["tool_calls"]["total"] == want["tool_calls"]["total"], where
        assert got["tool_calls"]["error"] == want["tool_calls"]["error"], where
        assert got["live"] is False  # no recorded process runs on this machine


def test_subagents(scenario: Path) -> None:
    rows = rows_by_id(scenario)
    for want in files_facts(scenario)["sessions"]:
        got = {s["id"]: s for s in rows[want["session_id"]]["subagents"]}
        assert set(got) == {sub_facts(s)[0] for s in want["subagents"]}, scenario.name
        for sub in want["subagents"]:
            sub_id, sub_type, state = sub_facts(sub)
            if state == "running" and killed(scenario):  # its process is gone: the work stopped
                state = "cancelled"
            mine = got[sub_id]
            where = f"{scenario.name} {sub_id}"
            assert mine["type"] == sub_type, where
            assert mine["state"] == state, where
            assert mine["messages"] == sub["messages"], where
            tokens = ours(scenario, sub["tokens"])
            assert {k: mine["tokens"][k] for k in tokens} == tokens, where
            if "tool_calls" not in sub:  # Vibe's expected facts do not count them
                continue
            calls = sub["tool_calls"]  # Codex fixtures break them down by outcome
            assert mine["tool_calls"] == (calls["total"] if isinstance(calls, dict) else calls)


def test_golden_sessions_json(scenario: Path) -> None:
    """What `sessions --all --include-internal --json` prints for each recorded scenario.
    `UPDATE_GOLDEN=1 pytest tests/test_fixtures.py` rewrites them after a deliberate change."""
    import json
    import os

    from .conftest import GOLDEN, scenario_id

    app = app_for(scenario / "home")
    rows = session_rows(app.state, app.config.project, history=True, internal=True)
    text = json.dumps(rows, indent=1, sort_keys=True) + "\n"
    golden = GOLDEN / "sessions" / f"{scenario_id(scenario)}.json"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}: run with UPDATE_GOLDEN=1"
    assert text == golden.read_text()

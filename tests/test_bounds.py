"""Smaller points of issue #34 (10): `$OPENCODE_DB` in the user's home takes nothing of the
other agents or of the catch-up cache; the history counters' `project` label is bounded."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from coding_agent_exporter.runtime.app import App
from coding_agent_exporter.runtime.config import parse
from coding_agent_exporter.state.base import MAX_LABEL_VALUES

from .conftest import FIXTURES, NOW

OPENCODE_DB = FIXTURES / "opencode" / "1.18.33" / "run-answer" / "home" / ".local"
PI = FIXTURES / "pi" / "0.73.1" / "print-answer" / "home" / "agent"
CLAUDE = FIXTURES / "claude-code" / "2.1.332" / "interactive" / "home"
CLAUDE_ID = "971b287f-0952-4ff3-8a23-8b842ccd6d13"


def made(argv: list[str], environ: dict[str, str]) -> App:
    app = App(
        parse(["metrics", *argv], environ),
        process_metrics=False,
        clock=lambda: NOW,
        probe=lambda _: None,
        cache=True,
    )
    app.catch_up()
    return app


def test_opencode_db_in_the_user_home_takes_neither_other_agents_changes_nor_the_cache(
    tmp_path: Path,
) -> None:
    """`OPENCODE_DB=~/opencode.db` makes the user's home OpenCode's: pi's files below it are
    still pi's when they change, and the cache in the default state folder (under the same
    home) is still written."""
    home = Path(os.environ["HOME"])
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(OPENCODE_DB / "share" / "opencode" / "opencode.db", home / "opencode.db")
    shutil.copytree(PI, home / ".pi" / "agent")
    environ = {"HOME": str(home), "OPENCODE_DB": str(home / "opencode.db")}
    state = home / ".local" / "state" / "coding-agent-exporter"
    only = ["--no-harness." + n for n in ("claude-code", "codex", "gemini-cli", "grok", "oh-my-pi")]
    app = made([*only, "--no-harness.vibe", "--state.dir", str(state)], environ)
    assert app.config.homes["opencode"] == home
    app.engine.save_cache()
    assert list(state.glob("catch-up-*.cache")), "the cache was not written"
    read = app.stats.records["pi"]
    (journal,) = (home / ".pi" / "agent" / "sessions").rglob("*.jsonl")
    last = journal.read_text().splitlines()[-1]
    with journal.open("a") as out:
        out.write(last + "\n")  # one more record of pi's
    app.changed([journal])
    assert app.stats.records["pi"] == read + 1


def test_the_project_label_of_the_history_counters_is_bounded(tmp_path: Path) -> None:
    """A session in each of 300 folders: at most `MAX_LABEL_VALUES` projects keep their own
    value, the rest are `other`; every token is still counted."""
    source = (CLAUDE / "projects" / "-home-user-work-shop-api" / f"{CLAUDE_ID}.jsonl").read_text()
    home = tmp_path / "claude"
    folders = MAX_LABEL_VALUES + 100
    for i in range(folders):
        text = source.replace(CLAUDE_ID, f"{CLAUDE_ID[:-4]}{i:04d}")
        text = text.replace("/home/user/work/shop-api", f"/home/user/work/p{i:04d}")
        text = text.replace('"msg_stub_', f'"msg_stub_{i:04d}')  # each its own responses
        project = home / "projects" / f"-home-user-work-p{i:04d}"
        project.mkdir(parents=True)
        (project / f"{CLAUDE_ID[:-4]}{i:04d}.jsonl").write_text(text)
    app = made(["--claude.home", str(home), "--state.dir", str(tmp_path / "state")], {})
    tokens: Counter[str] = Counter()
    for family in text_string_to_metric_families(generate_latest(app.registry).decode()):
        if family.name == "coding_agent_tokens":
            for sample in family.samples:
                tokens[sample.labels["project"]] += int(sample.value)
    assert len(tokens) == MAX_LABEL_VALUES + 1 and tokens["other"] > 0
    one = made(["--claude.home", str(CLAUDE), "--state.dir", str(tmp_path / "one")], {})
    single = sum(
        int(s.value)
        for family in text_string_to_metric_families(generate_latest(one.registry).decode())
        if family.name == "coding_agent_tokens"
        for s in family.samples
    )
    assert sum(tokens.values()) == folders * single
    again = Counter(
        s.labels["project"]
        for family in text_string_to_metric_families(generate_latest(app.registry).decode())
        if family.name == "coding_agent_tokens"
        for s in family.samples
    )
    assert set(again) == set(tokens)  # the same projects keep their value scrape after scrape

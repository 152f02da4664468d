"""The exporter never changes anything in an agent's folders and never opens credentials.

A real `serve` runs over copies of recorded homes of both agents, with traces on, while a new
session is written: every path, size, inode, mode and modification time is the same after it
as before (only what the test itself wrote differs), no file is opened for writing, and
inotify sees no open of a credential file.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from watchdog.events import (
    FileClosedEvent,
    FileOpenedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from .backends import get, run_exporter, wait_for
from .conftest import FIXTURES

CLAUDE = FIXTURES / "claude-code" / "2.1.332" / "handback-auto" / "home"
CODEX = FIXTURES / "codex" / "0.171.0" / "tui" / "home" / ".codex"
SECRETS = ("auth.json", ".credentials.json", "4242.abcdef.key")


def snapshot(*roots: Path) -> dict[str, tuple[int, int, int, int]]:
    """Every path under the roots with its inode, size, mode and modification time."""
    seen: dict[str, tuple[int, int, int, int]] = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            for name in [*dirs, *files]:
                path = os.path.join(folder, name)
                st = os.lstat(path)
                seen[path] = (st.st_ino, st.st_size, st.st_mode, st.st_mtime_ns)
    return seen


class Opens(FileSystemEventHandler):
    def __init__(self) -> None:
        self.opened: list[str] = []
        self.written: list[str] = []
        self.lock = threading.Lock()

    def on_any_event(self, event: FileSystemEvent) -> None:
        with self.lock:
            if isinstance(event, FileOpenedEvent):
                self.opened.append(str(event.src_path))
            elif type(event) is FileClosedEvent:  # closed after being open for writing
                self.written.append(str(event.src_path))


def test_serve_changes_nothing_and_opens_no_credentials(tmp_path: Path) -> None:
    claude, codex = tmp_path / "claude", tmp_path / "codex"
    shutil.copytree(CLAUDE, claude)
    shutil.copytree(CODEX, codex)
    (claude / "sessions").mkdir(exist_ok=True)
    for home in (claude, codex):
        (home / "auth.json").write_text('{"token": "planted"}')
    (claude / ".credentials.json").write_text("{}")
    (claude / "sessions" / "4242.abcdef.key").write_text("secret")
    opens = Opens()
    observer = Observer()
    for home in (claude, codex):
        observer.schedule(opens, str(home), recursive=True)
    observer.start()
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"  # traces on, nowhere
    try:
        with run_exporter(claude, tmp_path, "--traces.backfill", "all", codex_home=codex) as url:
            (journal,) = (FIXTURES / "claude-code" / "2.1.197" / "print-answer" / "home").glob(
                "projects/*/*.jsonl"
            )
            target = claude / "projects" / journal.parent.name / journal.name
            shutil.copy(journal, target)  # an agent writes a new session meanwhile
            before = snapshot(claude, codex)
            wait_for(
                "two claude sessions",
                lambda: any(
                    line.startswith('coding_agent_sessions_total{agent="claude-code"')
                    and line.endswith(" 2.0")
                    for line in get(url + "/metrics")[1].splitlines()
                ),
            )
    finally:
        del os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]
        observer.stop()
        observer.join()
    assert snapshot(claude, codex) == before
    assert set(opens.written) <= {str(target)}  # only the test's own write
    assert opens.opened, "inotify saw no opens at all: the check would be vacuous"
    assert not [p for p in opens.opened if p.endswith(SECRETS)]


OTHER_HOMES = {  # flag → (recorded home inside the fixture, credential files planted there)
    "--gemini.home": ("gemini-cli/0.61.0/subagent/home/.gemini", ("oauth_creds.json",)),
    "--opencode.home": ("opencode/1.18.33/subagent/home/.local/share/opencode", ("auth.json",)),
    "--kilo.home": ("kilo-code/7.7.7/subagent/home/.local/share/kilo", ("auth.json",)),
    "--pi.home": ("pi/0.73.1/print-tool/home/agent", ("auth.json",)),
    "--omp.home": ("oh-my-pi/18.2.3/profile-live/home", ("agent/auth.json", "agent/agent.db")),
    "--grok.home": ("grok/0.2.111/subagent/home/.grok", ("auth.json",)),
    "--vibe.home": ("vibe/3.0.2/tui/home/.vibe", (".env", "auth.json")),
}


def test_every_agent_home_is_left_as_it_was(tmp_path: Path) -> None:
    """The other agents' recorded homes, with credential files planted: a `serve` over all of
    them changes nothing (paths, sizes, inodes, modes, mtimes) and opens no credential file."""
    homes, argv, secrets = [], [], []
    for flag, (fixture, planted) in OTHER_HOMES.items():
        home = tmp_path / flag.strip("-").replace(".", "-")
        shutil.copytree(FIXTURES / fixture, home)
        for name in planted:
            (home / name).parent.mkdir(parents=True, exist_ok=True)
            (home / name).write_text('{"token": "planted"}')
            secrets.append(str(home / name))
        homes.append(home)
        argv += [flag, str(home)]
    before = snapshot(*homes)
    opens = Opens()
    observer = Observer()
    for home in homes:
        observer.schedule(opens, str(home), recursive=True)
    observer.start()
    try:
        with run_exporter(tmp_path / "claude", tmp_path, *argv) as url:
            for agent in ("gemini-cli", "opencode", "kilo-code", "pi", "oh-my-pi", "grok", "vibe"):
                wait_for(
                    f"{agent} sessions",
                    lambda agent=agent: (
                        f'coding_agent_sessions_total{{agent="{agent}"'  # type: ignore[misc]
                        in get(url + "/metrics")[1]
                    ),
                )
    finally:
        observer.stop()
        observer.join()
    assert snapshot(*homes) == before
    assert not opens.written
    assert opens.opened, "inotify saw no opens at all: the check would be vacuous"
    assert not [p for p in opens.opened if p in secrets]

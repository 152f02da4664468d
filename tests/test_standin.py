"""The exporter in a macOS stand-in and a Windows stand-in (`tests/standin.py`), on this Linux.

What a stand-in proves: with `sys.platform` saying darwin or win32, with what that system lacks
taken away (libc's inotify symbols, `os.pidfd_open`, `/proc` except to psutil; on Windows also
`os.pread`, `O_CLOEXEC`, `os.major`, `getloadavg`, `set_blocking`, `fork`, `fcntl`, ...; `select`
over sockets only), the exporter chooses its portable probes by itself and works: `metrics`
gives, over every recorded fixture of every agent, the counters Linux gives; `serve` gets ready,
shows a Claude Code session waiting for its user as needs_user, a Codex thread whose writer
lock a `codex` process holds (only the lock) as running, and an oh-my-pi process on a terminal
as running on macOS (Windows has no terminal names: not live there, as on a real Windows), reads
an append to a journal, and sees the Claude process exit with no scrape (pushed on /api/events,
the exit logged by the process watch); its counters are then Linux's `metrics` over the same
files.

What it cannot prove: anything of the other system's kernel. File events come from watchdog's
polling observer here (no FSEvents, no ReadDirectoryChangesW), process exits from the look at
the pids every second (no kqueue, no Win32 handle: those two are tested against fakes in
`tests/test_waiters.py`), holders and terminals from Linux's psutil, paths are POSIX paths.
Our own state is found where each system keeps it (`~/Library/Application Support`, and
`%LOCALAPPDATA%` read from the environment: Windows' known folder cannot be asked here).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from coding_agent_exporter.sources.places import APP

from .backends import get, run_exporter, wait_for, write_index
from .conftest import AGENT_HOMES, FIXTURES, ROOT, all_scenarios, expected, home_flags, scenario_id
from .test_codex_live import LOCK, now_lines
from .test_live import read_event, wait_for_row
from .test_pi import controlling_terminal, on_its_terminal
from .test_platform import UNGATED

STANDIN = ROOT / "tests" / "standin.py"
SYSTEMS = ["darwin", "windows"]
SELF = re.compile(r"(# (HELP|TYPE) )?(python|process)_")
"""The exporter's own process and interpreter: they differ between any two runs, and on macOS
and Windows prometheus_client reads no /proc for them."""
CLAUDE = FIXTURES / "claude-code" / "2.1.332" / "print-tool"
CODEX = FIXTURES / "codex" / "0.171.0" / "exec-shell" / "home" / ".codex"
OMP = FIXTURES / "oh-my-pi" / "18.2.3"


def state_folder(system: str, home: Path, local: Path) -> Path:
    """Where each system keeps our state (with no $XDG_STATE_HOME; Windows' known folder cannot
    be asked in a stand-in, so its %LOCALAPPDATA% is what is read)."""
    return (home / "Library" / "Application Support" if system == "darwin" else local) / APP


def clean_env(tmp: Path) -> dict[str, str]:
    """This machine's environment without its agent homes, exporter or OTel settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "CODING_AGENT_EXPORTER_")) and k not in AGENT_HOMES
    }
    return {**env, "HOME": str(tmp / "home"), "XDG_STATE_HOME": str(tmp / "state")}


def metrics_of_every_fixture(system: str, tmp: Path) -> list[dict[str, Any]]:
    """`metrics` over each recorded scenario, in one stand-in process."""
    argv = [
        ["metrics", "--state.dir", str(tmp / system / str(i)), *home_flags(s / "home")]
        for i, s in enumerate(all_scenarios())
    ]
    (tmp / "argv.json").write_text(json.dumps(argv))
    out = tmp / f"{system}.json"
    run = subprocess.run(
        [sys.executable, str(STANDIN), system, "--many", str(tmp / "argv.json"), str(out)],
        env=clean_env(tmp),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert exporter_read_proc(run.stderr) == set()
    results: list[dict[str, Any]] = json.loads(out.read_text())
    return results


def exporter_read_proc(log: str) -> set[str]:
    """The exporter's modules that tried to read /proc in a stand-in, but for those still
    reached on every system by the file-reading work's code (`test_platform.UNGATED`)."""
    ungated = {"coding_agent_exporter." + m[: -len(".py")].replace("/", ".") for m, _ in UNGATED}
    found = re.findall(r"standin: refused (coding_agent_exporter[\w.]*):", log)
    return set(found) - ungated


def counters(text: str) -> list[str]:
    return [line for line in text.splitlines() if not SELF.match(line)]


@pytest.fixture(scope="module")
def on_linux(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return metrics_of_every_fixture("linux", tmp_path_factory.mktemp("linux"))


@pytest.mark.parametrize("system", SYSTEMS)
def test_metrics_over_every_fixture_gives_linux_s_counters(
    system: str, on_linux: list[dict[str, Any]], tmp_path: Path
) -> None:
    found = metrics_of_every_fixture(system, tmp_path)
    names = [scenario_id(s) for s in all_scenarios()]
    assert len(found) == len(names) == len(on_linux) > 100
    for name, there, here in zip(names, found, on_linux, strict=True):
        assert there["code"] == here["code"] == 0, name
        assert counters(there["stdout"]) == counters(here["stdout"]), name
        assert "coding_agent_sessions_total" in there["stdout"], name


# -- serve -----------------------------------------------------------------------------------------


class Running(list[subprocess.Popen[bytes]]):
    """The processes a test started, and the terminals they run on."""

    fds: list[int]

    def __init__(self) -> None:
        super().__init__()
        self.fds = []


@pytest.fixture
def processes() -> Iterator[Running]:
    started = Running()
    yield started
    for process in started:
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
    for fd in started.fds:
        os.close(fd)


def codex_home(tmp: Path, processes: Running) -> Path:
    """A Codex home whose thread is mid-turn, its writer lock flocked and held open by a
    process named `codex` that holds no rollout."""
    home = tmp / "codex"
    (recorded,) = CODEX.glob("sessions/*/*/*/rollout-*.jsonl")
    rollout = home / recorded.relative_to(CODEX)
    rollout.parent.mkdir(parents=True)
    lines = now_lines(recorded)
    ended = next(i for i, line in enumerate(lines) if '"task_complete"' in line)
    rollout.write_text("\n".join(lines[:ended]) + "\n")
    lock = home / "thread-writer-locks" / f"{rollout.name[-42:-6]}.lock"
    lock.parent.mkdir()
    lock.touch()
    argv = ["bash", "-c", 'exec -a codex "$0" "$@"', sys.executable, "-c", LOCK, str(lock)]
    writer = subprocess.Popen(argv, stdout=subprocess.PIPE)
    processes.append(writer)
    assert writer.stdout is not None and writer.stdout.readline() == b"locked\n"
    return home


def omp_home(tmp: Path, processes: Running) -> Path:
    """oh-my-pi's recorded live snapshot (a turn open) for a process named omp on a fresh
    terminal, which oh-my-pi names its breadcrumb after."""
    home = tmp / ".omp"
    shutil.copytree(OMP / "interactive-live" / "home-live", home)
    primary, secondary = os.openpty()
    processes.fds += [primary, secondary]  # closed after its process: a hang-up would end it
    command = ["setsid", "--ctty", "bash", "-c", "exec -a omp sleep 300"]
    omp = subprocess.Popen(command, stdin=secondary, stdout=subprocess.DEVNULL)
    processes.append(omp)
    wait_for(
        "its terminal",
        lambda: "omp" in psutil.Process(omp.pid).cmdline() and controlling_terminal(omp.pid),
    )
    on_its_terminal(home, omp.pid, secondary)
    return home


def no_omp(text: str) -> str | None:
    """The exposition once no oh-my-pi session is live, else None."""
    return text if state_of(text, "oh-my-pi") is None else None


def state_of(text: str, agent: str) -> str | None:
    found = re.search(rf'coding_agent_session_state{{agent="{agent}",[^}}]*state="(\w+)"}} 1', text)
    return found.group(1) if found else None


def totals(text: str) -> list[str]:
    """The counters of agents' work (not the exporter's own)."""
    return sorted(
        line
        for line in text.splitlines()
        if re.match(r"coding_agent_(?!exporter_)\w+_total\{", line)
    )


@pytest.mark.parametrize("system", SYSTEMS)
def test_serve_in_a_stand_in_shows_live_sessions_reads_appends_and_sees_an_exit(
    system: str, tmp_path: Path, processes: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_STATE_HOME")  # our state where the system keeps it
    monkeypatch.setenv("USERPROFILE", os.environ["HOME"])  # Windows' home
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "AppData" / "Local"))
    home = tmp_path / "claude"
    shutil.copytree(CLAUDE / "home", home)
    (journal,) = home.glob("projects/*/*.jsonl")
    lines = journal.read_text().splitlines(keepends=True)
    half = len(lines) // 2
    journal.write_text("".join(lines[:half]))
    (home / "sessions").mkdir()
    session = expected(CLAUDE)["sessions"][0]["session_id"]
    agent = subprocess.Popen(["sleep", "300"])  # stands in for Claude Code's process
    processes.append(agent)
    write_index(home, agent, session, status="waiting", waitingFor="permission prompt")
    codex = codex_home(tmp_path, processes)
    omp = ["--omp.home", str(omp_home(tmp_path, processes))]
    omp_process = processes[-1]
    launcher = (str(STANDIN), system, "--")
    with run_exporter(home, tmp_path, *omp, codex_home=codex, launcher=launcher) as url:
        text = get(url + "/metrics")[1]
        assert state_of(text, "claude-code") == "needs_user"
        assert state_of(text, "codex") == "running"  # only its writer lock is held
        # oh-my-pi names its breadcrumb after the terminal; Windows gives no terminal names
        assert state_of(text, "oh-my-pi") == (None if system == "windows" else "running")
        before = totals(text)
        with journal.open("a") as f:
            f.write("".join(lines[half:]))
        wait_for("the append read", lambda: totals(get(url + "/metrics")[1]) != before)
        with urllib.request.urlopen(f"{url}/api/events", timeout=20) as stream:
            assert read_event(stream) == b"retry: 2000\n\n"
            assert b"event: hello" in read_event(stream)
            for process in (agent, omp_process):
                process.kill()
                process.wait()
            wait_for_row(stream, session, "ended")  # pushed by the exit: no scrape between
        text = wait_for("omp's exit", lambda: no_omp(get(url + "/metrics")[1]))
        assert state_of(text, "claude-code") is None
        served = totals(text)  # oh-my-pi's open turn ended: interrupted, as on Linux
    state = state_folder(system, Path(os.environ["HOME"]), tmp_path / "AppData" / "Local")
    assert list(state.glob("catch-up-*.cache")), "no catch-up cache where the system keeps state"
    log = (tmp_path / "exporter.log").read_text()
    assert "process exits: waited for with poll" in log  # no kqueue, no kernel32 here
    assert f"process exits: {agent.pid}" in log  # the watch saw it, not a scrape
    assert exporter_read_proc(log) == set()
    flags = ["--claude.home", str(home), "--codex.home", str(codex), *omp]
    flags += ["--state.dir", str(tmp_path / "linux-state")]
    linux = subprocess.run(
        [sys.executable, "-m", "coding_agent_exporter", "metrics", *flags],
        env=clean_env(tmp_path),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert served == totals(linux) and served
